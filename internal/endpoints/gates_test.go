package endpoints

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const gate corev1.PodConditionType = "k8s.example/pool-web"

type podOpt func(*corev1.Pod)

// gatedPod is a pod of ns that declares gate, whose containers are ready
// and whose gate's condition is absent, unless options say otherwise.
func gatedPod(name string, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse},
		}},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func condition(t corev1.PodConditionType, s corev1.ConditionStatus) podOpt {
	return func(p *corev1.Pod) {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == t {
				p.Status.Conditions[i].Status = s
				return
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: s})
	}
}

func alsoGate(t corev1.PodConditionType) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: t})
	}
}

func noGates() podOpt { return func(p *corev1.Pod) { p.Spec.ReadinessGates = nil } }

func deleting() podOpt {
	return func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
}

func TestReadyButForGate(t *testing.T) {
	const other corev1.PodConditionType = "k8s.example/other"
	tests := []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"containers ready, the gate's condition absent: waits for this gate", gatedPod("p"), true},
		{"the gate's condition False: waits for this gate", gatedPod("p", condition(gate, corev1.ConditionFalse)), true},
		{"every other gate true: waits for this gate", gatedPod("p", alsoGate(other), condition(other, corev1.ConditionTrue)), true},
		{"two other gates true: waits for this gate", gatedPod("p", alsoGate(other), condition(other, corev1.ConditionTrue),
			alsoGate("k8s.example/third"), condition("k8s.example/third", corev1.ConditionTrue)), true},
		{"one of two other gates false: waits for more than this gate", gatedPod("p", alsoGate(other), condition(other, corev1.ConditionTrue),
			alsoGate("k8s.example/third"), condition("k8s.example/third", corev1.ConditionFalse)), false},
		{"another gate false: waits for more than this gate", gatedPod("p", alsoGate(other), condition(other, corev1.ConditionFalse)), false},
		{"another gate without its condition: waits for more than this gate", gatedPod("p", alsoGate(other)), false},
		{"a terminating pod does not wait", gatedPod("p", deleting()), false},
		{"containers not ready: waits for more than this gate", gatedPod("p", condition(corev1.ContainersReady, corev1.ConditionFalse)), false},
		{"no ContainersReady condition: waits for more than this gate", corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
			Spec:       corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}}},
		}, false},
		{"no such gate declared: the gate is not what it waits for", gatedPod("p", noGates()), false},
		{"only another gate declared: not this gate", gatedPod("p", noGates(), alsoGate(other)), false},
		{"the gate already true: ready as usual, nothing to wait for", gatedPod("p", condition(gate, corev1.ConditionTrue)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReadyButForGate(&tt.pod, gate); got != tt.want {
				t.Errorf("ReadyButForGate = %v, want %v", got, tt.want)
			}
		})
	}
	if ReadyButForGate(ptr.To(gatedPod("p")), "") {
		t.Error("no gate given: a pod cannot wait for it")
	}
}

