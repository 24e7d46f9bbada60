package endpoints

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func namedService(namespace, name string, ports ...corev1.ServicePort) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: corev1.ServiceSpec{Ports: ports}}
}

// fleetSlice is an IPv4 slice of Service namespace/service whose port http is 8080.
func fleetSlice(namespace, service, name string, e ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	return slice(name, v4Slice, inNamespace(namespace), labelledFor(service), ports(slicePort("http", 8080)), eps(e...))
}

type fleetPool struct {
	key       string
	endpoints []Endpoint
}

func TestFleet(t *testing.T) {
	metrics := svcPort("metrics", 9090, intstr.FromInt32(9090))
	tests := []struct {
		name     string
		services []corev1.Service
		slices   []discoveryv1.EndpointSlice
		query    Query
		want     []fleetPool
		skipped  []SkippedService
	}{
		{
			name:     "no Service gives an empty fleet, not an error",
			services: nil,
			slices:   []discoveryv1.EndpointSlice{fleetSlice("shop", "web", "web-a", ep("10.0.0.1"))},
			want:     []fleetPool{},
		},
		{
			name:     "each Service gets the endpoints of its own slices, sorted by namespace then name",
			services: []corev1.Service{namedService("shop", "web", http), namedService("blog", "web", http), namedService("shop", "api", http)},
			slices: []discoveryv1.EndpointSlice{
				fleetSlice("shop", "web", "web-a", ep("10.0.0.2"), ep("10.0.0.1")),
				fleetSlice("blog", "web", "web-a", ep("10.0.1.1")),
				fleetSlice("shop", "api", "api-a", ep("10.0.2.1")),
			},
			want: []fleetPool{
				{"blog/web", []Endpoint{v4("10.0.1.1", 8080)}},
				{"shop/api", []Endpoint{v4("10.0.2.1", 8080)}},
				{"shop/web", []Endpoint{v4("10.0.0.1", 8080), v4("10.0.0.2", 8080)}},
			},
		},
		{
			name:     "slices of Services not in the fleet, and slices without a Service label, are ignored",
			services: []corev1.Service{namedService("shop", "web", http)},
			slices: []discoveryv1.EndpointSlice{
				fleetSlice("shop", "web", "web-a", ep("10.0.0.1")),
				fleetSlice("shop", "other", "other-a", ep("10.0.9.9")),
				func() discoveryv1.EndpointSlice {
					s := fleetSlice("shop", "web", "unlabelled", ep("10.0.8.8"))
					s.Labels = nil
					return s
				}(),
			},
			want: []fleetPool{{"shop/web", []Endpoint{v4("10.0.0.1", 8080)}}},
		},
		{
			name:     "a Service without endpoints has an empty pool",
			services: []corev1.Service{namedService("shop", "web", http)},
			want:     []fleetPool{{"shop/web", []Endpoint{}}},
		},
		{
			name:     "a Service without the asked port is skipped with the reason, the others keep their pools",
			services: []corev1.Service{namedService("shop", "web", http), namedService("shop", "exporter", metrics)},
			slices: []discoveryv1.EndpointSlice{
				fleetSlice("shop", "web", "web-a", ep("10.0.0.1")),
				fleetSlice("shop", "exporter", "exporter-a", ep("10.0.3.1")),
			},
			query:   Query{PortName: "http"},
			want:    []fleetPool{{"shop/web", []Endpoint{v4("10.0.0.1", 8080)}}},
			skipped: []SkippedService{{Namespace: "shop", Name: "exporter", Reason: "port http not found in service shop/exporter"}},
		},
		{
			name:     "a Service listed twice is given once",
			services: []corev1.Service{namedService("shop", "web", http), namedService("shop", "web", http)},
			slices:   []discoveryv1.EndpointSlice{fleetSlice("shop", "web", "web-a", ep("10.0.0.1"))},
			want:     []fleetPool{{"shop/web", []Endpoint{v4("10.0.0.1", 8080)}}},
		},
		{
			name:     "the query applies to every Service",
			services: []corev1.Service{namedService("shop", "web", http), namedService("shop", "api", http)},
			slices: []discoveryv1.EndpointSlice{
				fleetSlice("shop", "web", "web-a", ep("10.0.0.1"), with(ep("10.0.0.2"), terminating())),
				fleetSlice("shop", "api", "api-a", with(ep("10.0.2.2"), terminating())),
			},
			query: Query{Terminating: TerminatingFallback},
			want: []fleetPool{
				{"shop/api", []Endpoint{draining("10.0.2.2")}},
				{"shop/web", []Endpoint{v4("10.0.0.1", 8080)}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Fleet(tt.services, tt.slices, tt.query)
			if err != nil {
				t.Fatal(err)
			}
			got := []fleetPool{}
			for _, p := range res.Pools {
				got = append(got, fleetPool{p.Service.Namespace + "/" + p.Service.Name, p.Endpoints})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("pools\n got  %+v\n want %+v", got, tt.want)
			}
			if tt.skipped == nil {
				tt.skipped = []SkippedService{}
			}
			if !reflect.DeepEqual(res.Skipped, tt.skipped) {
				t.Errorf("skipped\n got  %+v\n want %+v", res.Skipped, tt.skipped)
			}
		})
	}
}

// The fleet is not a second set of rules: each Service's pool is exactly what
// Pool gives for that Service and the same slices, whatever the query.
func TestFleetGivesEachServiceWhatPoolGives(t *testing.T) {
	services := []corev1.Service{namedService("shop", "web", http), namedService("shop", "api", http, svcPort("grpc", 81, intstr.FromInt32(9000)))}
	all := mixedSlices()
	for i := range all {
		if i%2 == 1 {
			all[i].Labels = map[string]string{discoveryv1.LabelServiceName: "api"}
		}
	}
	for _, q := range []Query{
		{PortName: "http", DefaultPort: 80},
		{DefaultPort: 80, Terminating: TerminatingInclude},
		{PortName: "http", DefaultPort: 80, Terminating: TerminatingFallback, AddressType: discoveryv1.AddressTypeIPv6},
	} {
		res, err := Fleet(services, all, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Pools) != len(services) {
			t.Fatalf("%+v: %d pools, want %d", q, len(res.Pools), len(services))
		}
		for _, p := range res.Pools {
			want, err := Pool(p.Service, all, q)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Result, want) {
				t.Errorf("%+v: fleet pool of %s differs from Pool:\n got  %+v\n want %+v", q, p.Service.Name, p.Result, want)
			}
		}
	}
}
