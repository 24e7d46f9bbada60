package pools

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// withGatedPods is the fleet of the snapshot with the pods that wait on the
// request's readiness gate in their pools: the Pods of each namespace in
// scope are read (page by page from a PodPager), and only those that
// declare the gate and whose condition is not True are kept, so that what
// the read holds grows with the pods that wait, not with the namespace.
func (r FleetRequest) withGatedPods(ctx context.Context, src Reader, snapshot *FleetSnapshot, now time.Time) (endpoints.FleetResult, error) {
	gate := r.Query.ReadinessGate
	var waiting []corev1.Pod
	keep := func(pods []corev1.Pod) {
		for i := range pods {
			if endpoints.DeclaresGate(&pods[i], gate) && !endpoints.ConditionTrue(&pods[i], gate) {
				waiting = append(waiting, pods[i])
			}
		}
	}
	for _, ns := range r.Namespaces {
		if pager, ok := src.(PodPager); ok {
			kept := len(waiting)
			err := pager.PodPages(ctx, ns, "", func(pods []corev1.Pod, restart bool) {
				if restart {
					waiting = waiting[:kept]
				}
				keep(pods)
			})
			if err != nil {
				return endpoints.FleetResult{}, &ReadError{Object: PodsObject, Namespace: ns, Err: err}
			}
			continue
		}
		pods, err := src.Pods(ctx, ns, "")
		if err != nil {
			return endpoints.FleetResult{}, &ReadError{Object: PodsObject, Namespace: ns, Err: err}
		}
		keep(pods)
	}
	o := r.Objects(snapshot)
	o.Pods = waiting
	plain := r
	plain.PodHealthChecks = false
	res, err := plain.Compute(o, now)
	if err != nil {
		return endpoints.FleetResult{}, &RuleError{Err: err}
	}
	return res, nil
}
