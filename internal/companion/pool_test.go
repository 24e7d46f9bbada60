package companion

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
	"github.com/vigie/terraform-provider-k8s/internal/pools"
	"github.com/vigie/terraform-provider-k8s/internal/provider"
)

// fleetObjects are n Services labelled lb=x in the namespace shop, each with
// a slice of 3 ready endpoints, and one more without the port asked for.
func fleetObjects(n int) map[string]any {
	out := map[string]any{}
	for i := range n + 1 {
		name := fmt.Sprintf("svc-%03d", i)
		port := "http"
		if i == n {
			port = "grpc"
		}
		out["service "+name] = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"lb": "x"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: port, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr.To(port), Port: ptr.To[int32](8080)}}}
		for e := range 3 {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i, e+1)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		out["slice "+name] = slice
	}
	return out
}

func sliceOf(t *testing.T, objects map[string]any, name string) *discoveryv1.EndpointSlice {
	t.Helper()
	return objectOf[discoveryv1.EndpointSlice](t, objects, "slice "+name)
}

func serviceOf(t *testing.T, objects map[string]any, name string) *corev1.Service {
	t.Helper()
	return objectOf[corev1.Service](t, objects, "service "+name)
}

func objectOf[T any](t *testing.T, objects map[string]any, key string) *T {
	t.Helper()
	o, ok := objects[key].(*T)
	if !ok {
		t.Fatalf("no %s", key)
	}
	return o
}