func TestGatedPool(t *testing.T) {
	notReady := func(name string) discoveryv1.Endpoint {
		return with(ep("10.0.0.2"), pod(name), ready(ptr.To(false)), func(e *discoveryv1.Endpoint) { e.Conditions.Serving = ptr.To(false) })
	}
	readyPod := with(ep("10.0.0.1"), pod("ready"))
	slices := []discoveryv1.EndpointSlice{slice("s1", v4Slice, ports(slicePort("http", 8080)), eps(readyPod, notReady("waiting")))}
	readyEndpoint := detailed(v4("10.0.0.1", 8080), "ready", "", "", "")
	pending := detailed(Endpoint{Address: "10.0.0.2", Port: 8080, AddressType: v4Slice, GatePending: true}, "waiting", "", "", "")
	tests := []struct {
		name   string
		gate   corev1.PodConditionType
		slices []discoveryv1.EndpointSlice
		pods   []corev1.Pod
		want   []Endpoint
	}{
		{
			name: "a pod ready but for the gate is in the pool, gate pending, not ready",
			gate: gate, slices: slices, pods: []corev1.Pod{gatedPod("waiting")},
			want: []Endpoint{readyEndpoint, pending},
		},
		{
			name:   "without the gate nothing changes: the not-ready endpoint stays out",
			slices: slices, pods: []corev1.Pod{gatedPod("waiting")},
			want: []Endpoint{readyEndpoint},
		},
		{
			name: "a pod whose other gate is false stays out",
			gate: gate, slices: slices, pods: []corev1.Pod{gatedPod("waiting", alsoGate("k8s.example/other"), condition("k8s.example/other", corev1.ConditionFalse))},
			want: []Endpoint{readyEndpoint},
		},
		{
			name: "a terminating pod stays out",
			gate: gate, slices: slices, pods: []corev1.Pod{gatedPod("waiting", deleting())},
			want: []Endpoint{readyEndpoint},
		},
		{
			name: "a pod whose containers are not ready stays out",
			gate: gate, slices: slices, pods: []corev1.Pod{gatedPod("waiting", condition(corev1.ContainersReady, corev1.ConditionFalse))},
			want: []Endpoint{readyEndpoint},
		},
		{
			name: "a pod that declares no such gate stays out",
			gate: gate, slices: slices, pods: []corev1.Pod{gatedPod("waiting", noGates())},
			want: []Endpoint{readyEndpoint},
		},
		{
			name: "a pod not among those read stays out",
			gate: gate, slices: slices,
			want: []Endpoint{readyEndpoint},
		},
		{
			name: "a pod whose gate is already true is ready as usual, gate_pending false",
			gate: gate, slices: []discoveryv1.EndpointSlice{slice("s1", v4Slice, ports(slicePort("http", 8080)), eps(with(ep("10.0.0.2"), pod("open"))))},
			pods: []corev1.Pod{gatedPod("open", condition(gate, corev1.ConditionTrue), condition(corev1.PodReady, corev1.ConditionTrue))},
			want: []Endpoint{detailed(v4("10.0.0.2", 8080), "open", "", "", "")},
		},
		{
			name: "a pod whose gate was just set True stays in the pool, not pending, while its slice says not ready",
			gate: gate, slices: slices, pods: []corev1.Pod{gatedPod("waiting", condition(gate, corev1.ConditionTrue))},
			want: []Endpoint{readyEndpoint, detailed(Endpoint{Address: "10.0.0.2", Port: 8080, AddressType: v4Slice}, "waiting", "", "", "")},
		},
		{
			name: "a terminating endpoint of a waiting pod is not taken for it",
			gate: gate, slices: []discoveryv1.EndpointSlice{slice("s1", v4Slice, ports(slicePort("http", 8080)), eps(with(ep("10.0.0.2"), pod("waiting"), terminating())))},
			pods: []corev1.Pod{gatedPod("waiting")},
			want: []Endpoint{},
		},
		{
			name: "an endpoint naming a pod of the same name but another UID is not taken for it",
			gate: gate, slices: []discoveryv1.EndpointSlice{slice("s1", v4Slice, ports(slicePort("http", 8080)), eps(with(notReady("waiting"), func(e *discoveryv1.Endpoint) { e.TargetRef.UID = "old" })))},
			pods: []corev1.Pod{gatedPod("waiting", func(p *corev1.Pod) { p.UID = "new" })},
			want: []Endpoint{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := deepCopySlices(tt.slices)
			res, err := GatedPool(service(http), tt.slices, tt.pods, Query{ReadinessGate: tt.gate})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Endpoints, tt.want) {
				t.Errorf("got %+v\nwant %+v", res.Endpoints, tt.want)
			}
			if !reflect.DeepEqual(before, tt.slices) {
				t.Error("GatedPool modified its slices")
			}
			if CountReady(res.Endpoints) != CountReady(tt.want) {
				t.Errorf("%d counted ready, want %d", CountReady(res.Endpoints), CountReady(tt.want))
			}
		})
	}
}

func TestGatedFleetGivesEachServiceWhatGatedPoolGives(t *testing.T) {
	waitingEp := with(ep("10.0.0.2"), pod("waiting"), ready(ptr.To(false)))
	services := []corev1.Service{namedService(ns, svc, http), namedService("other", svc, http)}
	slices := []discoveryv1.EndpointSlice{
		fleetSlice(ns, svc, "a", with(ep("10.0.0.1"), pod("ready")), waitingEp),
		// The same pod name in another namespace is another pod, not waiting.
		fleetSlice("other", svc, "b", with(ep("10.0.1.2"), func(e *discoveryv1.Endpoint) {
			e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "other", Name: "waiting"}
		}, ready(ptr.To(false)))),
	}
	pods := []corev1.Pod{gatedPod("waiting")}
	q := Query{ReadinessGate: gate}
	fleet, err := GatedFleet(services, slices, pods, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(fleet.Pools) != 2 {
		t.Fatalf("pools: %+v", fleet.Pools)
	}
	for _, p := range fleet.Pools {
		var own []discoveryv1.EndpointSlice
		for _, s := range slices {
			if s.Namespace == p.Service.Namespace {
				own = append(own, s)
			}
		}
		single, err := GatedPool(p.Service, own, pods, q)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p.Endpoints, single.Endpoints) {
			t.Errorf("%s: fleet %+v, pool %+v", p.Service.Namespace, p.Endpoints, single.Endpoints)
		}
	}
	if CountGatePending(fleet.Pools[0].Endpoints)+CountGatePending(fleet.Pools[1].Endpoints) != 1 {
		t.Errorf("want one pending endpoint in all: %+v", fleet.Pools)
	}
}
