package endpoints

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Node pools: for load balancers that cannot reach pod IPs, the members are
// the nodes, on the nodePort of the chosen Service port. Which nodes follows
// what the tools that build such pools inside the cluster agree on.

// ToBeDeletedTaint is put on a node by the Cluster Autoscaler before it
// deletes it; k8s.io/cloud-provider's service controller (controllers/service,
// nodeUnTaintedPredicate) takes such nodes out of load balancers.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// KarpenterDisruptedTaint is put on a node by Karpenter before it drains and
// deletes it; the AWS Load Balancer Controller leaves such nodes out of its
// target groups in instance mode.
const KarpenterDisruptedTaint = "karpenter.sh/disrupted"

// NoNodePortError reports that a node pool cannot be made for a Service: the
// chosen port has no nodePort (a ClusterIP or headless Service, or a
// LoadBalancer Service with allocateLoadBalancerNodePorts false), or no port
// was chosen among several.
type NoNodePortError struct {
	Namespace, Service string
	// Type is the Service's type, ClusterIP when it gives none.
	Type corev1.ServiceType
	// PortName is the name of the chosen port ("" for an unnamed only port),
	// and Port its number; both are zero when Ports > 1 and none was chosen.
	PortName string
	Port     int32
	// Ports is how many ports the Service has.
	Ports int
}

func (e *NoNodePortError) Error() string {
	if e.Port == 0 && e.PortName == "" {
		return fmt.Sprintf("service %s/%s has %d ports and none was chosen by name: a node pool needs the nodePort of one port",
			e.Namespace, e.Service, e.Ports)
	}
	return fmt.Sprintf("port %s of service %s/%s has no nodePort (the Service is of type %s): a node pool needs a NodePort "+
		"or LoadBalancer Service that allocates node ports", e.portLabel(), e.Namespace, e.Service, e.Type)
}

func (e *NoNodePortError) portLabel() string {
	if e.PortName != "" {
		return e.PortName
	}
	return strconv.Itoa(int(e.Port))
}

// Nodes returns the node pool of svc: one entry per eligible node and address
// family, on the nodePort of the chosen port, sorted like Pool's endpoints.
// The pod pool, Pool(svc, endpointSlices, q), says how many endpoints run on
// each node (LocalEndpoints) and, for a Service with externalTrafficPolicy
// Local, which nodes are kept: only those running at least one, since
// kube-proxy drops what such a node receives otherwise. The pod pool's
// trigger time and warnings are the node pool's. It never modifies its
// arguments.
//
// A node is eligible unless eligibleNode says otherwise; see there for the
// rules and where each comes from.
func Nodes(svc *corev1.Service, endpointSlices []discoveryv1.EndpointSlice, nodes []corev1.Node, q Query) (Result, error) {
	if svc == nil {
		return Result{}, errors.New("no service given")
	}
	return nodePool(svc, endpointSlices, eligibleNodes(nodes, q), q)
}

// candidateNode is an eligible node with what a pool entry needs of it.
type candidateNode struct {
	name, zone string
	// addresses holds the first address of the asked type of each family
	// the query allows, IPv4 first.
	addresses []netip.Addr
}

// eligibleNodes keeps the nodes that may be in a node pool, whatever the
// Service.
func eligibleNodes(nodes []corev1.Node, q Query) []candidateNode {
	addressType := cmp.Or(q.NodeAddressType, corev1.NodeInternalIP)
	out := make([]candidateNode, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if !eligibleNode(n, q.NodeSelector) {
			continue
		}
		zone := n.Labels[corev1.LabelTopologyZone]
		if len(q.Zones) > 0 && !slices.Contains(q.Zones, zone) {
			continue
		}
		addresses := nodeAddresses(n, addressType, q.AddressType)
		if len(addresses) == 0 {
			continue
		}
		out = append(out, candidateNode{name: n.Name, zone: zone, addresses: addresses})
	}
	return out
}