func cacheOfObjects(t *testing.T, objects map[string]any) *kube.Cache {
	t.Helper()
	var list []any
	for _, o := range objects {
		list = append(list, o)
	}
	k, err := kube.CacheOf(kube.CacheScope{Namespaces: []string{"shop"}}, list...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newFleetPool(t *testing.T, minReady int) *fleetPool {
	t.Helper()
	return newFleetPoolOf(t, minReady, "{}")
}

// newFleetPoolOf is the fleet of newFleetPool with services (JSON) in state.
func newFleetPoolOf(t *testing.T, minReady int, services string) *fleetPool {
	t.Helper()
	return newFleetPoolWith(t, fmt.Sprintf(`"min_ready": %d`, minReady), services)
}

// newFleetPoolWith is the fleet of the Services labelled lb=x in shop, port
// http, with guards (JSON attributes) and services (JSON) in state.
func newFleetPoolWith(t *testing.T, guards, services string) *fleetPool {
	t.Helper()
	state := fmt.Sprintf(`{"namespaces": ["shop"], "label_selector": "lb=x", "port_name": "http", %s, "services": %s, "skipped": []}`, guards, services)
	pool, err := provider.DecodeStatePool(context.Background(), provider.ServicesType, []byte(state))
	if err != nil {
		t.Fatal(err)
	}
	fp, ok := watch(pool).(*fleetPool)
	if !ok {
		t.Fatal("a k8s_services is not watched as a fleet")
	}
	return fp
}

// servicesInState are the pools of state of svc-000 to svc-(n-1) in shop,
// as JSON entries of a k8s_services' services: each with the endpoint
// 10.1.i.1:8080 ready, or with none.
func servicesInState(n int, withEndpoint bool) []string {
	var out []string
	for i := range n {
		endpoint := ""
		if withEndpoint {
			endpoint = fmt.Sprintf(`{"address": "10.1.%d.1", "port": 8080, "ready": true}`, i)
		}
		out = append(out, fmt.Sprintf(`"shop/svc-%03d": {"namespace": "shop", "name": "svc-%03d", "endpoints": [%s]}`, i, i, endpoint))
	}
	return out
}

// fleetStates are the two states a fleet's tests run against:
// the fleet's first n Services in state (see servicesInState), and none.
func fleetStates(n int, withEndpoint bool) []struct{ name, services string } {
	return []struct{ name, services string }{
		{"state without the fleet", "{}"},
		{"the fleet in state", "{" + strings.Join(servicesInState(n, withEndpoint), ", ") + "}"},
	}
}

// A change of one Service of a fleet recomputes that Service's pool alone,
// and the fleet's evaluation is then what a whole recomputation gives.
func TestAChangeOfOneServiceOfAFleetRecomputesThatServiceAlone(t *testing.T) {
	// Half of the Services in state (the other half new to it), and one
	// that the cluster no longer has: a Service's record is kept by its
	// pool of state, or apart when state has none.
	half := append(servicesInState(50, true), `"shop/gone": {"namespace": "shop", "name": "gone", "endpoints": []}`)
	for _, tt := range []struct {
		name     string
		services string
		// changes at the first evaluation: the 100 pools, the skipped
		// list, and gone's pool when state has it.
		changes int
	}{
		{"state without the fleet", "{}", 101},
		{"half of the fleet in state", "{" + strings.Join(half, ", ") + "}", 102},
	} {
		t.Run(tt.name, func(t *testing.T) {
			changesOfOneService(t, func() *fleetPool { return newFleetPoolOf(t, 0, tt.services) }, tt.changes)
		})
	}
}

func changesOfOneService(t *testing.T, newPool func() *fleetPool, changes int) {
	ctx := context.Background()
	now := time.Unix(2e9, 0)
	objects := fleetObjects(100)
	p := newPool()
	first := p.evaluate(ctx, cacheOfObjects(t, objects), now, everything)
	if first.unreadable != "" || first.computed != 101 || len(first.changes) != changes {
		t.Fatalf("first evaluation: %d computed, %d changes, %q; want the 101 Services computed, %d changes",
			first.computed, len(first.changes), first.unreadable, changes)
	}
	for _, step := range []struct {
		name     string
		change   func()
		touched  touched
		computed int
	}{
		{"an endpoint of one Service goes", func() {
			s := sliceOf(t, objects, "svc-042")
			s.Endpoints = s.Endpoints[:2]
		}, touched{services: map[string]bool{"shop/svc-042": true}}, 1},
		{"one Service is relabelled out of the selection", func() {
			serviceOf(t, objects, "svc-010").Labels = map[string]string{"lb": "y"}
		}, touched{services: map[string]bool{"shop/svc-010": true}}, 1},
		{"one Service is deleted, and its slice", func() {
			delete(objects, "service svc-007")
			delete(objects, "slice svc-007")
		}, touched{services: map[string]bool{"shop/svc-007": true}}, 0},
		{"one Service new to state is deleted, and its slice", func() {
			delete(objects, "service svc-077")
			delete(objects, "slice svc-077")
		}, touched{services: map[string]bool{"shop/svc-077": true}}, 0},
		{"a Service gets the port that it lacked", func() {
			serviceOf(t, objects, "svc-100").Spec.Ports[0].Name = "http"
			sliceOf(t, objects, "svc-100").Ports[0].Name = ptr.To("http")
		}, touched{services: map[string]bool{"shop/svc-100": true}}, 1},
		{"two Services change in one batch", func() {
			sliceOf(t, objects, "svc-001").Endpoints[0].Conditions.Ready = ptr.To(false)
			sliceOf(t, objects, "svc-002").Endpoints[0].Addresses = []string{"10.9.9.9"}
		}, touched{services: map[string]bool{"shop/svc-001": true, "shop/svc-002": true}}, 2},
		{"a Node changes: the fleet is recomputed whole", func() {}, everything, 98},
	} {
		t.Run(step.name, func(t *testing.T) {
			step.change()
			k := cacheOfObjects(t, objects)
			got := p.evaluate(ctx, k, now, step.touched)
			want := newPool().evaluate(ctx, k, now, everything)
			if got.computed != step.computed {
				t.Errorf("%d Service pools computed, want %d", got.computed, step.computed)
			}
			if got.unreadable != want.unreadable || !reflect.DeepEqual(got.changes, want.changes) {
				t.Errorf("evaluation differs from a whole recomputation:\n%+v\nwant\n%+v", got.changes, want.changes)
			}
		})
	}
}

// A pool of state whose Service is gone from the cluster, or now skipped,
// is a change that removes its members, at the fleet's first evaluation as
// after it; the pools that a Service gives are not.
func TestAPoolOfStateThatNoServiceGivesIsGone(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(2e9, 0)
	objects := fleetObjects(3)
	member := func(address string) string {
		return fmt.Sprintf(`{"address": %q, "port": 8080, "ready": true}`, address)
	}
	state := `{"namespaces": ["shop"], "label_selector": "lb=x", "port_name": "http", "min_ready": 0, "services": {
	  "shop/gone": {"namespace": "shop", "name": "gone", "endpoints": [` + member("10.9.0.1") + `]},
	  "shop/svc-003": {"namespace": "shop", "name": "svc-003", "endpoints": [` + member("10.9.0.2") + `]}}, "skipped": []}`
	pool, err := provider.DecodeStatePool(ctx, provider.ServicesType, []byte(state))
	if err != nil {
		t.Fatal(err)
	}
	p, ok := watch(pool).(*fleetPool)
	if !ok {
		t.Fatal("a k8s_services is not watched as a fleet")
	}
	e := p.evaluate(ctx, cacheOfObjects(t, objects), now, everything)
	removed := map[string][]string{}
	for _, ch := range e.changes {
		if len(ch.After) == 0 && ch.Name != "skipped" {
			removed[ch.Name] = ch.Removed
		}
	}
	want := map[string][]string{"shop/gone": {"10.9.0.1:8080"}, "shop/svc-003": {"10.9.0.2:8080"}}
	if e.unreadable != "" || !reflect.DeepEqual(removed, want) || len(e.changes) != 3+2+1 {
		t.Errorf("%d changes (%q), pools emptied %v; want svc-000 to svc-002 new, gone and svc-003 (skipped: no port http) emptied, and the skipped list",
			len(e.changes), e.unreadable, removed)
	}
}

// The guards of a fleet hold over every Service: one Service that falls
// short of min_ready, recomputed alone, makes the fleet unreadable, and
// the fleet is readable again once it is back.
func TestAServiceRecomputedAloneStillAnswersToTheFleetsGuards(t *testing.T) {
	// The fleet's records are kept apart for Services new to state, by
	// their pool of state for the others: the guards count both alike.
	for _, tt := range fleetStates(10, true) {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Unix(2e9, 0)
			objects := fleetObjects(10)
			delete(objects, "service svc-010")
			delete(objects, "slice svc-010")
			p := newFleetPoolOf(t, 2, tt.services)
			if e := p.evaluate(ctx, cacheOfObjects(t, objects), now, everything); e.unreadable != "" {
				t.Fatalf("first evaluation: %q", e.unreadable)
			}
			s := sliceOf(t, objects, "svc-003")
			full := s.Endpoints
			s.Endpoints = full[:1]
			one := touched{services: map[string]bool{"shop/svc-003": true}}
			if e := p.evaluate(ctx, cacheOfObjects(t, objects), now, one); e.unreadable == "" {
				t.Fatal("a Service short of min_ready left the fleet readable")
			}
			s.Endpoints = full
			if e := p.evaluate(ctx, cacheOfObjects(t, objects), now, one); e.unreadable != "" || len(e.changes) != 10 {
				t.Fatalf("back to 3 endpoints: %q, %d changes; want readable and its 10 pools differing from state", e.unreadable, len(e.changes))
			}
			// Short again, then skipped (no port http): a skipped Service
			// is not short; then a pool again.
			s.Endpoints = full[:1]
			if e := p.evaluate(ctx, cacheOfObjects(t, objects), now, one); e.unreadable == "" {
				t.Fatal("short again: the fleet is readable")
			}
			serviceOf(t, objects, "svc-003").Spec.Ports[0].Name = "grpc"
			s.Ports[0].Name = ptr.To("grpc")
			k := cacheOfObjects(t, objects)
			e, want := p.evaluate(ctx, k, now, one), newFleetPoolOf(t, 2, tt.services).evaluate(ctx, k, now, everything)
			if e.unreadable != "" || !reflect.DeepEqual(e.changes, want.changes) {
				t.Fatalf("skipped: %q, changes %+v; want readable, %+v", e.unreadable, e.changes, want.changes)
			}
			serviceOf(t, objects, "svc-003").Spec.Ports[0].Name = "http"
			s.Ports[0].Name = ptr.To("http")
			s.Endpoints = full
			k = cacheOfObjects(t, objects)
			e, want = p.evaluate(ctx, k, now, one), newFleetPoolOf(t, 2, tt.services).evaluate(ctx, k, now, everything)
			if e.unreadable != "" || !reflect.DeepEqual(e.changes, want.changes) {
				t.Fatalf("a pool again: %q, changes %+v; want readable, %+v", e.unreadable, e.changes, want.changes)
			}
		})
	}
}

