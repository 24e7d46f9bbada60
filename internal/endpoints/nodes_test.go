package endpoints

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Builders for node pools.

type nodeOpt func(*corev1.Node)

// node is a Ready node in zone-a with the given InternalIPs, unless options
// say otherwise.
func node(name string, internalIPs ...string) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, ip := range internalIPs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return n
}

func withNode(n corev1.Node, opts ...nodeOpt) corev1.Node {
	for _, o := range opts {
		o(&n)
	}
	return n
}

func nodeLabel(key, value string) nodeOpt {
	return func(n *corev1.Node) { n.Labels[key] = value }
}

func nodeZone(zone string) nodeOpt { return nodeLabel(corev1.LabelTopologyZone, zone) }

func noZoneLabel() nodeOpt {
	return func(n *corev1.Node) { delete(n.Labels, corev1.LabelTopologyZone) }
}

func tainted(key string, effect corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) }
}

func readyStatus(status corev1.ConditionStatus) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: status},
		}
	}
}

func noConditions() nodeOpt { return func(n *corev1.Node) { n.Status.Conditions = nil } }

func beingDeleted() nodeOpt {
	return func(n *corev1.Node) {
		t := metav1.Now()
		n.DeletionTimestamp = &t
		n.Finalizers = []string{"example.com/hold"}
	}
}

func address(kind corev1.NodeAddressType, addr string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: kind, Address: addr})
	}
}

// nodePortService is Service shop/web of the given type and policy.
func nodePortService(kind corev1.ServiceType, policy corev1.ServiceExternalTrafficPolicy, ports ...corev1.ServicePort) *corev1.Service {
	s := service(ports...)
	s.Spec.Type, s.Spec.ExternalTrafficPolicy = kind, policy
	return s
}

func withNodePort(p corev1.ServicePort, nodePort int32) corev1.ServicePort {
	p.NodePort = nodePort
	return p
}

var (
	httpNodePort = withNodePort(http, 30080)
	cluster      = corev1.ServiceExternalTrafficPolicyCluster
	local        = corev1.ServiceExternalTrafficPolicyLocal
)

// nodeEntry is the pool entry of a node on port 30080 in zone-a with local
// endpoints of its family running on it, checked on kube-proxy's health port
// (the Services of these tests have no healthCheckNodePort).
func nodeEntry(addr, nodeName string, localEndpoints int) Endpoint {
	family := discoveryv1.AddressTypeIPv4
	if !isV4(addr) {
		family = discoveryv1.AddressTypeIPv6
	}
	return Endpoint{Address: addr, Port: 30080, AddressType: family, NodeName: nodeName, Zone: "zone-a",
		Ready: true, Serving: true, LocalEndpoints: &localEndpoints, HealthCheck: &kubeProxyCheck}
}

var kubeProxyCheck = HealthCheck{Type: HealthCheckHTTP, Port: DefaultKubeProxyHealthPort, Path: "/healthz", Source: HealthSourceKubeProxy}

func isV4(addr string) bool {
	for _, c := range addr {
		if c == ':' {
			return false
		}
	}
	return true
}

func inNodeZone(e Endpoint, zone string) Endpoint {
	e.Zone = zone
	return e
}

// podsOn is an IPv4 slice of shop/web whose http port is 8080, with one
// ready endpoint per address, on the node given for it.
func podsOn(name string, e ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	return slice(name, v4Slice, ports(slicePort("http", 8080)), eps(e...))
}

func podOn(addr, nodeName string, opts ...epOpt) discoveryv1.Endpoint {
	return with(ep(addr), append([]epOpt{onNode(nodeName, "zone-a")}, opts...)...)
}

