package endpoints

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// FuzzPool builds a Service, EndpointSlices and Nodes from arbitrary bytes,
// every field free to be nil, empty, out of range or malformed, and checks
// that Pool and Nodes neither panic nor break their promises. `go test` runs the seeds below;
// `go test -fuzz=FuzzPool ./internal/endpoints` searches for more.
func FuzzPool(f *testing.F) {
	f.Add([]byte{}, "", int32(80))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, "http", int32(80))
	f.Add([]byte("\x03\x01\x02\x00\x04\x01\x01\x02\x03\x05\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09"), "", int32(8080))
	f.Add([]byte("\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0\xef\xee\xed"), "metrics", int32(65535))
	f.Add([]byte("\x02\x02\x03\x03\x01\x00\x00\x00\x50\x02\x01\x01\x01\x00\x00\x1f\x90\x03\x03\x00\x01\x02"), "", int32(1))
	f.Fuzz(func(t *testing.T, data []byte, portName string, defaultPort int32) {
		g := &generator{data: data}
		q := g.query(portName, defaultPort)
		service := g.service()
		in := g.slices()
		nodes := g.nodes()
		g.nodeQuery(&q)
		inCopy, serviceCopy := deepCopySlices(in), service.DeepCopy()

		checkNodes(t, service, in, nodes, q)

		res, err := Pool(service, in, q)
		got := res.Endpoints

		if !reflect.DeepEqual(in, inCopy) || !reflect.DeepEqual(service, serviceCopy) {
			t.Fatal("Ready changed its inputs")
		}
		if err != nil {
			var notFound *PortNotFoundError
			if !errors.As(err, &notFound) || portName == "" {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if got == nil {
			t.Fatal("nil result without an error")
		}
		var prev *Endpoint
		for i := range got {
			e := &got[i]
			addr, perr := netip.ParseAddr(e.Address)
			if perr != nil || addr.String() != e.Address {
				t.Fatalf("endpoint %+v has no canonical IP address", e)
			}
			if (e.AddressType == discoveryv1.AddressTypeIPv4) != addr.Is4() {
				t.Fatalf("endpoint %+v has an address of the wrong family", e)
			}
			if q.AddressType != "" && e.AddressType != q.AddressType {
				t.Fatalf("endpoint %+v is not of the family asked for, %s", e, q.AddressType)
			}
			if len(q.Zones) > 0 && !slices.Contains(q.Zones, e.Zone) {
				t.Fatalf("endpoint %+v is not in the zones asked for, %v", e, q.Zones)
			}
			if !e.Ready && (q.Terminating == TerminatingExclude || !e.Serving || !e.Terminating) {
				t.Fatalf("endpoint %+v is neither ready nor allowed as serving and terminating by %q", e, q.Terminating)
			}
			if e.Port != defaultPort && (e.Port < 1 || e.Port > 65535) {
				t.Fatalf("endpoint %+v has port %d", e, e.Port)
			}
			if prev != nil {
				pa := netip.MustParseAddr(prev.Address)
				if c := pa.Compare(addr); c > 0 || (c == 0 && prev.Port >= e.Port) {
					t.Fatalf("result not sorted or not unique: %+v then %+v", prev, e)
				}
			}
			prev = e
		}
	})
}

// checkNodes checks the promises of Nodes: no change to its inputs, an error
// only for a port it cannot use, and entries that are unique, sorted, of
// eligible nodes with an address of the asked type and family, on the
// chosen port's nodePort, with a local count that Local requires to be
// positive.
func checkNodes(t *testing.T, service *corev1.Service, in []discoveryv1.EndpointSlice, nodes []corev1.Node, q Query) {
	t.Helper()
	inCopy, serviceCopy := deepCopySlices(in), service.DeepCopy()
	var nodesCopy []corev1.Node
	if nodes != nil {
		nodesCopy = make([]corev1.Node, len(nodes))
	}
	for i := range nodes {
		nodes[i].DeepCopyInto(&nodesCopy[i])
	}
	res, err := Nodes(service, in, nodes, q)
	if !reflect.DeepEqual(in, inCopy) || !reflect.DeepEqual(service, serviceCopy) || !reflect.DeepEqual(nodes, nodesCopy) {
		t.Fatal("Nodes changed its inputs")
	}
	if err != nil {
		var notFound *PortNotFoundError
		var noNodePort *NoNodePortError
		if !errors.As(err, &notFound) && !errors.As(err, &noNodePort) {
			t.Fatalf("unexpected error from Nodes: %v", err)
		}
		return
	}
	if res.Endpoints == nil {
		t.Fatal("Nodes gave a nil result without an error")
	}
	// The generator may give two nodes one name (a cluster never does): an
	// entry must come from one of them.
	byName := map[string][]*corev1.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = append(byName[nodes[i].Name], &nodes[i])
	}
	addressType := corev1.NodeInternalIP
	if q.NodeAddressType != "" {
		addressType = q.NodeAddressType
	}
	var prev *Endpoint
	for i := range res.Endpoints {
		e := &res.Endpoints[i]
		addr, perr := netip.ParseAddr(e.Address)
		if perr != nil || addr.String() != e.Address || (e.AddressType == discoveryv1.AddressTypeIPv4) != addr.Is4() {
			t.Fatalf("node entry %+v has no canonical address of its family", e)
		}
		if q.AddressType != "" && e.AddressType != q.AddressType {
			t.Fatalf("node entry %+v is not of the family asked for, %s", e, q.AddressType)
		}
		if e.Port < 1 || e.Port > 65535 {
			t.Fatalf("node entry %+v has port %d", e, e.Port)
		}
		if e.LocalEndpoints == nil || *e.LocalEndpoints < 0 {
			t.Fatalf("node entry %+v has no local count", e)
		}
		if service.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && *e.LocalEndpoints == 0 {
			t.Fatalf("node entry %+v runs no endpoint of a Local Service", e)
		}
		eligible, hasAddress := false, false
		for _, n := range byName[e.NodeName] {
			if !eligibleNode(n, q.NodeSelector) {
				continue
			}
			eligible = true
			for _, a := range n.Status.Addresses {
				if a.Type == addressType {
					if parsed, err := netip.ParseAddr(a.Address); err == nil && parsed == addr {
						hasAddress = true
					}
				}
			}
		}
		if !eligible {
			t.Fatalf("node entry %+v is not of an eligible node", e)
		}
		if !hasAddress {
			t.Fatalf("node entry %+v: no eligible node %s has such a %s", e, e.NodeName, addressType)
		}
		if prev != nil {
			pa := netip.MustParseAddr(prev.Address)
			if c := pa.Compare(addr); c > 0 || (c == 0 && prev.Port >= e.Port) {
				t.Fatalf("node entries not sorted or not unique: %+v then %+v", prev, e)
			}
		}
		prev = e
	}
}

