// Package endpoints holds the rules that turn a Service and its EndpointSlices
// into the members of a load balancer pool. It does no I/O and knows nothing of
// Terraform or of client-go, so every rule can be tested with plain values.
package endpoints

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Endpoint is one member of a load balancer pool. An empty Pod, NodeName,
// Zone or Hostname means the EndpointSlice did not give one.
type Endpoint struct {
	Address     string
	Port        int32
	AddressType discoveryv1.AddressType
	Pod         string
	NodeName    string
	Zone        string
	Hostname    string
	// The endpoint's conditions with the API's defaults for missing ones:
	// ready true, serving true, terminating false. A node of a node pool is
	// ready and serving, never terminating: the rules leave out the others.
	Ready, Serving, Terminating bool
	// GatePending says that the endpoint's pod is ready but for the
	// Query's ReadinessGate (see GatedPool): in the pool, not yet Ready.
	GatePending bool
	// LocalEndpoints is set only in a node pool: how many endpoints of the
	// Service's pod pool, of the entry's address family, run on the node.
	// Nil for a pod endpoint.
	LocalEndpoints *int
	// HealthCheck is how a load balancer should check the member: for a
	// node, its Service's (nodeHealthCheck); for a pod, its readinessProbe,
	// set only by WithPodHealthChecks. Nil when there is none.
	HealthCheck *HealthCheck
}

// TerminatingPolicy says what becomes of endpoints that are terminating but
// still serving (a pod draining its connections).
type TerminatingPolicy string

const (
	// TerminatingExclude leaves them out: only ready endpoints are given.
	TerminatingExclude TerminatingPolicy = "exclude"
	// TerminatingFallback gives them only when no endpoint is ready, as
	// kube-proxy does since Kubernetes 1.28.
	TerminatingFallback TerminatingPolicy = "fallback"
	// TerminatingInclude gives them beside the ready ones, for pools that
	// drain connections gracefully.
	TerminatingInclude TerminatingPolicy = "include"
)

// TerminatingPolicies lists the policies, for schema text and validation.
var TerminatingPolicies = []TerminatingPolicy{TerminatingExclude, TerminatingFallback, TerminatingInclude}

// Query says which endpoints of the Service make the pool.
type Query struct {
	// PortName is the name of a port of the Service; empty means none was given.
	PortName string
	// DefaultPort is the port of endpoints whose slice gives no number.
	DefaultPort int32
	// Terminating is the policy for serving, terminating endpoints; empty
	// means TerminatingExclude.
	Terminating TerminatingPolicy
	// AddressType keeps only the endpoints of one family; empty keeps both.
	AddressType discoveryv1.AddressType
	// Zones keeps only the endpoints in these zones; empty keeps all.
	Zones []string
	// ExpiryAnnotation names an annotation of EndpointSlices that holds the
	// time after which their endpoints are stale; empty means none.
	ExpiryAnnotation string
	// Now is the time expiry is judged against.
	Now time.Time
	// TrustedSliceManagers are the managers (TrustsSlice) whose slices
	// count for a Service with a selector, beside the EndpointSlice
	// controller.
	TrustedSliceManagers []string
	// ReadinessGate is the condition type of a readiness gate whose waiting
	// pods are in the pool (GatedPool); empty means none.
	ReadinessGate corev1.PodConditionType

	// The next fields apply to node pools only (Nodes, NodeFleet).

	// NodeAddressType is the type of node address a node pool gives:
	// corev1.NodeInternalIP when empty, or corev1.NodeExternalIP.
	NodeAddressType corev1.NodeAddressType
	// NodeSelector keeps only the nodes whose labels it matches; nil keeps all.
	NodeSelector labels.Selector
	// KubeProxyHealthPort is the port of the nodes' health check when the
	// Service has no healthCheckNodePort; 0 means DefaultKubeProxyHealthPort.
	KubeProxyHealthPort int32
}

// CountReady is the number of endpoints whose ready condition is true: those
// that take new connections, which is what the min_ready guards count. A
// draining pod (serving and terminating, given under TerminatingFallback or
// TerminatingInclude) is in the pool but not counted; an entry of a node pool
// is always ready.
func CountReady(eps []Endpoint) int {
	n := 0
	for _, e := range eps {
		if e.Ready {
			n++
		}
	}
	return n
}