func TestNodes(t *testing.T) {
	// Three ready nodes; two pods on node-a, one on node-b, none on node-c.
	threeNodes := []corev1.Node{node("node-c", "192.168.0.3"), node("node-a", "192.168.0.1"), node("node-b", "192.168.0.2")}
	threePods := []discoveryv1.EndpointSlice{podsOn("a",
		podOn("10.244.0.1", "node-a"), podOn("10.244.0.2", "node-a"), podOn("10.244.1.1", "node-b"))}
	// A dual-stack Service's pods: node-a runs one pod with both families.
	dualStackPods := []discoveryv1.EndpointSlice{
		podsOn("v4", podOn("10.244.0.1", "node-a")),
		slice("v6", v6Slice, ports(slicePort("http", 8080)), eps(podOn("fd00:244::1", "node-a"), podOn("fd00:244::2", "node-a"))),
	}
	dualStackNodes := []corev1.Node{node("node-a", "fd00::1", "192.168.0.1"), node("node-b", "192.168.0.2", "fd00::2")}
	// node-a runs a draining pod only, node-b a ready one.
	drainingOnA := []discoveryv1.EndpointSlice{podsOn("a",
		podOn("10.244.0.1", "node-a", terminating()), podOn("10.244.1.1", "node-b"))}
	// The only pod, on node-a, is draining.
	onlyDraining := []discoveryv1.EndpointSlice{podsOn("a", podOn("10.244.0.1", "node-a", terminating()))}
	twoNodes := []corev1.Node{node("node-a", "192.168.0.1"), node("node-b", "192.168.0.2")}

	tests := []struct {
		name    string
		service *corev1.Service
		slices  []discoveryv1.EndpointSlice
		nodes   []corev1.Node
		query   Query
		want    []Endpoint
		wantErr string
	}{
		{
			name:    "with policy Cluster every ready node is given on the nodePort, with the number of pods it runs",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			slices:  threePods,
			nodes:   threeNodes,
			want:    []Endpoint{nodeEntry("192.168.0.1", "node-a", 2), nodeEntry("192.168.0.2", "node-b", 1), nodeEntry("192.168.0.3", "node-c", 0)},
		},
		{
			name:    "a Service that gives no policy is treated as Cluster",
			service: nodePortService(corev1.ServiceTypeNodePort, "", httpNodePort),
			slices:  threePods,
			nodes:   threeNodes,
			want:    []Endpoint{nodeEntry("192.168.0.1", "node-a", 2), nodeEntry("192.168.0.2", "node-b", 1), nodeEntry("192.168.0.3", "node-c", 0)},
		},
		{
			name:    "with policy Local only the nodes that run a pool endpoint are given",
			service: nodePortService(corev1.ServiceTypeNodePort, local, httpNodePort),
			slices:  threePods,
			nodes:   threeNodes,
			want:    []Endpoint{nodeEntry("192.168.0.1", "node-a", 2), nodeEntry("192.168.0.2", "node-b", 1)},
		},
		{
			name:    "with policy Local a pod that is not ready does not keep its node",
			service: nodePortService(corev1.ServiceTypeNodePort, local, httpNodePort),
			slices:  []discoveryv1.EndpointSlice{podsOn("a", podOn("10.244.0.1", "node-a", ready(ptr.To(false))), podOn("10.244.1.1", "node-b"))},
			nodes:   twoNodes,
			want:    []Endpoint{nodeEntry("192.168.0.2", "node-b", 1)},
		},
		{
			name:    "with policy Local and no ready pod the pool is empty",
			service: nodePortService(corev1.ServiceTypeNodePort, local, httpNodePort),
			nodes:   twoNodes,
			want:    []Endpoint{},
		},
		{
			name:    "a pod whose endpoint names no node is counted on none",
			service: nodePortService(corev1.ServiceTypeNodePort, local, httpNodePort),
			slices:  []discoveryv1.EndpointSlice{podsOn("a", ep("10.244.0.1"), podOn("10.244.1.1", "node-b"))},
			nodes:   twoNodes,
			want:    []Endpoint{nodeEntry("192.168.0.2", "node-b", 1)},
		},
		{
			name:    "a LoadBalancer Service gives its nodes on the nodePort like a NodePort Service",
			service: nodePortService(corev1.ServiceTypeLoadBalancer, local, httpNodePort),
			slices:  threePods,
			nodes:   threeNodes,
			want:    []Endpoint{nodeEntry("192.168.0.1", "node-a", 2), nodeEntry("192.168.0.2", "node-b", 1)},
		},
		{
			name:    "a node being deleted is left out",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			nodes:   []corev1.Node{withNode(node("node-a", "192.168.0.1"), beingDeleted()), node("node-b", "192.168.0.2")},
			want:    []Endpoint{nodeEntry("192.168.0.2", "node-b", 0)},
		},
		{
			name:    "a node labelled exclude-from-external-load-balancers is left out unless the value is a false boolean",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			nodes: []corev1.Node{
				withNode(node("empty", "192.168.0.1"), nodeLabel(corev1.LabelNodeExcludeBalancers, "")),
				withNode(node("true", "192.168.0.2"), nodeLabel(corev1.LabelNodeExcludeBalancers, "true")),
				withNode(node("yes", "192.168.0.3"), nodeLabel(corev1.LabelNodeExcludeBalancers, "yes")),
				withNode(node("false", "192.168.0.4"), nodeLabel(corev1.LabelNodeExcludeBalancers, "false")),
				withNode(node("zero", "192.168.0.5"), nodeLabel(corev1.LabelNodeExcludeBalancers, "0")),
				withNode(node("capital-f", "192.168.0.6"), nodeLabel(corev1.LabelNodeExcludeBalancers, "F")),
				withNode(node("no", "192.168.0.7"), nodeLabel(corev1.LabelNodeExcludeBalancers, "no")),
			},
			want: []Endpoint{nodeEntry("192.168.0.4", "false", 0), nodeEntry("192.168.0.5", "zero", 0), nodeEntry("192.168.0.6", "capital-f", 0)},
		},
		{
			name:    "nodes tainted by the Cluster Autoscaler or Karpenter for removal are left out, other taints are not",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			nodes: []corev1.Node{
				withNode(node("autoscaled", "192.168.0.1"), tainted(ToBeDeletedTaint, corev1.TaintEffectNoSchedule)),
				withNode(node("disrupted", "192.168.0.2"), tainted(KarpenterDisruptedTaint, corev1.TaintEffectNoSchedule)),
				withNode(node("control-plane", "192.168.0.3"), tainted("node-role.kubernetes.io/control-plane", corev1.TaintEffectNoSchedule)),
				withNode(node("prefer", "192.168.0.4"), tainted(ToBeDeletedTaint, corev1.TaintEffectPreferNoSchedule)),
			},
			want: []Endpoint{nodeEntry("192.168.0.3", "control-plane", 0)},
		},
		{
			name:    "a node whose Ready condition is False, Unknown or missing is left out",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			nodes: []corev1.Node{
				withNode(node("false", "192.168.0.1"), readyStatus(corev1.ConditionFalse)),
				withNode(node("unknown", "192.168.0.2"), readyStatus(corev1.ConditionUnknown)),
				withNode(node("missing", "192.168.0.3"), noConditions()),
				withNode(node("true", "192.168.0.4"), readyStatus(corev1.ConditionTrue)),
			},
			want: []Endpoint{nodeEntry("192.168.0.4", "true", 0)},
		},
		{
			name:    "with policy Local a node that runs pods is still left out when it is excluded",
			service: nodePortService(corev1.ServiceTypeNodePort, local, httpNodePort),
			slices:  threePods,
			nodes:   []corev1.Node{withNode(node("node-a", "192.168.0.1"), readyStatus(corev1.ConditionFalse)), node("node-b", "192.168.0.2")},
			want:    []Endpoint{nodeEntry("192.168.0.2", "node-b", 1)},
		},
		{
			name:    "a node without an InternalIP is left out",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			nodes: []corev1.Node{
				withNode(node("external-only"), address(corev1.NodeExternalIP, "203.0.113.1"), address(corev1.NodeHostName, "external-only")),
				withNode(node("not-an-ip"), address(corev1.NodeInternalIP, "node.example.com")),
				node("internal", "192.168.0.2"),
			},
			want: []Endpoint{nodeEntry("192.168.0.2", "internal", 0)},
		},
		{
			name:    "asked for ExternalIP, nodes give their external address, and those without one are left out",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			nodes: []corev1.Node{
				withNode(node("node-a", "192.168.0.1"), address(corev1.NodeExternalIP, "203.0.113.1")),
				node("node-b", "192.168.0.2"),
			},
			query: Query{NodeAddressType: corev1.NodeExternalIP},
			want:  []Endpoint{nodeEntry("203.0.113.1", "node-a", 0)},
		},
		{
			name:    "of several addresses of one type and family, the first is given",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			nodes:   []corev1.Node{node("node-a", "192.168.0.9", "192.168.0.1")},
			want:    []Endpoint{nodeEntry("192.168.0.9", "node-a", 0)},
		},
		{
			name:    "a node selector keeps only the nodes it matches",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			slices:  threePods,
			nodes: []corev1.Node{
				withNode(node("node-a", "192.168.0.1"), nodeLabel("pool", "edge")),
				withNode(node("node-b", "192.168.0.2"), nodeLabel("pool", "batch")),
				node("node-c", "192.168.0.3"),
			},
			query: Query{NodeSelector: labels.SelectorFromSet(labels.Set{"pool": "edge"})},
			want:  []Endpoint{nodeEntry("192.168.0.1", "node-a", 2)},
		},
		{
			name:    "a node without a zone label has an empty zone",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			nodes:   []corev1.Node{withNode(node("node-a", "192.168.0.1"), noZoneLabel())},
			want:    []Endpoint{inNodeZone(nodeEntry("192.168.0.1", "node-a", 0), "")},
		},
		{
			name:    "zones keep only the nodes labelled with one of them",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			nodes: []corev1.Node{
				withNode(node("node-a", "192.168.0.1"), nodeZone("zone-b")),
				node("node-b", "192.168.0.2"),
				withNode(node("node-c", "192.168.0.3"), noZoneLabel()),
			},
			query: Query{Zones: []string{"zone-b"}},
			want:  []Endpoint{inNodeZone(nodeEntry("192.168.0.1", "node-a", 0), "zone-b")},
		},
		{
			name:    "a dual-stack node gives one entry per family, IPv4 first, each counting the pods of its family",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			slices:  dualStackPods,
			nodes:   dualStackNodes,
			want: []Endpoint{
				nodeEntry("192.168.0.1", "node-a", 1), nodeEntry("192.168.0.2", "node-b", 0),
				nodeEntry("fd00::1", "node-a", 2), nodeEntry("fd00::2", "node-b", 0),
			},
		},
		{
			name:    "address_type keeps one family of dual-stack nodes",
			service: nodePortService(corev1.ServiceTypeNodePort, local, httpNodePort),
			slices:  dualStackPods,
			nodes:   dualStackNodes,
			query:   Query{AddressType: discoveryv1.AddressTypeIPv6},
			want:    []Endpoint{nodeEntry("fd00::1", "node-a", 2)},
		},
		{
			name: "a single-stack Service gives no entry of the other family, on which it has no nodePort",
			service: func() *corev1.Service {
				s := nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort)
				s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
				return s
			}(),
			slices: dualStackPods,
			nodes:  dualStackNodes,
			want:   []Endpoint{nodeEntry("192.168.0.1", "node-a", 1), nodeEntry("192.168.0.2", "node-b", 0)},
		},
		{
			name:    "with policy Local and terminating endpoints excluded, a node running only a draining pod is left out",
			service: nodePortService(corev1.ServiceTypeNodePort, local, httpNodePort),
			slices:  drainingOnA,
			nodes:   twoNodes,
			query:   Query{Terminating: TerminatingExclude},
			want:    []Endpoint{nodeEntry("192.168.0.2", "node-b", 1)},
		},
		{
			name:    "with policy Local and terminating endpoints included, a node running only a draining pod is kept",
			service: nodePortService(corev1.ServiceTypeNodePort, local, httpNodePort),
			slices:  drainingOnA,
			nodes:   twoNodes,
			query:   Query{Terminating: TerminatingInclude},
			want:    []Endpoint{nodeEntry("192.168.0.1", "node-a", 1), nodeEntry("192.168.0.2", "node-b", 1)},
		},
		{
			name:    "with policy Local and fallback, a node running only a draining pod is left out while another pod is ready",
			service: nodePortService(corev1.ServiceTypeNodePort, local, httpNodePort),
			slices:  drainingOnA,
			nodes:   twoNodes,
			query:   Query{Terminating: TerminatingFallback},
			want:    []Endpoint{nodeEntry("192.168.0.2", "node-b", 1)},
		},
		{
			name:    "with policy Local and fallback, the node of the draining pod is kept when no pod is ready",
			service: nodePortService(corev1.ServiceTypeNodePort, local, httpNodePort),
			slices:  onlyDraining,
			nodes:   twoNodes,
			query:   Query{Terminating: TerminatingFallback},
			want:    []Endpoint{nodeEntry("192.168.0.1", "node-a", 1)},
		},
		{
			name:    "nodes are sorted IPv4 before IPv6, then numerically, whatever their names",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			nodes: []corev1.Node{
				node("a", "fd00::10"), node("b", "192.168.0.10"), node("c", "fd00::9"), node("d", "9.0.0.1"), node("e", "192.168.0.9"),
			},
			want: []Endpoint{
				nodeEntry("9.0.0.1", "d", 0), nodeEntry("192.168.0.9", "e", 0), nodeEntry("192.168.0.10", "b", 0),
				nodeEntry("fd00::9", "c", 0), nodeEntry("fd00::10", "a", 0),
			},
		},
		{
			name:    "two nodes that claim one address give one entry, of the first node by name",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			nodes:   []corev1.Node{node("node-b", "192.168.0.1"), node("node-a", "192.168.0.1")},
			want:    []Endpoint{nodeEntry("192.168.0.1", "node-a", 0)},
		},
		{
			name: "port_name chooses the port whose nodePort is given",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster,
				withNodePort(svcPort("https", 443, intstr.FromInt32(8443)), 30443), httpNodePort),
			nodes: []corev1.Node{node("node-a", "192.168.0.1")},
			query: Query{PortName: "http"},
			want:  []Endpoint{nodeEntry("192.168.0.1", "node-a", 0)},
		},
		{
			name:    "without port_name the only port of the Service is used, even unnamed",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, withNodePort(svcPort("", 80, intstr.FromInt32(8080)), 30080)),
			nodes:   []corev1.Node{node("node-a", "192.168.0.1")},
			want:    []Endpoint{nodeEntry("192.168.0.1", "node-a", 0)},
		},
		{
			name:    "a ClusterIP Service is an error naming the Service and the port",
			service: nodePortService("", "", http),
			nodes:   twoNodes,
			query:   Query{PortName: "http"},
			wantErr: "port http of service shop/web has no nodePort (the Service is of type ClusterIP): a node pool needs a NodePort or LoadBalancer Service that allocates node ports",
		},
		{
			name:    "a LoadBalancer Service that allocates no node ports is an error naming the Service and the port",
			service: nodePortService(corev1.ServiceTypeLoadBalancer, cluster, svcPort("", 80, intstr.FromInt32(8080))),
			nodes:   twoNodes,
			wantErr: "port 80 of service shop/web has no nodePort (the Service is of type LoadBalancer): a node pool needs a NodePort or LoadBalancer Service that allocates node ports",
		},
		{
			name: "a Service of several ports without port_name is an error, since no nodePort is chosen",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort,
				withNodePort(svcPort("https", 443, intstr.FromInt32(8443)), 30443)),
			nodes:   twoNodes,
			wantErr: "service shop/web has 2 ports and none was chosen by name: a node pool needs the nodePort of one port",
		},
		{
			name:    "a port name the Service does not have is the same error as for pods",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			nodes:   twoNodes,
			query:   Query{PortName: "https"},
			wantErr: "port https not found in service shop/web",
		},
		{
			name:    "no node gives an empty list",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort),
			slices:  threePods,
			want:    []Endpoint{},
		},
		{
			name:    "a missing Service is an error, not a panic",
			nodes:   twoNodes,
			wantErr: "no service given",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Nodes(tt.service, tt.slices, tt.nodes, tt.query)
			if listOrError(t, res.Endpoints, err, tt.wantErr) && !reflect.DeepEqual(res.Endpoints, tt.want) {
				t.Errorf("got  %s\nwant %s", describeEntries(res.Endpoints), describeEntries(tt.want))
			}
		})
	}
}

