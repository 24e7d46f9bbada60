package endpoints

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

const (
	ns  = "shop"
	svc = "web"
)

// Builders keep each case down to what it is about.

func service(ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc},
		Spec:       corev1.ServiceSpec{Ports: ports},
	}
}

func svcPort(name string, port int32, target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: target, Protocol: corev1.ProtocolTCP}
}

func slicePort(name string, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Port: ptr.To(port)}
}

type sliceOpt func(*discoveryv1.EndpointSlice)

// slice is an EndpointSlice of Service web, as the EndpointSlice controller
// writes it (its managed-by label) unless options say otherwise.
func slice(name string, family discoveryv1.AddressType, opts ...sliceOpt) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: EndpointSliceController},
		},
		AddressType: family,
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func ports(p ...discoveryv1.EndpointPort) sliceOpt {
	return func(s *discoveryv1.EndpointSlice) { s.Ports = p }
}

func eps(e ...discoveryv1.Endpoint) sliceOpt {
	return func(s *discoveryv1.EndpointSlice) { s.Endpoints = e }
}

func labelledFor(service string) sliceOpt {
	return func(s *discoveryv1.EndpointSlice) {
		s.Labels[discoveryv1.LabelServiceName] = service
	}
}

func inNamespace(n string) sliceOpt {
	return func(s *discoveryv1.EndpointSlice) { s.Namespace = n }
}

type epOpt func(*discoveryv1.Endpoint)

// ep is a ready endpoint of pod "pod-<first address>" unless options say otherwise.
func ep(addresses ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: addresses, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
}

func with(e discoveryv1.Endpoint, opts ...epOpt) discoveryv1.Endpoint {
	for _, o := range opts {
		o(&e)
	}
	return e
}

func ready(v *bool) epOpt { return func(e *discoveryv1.Endpoint) { e.Conditions.Ready = v } }

func terminating() epOpt {
	return func(e *discoveryv1.Endpoint) {
		e.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	}
}

func pod(name string) epOpt {
	return func(e *discoveryv1.Endpoint) {
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name}
	}
}

func onNode(node, zone string) epOpt {
	return func(e *discoveryv1.Endpoint) { e.NodeName, e.Zone = ptr.To(node), ptr.To(zone) }
}

func hostname(h string) epOpt { return func(e *discoveryv1.Endpoint) { e.Hostname = ptr.To(h) } }

// v4 and v6 (on port 8080) are ready, serving endpoints that name nothing else.
func v4(addr string, port int32) Endpoint {
	return Endpoint{Address: addr, Port: port, AddressType: discoveryv1.AddressTypeIPv4, Ready: true, Serving: true}
}

func v6(addr string) Endpoint {
	return Endpoint{Address: addr, Port: 8080, AddressType: discoveryv1.AddressTypeIPv6, Ready: true, Serving: true}
}

// detailed is e with the given pod, node, zone and hostname.
func detailed(e Endpoint, pod, node, zone, host string) Endpoint {
	e.Pod, e.NodeName, e.Zone, e.Hostname = pod, node, zone, host
	return e
}

var (
	v4Slice = discoveryv1.AddressTypeIPv4
	v6Slice = discoveryv1.AddressTypeIPv6
	http    = svcPort("http", 80, intstr.FromInt32(8080))
)