// Result is the pool and what was learnt while making it.
type Result struct {
	// Endpoints is never nil, so that "nothing is ready" is an empty list.
	Endpoints []Endpoint
	// LastChangeTriggerTime is the latest endpoints.kubernetes.io/last-change-
	// trigger-time among the Service's slices; zero when none has one.
	LastChangeTriggerTime time.Time
	// Warnings name slices whose annotations could not be understood.
	Warnings []string
	// LeftOut are the slices labelled for the Service whose manager is not
	// trusted (TrustsSlice), sorted by name.
	LeftOut []LeftOutSlice
}

// PortNotFoundError reports a PortName that the Service does not have.
type PortNotFoundError struct {
	Namespace, Service, PortName string
	// Available lists the names of the Service's ports, in its order.
	Available []string
}

func (e *PortNotFoundError) Error() string {
	return fmt.Sprintf("port %s not found in service %s/%s", e.PortName, e.Namespace, e.Service)
}

// Pool returns the endpoints of svc found in endpointSlices that q asks for
// (by default the ready ones), once each, sorted IPv4 before IPv6, then by
// address, then by port. Slices of other Services are ignored. It never
// modifies its arguments.
func Pool(svc *corev1.Service, endpointSlices []discoveryv1.EndpointSlice, q Query) (Result, error) {
	if svc == nil {
		return Result{}, errors.New("no service given")
	}
	port, err := choosePort(svc, q)
	if err != nil {
		return Result{}, err
	}
	var res Result
	found := candidates{ready: map[endpointKey]Endpoint{}, draining: map[endpointKey]Endpoint{}}
	for i := range endpointSlices {
		slice := &endpointSlices[i]
		if !belongsTo(slice, svc) {
			continue
		}
		if !TrustsSlice(svc, slice, q.TrustedSliceManagers) {
			res.LeftOut = append(res.LeftOut, LeftOutSlice{Namespace: slice.Namespace, Name: slice.Name, Manager: slice.Labels[discoveryv1.LabelManagedBy]})
			continue
		}
		res.LastChangeTriggerTime = later(res.LastChangeTriggerTime, lastChangeTriggerTime(slice))
		number, use, warning := sliceServes(slice, port, q)
		if warning != "" {
			res.Warnings = append(res.Warnings, warning)
		}
		if use {
			found.addSlice(slice, number, q)
		}
	}
	res.Endpoints = sorted(found.chosen(q.Terminating))
	slices.SortFunc(res.LeftOut, func(a, b LeftOutSlice) int { return cmp.Compare(a.Name, b.Name) })
	return res, nil
}

// sliceServes says whether the endpoints of a slice may be in the pool, and
// on which port: an IP slice of the asked family, not expired, that serves
// the chosen port.
func sliceServes(slice *discoveryv1.EndpointSlice, port portRule, q Query) (number int32, use bool, warning string) {
	if !isIPFamily(slice.AddressType) || (q.AddressType != "" && slice.AddressType != q.AddressType) {
		return 0, false, ""
	}
	if q.ExpiryAnnotation != "" {
		var expired bool
		if expired, warning = isExpired(slice, q.ExpiryAnnotation, q.Now); expired {
			return 0, false, ""
		}
	}
	number, use = port.numberIn(slice.Ports)
	return number, use, warning
}

// candidates are the endpoints found so far, ready ones apart from serving,
// terminating ones, each keyed by address and port.
type candidates struct {
	ready, draining map[endpointKey]Endpoint
}

// addSlice adds the endpoints of a slice that the query may give.
func (c candidates) addSlice(slice *discoveryv1.EndpointSlice, number int32, q Query) {
	for j := range slice.Endpoints {
		ep := &slice.Endpoints[j]
		isReady, serving, terminating := conditions(ep.Conditions)
		into := c.ready
		if !isReady {
			if !serving || !terminating || q.Terminating == TerminatingExclude || q.Terminating == "" {
				continue
			}
			into = c.draining
		}
		if len(q.Zones) > 0 && (ep.Zone == nil || !slices.Contains(q.Zones, *ep.Zone)) {
			continue
		}
		addr, ok := firstAddress(ep, slice.AddressType)
		if !ok {
			continue
		}
		key := endpointKey{addr: addr, port: number}
		candidate := Endpoint{
			Address:     addr.String(),
			Port:        number,
			AddressType: slice.AddressType,
			Pod:         podName(ep.TargetRef),
			NodeName:    deref(ep.NodeName),
			Zone:        deref(ep.Zone),
			Hostname:    deref(ep.Hostname),
			Ready:       isReady,
			Serving:     serving,
			Terminating: terminating,
		}
		if seen, dup := into[key]; dup && !describesBetter(candidate, seen) {
			continue
		}
		into[key] = candidate
	}
}

