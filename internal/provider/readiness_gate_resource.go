package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// readinessGateResource is k8s_readiness_gate: it sets a readiness gate's
// condition True on the pods a load balancer was given, once that load
// balancer's resource is applied (depends_on), so that Kubernetes counts
// a pod Ready only once the pool that holds it is applied.
type readinessGateResource struct {
	client *kube.Client
}

var (
	_ resource.ResourceWithConfigure   = (*readinessGateResource)(nil)
	_ resource.ResourceWithImportState = (*readinessGateResource)(nil)
)

func newReadinessGateResource() resource.Resource { return &readinessGateResource{} }

// readinessGateModel is the resource's configuration and state. Pods in
// state are those of the last apply whose gate is open and that are still
// in a pool (Read drops the pods that wait, are gone, terminating or whose
// containers are not ready), so that a plan shows a change when a pod
// waits, and not when the pool loses one.
type readinessGateModel struct {
	ID            types.String `tfsdk:"id"`
	Namespace     types.String `tfsdk:"namespace"`
	ReadinessGate types.String `tfsdk:"readiness_gate"`
	Pods          types.Set    `tfsdk:"pods"`
}

// gateReason is the reason of the conditions the resource sets.
const gateReason = "LoadBalancerApplied"

func (r *readinessGateResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_readiness_gate"
}

