package provider

import (
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// conditionType checks the condition type of a readiness gate as the API
// server checks spec.readinessGates[].conditionType: a qualified name.
func conditionType() stringRule {
	return stringRule{
		description: "must be a pod condition type, a qualified name such as `k8s.example/pool-web`",
		check: func(v string) (bool, string) {
			problems := validation.IsQualifiedName(v)
			return len(problems) == 0, strings.Join(problems, "; ")
		},
	}
}

// readinessGateArgument is readiness_gate, a pool argument of both data
// sources.
func readinessGateArgument[T any]() attribute[T] {
	return attribute[T]{name: "readiness_gate", schema: schema.StringAttribute{
		Optional: true,
		MarkdownDescription: "With `target = \"pods\"`, the condition type of a pod readiness gate that the load " +
			"balancer's pool opens (such as `k8s.example/pool-web`, declared in the pods' `spec.readinessGates` and " +
			"set by a `k8s_readiness_gate` resource ordered after the load balancer). The pool then also holds the " +
			"endpoints of the pods that are ready but for this gate: their containers ready (`ContainersReady`), " +
			"every other readiness gate True, not terminating, and this gate's condition not True. Such a pod is " +
			"not Ready yet, so its endpoint has `ready = false` and `serving = false` as its EndpointSlice says, and " +
			"`gate_pending = true`: a load balancer gives it traffic like a ready one, so that it has the pod " +
			"before Kubernetes counts the pod available and goes on with a rollout. This reads the Pods behind the " +
			"Service: one more paginated LIST of Pods (of the Service's selector; for `k8s_services`, of each " +
			"namespace in scope, keeping only the pods that declare the gate), which needs `list` on `pods`. " +
			"When unset, no Pod is read for it and the pool is the ready endpoints alone.",
		Validators: []validator.String{conditionType()},
	}}
}

// gatePendingAttribute is an endpoint's gate_pending.
var gatePendingAttribute = attribute[endpoints.Endpoint]{name: "gate_pending", schema: schema.BoolAttribute{
	Computed: true,
	MarkdownDescription: "`true` when the endpoint's pod is ready but for `readiness_gate`: in the pool so that " +
		"the load balancer has it, not yet Ready in Kubernetes (`ready = false`). Always `false` without " +
		"`readiness_gate`, and for a node.",
}, write: func(w stateWriter, e *endpoints.Endpoint) { w.bool(e.GatePending) }}
