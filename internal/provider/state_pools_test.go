package provider

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

// A pool decoded from the state a read wrote, recomputed from the objects
// that read saw, has the digest of state; recomputed from other objects, it
// has another, and the members of each side are given.
func TestAPoolOfStateComparesWithWhatAReadWouldWrite(t *testing.T) {
	ctx := context.Background()
	api := standInWithOneEndpoint(t, "10.6.0.1")
	p := newProtocolProvider(t, writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
	state, diags := p.read(t, ReadyEndpointsType, map[string]tftypes.Value{"service": tfString("web"), "port_name": tfString("http")})
	failOnDiagnostics(t, "read", diags)
	pool, err := DecodeStatePool(ctx, ReadyEndpointsType, stateJSON(t, state))
	if err != nil {
		t.Fatal(err)
	}
	if pool.Pool == nil || pool.Pool.Namespace != "default" || pool.Pool.Service != "web" || pool.Pool.Query.PortName != "http" {
		t.Fatalf("decoded %+v", pool.Pool)
	}
	svc := api.services["default/web"]
	objects := pools.Objects{Service: &svc, EndpointSlices: slices.Clone(api.slices)}
	res, err := pool.Pool.Compute(objects, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var d Digester
	inState, ok := pool.State("")
	if !ok || d.Pool(res) != inState.Sum {
		t.Errorf("the same objects: digest differs from state's (%v)", ok)
	}
	if !slices.Equal(inState.Members(), []string{"10.6.0.1:8080"}) {
		t.Errorf("members of state %v, want [10.6.0.1:8080]", inState.Members())
	}
	objects.EndpointSlices = []discoveryv1.EndpointSlice{webSlice("web-b", discoveryv1.Endpoint{Addresses: []string{"10.6.0.2"}})}
	res, err = pool.Pool.Compute(objects, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if d.Pool(res) == inState.Sum {
		t.Error("another endpoint: the digest is state's")
	}
	if got := Members(res.Endpoints); !slices.Equal(got, []string{"10.6.0.2:8080"}) {
		t.Errorf("members %v, want [10.6.0.2:8080]", got)
	}
}

// A fleet decoded from the state a read wrote, recomputed from the same
// objects, has the digests of state, a Service of several labels and
// annotations among them however often state is read (a map is written in
// order of key, not in Go's); with a pod gone, its Service differs alone.
func TestAFleetOfStateComparesWithWhatAReadWouldWrite(t *testing.T) {
	ctx := context.Background()
	api := fleetFixture(t)
	web := api.services["shop/web"]
	web.Labels = map[string]string{"tier": "front", "app": "web", "version": "v2", "track": "stable"}
	web.Annotations = map[string]string{"team": "payments", "owner": "shop", "pager": "shop-oncall", lastAppliedAnnotation: "{}"}
	api.services["shop/web"] = web
	p := newProtocolProvider(t, writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
	state, diags := p.read(t, ServicesType, map[string]tftypes.Value{"namespaces": stringSet("shop", "blog"), "port_name": tfString("http")})
	failOnDiagnostics(t, "read", diags)
	fleet, err := DecodeStatePool(ctx, ServicesType, stateJSON(t, state))
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		again, err := DecodeStatePool(ctx, ServicesType, stateJSON(t, state))
		if err != nil {
			t.Fatal(err)
		}
		a, _ := again.State("shop/web")
		if b, _ := fleet.State("shop/web"); a.Sum != b.Sum {
			t.Fatal("the same state read twice gave shop/web two digests")
		}
	}
	if fleet.Fleet == nil || !slices.Equal(fleet.Fleet.Namespaces, []string{"blog", "shop"}) {
		t.Fatalf("decoded %+v", fleet.Fleet)
	}
	var services []corev1.Service
	for _, key := range []string{"blog/web", "shop/api", "shop/exporter", "shop/web"} {
		services = append(services, api.services[key])
	}
	objects := pools.FleetObjects{Services: services, EndpointSlices: slices.Clone(api.slices)}
	res, err := fleet.Fleet.Compute(objects, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var d Digester
	if got, want := stateNames(fleet), []string{"blog/web", "shop/api", "shop/web"}; !slices.Equal(got, want) {
		t.Fatalf("pools of state %v, want %v", got, want)
	}
	for _, p := range res.Pools {
		name := p.Service.Namespace + "/" + p.Service.Name
		if inState, ok := fleet.State(name); !ok || d.ServicePool(p) != inState.Sum {
			t.Errorf("the same objects: %s differs from state (%v)", name, ok)
		}
	}
	if d.Skipped(res.Skipped) != fleet.SkippedSum() {
		t.Error("the same objects: skipped differs from state")
	}
	// shop/api loses its only pod.
	objects.EndpointSlices = slices.DeleteFunc(slices.Clone(api.slices), func(s discoveryv1.EndpointSlice) bool {
		return s.Labels[discoveryv1.LabelServiceName] == "api"
	})
	res, err = fleet.Fleet.Compute(objects, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Pools {
		name := p.Service.Namespace + "/" + p.Service.Name
		inState, _ := fleet.State(name)
		if differs := d.ServicePool(p) != inState.Sum; differs != (name == "shop/api") {
			t.Errorf("a pod of shop/api gone: %s differs %v", name, differs)
		}
		if name == "shop/api" && (!slices.Equal(inState.Members(), []string{"10.0.1.1:8080"}) || len(Members(p.Endpoints)) != 0) {
			t.Errorf("shop/api: members of state %v, now %v; want [10.0.1.1:8080], none", inState.Members(), Members(p.Endpoints))
		}
	}
}

// The pools of state are found by name whatever order state lists them in;
// a name given twice keeps its last digest, as JSON's last key wins.
func TestAStatesPoolsAreFoundByNameInAnyOrder(t *testing.T) {
	digest := func(b byte) PoolDigest { return PoolDigest{Sum: [32]byte{b}} }
	for _, tt := range []struct {
		name  string
		given []namedDigest
		want  map[string]byte
	}{
		{"none", nil, map[string]byte{}},
		{"in order", []namedDigest{{"a/x", digest(1)}, {"b/y", digest(2)}}, map[string]byte{"a/x": 1, "b/y": 2}},
		{"out of order", []namedDigest{{"shop/web", digest(3)}, {"blog/web", digest(1)}, {"shop/api", digest(2)}},
			map[string]byte{"blog/web": 1, "shop/api": 2, "shop/web": 3}},
		{"a name twice", []namedDigest{{"shop/web", digest(1)}, {"blog/web", digest(2)}, {"shop/web", digest(3)}},
			map[string]byte{"blog/web": 2, "shop/web": 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &StatePool{pools: sortedDigests(slices.Clone(tt.given))}
			if p.StatePools() != len(tt.want) {
				t.Errorf("%d pools, want %d", p.StatePools(), len(tt.want))
			}
			for name, b := range tt.want {
				d, ok := p.State(name)
				if !ok || d.Sum[0] != b {
					t.Errorf("%s: digest %d (%v), want %d", name, d.Sum[0], ok, b)
				}
				if i, ok := p.StateIndex(name); !ok || p.StateName(i) != name {
					t.Errorf("%s: index %d (%v) names %q", name, i, ok, p.StateName(i))
				}
			}
			if !slices.IsSorted(stateNames(p)) {
				t.Errorf("names %v, not sorted", stateNames(p))
			}
			if _, ok := p.State("shop/gone"); ok {
				t.Error("a pool state has not is found")
			}
		})
	}
}

// stateNames are the names of the pools of p, in its order.
func stateNames(p *StatePool) []string {
	names := make([]string, p.StatePools())
	for i := range names {
		names[i] = p.StateName(i)
	}
	return names
}

// A pool read with readiness_gate while a pod waits for its gate holds that
// pod pending; once the apply has opened the gate, the pod's way to Ready
// (the gate True while its slice still lists it not ready, then its slice
// listing it ready) compares equal to that state, so the companion does not
// run for the gate's own opening; another pod waiting is a change.
func TestAGateOpeningIsNotAChangeOfThePool(t *testing.T) {
	ctx := context.Background()
	api := newStandInAPIServer(t)
	svc := webService("default", httpPort)
	svc.Spec.Selector = webLabels
	api.addService(svc)
	endpoint := func(addr, pod string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod}}
	}
	pod := func(name string, gate corev1.ConditionStatus) corev1.Pod {
		ready := corev1.ConditionFalse
		if gate == corev1.ConditionTrue {
			ready = corev1.ConditionTrue
		}
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: webLabels},
			Spec: corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: accGate}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
				{Type: accGate, Status: gate}, {Type: corev1.PodReady, Status: ready}}}}
	}
	api.addSlices(webSlice("web-a", endpoint("10.6.0.1", "web-old", true), endpoint("10.6.0.2", "web-new", false)))
	api.addPods(pod("web-old", corev1.ConditionTrue), pod("web-new", corev1.ConditionFalse))
	p := newProtocolProvider(t, writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
	state, diags := p.read(t, ReadyEndpointsType, map[string]tftypes.Value{"service": tfString("web"), "readiness_gate": tfString(string(accGate))})
	failOnDiagnostics(t, "read", diags)
	pool, err := DecodeStatePool(ctx, ReadyEndpointsType, stateJSON(t, state))
	if err != nil {
		t.Fatal(err)
	}
	inState, _ := pool.State("")
	if got := inState.Members(); !slices.Equal(got, []string{"10.6.0.1:8080", "10.6.0.2:8080"}) {
		t.Fatalf("members of state %v, want the ready pod and the waiting one", got)
	}
	var d Digester
	for _, tc := range []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		pods   []corev1.Pod
		change bool
	}{
		{"the pod still waiting", []discoveryv1.EndpointSlice{webSlice("web-a", endpoint("10.6.0.1", "web-old", true), endpoint("10.6.0.2", "web-new", false))},
			[]corev1.Pod{pod("web-old", corev1.ConditionTrue), pod("web-new", corev1.ConditionFalse)}, false},
		{"its gate open, its slice not yet updated", []discoveryv1.EndpointSlice{webSlice("web-a", endpoint("10.6.0.1", "web-old", true), endpoint("10.6.0.2", "web-new", false))},
			[]corev1.Pod{pod("web-old", corev1.ConditionTrue), pod("web-new", corev1.ConditionTrue)}, false},
		{"its gate open and its slice listing it ready", []discoveryv1.EndpointSlice{webSlice("web-a", endpoint("10.6.0.1", "web-old", true), endpoint("10.6.0.2", "web-new", true))},
			[]corev1.Pod{pod("web-old", corev1.ConditionTrue), pod("web-new", corev1.ConditionTrue)}, false},
		{"another pod waiting", []discoveryv1.EndpointSlice{webSlice("web-a", endpoint("10.6.0.1", "web-old", true), endpoint("10.6.0.2", "web-new", true), endpoint("10.6.0.3", "web-third", false))},
			[]corev1.Pod{pod("web-old", corev1.ConditionTrue), pod("web-new", corev1.ConditionTrue), pod("web-third", corev1.ConditionFalse)}, true},
		{"the ready pod not ready any more", []discoveryv1.EndpointSlice{webSlice("web-a", endpoint("10.6.0.1", "web-old", false), endpoint("10.6.0.2", "web-new", true))},
			[]corev1.Pod{pod("web-new", corev1.ConditionTrue)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := pool.Pool.Compute(pools.Objects{Service: &svc, EndpointSlices: tc.slices, Pods: tc.pods}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if differs := d.Pool(res) != inState.Sum; differs != tc.change {
				t.Errorf("differs from state: %v, want %v (members now %v)", differs, tc.change, Members(res.Endpoints))
			}
		})
	}
}
