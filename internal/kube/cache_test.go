package kube

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

func labelledSlice(service string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-abc",
		Labels: map[string]string{discoveryv1.LabelServiceName: service}}}
}

// kept is obj packed as the cache keeps it.
func kept(t *testing.T, obj any) *packed {
	t.Helper()
	out, err := trimForCache(obj)
	if err != nil {
		t.Fatal(err)
	}
	return asPacked(t, out)
}

// An update that moves a slice to another Service is a change of the old
// one too (its endpoints go), as the endpointslice controller queues both.
func TestASliceRelabelledForAnotherServiceChangesTheOldOne(t *testing.T) {
	was, ok := relabelled(kept(t, labelledSlice("web")), kept(t, labelledSlice("other")))
	if !ok || was.Kind != "EndpointSlice" || was.Namespace != "shop" || was.Service != "web" || was.Name != "web-abc" {
		t.Errorf("change %+v (%v), want one of web's slice", was, ok)
	}
	if _, ok := relabelled(kept(t, labelledSlice("web")), kept(t, labelledSlice("web"))); ok {
		t.Error("an update that keeps the Service is a change of another")
	}
}

// The objects of a Service as the API gives them: what the cache drops
// (managedFields, uids, hints, a targetRef's uid and resourceVersion, a
// Pod's status) is there, so that a rule reading it would show.
func apiObjects() (corev1.Service, []discoveryv1.EndpointSlice, []corev1.Pod) {
	meta := func(name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels, UID: "u-" + "name", ResourceVersion: "42",
			CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0)), Generation: 3,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: "Update"}},
			Annotations:   map[string]string{lastAppliedAnnotation: `{"huge": true}`, "team": "web"}}
	}
	svc := corev1.Service{ObjectMeta: meta("web", map[string]string{"lb": "haproxy"}), Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
	}}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}}
	var pods []corev1.Pod
	slice := discoveryv1.EndpointSlice{ObjectMeta: meta("web-abc", map[string]string{discoveryv1.LabelServiceName: "web",
		discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}),
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}}
	slice.Annotations[endpoints.LastChangeTriggerTimeAnnotation] = "2026-12-01T10:00:00Z"
	for i, ready := range []bool{true, false, true} {
		name := []string{"web-0", "web-1", "web-2"}[i]
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{"10.0.0." + string(rune('1'+i))},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(true), Terminating: ptr.To(!ready)},
			NodeName:   ptr.To("node-a"), Zone: ptr.To("zone-a"),
			Hints:     &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: name, UID: "pod-uid", ResourceVersion: "9"},
		})
		pods = append(pods, corev1.Pod{ObjectMeta: meta(name, map[string]string{"app": "web"}),
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}, ReadinessProbe: probe}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9"}})
	}
	return svc, []discoveryv1.EndpointSlice{slice}, pods
}