// generator turns fuzz bytes into Kubernetes objects; once the bytes run out
// every choice is the zero one.
type generator struct{ data []byte }

func (g *generator) next() byte {
	if len(g.data) == 0 {
		return 0
	}
	b := g.data[0]
	g.data = g.data[1:]
	return b
}

func (g *generator) upTo(n int) int { return int(g.next()) % (n + 1) }

func (g *generator) pick(options ...string) string { return options[int(g.next())%len(options)] }

func (g *generator) maybe(options ...string) *string {
	if g.next()%4 == 0 {
		return nil
	}
	s := g.pick(options...)
	return &s
}

func (g *generator) int32() int32 {
	var b [4]byte
	for i := range b {
		b[i] = g.next()
	}
	return int32(binary.BigEndian.Uint32(b[:]))
}

var fuzzNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func (g *generator) query(portName string, defaultPort int32) Query {
	q := Query{PortName: portName, DefaultPort: defaultPort, Now: fuzzNow,
		Terminating: TerminatingPolicies[int(g.next())%len(TerminatingPolicies)],
		AddressType: discoveryv1.AddressType(g.pick("", "IPv4", "IPv6")),
	}
	for range g.upTo(2) {
		q.Zones = append(q.Zones, g.pick("zone-a", "zone-b", ""))
	}
	if g.next()%2 == 0 {
		q.ExpiryAnnotation = "example.com/expires"
	}
	return q
}

func (g *generator) service() *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: g.pick(ns, "other", ""), Name: g.pick(svc, "api", "")}}
	for range g.upTo(3) {
		p := corev1.ServicePort{Name: g.pick("", "http", "https", "metrics"), Port: g.int32()}
		// Mostly valid node ports, so that node pools get made; 0 is none.
		p.NodePort = []int32{30080, 30443, 0, -1, 70000}[int(g.next())%5]
		s.Spec.Ports = append(s.Spec.Ports, p)
	}
	s.Spec.Type = corev1.ServiceType(g.pick("", "ClusterIP", "NodePort", "LoadBalancer"))
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicy(g.pick("", "Cluster", "Local"))
	if g.next()%3 == 0 {
		for range g.upTo(2) {
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, corev1.IPFamily(g.pick("IPv4", "IPv6", "")))
		}
	}
	return s
}

