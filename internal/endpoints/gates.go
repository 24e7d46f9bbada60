package endpoints

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ReadyButForGate says whether pod waits for nothing but the readiness gate
// of condition type gate, as the AWS Load Balancer Controller decides it
// before it registers a target: the pod declares the gate in
// spec.readinessGates, its containers are ready (condition ContainersReady
// True), every other gate it declares is True, it is not terminating (no
// deletionTimestamp), and the gate's own condition is not True. Such a pod
// is not Ready, so its EndpointSlice lists it not ready; the load balancer
// is to have it before Kubernetes routes to it.
func ReadyButForGate(pod *corev1.Pod, gate corev1.PodConditionType) bool {
	return readyCountingGate(pod, gate) && !ConditionTrue(pod, gate)
}

// readyCountingGate says whether pod is ready but for the gate, whatever
// the gate's condition: a pod whose gate was just set True is so until the
// kubelet computes Ready and the EndpointSlice controller lists it ready,
// and stays in the pool meanwhile, no longer pending.
func readyCountingGate(pod *corev1.Pod, gate corev1.PodConditionType) bool {
	if pod == nil || gate == "" || pod.DeletionTimestamp != nil {
		return false
	}
	declared := false
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == gate {
			declared = true
			continue
		}
		if !ConditionTrue(pod, g.ConditionType) {
			return false
		}
	}
	return declared && ConditionTrue(pod, corev1.ContainersReady)
}

// DeclaresGate says whether pod declares the readiness gate of condition
// type gate in spec.readinessGates.
func DeclaresGate(pod *corev1.Pod, gate corev1.PodConditionType) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == gate {
			return true
		}
	}
	return false
}

// ConditionTrue says whether pod has the condition t with status True.
func ConditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// GatedPool is Pool with the endpoints of the pods that are ready but for
// q.ReadinessGate (ReadyButForGate, among pods, those the Service selects)
// in the pool beside the ready ones, each with GatePending set and the
// conditions its slice gives (not ready). A pod whose gate's condition is
// True but whose slice does not list it ready yet (the kubelet and the
// EndpointSlice controller follow) stays in the pool, not pending, rather
// than leave it for the moment. Without q.ReadinessGate it is Pool, and pods
// are not looked at.
func GatedPool(svc *corev1.Service, endpointSlices []discoveryv1.EndpointSlice, pods []corev1.Pod, q Query) (Result, error) {
	if q.ReadinessGate == "" || svc == nil {
		return Pool(svc, endpointSlices, q)
	}
	opened, waiting := openGates(endpointSlices, pods, q.ReadinessGate)
	res, err := Pool(svc, opened, q)
	if err != nil {
		return res, err
	}
	res.Endpoints = markWaiting(res.Endpoints, svc.Namespace, waiting)
	return res, nil
}

// GatedFleet is Fleet with the pods that wait for q.ReadinessGate in their
// pools, as GatedPool gives them.
func GatedFleet(services []corev1.Service, endpointSlices []discoveryv1.EndpointSlice, pods []corev1.Pod, q Query) (FleetResult, error) {
	if q.ReadinessGate == "" {
		return Fleet(services, endpointSlices, q)
	}
	opened, waiting := openGates(endpointSlices, pods, q.ReadinessGate)
	res, err := Fleet(services, opened, q)
	if err != nil {
		return res, err
	}
	for i := range res.Pools {
		res.Pools[i].Endpoints = markWaiting(res.Pools[i].Endpoints, res.Pools[i].Service.Namespace, waiting)
	}
	return res, nil
}

// CountGatePending is the number of endpoints that wait for the gate.
func CountGatePending(eps []Endpoint) int {
	n := 0
	for _, e := range eps {
		if e.GatePending {
			n++
		}
	}
	return n
}

// openGates is endpointSlices with the not-ready endpoints of the pods
// ready but for gate (whatever its condition) listed ready and serving, so
// that Pool takes them (the slices that hold none are not copied), and
// those pods by namespace and name, true when the gate's condition is not
// True (pending). An
// endpoint is taken for its pod only when its reference names that pod (and
// the same UID, when both give one) and it is not terminating.
func openGates(endpointSlices []discoveryv1.EndpointSlice, pods []corev1.Pod, gate corev1.PodConditionType) ([]discoveryv1.EndpointSlice, map[types.NamespacedName]bool) {
	waiting := map[types.NamespacedName]*corev1.Pod{}
	for i := range pods {
		if readyCountingGate(&pods[i], gate) {
			waiting[types.NamespacedName{Namespace: pods[i].Namespace, Name: pods[i].Name}] = &pods[i]
		}
	}
	names := map[types.NamespacedName]bool{}
	if len(waiting) == 0 {
		return endpointSlices, names
	}
	out := endpointSlices
	copied := false
	for i := range endpointSlices {
		slice := &endpointSlices[i]
		var eps []discoveryv1.Endpoint
		for j := range slice.Endpoints {
			ep := &slice.Endpoints[j]
			ready, _, terminating := conditions(ep.Conditions)
			if ready || terminating || ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
				continue
			}
			key := types.NamespacedName{Namespace: slice.Namespace, Name: ep.TargetRef.Name}
			pod := waiting[key]
			if pod == nil || (ep.TargetRef.UID != "" && pod.UID != "" && ep.TargetRef.UID != pod.UID) {
				continue
			}
			if eps == nil {
				eps = make([]discoveryv1.Endpoint, len(slice.Endpoints))
				copy(eps, slice.Endpoints)
			}
			yes := true
			eps[j].Conditions = discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: ep.Conditions.Terminating}
			names[key] = !ConditionTrue(pod, gate)
		}
		if eps == nil {
			continue
		}
		if !copied {
			out = make([]discoveryv1.EndpointSlice, len(endpointSlices))
			copy(out, endpointSlices)
			copied = true
		}
		out[i].Endpoints = eps
	}
	return out, names
}

// markWaiting gives the endpoints opened for their pods back the conditions
// of their slice (not ready), with GatePending set while the gate's
// condition is not True.
func markWaiting(eps []Endpoint, namespace string, opened map[types.NamespacedName]bool) []Endpoint {
	for i := range eps {
		if eps[i].Pod == "" {
			continue
		}
		if pending, ok := opened[types.NamespacedName{Namespace: namespace, Name: eps[i].Pod}]; ok {
			eps[i].Ready, eps[i].Serving, eps[i].GatePending = false, false, pending
		}
	}
	return eps
}