// chosen applies the terminating policy: the ready endpoints; with fallback,
// the draining ones when none is ready; with include, both, a copy that is
// ready (from a slice not yet updated) winning over a terminating one.
func (c candidates) chosen(policy TerminatingPolicy) map[endpointKey]Endpoint {
	switch {
	case policy == TerminatingFallback && len(c.ready) == 0:
		return c.draining
	case policy == TerminatingInclude:
		for k, e := range c.draining {
			if _, dup := c.ready[k]; !dup {
				c.ready[k] = e
			}
		}
	}
	return c.ready
}

func sorted(found map[endpointKey]Endpoint) []Endpoint {
	keys := make([]endpointKey, 0, len(found))
	for k := range found {
		keys = append(keys, k)
	}
	// netip orders every IPv4 address before every IPv6 one, then numerically.
	slices.SortFunc(keys, func(a, b endpointKey) int {
		return cmp.Or(a.addr.Compare(b.addr), cmp.Compare(a.port, b.port))
	})
	out := make([]Endpoint, 0, len(keys))
	for _, k := range keys {
		out = append(out, found[k])
	}
	return out
}

// endpointKey identifies an endpoint: the same address and port listed in two
// slices, as happens while the controller rebalances them, is one endpoint.
type endpointKey struct {
	addr netip.Addr
	port int32
}

// portRule is how an endpoint's port is found: by the name of a Service port
// in each slice's ports (the number Kubernetes resolved from targetPort, which
// may differ from slice to slice), or one fixed number for every endpoint.
type portRule struct {
	byName      bool
	name        string
	defaultPort int32
	// service is the Service port chosen, nil when none is (several ports
	// and no PortName): node pools take its nodePort.
	service *corev1.ServicePort
}

func choosePort(svc *corev1.Service, q Query) (portRule, error) {
	if q.PortName != "" {
		for i, p := range svc.Spec.Ports {
			if p.Name == q.PortName {
				return portRule{byName: true, name: p.Name, defaultPort: q.DefaultPort, service: &svc.Spec.Ports[i]}, nil
			}
		}
		available := make([]string, 0, len(svc.Spec.Ports))
		for _, p := range svc.Spec.Ports {
			available = append(available, p.Name)
		}
		return portRule{}, &PortNotFoundError{Namespace: svc.Namespace, Service: svc.Name, PortName: q.PortName, Available: available}
	}
	if len(svc.Spec.Ports) == 1 {
		return portRule{byName: true, name: svc.Spec.Ports[0].Name, defaultPort: q.DefaultPort, service: &svc.Spec.Ports[0]}, nil
	}
	return portRule{defaultPort: q.DefaultPort}, nil
}

// numberIn returns the port number that the endpoints of a slice with these
// ports serve, and false when the slice lists ports but not the chosen one.
func (r portRule) numberIn(ports []discoveryv1.EndpointPort) (int32, bool) {
	if !r.byName || len(ports) == 0 {
		return r.defaultPort, true
	}
	for _, p := range ports {
		if deref(p.Name) != r.name {
			continue
		}
		// The API server rejects numbers outside 1-65535; treat one that got
		// through anyway like a missing number rather than put it in a pool.
		if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
			return r.defaultPort, true
		}
		return *p.Port, true
	}
	return 0, false
}

// EndpointSliceController is the value of endpointslice.kubernetes.io/managed-by
// on the slices the control plane's EndpointSlice controller writes for the
// Services with a selector.
const EndpointSliceController = "endpointslice-controller.k8s.io"

// LeftOutSlice is a slice labelled for a Service that the pool does not
// read: Manager is its endpointslice.kubernetes.io/managed-by label, empty
// when it has none.
type LeftOutSlice struct {
	Namespace, Name, Manager string
}

// TrustsSlice says whether the pool of svc reads slice, one labelled for
// it. Whoever may write an EndpointSlice labelled with a Service's name
// would otherwise put any address in its pool: for a Service with a
// selector, whose slices the EndpointSlice controller writes, only the
// slices of that controller and of the trusted managers count. A Service
// without a selector has its slices written by hand, by the EndpointSlice
// mirroring controller or by a controller of its own: all count.
func TrustsSlice(svc *corev1.Service, slice *discoveryv1.EndpointSlice, trusted []string) bool {
	if len(svc.Spec.Selector) == 0 {
		return true
	}
	manager, ok := slice.Labels[discoveryv1.LabelManagedBy]
	return ok && (manager == EndpointSliceController || slices.Contains(trusted, manager))
}

func belongsTo(slice *discoveryv1.EndpointSlice, svc *corev1.Service) bool {
	return slice.Namespace == svc.Namespace && slice.Labels[discoveryv1.LabelServiceName] == svc.Name
}