// nodeQuery adds the node pool's arguments to q.
func (g *generator) nodeQuery(q *Query) {
	q.NodeAddressType = corev1.NodeAddressType(g.pick("", "InternalIP", "ExternalIP"))
	switch g.next() % 4 {
	case 1:
		q.NodeSelector = labels.SelectorFromSet(labels.Set{"pool": "edge"})
	case 2:
		q.NodeSelector = labels.Everything()
	}
}

func (g *generator) nodes() []corev1.Node {
	var out []corev1.Node
	for range g.upTo(4) {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: g.pick("node-a", "node-b", "")}}
		if zone := g.maybe("zone-a", "zone-b", ""); zone != nil {
			n.Labels = map[string]string{corev1.LabelTopologyZone: *zone}
		}
		for range g.upTo(2) {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			key := g.pick(corev1.LabelNodeExcludeBalancers, "pool")
			n.Labels[key] = g.pick("", "true", "false", "0", "edge", "maybe")
		}
		if g.next()%8 == 0 {
			now := metav1.NewTime(fuzzNow)
			n.DeletionTimestamp = &now
		}
		for range g.upTo(1) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: g.pick(ToBeDeletedTaint, KarpenterDisruptedTaint, "other", "")})
		}
		for range 1 + g.upTo(1) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
				Type: corev1.NodeConditionType(g.pick("Ready", "Ready", "Ready", "MemoryPressure", "")), Status: corev1.ConditionStatus(g.pick("True", "True", "True", "False", "Unknown", "")),
			})
		}
		for range 1 + g.upTo(3) {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{
				Type: corev1.NodeAddressType(g.pick("InternalIP", "InternalIP", "ExternalIP", "Hostname", "")), Address: g.pick(fuzzAddresses...),
			})
		}
		out = append(out, n)
	}
	return out
}

func (g *generator) slices() []discoveryv1.EndpointSlice {
	var out []discoveryv1.EndpointSlice
	for range g.upTo(4) {
		s := discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: g.pick(ns, "other", ""), Name: g.pick("a", "b")},
			AddressType: discoveryv1.AddressType(g.pick("IPv4", "IPv6", "FQDN", "", "ipv4")),
		}
		if label := g.maybe(svc, "api", ""); label != nil {
			s.Labels = map[string]string{discoveryv1.LabelServiceName: *label}
		}
		if expiry := g.maybe("2026-11-29T11:00:00Z", "2026-11-29T13:00:00+01:00", "1795953600", "1999999999", "soon", ""); expiry != nil {
			s.Annotations = map[string]string{"example.com/expires": *expiry}
		}
		if trigger := g.maybe("2026-11-29T10:00:00.123Z", "garbage"); trigger != nil {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[LastChangeTriggerTimeAnnotation] = *trigger
		}
		for range g.upTo(3) {
			p := discoveryv1.EndpointPort{Name: g.maybe("", "http", "https", "metrics")}
			if g.next()%3 != 0 {
				n := g.int32()
				p.Port = &n
			}
			s.Ports = append(s.Ports, p)
		}
		for range g.upTo(5) {
			s.Endpoints = append(s.Endpoints, g.endpoint())
		}
		out = append(out, s)
	}
	return out
}

var fuzzAddresses = []string{
	"10.0.0.1", "10.0.0.2", "010.0.0.1", "255.255.255.255", "0.0.0.0", "fd00::1", "FD00:0::1",
	"::ffff:10.0.0.1", "fe80::1%eth0", "", "example.com", "10.0.0.256", "::", "1.2.3",
}

func (g *generator) endpoint() discoveryv1.Endpoint {
	var e discoveryv1.Endpoint
	for range g.upTo(3) {
		if g.next()%5 == 0 {
			// Take the length first: next shortens data.
			n := int(g.next()) % 16
			e.Addresses = append(e.Addresses, string(g.data[:min(len(g.data), n)]))
		} else {
			e.Addresses = append(e.Addresses, g.pick(fuzzAddresses...))
		}
	}
	e.Conditions.Ready = g.boolPtr()
	e.Conditions.Serving = g.boolPtr()
	e.Conditions.Terminating = g.boolPtr()
	if g.next()%2 == 0 {
		e.TargetRef = &corev1.ObjectReference{Kind: g.pick("Pod", "Node", ""), Name: g.pick("web-0", "web-1", "")}
	}
	e.NodeName = g.maybe("node-a", "node-b", "")
	e.Zone = g.maybe("zone-a", "")
	e.Hostname = g.maybe("web-0", "")
	return e
}

func (g *generator) boolPtr() *bool {
	switch g.next() % 3 {
	case 0:
		return nil
	case 1:
		v := true
		return &v
	default:
		v := false
		return &v
	}
}