func cacheWith(t *testing.T, svc corev1.Service, slices []discoveryv1.EndpointSlice, pods []corev1.Pod) *Cache {
	t.Helper()
	objects := append(append([]any{&svc}, pointers(slices)...), pointers(pods)...)
	k, err := cacheOf(CacheScope{Namespaces: []string{"shop"}, PodNamespaces: []string{"shop"}}, objects)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// What the cache keeps of each object gives the rules what the objects
// themselves give: the pool of a data source, with health checks, and the
// fleet's, read through the cache as the companion reads them, equal the
// pools computed from the objects as the API gave them. (The informers and
// check's snapshot keep them alike.)
func TestWhatTheCacheKeepsGivesThePoolsTheObjectsGive(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(2e9, 0)
	svc, slices, pods := apiObjects()
	k := cacheWith(t, *svc.DeepCopy(), deepCopies(slices), deepCopies(pods))

	req := pools.Request{Namespace: "shop", Service: "web", Query: endpoints.Query{PortName: "http", Terminating: endpoints.TerminatingInclude}, PodHealthChecks: true}
	want, err := req.Compute(pools.Objects{Service: &svc, EndpointSlices: slices, Pods: pods}, now)
	if err != nil {
		t.Fatal(err)
	}
	got, err := req.Read(ctx, k, pools.ReadOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pool through the cache:\n%+v\nwant\n%+v", got, want)
	}
	if len(got.Endpoints) != 3 || got.Endpoints[0].HealthCheck == nil {
		t.Fatalf("the pool %+v lacks its endpoints or health checks: the test proves nothing", got.Endpoints)
	}

	fleet := pools.FleetRequest{Namespaces: []string{"shop"}, Selector: "lb=haproxy", Query: endpoints.Query{PortName: "http"}, PodHealthChecks: true}
	wantFleet, err := fleet.Compute(pools.FleetObjects{Services: []corev1.Service{svc}, EndpointSlices: slices, Pods: pods}, now)
	if err != nil {
		t.Fatal(err)
	}
	gotFleet, err := fleet.Read(ctx, k, pools.FleetReadOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	// Of the Service's metadata, what the fleet's state writes: its name,
	// labels and annotations but kubectl's copy.
	for i := range wantFleet.Pools {
		s := wantFleet.Pools[i].Service.DeepCopy()
		s.ObjectMeta = metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels, Annotations: s.Annotations}
		delete(s.Annotations, lastAppliedAnnotation)
		wantFleet.Pools[i].Service = s
	}
	if !reflect.DeepEqual(gotFleet, wantFleet) {
		t.Errorf("fleet through the cache:\n%+v\nwant\n%+v", gotFleet, wantFleet)
	}
	// Read Service by Service, the Services named by the cache.
	each := endpoints.FleetResult{Pools: []endpoints.ServicePool{}, Skipped: []endpoints.SkippedService{}}
	if err := fleet.ReadEach(ctx, k, now, func(_ types.NamespacedName, res endpoints.FleetResult) {
		each.Pools = append(each.Pools, res.Pools...)
		each.Skipped = append(each.Skipped, res.Skipped...)
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(each, wantFleet) {
		t.Errorf("fleet through the cache, Service by Service:\n%+v\nwant\n%+v", each, wantFleet)
	}
}

// The cache names the Services a selector matches, in a namespace watched,
// without decoding them.
func TestTheCacheNamesTheServicesASelectorMatches(t *testing.T) {
	svc, slices, _ := apiObjects()
	other := *svc.DeepCopy()
	other.Name, other.Labels = "api", map[string]string{"lb": "f5"}
	k, err := cacheOf(CacheScope{Namespaces: []string{"shop"}}, append([]any{&svc, &other}, pointers(slices)...))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for selector, want := range map[string][]types.NamespacedName{
		"":           {{Namespace: "shop", Name: "api"}, {Namespace: "shop", Name: "web"}},
		"lb=haproxy": {{Namespace: "shop", Name: "web"}},
		"lb=nginx":   nil,
	} {
		got, err := k.ServiceNames(ctx, "shop", selector)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("selector %q: %v, %v; want %v", selector, got, err, want)
		}
	}
	if _, err := k.ServiceNames(ctx, "shop", "lb in ("); err == nil {
		t.Error("a selector that does not parse gave no error")
	}
	var notWatched *NotWatchedError
	if _, err := k.ServiceNames(ctx, "elsewhere", ""); !errors.As(err, &notWatched) {
		t.Errorf("a namespace not watched: %v, want a NotWatchedError", err)
	}
}

func deepCopies[T any, P interface {
	*T
	DeepCopy() *T
}](items []T) []T {
	out := make([]T, len(items))
	for i := range items {
		out[i] = *P(&items[i]).DeepCopy()
	}
	return out
}

// A Pod whose status alone changed is the same Pod to the cache: no change
// is signalled for it; one whose labels changed is another.
func TestAPodWhoseStatusAloneChangedIsNoChange(t *testing.T) {
	_, _, pods := apiObjects()
	moved := *pods[0].DeepCopy()
	moved.Status.Phase, moved.ResourceVersion = corev1.PodSucceeded, "43"
	if !samePacked(kept(t, &pods[0]), kept(t, &moved)) {
		t.Error("a Pod whose status changed is a change")
	}
	relabelledPod := *pods[0].DeepCopy()
	relabelledPod.Labels = map[string]string{"app": "other"}
	if samePacked(kept(t, &pods[0]), kept(t, &relabelledPod)) {
		t.Error("a Pod whose labels changed is no change")
	}
}

// Objects deflated against the dictionary of their kind (the first object
// of that kind packed) unpack to what was trimmed, whichever came first:
// two Services, a slice of 10 endpoints and one of none.
func TestPackedObjectsUnpackToWhatWasTrimmedWhateverCameFirst(t *testing.T) {
	svc, slice := benchService(1)
	other, bigger := benchService(2)
	other.Labels = map[string]string{"app": "other"}
	other.Spec.Ports = append(other.Spec.Ports, corev1.ServicePort{Name: "admin", Port: 9090})
	empty := bigger.DeepCopy()
	empty.Endpoints = nil
	for _, svc := range []*corev1.Service{svc, other} {
		p, err := trimForCache(svc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := unpack[corev1.Service](asPacked(t, p))
		if want := trimService(svc); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("service %s: %v\n%+v\nwant\n%+v", svc.Name, err, got, want)
		}
	}
	for _, s := range []*discoveryv1.EndpointSlice{slice, bigger, empty} {
		p, err := trimForCache(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := unpack[discoveryv1.EndpointSlice](asPacked(t, p))
		want := trimSlice(s)
		if len(want.Endpoints) == 0 {
			want.Endpoints = nil // protobuf does not tell none from empty
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("slice %s: %v\n%+v\nwant\n%+v", s.Name, err, got, want)
		}
	}
}

func asPacked(t *testing.T, obj any) *packed {
	t.Helper()
	p, ok := obj.(*packed)
	if !ok {
		t.Fatalf("a %T, not packed", obj)
	}
	return p
}

// The cache keeps whose slices they are: through it, the companion leaves
// out the slices a plan's read leaves out, and reads those of a trusted
// manager.
func TestTheCacheLeavesOutTheSlicesAReadLeavesOut(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(2e9, 0)
	svc, slices, _ := apiObjects()
	mesh := *slices[0].DeepCopy()
	mesh.Name, mesh.Labels[discoveryv1.LabelManagedBy] = "web-mesh", "mesh.example.com"
	mesh.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.9.1"}}}
	bare := *mesh.DeepCopy()
	bare.Name, bare.Endpoints = "web-bare", []discoveryv1.Endpoint{{Addresses: []string{"10.0.9.2"}}}
	delete(bare.Labels, discoveryv1.LabelManagedBy)
	slices = append(slices, mesh, bare)
	k := cacheWith(t, *svc.DeepCopy(), deepCopies(slices), nil)
	for _, tt := range []struct {
		trusted []string
		ready   int
		leftOut int
	}{{nil, 2, 2}, {[]string{"mesh.example.com"}, 3, 1}} {
		req := pools.Request{Namespace: "shop", Service: "web", Query: endpoints.Query{PortName: "http", TrustedSliceManagers: tt.trusted}}
		want, err := req.Compute(pools.Objects{Service: &svc, EndpointSlices: slices}, now)
		if err != nil {
			t.Fatal(err)
		}
		got, err := req.Read(ctx, k, pools.ReadOptions{Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("trusting %v, the pool through the cache:\n%+v\nwant\n%+v", tt.trusted, got, want)
		}
		if len(got.Endpoints) != tt.ready || len(got.LeftOut) != tt.leftOut {
			t.Errorf("trusting %v: %d endpoints, %d slices left out (%+v); want %d and %d", tt.trusted, len(got.Endpoints),
				len(got.LeftOut), got.LeftOut, tt.ready, tt.leftOut)
		}
	}
}
