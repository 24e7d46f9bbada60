package pools

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

const gate corev1.PodConditionType = "k8s.example/pool-web"

// gatedObjects are Service web, a slice with a ready pod web-0 at 10.0.0.1
// and a pod web-1 at 10.0.0.2 that is not ready, and the two pods, web-1
// ready but for the gate.
func gatedObjects() ([]corev1.Service, []discoveryv1.EndpointSlice, []corev1.Pod) {
	s := slice("web", "10.0.0.1", "10.0.0.2")
	for i, name := range []string{"web-0", "web-1"} {
		s.Endpoints[i].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: name}
	}
	s.Endpoints[1].Conditions.Ready = ptr.To(false)
	pod := func(name string, gateStatus corev1.ConditionStatus) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: gate, Status: gateStatus}}}}
	}
	return []corev1.Service{selecting(service("web", corev1.ServiceTypeClusterIP, 0))}, []discoveryv1.EndpointSlice{s},
		[]corev1.Pod{pod("web-0", corev1.ConditionTrue), pod("web-1", corev1.ConditionFalse)}
}

func pending(eps []endpoints.Endpoint) []bool {
	out := []bool{}
	for _, e := range eps {
		out = append(out, e.GatePending)
	}
	return out
}

func TestAReadWithAReadinessGateReadsThePodsTheServiceSelectsAndGivesTheWaitingOnes(t *testing.T) {
	services, slices, pods := gatedObjects()
	plain := Request{Namespace: "shop", Service: "web", Query: endpoints.Query{PortName: "http"}}
	gated := plain
	gated.Query.ReadinessGate = gate
	for _, tc := range []struct {
		name    string
		request Request
		asked   []string
		want    []string
		pending []bool
	}{
		{"without the gate no Pod is read and the waiting pod stays out", plain,
			[]string{"[service shop web]", "[endpointslices shop web]"}, []string{"10.0.0.1"}, []bool{false}},
		{"with the gate the Pods of the selector are read, the waiting pod is in the pool, pending", gated,
			[]string{"[service shop web]", "[endpointslices shop web]", "[pods shop app=web]"}, []string{"10.0.0.1", "10.0.0.2"}, []bool{false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &reader{services: services, slices: slices, pods: pods}
			res, err := tc.request.Read(context.Background(), src, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(src.asked, tc.asked) {
				t.Errorf("asked %v, want %v", src.asked, tc.asked)
			}
			if got := addresses(res.Endpoints); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("endpoints %v, want %v", got, tc.want)
			}
			if got := pending(res.Endpoints); !reflect.DeepEqual(got, tc.pending) {
				t.Errorf("gate pending %v, want %v", got, tc.pending)
			}
		})
	}
}

func TestAFleetWithAReadinessGateGivesTheWaitingPodsWholeOrPageByPage(t *testing.T) {
	services, slices, pods := gatedObjects()
	r := FleetRequest{Namespaces: []string{"shop"}, Query: endpoints.Query{PortName: "http", ReadinessGate: gate}}
	for _, src := range []Reader{
		&reader{services: services, slices: slices, pods: pods},
		&pagingReader{reader: &reader{services: services, slices: slices, pods: pods}, restartAfter: 1},
	} {
		res, err := r.Read(context.Background(), src, FleetReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Pools) != 1 {
			t.Fatalf("pools %+v", res.Pools)
		}
		if got := pending(res.Pools[0].Endpoints); !reflect.DeepEqual(got, []bool{false, true}) {
			t.Errorf("%T: gate pending %v, want [false true]", src, got)
		}
		one, err := r.ReadService(context.Background(), src, "shop", "web", now)
		if err != nil || !reflect.DeepEqual(one.Pools[0].Endpoints, res.Pools[0].Endpoints) {
			t.Errorf("%T: the Service read alone gives %+v (%v), the fleet %+v", src, one.Pools, err, res.Pools[0].Endpoints)
		}
	}
}