// eligibleNode applies the rules that leave a node out of every node pool:
//   - being deleted (deletionTimestamp set): k8s.io/cloud-provider's service
//     controller, nodeNotDeletedPredicate;
//   - labelled node.kubernetes.io/exclude-from-external-load-balancers with
//     any value but a false boolean as strconv.ParseBool reads it: the same
//     controller, nodeIncludedPredicate;
//   - tainted ToBeDeletedByClusterAutoscaler (the same controller,
//     nodeUnTaintedPredicate) or karpenter.sh/disrupted (the AWS Load Balancer
//     Controller in instance mode), whatever the taint's value and effect;
//   - a Ready condition that is not True, or none: the same controller,
//     nodeReadyPredicate;
//   - labels that the selector, when given, does not match.
func eligibleNode(n *corev1.Node, selector labels.Selector) bool {
	if n.DeletionTimestamp != nil {
		return false
	}
	if v, ok := n.Labels[corev1.LabelNodeExcludeBalancers]; ok {
		excluded, err := strconv.ParseBool(v)
		if err != nil || excluded {
			return false
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == ToBeDeletedTaint || t.Key == KarpenterDisruptedTaint {
			return false
		}
	}
	if !nodeReady(n) {
		return false
	}
	return selector == nil || selector.Matches(labels.Set(n.Labels))
}

// nodeReady reads the node's Ready condition; a node without one is not
// ready, as the cloud-provider service controller reads it.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeAddresses is the first address of the given type of each IP family
// (only family, when one is asked), IPv4 first. Addresses that are not IPs,
// or carry an IPv6 zone, are skipped.
func nodeAddresses(n *corev1.Node, addressType corev1.NodeAddressType, family discoveryv1.AddressType) []netip.Addr {
	var v4, v6 netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != addressType {
			continue
		}
		addr, err := netip.ParseAddr(a.Address)
		if err != nil || addr.Zone() != "" {
			continue
		}
		switch {
		case addr.Is4() && !v4.IsValid():
			v4 = addr
		case addr.Is6() && !v6.IsValid():
			v6 = addr
		}
	}
	var out []netip.Addr
	if v4.IsValid() && family != discoveryv1.AddressTypeIPv6 {
		out = append(out, v4)
	}
	if v6.IsValid() && family != discoveryv1.AddressTypeIPv4 {
		out = append(out, v6)
	}
	return out
}

// NodePort is the nodePort a node pool of svc gives, that of the port the
// query chooses by the same rule as Pool: the port named PortName, or the
// Service's only port. Its error is a *PortNotFoundError or a
// *NoNodePortError.
func NodePort(svc *corev1.Service, q Query) (int32, error) {
	if svc == nil {
		return 0, errors.New("no service given")
	}
	return chooseNodePort(svc, q)
}

func chooseNodePort(svc *corev1.Service, q Query) (int32, error) {
	rule, err := choosePort(svc, q)
	if err != nil {
		return 0, err
	}
	noPort := &NoNodePortError{Namespace: svc.Namespace, Service: svc.Name, Type: ServiceType(svc), Ports: len(svc.Spec.Ports)}
	chosen := rule.service
	if chosen == nil {
		return 0, noPort
	}
	noPort.PortName, noPort.Port = chosen.Name, chosen.Port
	if chosen.NodePort < 1 || chosen.NodePort > 65535 {
		return 0, noPort
	}
	return chosen.NodePort, nil
}

// ServiceType is the Service's type, ClusterIP when the object leaves it out,
// as the API server defaults it.
func ServiceType(svc *corev1.Service) corev1.ServiceType {
	return cmp.Or(svc.Spec.Type, corev1.ServiceTypeClusterIP)
}

// nodeFamily is a node and an address family, to count the endpoints of that
// family on the node.
type nodeFamily struct {
	node   string
	family discoveryv1.AddressType
}

func nodePool(svc *corev1.Service, endpointSlices []discoveryv1.EndpointSlice, nodes []candidateNode, q Query) (Result, error) {
	port, err := chooseNodePort(svc, q)
	if err != nil {
		return Result{}, err
	}
	pods, err := Pool(svc, endpointSlices, q)
	if err != nil {
		return Result{}, err
	}
	// kube-proxy sends a connection to an endpoint of its own family, so a
	// node's IPv4 entry counts the IPv4 endpoints on it, its IPv6 entry the
	// IPv6 ones.
	local := map[nodeFamily]int{}
	for _, e := range pods.Endpoints {
		if e.NodeName != "" {
			local[nodeFamily{e.NodeName, e.AddressType}]++
		}
	}
	onlyLocal := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	check := nodeHealthCheck(svc, q)
	found := map[endpointKey]Endpoint{}
	for _, n := range nodes {
		for _, addr := range n.addresses {
			family := addressFamily(addr)
			// A single-stack Service has no nodePort on the other family.
			if len(svc.Spec.IPFamilies) > 0 && !slices.Contains(svc.Spec.IPFamilies, corev1.IPFamily(family)) {
				continue
			}
			count := local[nodeFamily{n.name, family}]
			if onlyLocal && count == 0 {
				continue
			}
			key := endpointKey{addr: addr, port: port}
			// Two nodes claiming one address: keep the first by name, so the
			// result does not depend on the order of the nodes.
			if seen, dup := found[key]; dup && seen.NodeName < n.name {
				continue
			}
			found[key] = Endpoint{
				Address:        addr.String(),
				Port:           port,
				AddressType:    family,
				NodeName:       n.name,
				Zone:           n.zone,
				Ready:          true,
				Serving:        true,
				LocalEndpoints: &count,
				HealthCheck:    check,
			}
		}
	}
	return Result{Endpoints: sorted(found), LastChangeTriggerTime: pods.LastChangeTriggerTime, Warnings: pods.Warnings, LeftOut: pods.LeftOut}, nil
}

func addressFamily(addr netip.Addr) discoveryv1.AddressType {
	if addr.Is4() {
		return discoveryv1.AddressTypeIPv4
	}
	return discoveryv1.AddressTypeIPv6
}