func (r *readinessGateResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Sets a pod readiness gate's condition True on the pods a load balancer was given, so " +
			"that Kubernetes counts a new pod Ready (and a rollout goes on) only once the load balancer has it. The pods " +
			"declare the gate in their template (`spec.readinessGates`); `k8s_ready_endpoints` or `k8s_services` with " +
			"`readiness_gate` puts the pods that wait for it in the pool with `gate_pending = true`; the load balancer's " +
			"resource takes the pool; and this resource, ordered after it with `depends_on`, opens the gate of the pods " +
			"given in `pods`, so that Terraform's own graph ensures the load balancer was applied first.\n\n" +
			"Give it every pod of the pool (`[for e in data.k8s_ready_endpoints.web.endpoints : e.pod if e.pod != null]`). " +
			"Read keeps in state the pods whose gate is open and that can still be in the pool (their containers ready, " +
			"not terminating), so that a plan shows a change to this resource when a pod of the pool waits for the " +
			"gate, and not when a pod leaves the pool. Apply reads each pod (`get` on `pods`) and sets the condition " +
			"(reason `" + gateReason + "`) by a strategic merge patch of its status (`patch` on `pods/status`, nothing " +
			"more); a pod gone, not declaring the gate, or whose condition is True already is skipped.\n\n" +
			"Destroy changes no pod: taking the condition back would make Ready pods unready and drop them from every " +
			"Service at once. Pods created afterwards wait for the gate until something sets it: remove the gate from " +
			"the pod template before removing this resource.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "`NAMESPACE/READINESS_GATE`.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"namespace": schema.StringAttribute{
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(defaultNamespace),
				MarkdownDescription: "Namespace of the pods. Defaults to `default`.",
				Validators:          []validator.String{dns1123Label()},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"readiness_gate": schema.StringAttribute{
				Required: true,
				MarkdownDescription: "Condition type of the readiness gate, as declared in the pods' " +
					"`spec.readinessGates` and given to the data source's `readiness_gate` (such as `k8s.example/pool-web`).",
				Validators:    []validator.String{conditionType()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"pods": schema.SetAttribute{
				Required:    true,
				ElementType: types.StringType,
				MarkdownDescription: "Names of the pods of the pool, read by the same plan that gave the load " +
					"balancer its pool: the gate of those that wait for it is opened. May be empty.",
			},
		},
	}
}

func (r *readinessGateResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if data := configuredData(req.ProviderData, &resp.Diagnostics); data != nil {
		r.client = data.client
	}
}

func (r *readinessGateResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	resp.Diagnostics.Append(r.openPlanned(ctx, req.Plan, &resp.State)...)
}

func (r *readinessGateResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.Append(r.openPlanned(ctx, req.Plan, &resp.State)...)
}

// openPlanned opens the gate of the planned pods and records the plan in
// state: Create and Update alike.
func (r *readinessGateResource) openPlanned(ctx context.Context, plan tfsdk.Plan, state *tfsdk.State) diag.Diagnostics {
	var model readinessGateModel
	diags := plan.Get(ctx, &model)
	if diags.HasError() {
		return diags
	}
	diags.Append(r.open(ctx, &model)...)
	if diags.HasError() {
		return diags
	}
	diags.Append(state.Set(ctx, model)...)
	return diags
}

// Delete changes no pod (see the schema's description): the resource
// leaves state.
func (r *readinessGateResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}

// Read keeps in state the pods whose gate is open (or that declare none)
// and that can still be in the pool, one GET each.
func (r *readinessGateResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state readinessGateModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.client == nil {
		if r.client == nil {
			resp.Diagnostics.Append(notConfiguredDiagnostic())
		}
		return
	}
	var names []string
	resp.Diagnostics.Append(state.Pods.ElementsAs(ctx, &names, false)...)
	if resp.Diagnostics.HasError() {
		return
	}
	gate := corev1.PodConditionType(state.ReadinessGate.ValueString())
	open := []string{}
	for _, name := range names {
		pod, err := r.client.GetPod(ctx, state.Namespace.ValueString(), name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			resp.Diagnostics.Append(gatePodDiagnostic("read", state.Namespace.ValueString(), name, err))
			return
		}
		waits := endpoints.DeclaresGate(pod, gate) && !endpoints.ConditionTrue(pod, gate)
		ready := endpoints.ConditionTrue(pod, corev1.ContainersReady) || endpoints.ConditionTrue(pod, corev1.PodReady)
		if !waits && ready && pod.DeletionTimestamp == nil {
			open = append(open, name)
		}
	}
	pods, d := types.SetValueFrom(ctx, types.StringType, open)
	resp.Diagnostics.Append(d...)
	state.Pods = pods
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

func (r *readinessGateResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	namespace, gate, ok := cutID(req.ID)
	if !ok {
		resp.Diagnostics.AddError("Invalid Import ID", fmt.Sprintf("The ID %q is not NAMESPACE/READINESS_GATE, such as default/k8s.example/pool-web.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, readinessGateModel{
		ID: types.StringValue(req.ID), Namespace: types.StringValue(namespace), ReadinessGate: types.StringValue(gate),
		Pods: types.SetValueMust(types.StringType, nil),
	})...)
}

// cutID splits NAMESPACE/GATE at the first slash (a namespace has none, a
// gate may have one).
func cutID(id string) (namespace, gate string, ok bool) {
	for i := range id {
		if id[i] == '/' {
			return id[:i], id[i+1:], i > 0 && i < len(id)-1
		}
	}
	return "", "", false
}

// open sets the gate of each pod of m that waits for it, and m's id.
func (r *readinessGateResource) open(ctx context.Context, m *readinessGateModel) diag.Diagnostics {
	var diags diag.Diagnostics
	if r.client == nil {
		return append(diags, notConfiguredDiagnostic())
	}
	var names []string
	diags.Append(m.Pods.ElementsAs(ctx, &names, false)...)
	if diags.HasError() {
		return diags
	}
	slices.Sort(names)
	namespace, gate := m.Namespace.ValueString(), corev1.PodConditionType(m.ReadinessGate.ValueString())
	m.ID = types.StringValue(namespace + "/" + string(gate))
	opened := 0
	for _, name := range names {
		pod, err := r.client.GetPod(ctx, namespace, name)
		if apierrors.IsNotFound(err) {
			tflog.Info(ctx, "pod gone: skipped", map[string]any{"namespace": namespace, "pod": name})
			continue
		}
		if err != nil {
			return append(diags, gatePodDiagnostic("read", namespace, name, err))
		}
		if !endpoints.DeclaresGate(pod, gate) || endpoints.ConditionTrue(pod, gate) {
			continue
		}
		err = r.client.OpenGate(ctx, namespace, name, pod.UID, gate, gateReason,
			"The load balancer's pool that holds the pod was applied.")
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return append(diags, gatePodDiagnostic("patch the status of", namespace, name, err))
		}
		opened++
	}
	tflog.Info(ctx, "readiness gate opened", map[string]any{"namespace": namespace, "gate": string(gate), "pods": opened})
	return diags
}

// gatePodDiagnostic is the error of a request about one pod: what was
// asked, and for a refusal the RBAC rule the resource needs.
func gatePodDiagnostic(verb, namespace, name string, err error) diag.Diagnostic {
	attempted := fmt.Sprintf("The provider could not %s pod %s/%s, for k8s_readiness_gate.", verb, namespace, name)
	if apierrors.IsForbidden(err) {
		return diag.NewAttributeErrorDiagnostic(path.Root("pods"), "Permission Denied on Pods", attempted+"\n\n"+
			"k8s_readiness_gate needs `get` on `pods` and `patch` on `pods/status` (API group \"\") in the namespace, "+
			"and nothing more.\n\n"+err.Error())
	}
	var timeout *kube.TimeoutError
	if errors.As(err, &timeout) {
		return diag.NewErrorDiagnostic("Pod Request Timed Out", attempted+"\n\n"+err.Error())
	}
	return diag.NewErrorDiagnostic("Unable to Open Readiness Gate", attempted+"\n\n"+transportRemedy(err)+"\n\n"+err.Error())
}