// isIPFamily leaves out FQDN slices, which carry no pod address, and any
// address type a future API might add.
func isIPFamily(t discoveryv1.AddressType) bool {
	return t == discoveryv1.AddressTypeIPv4 || t == discoveryv1.AddressTypeIPv6
}

// conditions applies the discovery/v1 API's defaults, as kube-proxy reads
// them: a missing ready or serving condition means true, a missing
// terminating condition means false.
func conditions(c discoveryv1.EndpointConditions) (ready, serving, terminating bool) {
	return c.Ready == nil || *c.Ready, c.Serving == nil || *c.Serving, c.Terminating != nil && *c.Terminating
}

// LastChangeTriggerTimeAnnotation is set by the EndpointSlice controller to
// the time of the change (a pod or Service update) that its last write reflects.
const LastChangeTriggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

func lastChangeTriggerTime(slice *discoveryv1.EndpointSlice) time.Time {
	t, err := time.Parse(time.RFC3339Nano, slice.Annotations[LastChangeTriggerTimeAnnotation])
	if err != nil {
		return time.Time{}
	}
	return t
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// isExpired reads the slice's expiry annotation, an RFC 3339 time or Unix
// seconds. A slice without the annotation never expires; one whose value
// cannot be read is kept, with a warning naming it.
func isExpired(slice *discoveryv1.EndpointSlice, annotation string, now time.Time) (expired bool, warning string) {
	at, ok, err := expiryOf(slice, annotation)
	if !ok {
		return false, ""
	}
	if err != nil {
		return false, fmt.Sprintf("EndpointSlice %s/%s: annotation %s = %q is neither an RFC 3339 time nor Unix seconds; its endpoints are kept",
			slice.Namespace, slice.Name, annotation, slice.Annotations[annotation])
	}
	return !at.After(now), ""
}

// expiryOf is the time the slice's expiry annotation names; ok is false
// without the annotation, err set when its value cannot be read.
func expiryOf(slice *discoveryv1.EndpointSlice, annotation string) (at time.Time, ok bool, err error) {
	value, ok := slice.Annotations[annotation]
	if !ok {
		return time.Time{}, false, nil
	}
	value = strings.TrimSpace(value)
	if t, err := time.Parse(time.RFC3339Nano, value); err == nil {
		return t, true, nil
	}
	seconds, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return time.Time{}, true, err
	}
	return time.Unix(seconds, 0), true, nil
}

// NextExpiry is the earliest expiry after now among the slices' annotation
// (the Query's ExpiryAnnotation), and false when none is to come: the time
// at which a pool made at now changes without any event.
func NextExpiry(endpointSlices []discoveryv1.EndpointSlice, annotation string, now time.Time) (time.Time, bool) {
	var next time.Time
	if annotation == "" {
		return next, false
	}
	for i := range endpointSlices {
		at, ok, err := expiryOf(&endpointSlices[i], annotation)
		if !ok || err != nil || !at.After(now) {
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}

// firstAddress returns the endpoint's first address (the API calls them
// fungible), and false when it is missing or not an IP of the slice's family.
func firstAddress(ep *discoveryv1.Endpoint, family discoveryv1.AddressType) (netip.Addr, bool) {
	if len(ep.Addresses) == 0 {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(ep.Addresses[0])
	if err != nil || addr.Zone() != "" {
		return netip.Addr{}, false
	}
	if family == discoveryv1.AddressTypeIPv4 {
		return addr, addr.Is4()
	}
	return addr, addr.Is6()
}

func podName(ref *corev1.ObjectReference) string {
	if ref == nil || ref.Kind != "Pod" {
		return ""
	}
	return ref.Name
}

// describesBetter decides which copy of a duplicated endpoint is kept, so that
// the result does not depend on the order of the slices: the copy that gives
// more of pod, node, zone and hostname, then the smaller one field by field.
func describesBetter(a, b Endpoint) bool {
	if na, nb := detailCount(a), detailCount(b); na != nb {
		return na > nb
	}
	return cmp.Or(
		cmp.Compare(a.Pod, b.Pod),
		cmp.Compare(a.NodeName, b.NodeName),
		cmp.Compare(a.Zone, b.Zone),
		cmp.Compare(a.Hostname, b.Hostname),
	) < 0
}

func detailCount(e Endpoint) int {
	n := 0
	for _, s := range []string{e.Pod, e.NodeName, e.Zone, e.Hostname} {
		if s != "" {
			n++
		}
	}
	return n
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