func describeEntries(entries []Endpoint) string {
	out := "["
	for _, e := range entries {
		local := "nil"
		if e.LocalEndpoints != nil {
			local = strconv.Itoa(*e.LocalEndpoints)
		}
		out += " " + e.Address + " " + e.NodeName + " zone=" + e.Zone + " local=" + local + ";"
	}
	return out + " ]"
}

func TestNoNodePortIsATypedError(t *testing.T) {
	_, err := Nodes(nodePortService("", "", http), nil, nil, Query{PortName: "http"})
	var noNodePort *NoNodePortError
	if !errors.As(err, &noNodePort) {
		t.Fatalf("error %v is not a *NoNodePortError", err)
	}
	want := NoNodePortError{Namespace: ns, Service: svc, Type: corev1.ServiceTypeClusterIP, PortName: "http", Port: 80, Ports: 1}
	if *noNodePort != want {
		t.Errorf("error fields = %+v, want %+v", *noNodePort, want)
	}
}

func TestPodEndpointsHaveNoLocalCount(t *testing.T) {
	res, err := Pool(service(http), mixedSlices(), Query{PortName: "http"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Endpoints {
		if e.LocalEndpoints != nil {
			t.Errorf("pod endpoint %s has a local count", e.Address)
		}
	}
}

func TestNodesGivesTheSameListWhateverTheOrderOfNodes(t *testing.T) {
	mixed := func() []corev1.Node {
		return []corev1.Node{
			node("node-a", "192.168.0.1", "fd00::1"), node("node-b", "192.168.0.2"), node("node-c", "fd00::3"),
			node("node-d", "192.168.0.1"), withNode(node("node-e", "192.168.0.5"), readyStatus(corev1.ConditionFalse)),
		}
	}
	s := nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort)
	pods := []discoveryv1.EndpointSlice{podsOn("a", podOn("10.244.0.1", "node-a"), podOn("10.244.0.2", "node-d"))}
	want, err := Nodes(s, pods, mixed(), Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Endpoints) != 4 {
		t.Fatalf("fixture gave %d entries, want 4: %s", len(want.Endpoints), describeEntries(want.Endpoints))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 100 {
		in := mixed()
		rng.Shuffle(len(in), func(a, b int) { in[a], in[b] = in[b], in[a] })
		got, err := Nodes(s, pods, in, Query{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("permutation %d gave %s, want %s", i, describeEntries(got.Endpoints), describeEntries(want.Endpoints))
		}
	}
}

func TestNodesNeverModifiesItsInputs(t *testing.T) {
	s := nodePortService(corev1.ServiceTypeNodePort, local, httpNodePort)
	pods := mixedSlices()
	nodes := []corev1.Node{node("node-a", "192.168.0.1"), withNode(node("node-b", "fd00::2"), beingDeleted())}
	sCopy, podsCopy := s.DeepCopy(), deepCopySlices(pods)
	nodesCopy := []corev1.Node{*nodes[0].DeepCopy(), *nodes[1].DeepCopy()}
	if _, err := Nodes(s, pods, nodes, Query{PortName: "http"}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, sCopy) || !reflect.DeepEqual(pods, podsCopy) || !reflect.DeepEqual(nodes, nodesCopy) {
		t.Error("Nodes changed its inputs")
	}
}

func TestNodeFleet(t *testing.T) {
	webNodes := nodePortService(corev1.ServiceTypeNodePort, local, httpNodePort)
	apiNodes := nodePortService(corev1.ServiceTypeLoadBalancer, cluster, withNodePort(http, 30081))
	apiNodes.Name = "api"
	internal := nodePortService(corev1.ServiceTypeClusterIP, "", http)
	internal.Name = "internal"
	services := []corev1.Service{*webNodes, *apiNodes, *internal}
	slices := []discoveryv1.EndpointSlice{
		podsOn("web-a", podOn("10.244.0.1", "node-a")),
		slice("api-a", v4Slice, labelledFor("api"), ports(slicePort("http", 8080)), eps(podOn("10.244.1.1", "node-b"), podOn("10.244.1.2", "node-b"))),
	}
	nodes := []corev1.Node{node("node-a", "192.168.0.1"), node("node-b", "192.168.0.2"), withNode(node("node-c", "192.168.0.3"), beingDeleted())}

	res, err := NodeFleet(services, slices, nodes, Query{PortName: "http"})
	if err != nil {
		t.Fatal(err)
	}
	api := func(addr, n string, count int) Endpoint {
		e := nodeEntry(addr, n, count)
		e.Port = 30081
		return e
	}
	want := map[string][]Endpoint{
		"api": {api("192.168.0.1", "node-a", 0), api("192.168.0.2", "node-b", 2)},
		"web": {nodeEntry("192.168.0.1", "node-a", 1)},
	}
	if len(res.Pools) != len(want) {
		t.Fatalf("%d pools, want %d", len(res.Pools), len(want))
	}
	for _, p := range res.Pools {
		if !reflect.DeepEqual(p.Endpoints, want[p.Service.Name]) {
			t.Errorf("%s: got %s, want %s", p.Service.Name, describeEntries(p.Endpoints), describeEntries(want[p.Service.Name]))
		}
		alone, err := Nodes(p.Service, slices, nodes, Query{PortName: "http"})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p.Result, alone) {
			t.Errorf("%s: the fleet's pool differs from Nodes': %+v, want %+v", p.Service.Name, p.Result, alone)
		}
	}
	wantSkipped := []SkippedService{{Namespace: ns, Name: "internal",
		Reason: "port http of service shop/internal has no nodePort (the Service is of type ClusterIP): a node pool needs a NodePort or LoadBalancer Service that allocates node ports"}}
	if !reflect.DeepEqual(res.Skipped, wantSkipped) {
		t.Errorf("skipped %+v, want %+v", res.Skipped, wantSkipped)
	}
}

func TestNodePortIsTheChosenPortsNodePort(t *testing.T) {
	twoPorts := nodePortService(corev1.ServiceTypeNodePort, cluster, httpNodePort, withNodePort(svcPort("https", 443, intstr.FromInt32(8443)), 30443))
	if got, err := NodePort(twoPorts, Query{PortName: "https"}); err != nil || got != 30443 {
		t.Errorf("NodePort(https) = %d, %v; want 30443", got, err)
	}
	var noNodePort *NoNodePortError
	if _, err := NodePort(twoPorts, Query{}); !errors.As(err, &noNodePort) || noNodePort.Ports != 2 {
		t.Errorf("NodePort without a port name on two ports: %v, want a *NoNodePortError for 2 ports", err)
	}
	var notFound *PortNotFoundError
	if _, err := NodePort(twoPorts, Query{PortName: "grpc"}); !errors.As(err, &notFound) {
		t.Errorf("NodePort(grpc) error = %v, want a *PortNotFoundError", err)
	}
	if _, err := NodePort(nil, Query{}); err == nil {
		t.Error("NodePort of no Service gave no error")
	}
}
