package endpoints

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BenchmarkPool measures Ready on Services of 1k, 10k and 100k endpoints in
// slices of 100 (the EndpointSlice controller's default maximum), with the
// default query, as `go test -run=NONE -bench=. -benchmem ./internal/endpoints/`
// and make bench run it. Its numbers are reported, never asserted: a timing
// bound in a test fails on a slow or busy machine and says nothing on a fast
// one.
//
// The input is shaped like a Service in the middle of a rollout: a tenth of
// each slice repeats endpoints of the previous one (the controller moves them
// between slices), the conditions are mixed (ready missing, true and false;
// terminating and still serving; terminating and not serving), and the
// addresses come in no order.
func BenchmarkPool(b *testing.B) {
	benchPool(b, Query{PortName: "http"}, 6)
}

// BenchmarkPoolTerminatingInclude is BenchmarkPool with the serving,
// terminating endpoints included: the path that fills both of Ready's maps.
func BenchmarkPoolTerminatingInclude(b *testing.B) {
	benchPool(b, Query{PortName: "http", Terminating: TerminatingInclude}, 8)
}

// benchPool runs Ready on each size; tenths is how many endpoints of ten
// the query gives, so that a benchmark of a broken Ready fails.
func benchPool(b *testing.B, q Query, tenths int) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		service, endpointSlices := benchService(n)
		want := len(benchUnique(endpointSlices)) * tenths / 10
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := Pool(service, endpointSlices, q)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Endpoints) != want {
					b.Fatalf("got %d endpoints, want %d", len(res.Endpoints), want)
				}
			}
		})
	}
}

const (
	benchPerSlice = 100
	// benchRepeated endpoints of each slice but the first are copies of
	// endpoints of the slice before.
	benchRepeated = 10
)

// benchService returns a Service and n endpoints over n/100 slices.
func benchService(n int) (*corev1.Service, []discoveryv1.EndpointSlice) {
	const name, namespace = "web", "shop"
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
		}},
	}
	yes, no := true, false
	portName, port := "http", int32(8080)
	changed := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	zones := []string{"zone-a", "zone-b", "zone-c"}

	// Distinct endpoints are numbered; a shuffle gives them addresses in no
	// order, as pods get them.
	distinct := n - (n/benchPerSlice-1)*benchRepeated
	addresses := rand.New(rand.NewPCG(1, 2)).Perm(distinct)
	endpoint := func(id int) discoveryv1.Endpoint {
		a := addresses[id]
		node := fmt.Sprintf("node-%d", id%50)
		e := discoveryv1.Endpoint{
			Addresses: []string{fmt.Sprintf("10.%d.%d.%d", a>>16, a>>8&0xff, a&0xff)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: fmt.Sprintf("web-%d", id)},
			NodeName:  &node,
			Zone:      &zones[id%len(zones)],
		}
		// Of ten endpoints: one without a ready condition, five ready (six
		// in the default result), two terminating but serving (eight with
		// them), one terminating and done, one not ready.
		switch id % 10 {
		case 0:
		case 1, 2, 3, 4, 5:
			e.Conditions.Ready = &yes
		case 6, 7:
			e.Conditions = discoveryv1.EndpointConditions{Ready: &no, Serving: &yes, Terminating: &yes}
		case 8:
			e.Conditions = discoveryv1.EndpointConditions{Ready: &no, Serving: &no, Terminating: &yes}
		case 9:
			e.Conditions.Ready = &no
		}
		return e
	}

	endpointSlices := make([]discoveryv1.EndpointSlice, 0, n/benchPerSlice)
	next := 0
	for s := range n / benchPerSlice {
		eps := make([]discoveryv1.Endpoint, 0, benchPerSlice)
		if s > 0 {
			// Copies of the last endpoints of the slice before.
			for id := next - benchRepeated; id < next; id++ {
				eps = append(eps, endpoint(id))
			}
		}
		for len(eps) < benchPerSlice {
			eps = append(eps, endpoint(next))
			next++
		}
		endpointSlices = append(endpointSlices, discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   namespace,
				Name:        fmt.Sprintf("%s-%05d", name, s),
				Labels:      map[string]string{discoveryv1.LabelServiceName: name},
				Annotations: map[string]string{LastChangeTriggerTimeAnnotation: changed.Add(time.Duration(s) * time.Second).Format(time.RFC3339)},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   eps,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
		})
	}
	return service, endpointSlices
}

// benchUnique returns the distinct addresses of the slices.
func benchUnique(endpointSlices []discoveryv1.EndpointSlice) map[string]bool {
	seen := map[string]bool{}
	for _, s := range endpointSlices {
		for _, e := range s.Endpoints {
			seen[e.Addresses[0]] = true
		}
	}
	return seen
}

// BenchmarkFleet runs Fleet on 500 Services of 100 endpoints each (one slice
// per Service, the slices in no order of Service), 50,000 endpoints in all.
func BenchmarkFleet(b *testing.B) {
	const services = 500
	_, one := benchService(services * benchPerSlice)
	fleet := make([]corev1.Service, 0, services)
	endpointSlices := make([]discoveryv1.EndpointSlice, 0, len(one))
	for i := range services {
		name := fmt.Sprintf("web-%03d", i)
		fleet = append(fleet, corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		})
	}
	for i, s := range one {
		s.Labels = map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("web-%03d", (i*7)%services)}
		endpointSlices = append(endpointSlices, s)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := Fleet(fleet, endpointSlices, Query{PortName: "http"})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Pools) != services {
			b.Fatalf("got %d pools, want %d", len(res.Pools), services)
		}
	}
}