// What the cache keeps of Services and slices as the API gives them
// (uids, managedFields, other labels, kubectl's copy, a targetRef's uid)
// gives the digests of state that the objects themselves give: what the
// companion compares is what a plan's read would write.
func TestTheCacheGivesTheDigestsThatTheObjectsGive(t *testing.T) {
	objects := fleetObjects(5)
	var services []corev1.Service
	var slices []discoveryv1.EndpointSlice
	for _, o := range objects {
		switch o := o.(type) {
		case *corev1.Service:
			o.UID, o.ResourceVersion, o.Generation = "uid", "7", 2
			o.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "web"}
			o.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
			o.Spec.ClusterIP, o.Status.LoadBalancer.Ingress = "10.96.0.9", []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
			services = append(services, *o)
		case *discoveryv1.EndpointSlice:
			o.UID, o.ResourceVersion = "uid", "8"
			o.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
			for i := range o.Endpoints {
				o.Endpoints[i].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("%s-%d", o.Name, i), UID: "p"}
				o.Endpoints[i].NodeName, o.Endpoints[i].Zone = ptr.To("node-a"), ptr.To("zone-a")
			}
			slices = append(slices, *o)
		}
	}
	now := time.Unix(2e9, 0)
	p := newFleetPool(t, 0)
	want, err := p.request.Compute(pools.FleetObjects{Services: services, EndpointSlices: slices}, now)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.request.Read(context.Background(), cacheOfObjects(t, objects), pools.FleetReadOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Pools) != 5 || len(want.Pools) != 5 {
		t.Fatalf("%d and %d pools, want 5", len(got.Pools), len(want.Pools))
	}
	var d provider.Digester
	for i := range want.Pools {
		if d.ServicePool(got.Pools[i]) != d.ServicePool(want.Pools[i]) {
			t.Errorf("%s: the digest through the cache differs from the objects'", want.Pools[i].Service.Name)
		}
	}
}