func TestPool(t *testing.T) {
	tests := []struct {
		name    string
		service *corev1.Service
		slices  []discoveryv1.EndpointSlice
		query   Query
		want    []Endpoint
		wantErr string
	}{
		{
			name:    "a ready endpoint is given with the port the pods listen on, not the Service port",
			service: service(http),
			slices:  []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("http", 8080)), eps(ep("10.0.0.1")))},
			query:   Query{PortName: "http", DefaultPort: 80},
			want:    []Endpoint{v4("10.0.0.1", 8080)},
		},
		{
			name:    "an endpoint without a ready condition counts as ready",
			service: service(http),
			slices:  []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("http", 8080)), eps(with(ep("10.0.0.1"), ready(nil))))},
			query:   Query{PortName: "http", DefaultPort: 80},
			want:    []Endpoint{v4("10.0.0.1", 8080)},
		},
		{
			name:    "an endpoint whose ready condition is false is left out",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("http", 8080)), eps(
				with(ep("10.0.0.1"), ready(ptr.To(false))),
				ep("10.0.0.2"),
			))},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{v4("10.0.0.2", 8080)},
		},
		{
			name:    "a terminating endpoint that still serves is left out",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("http", 8080)), eps(
				with(ep("10.0.0.1"), terminating()),
			))},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{},
		},
		{
			name:    "the ready flag alone decides, so a terminating endpoint marked ready (publishNotReadyAddresses) is given",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("http", 8080)), eps(
				with(ep("10.0.0.1"), func(e *discoveryv1.Endpoint) {
					e.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(false), Terminating: ptr.To(true)}
				}),
			))},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{{Address: "10.0.0.1", Port: 8080, AddressType: v4Slice, Ready: true, Terminating: true}},
		},
		{
			name:    "the same endpoint listed in two slices is given once",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{
				slice("a", v4Slice, ports(slicePort("http", 8080)), eps(ep("10.0.0.1"), ep("10.0.0.2"))),
				slice("b", v4Slice, ports(slicePort("http", 8080)), eps(ep("10.0.0.2"), ep("10.0.0.3"))),
			},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{v4("10.0.0.1", 8080), v4("10.0.0.2", 8080), v4("10.0.0.3", 8080)},
		},
		{
			name:    "of two copies of an endpoint, the one that says more about the pod is kept",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{
				slice("a", v4Slice, ports(slicePort("http", 8080)), eps(ep("10.0.0.1"))),
				slice("b", v4Slice, ports(slicePort("http", 8080)), eps(with(ep("10.0.0.1"), pod("web-1"), onNode("node-a", "zone-a")))),
			},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{detailed(v4("10.0.0.1", 8080), "web-1", "node-a", "zone-a", "")},
		},
		{
			name:    "the same address on two different ports is two endpoints",
			service: service(svcPort("http", 80, intstr.FromString("web"))),
			slices: []discoveryv1.EndpointSlice{
				slice("a", v4Slice, ports(slicePort("http", 8080)), eps(ep("10.0.0.1"))),
				slice("b", v4Slice, ports(slicePort("http", 9090)), eps(ep("10.0.0.1"))),
			},
			want: []Endpoint{v4("10.0.0.1", 8080), v4("10.0.0.1", 9090)},
		},
		{
			name:    "slices labelled for another Service are left out",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{
				slice("a", v4Slice, ports(slicePort("http", 8080)), eps(ep("10.0.0.1"))),
				slice("b", v4Slice, labelledFor("api"), ports(slicePort("http", 8080)), eps(ep("10.0.0.2"))),
				slice("c", v4Slice, func(s *discoveryv1.EndpointSlice) { s.Labels = nil }, ports(slicePort("http", 8080)), eps(ep("10.0.0.3"))),
			},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{v4("10.0.0.1", 8080)},
		},
		{
			name:    "slices of a Service of the same name in another namespace are left out",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{
				slice("a", v4Slice, inNamespace("other"), ports(slicePort("http", 8080)), eps(ep("10.0.0.1"))),
			},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{},
		},
		{
			name:    "IPv6 slices give IPv6 endpoints in canonical form",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{
				slice("a", v6Slice, ports(slicePort("http", 8080)), eps(ep("fd00:0:0:0::0a"))),
			},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{v6("fd00::a")},
		},
		{
			name:    "FQDN slices carry no pod address and are left out",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{
				slice("a", discoveryv1.AddressTypeFQDN, ports(slicePort("http", 8080)), eps(ep("db.example.com"))),
				slice("b", v4Slice, ports(slicePort("http", 8080)), eps(ep("10.0.0.1"))),
			},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{v4("10.0.0.1", 8080)},
		},
		{
			name:    "a dual-stack Service gives each pod once per address family, IPv4 first",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{
				slice("v6", v6Slice, ports(slicePort("http", 8080)), eps(with(ep("fd00::2"), pod("web-2")), with(ep("fd00::1"), pod("web-1")))),
				slice("v4", v4Slice, ports(slicePort("http", 8080)), eps(with(ep("10.0.0.2"), pod("web-2")), with(ep("10.0.0.1"), pod("web-1")))),
			},
			query: Query{PortName: "http", DefaultPort: 80},
			want: []Endpoint{
				detailed(v4("10.0.0.1", 8080), "web-1", "", "", ""),
				detailed(v4("10.0.0.2", 8080), "web-2", "", "", ""),
				detailed(v6("fd00::1"), "web-1", "", "", ""),
				detailed(v6("fd00::2"), "web-2", "", "", ""),
			},
		},
		{
			name: "a named targetPort can resolve to different numbers in different slices",
			service: service(
				svcPort("http", 80, intstr.FromString("web")),
				svcPort("metrics", 9100, intstr.FromInt32(9100)),
			),
			slices: []discoveryv1.EndpointSlice{
				slice("old", v4Slice, ports(slicePort("http", 8080), slicePort("metrics", 9100)), eps(ep("10.0.0.1"))),
				slice("new", v4Slice, ports(slicePort("metrics", 9100), slicePort("http", 8081)), eps(ep("10.0.0.2"))),
			},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{v4("10.0.0.1", 8080), v4("10.0.0.2", 8081)},
		},
		{
			name:    "a port name the Service does not have is an error naming the port and the Service",
			service: service(http),
			slices:  []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("http", 8080)), eps(ep("10.0.0.1")))},
			query:   Query{PortName: "https", DefaultPort: 80},
			wantErr: "port https not found in service shop/web",
		},
		{
			name:    "a port name is an error on a Service without ports",
			service: service(),
			query:   Query{PortName: "http", DefaultPort: 80},
			wantErr: "port http not found in service shop/web",
		},
		{
			name:    "without a port name, the only port of the Service is used even when unnamed",
			service: service(svcPort("", 80, intstr.FromInt32(8080))),
			slices:  []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("", 8080)), eps(ep("10.0.0.1")))},
			query:   Query{DefaultPort: 80},
			want:    []Endpoint{v4("10.0.0.1", 8080)},
		},
		{
			name:    "an unnamed slice port given without a name pointer matches the unnamed Service port",
			service: service(svcPort("", 80, intstr.FromInt32(8080))),
			slices: []discoveryv1.EndpointSlice{slice("a", v4Slice,
				ports(discoveryv1.EndpointPort{Port: ptr.To[int32](8080)}), eps(ep("10.0.0.1")))},
			query: Query{DefaultPort: 80},
			want:  []Endpoint{v4("10.0.0.1", 8080)},
		},
		{
			name:    "without a port name, the only port of the Service is used even when named",
			service: service(http),
			slices:  []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("http", 8080)), eps(ep("10.0.0.1")))},
			query:   Query{DefaultPort: 80},
			want:    []Endpoint{v4("10.0.0.1", 8080)},
		},
		{
			name:    "without a port name, a Service with several ports gives default_port",
			service: service(http, svcPort("https", 443, intstr.FromInt32(8443))),
			slices: []discoveryv1.EndpointSlice{slice("a", v4Slice,
				ports(slicePort("http", 8080), slicePort("https", 8443)), eps(ep("10.0.0.1")))},
			query: Query{DefaultPort: 7000},
			want:  []Endpoint{v4("10.0.0.1", 7000)},
		},
		{
			name:    "without a port name, a Service without ports gives default_port",
			service: service(),
			slices:  []discoveryv1.EndpointSlice{slice("a", v4Slice, eps(ep("10.0.0.1")))},
			query:   Query{DefaultPort: 80},
			want:    []Endpoint{v4("10.0.0.1", 80)},
		},
		{
			name:    "a slice port without a number gives default_port",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{slice("a", v4Slice,
				ports(discoveryv1.EndpointPort{Name: ptr.To("http")}), eps(ep("10.0.0.1")))},
			query: Query{PortName: "http", DefaultPort: 81},
			want:  []Endpoint{v4("10.0.0.1", 81)},
		},
		{
			name:    "a slice that lists no ports at all gives default_port",
			service: service(http),
			slices:  []discoveryv1.EndpointSlice{slice("a", v4Slice, eps(ep("10.0.0.1")))},
			query:   Query{PortName: "http", DefaultPort: 81},
			want:    []Endpoint{v4("10.0.0.1", 81)},
		},
		{
			name:    "a slice that lists ports but not the chosen one does not serve it",
			service: service(http, svcPort("metrics", 9100, intstr.FromInt32(9100))),
			slices: []discoveryv1.EndpointSlice{
				slice("a", v4Slice, ports(slicePort("metrics", 9100)), eps(ep("10.0.0.1"))),
				slice("b", v4Slice, ports(slicePort("http", 8080)), eps(ep("10.0.0.2"))),
			},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{v4("10.0.0.2", 8080)},
		},
		{
			name:    "of several addresses on one endpoint only the first is given",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("http", 8080)),
				eps(ep("10.0.0.9", "10.0.0.1", "10.0.0.5")))},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{v4("10.0.0.9", 8080)},
		},
		{
			name:    "endpoints without an address, or whose address is not an IP of the slice's family, are left out",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{
				slice("a", v4Slice, ports(slicePort("http", 8080)), eps(ep(), ep("not-an-ip"), ep("fd00::1"), ep("fe80::1%eth0"), ep("10.0.0.1"))),
				slice("b", v6Slice, ports(slicePort("http", 8080)), eps(ep("10.0.0.2"))),
			},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{v4("10.0.0.1", 8080)},
		},
		{
			name:    "pod, node, zone and hostname are given when the slice has them and empty when not",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("http", 8080)), eps(
				with(ep("10.0.0.1"), pod("web-0"), onNode("node-a", "eu-west-1a"), hostname("web-0")),
				with(ep("10.0.0.2"), func(e *discoveryv1.Endpoint) {
					e.TargetRef = &corev1.ObjectReference{Kind: "Node", Name: "node-b"}
				}),
			))},
			query: Query{PortName: "http", DefaultPort: 80},
			want: []Endpoint{
				detailed(v4("10.0.0.1", 8080), "web-0", "node-a", "eu-west-1a", "web-0"),
				v4("10.0.0.2", 8080),
			},
		},
		{
			name:    "addresses are sorted numerically, not as text",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("http", 8080)), eps(
				ep("10.0.0.10"), ep("9.0.0.1"), ep("10.0.0.9"), ep("10.0.0.100"),
			))},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{v4("9.0.0.1", 8080), v4("10.0.0.9", 8080), v4("10.0.0.10", 8080), v4("10.0.0.100", 8080)},
		},
		{
			name:    "a Service with no ready endpoint gives an empty list",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("http", 8080)), eps(
				with(ep("10.0.0.1"), ready(ptr.To(false))),
			))},
			query: Query{PortName: "http", DefaultPort: 80},
			want:  []Endpoint{},
		},
		{
			name:    "a Service without any slice gives an empty list",
			service: service(http),
			query:   Query{PortName: "http", DefaultPort: 80},
			want:    []Endpoint{},
		},
		{
			name:    "a missing Service is an error, not a panic",
			query:   Query{DefaultPort: 80},
			wantErr: "no service given",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Pool(tt.service, tt.slices, tt.query)
			if got := res.Endpoints; listOrError(t, got, err, tt.wantErr) && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// listOrError checks a result: the error wantErr, or else no error and a
// list that is not nil. It reports whether the list is to be compared.
func listOrError(t *testing.T, got []Endpoint, err error, wantErr string) bool {
	t.Helper()
	if wantErr != "" {
		if err == nil || err.Error() != wantErr {
			t.Fatalf("error = %v, want %q", err, wantErr)
		}
		return false
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if got == nil {
		t.Fatal("got a nil list, want an empty or full one")
	}
	return true
}

func TestPortNotFoundIsATypedError(t *testing.T) {
	_, err := Pool(service(http), nil, Query{PortName: "grpc", DefaultPort: 80})
	var notFound *PortNotFoundError
	if !errors.As(err, &notFound) {
		t.Fatalf("error %v is not a *PortNotFoundError", err)
	}
	if notFound.PortName != "grpc" || notFound.Namespace != ns || notFound.Service != svc ||
		!reflect.DeepEqual(notFound.Available, []string{"http"}) {
		t.Errorf("error fields = %+v", notFound)
	}
}

// mixedSlices is a Service state with overlaps, families, conditions and
// details, used to check properties that must hold whatever the input order.
func mixedSlices() []discoveryv1.EndpointSlice {
	return []discoveryv1.EndpointSlice{
		slice("a", v4Slice, ports(slicePort("http", 8080)), eps(
			with(ep("10.0.0.3"), pod("web-3"), onNode("node-a", "zone-a")),
			ep("10.0.0.1"),
			with(ep("10.0.0.2"), ready(ptr.To(false))),
		)),
		slice("b", v4Slice, ports(slicePort("http", 8080)), eps(
			with(ep("10.0.0.1"), pod("web-1")),
			with(ep("10.0.0.3"), pod("web-3"), onNode("node-b", "zone-b")),
			with(ep("10.0.0.4"), ready(nil)),
		)),
		slice("c", v6Slice, ports(slicePort("http", 8081)), eps(ep("fd00::1"), with(ep("fd00::2"), terminating()))),
		slice("d", discoveryv1.AddressTypeFQDN, eps(ep("example.com"))),
	}
}

func TestReadyNeverModifiesItsInputs(t *testing.T) {
	in, s := mixedSlices(), service(http)
	inCopy, sCopy := deepCopySlices(in), s.DeepCopy()
	if _, err := Pool(s, in, Query{PortName: "http", DefaultPort: 80}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, inCopy) {
		t.Error("Ready changed the EndpointSlices it was given")
	}
	if !reflect.DeepEqual(s, sCopy) {
		t.Error("Ready changed the Service it was given")
	}
}

func TestReadyGivesTheSameListWhateverTheOrderOfSlicesAndEndpoints(t *testing.T) {
	q := Query{PortName: "http", DefaultPort: 80}
	res, err := Pool(service(http), mixedSlices(), q)
	want := res.Endpoints
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 4 {
		t.Fatalf("fixture gave %d endpoints, want 4: %+v", len(want), want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		in := mixedSlices()
		rng.Shuffle(len(in), func(a, b int) { in[a], in[b] = in[b], in[a] })
		for j := range in {
			e := in[j].Endpoints
			rng.Shuffle(len(e), func(a, b int) { e[a], e[b] = e[b], e[a] })
		}
		res, err := Pool(service(http), in, q)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Endpoints; !reflect.DeepEqual(got, want) {
			t.Fatalf("permutation %d gave\n%+v\nwant\n%+v", i, res.Endpoints, want)
		}
	}
}

func deepCopySlices(in []discoveryv1.EndpointSlice) []discoveryv1.EndpointSlice {
	if in == nil {
		return nil
	}
	out := make([]discoveryv1.EndpointSlice, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