// A fleet counts its pools for min_services alike whether state has the
// Services' pools or not, through changes of one Service at a time.
func TestAFleetCountsItsPoolsAlikeInStateOrNot(t *testing.T) {
	for _, tt := range fleetStates(10, false) {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Unix(2e9, 0)
			p := newFleetPoolWith(t, `"min_services": 10`, tt.services)
			objects := fleetObjects(10) // svc-010 has no port http: skipped
			if e := p.evaluate(ctx, cacheOfObjects(t, objects), now, everything); e.unreadable != "" {
				t.Fatalf("10 pools: %q", e.unreadable)
			}
			for _, name := range []string{"svc-003", "svc-004", "svc-003"} {
				s := sliceOf(t, objects, name)
				s.Endpoints = s.Endpoints[:len(s.Endpoints)-1]
				if e := p.evaluate(ctx, cacheOfObjects(t, objects), now, touched{services: map[string]bool{"shop/" + name: true}}); e.unreadable != "" || e.computed != 1 {
					t.Fatalf("an endpoint of %s gone: %q, %d computed; want readable, 1", name, e.unreadable, e.computed)
				}
			}
			delete(objects, "service svc-005")
			delete(objects, "slice svc-005")
			if e := p.evaluate(ctx, cacheOfObjects(t, objects), now, touched{services: map[string]bool{"shop/svc-005": true}}); e.unreadable == "" {
				t.Fatal("9 pools left the fleet readable with min_services = 10")
			}
		})
	}
}
