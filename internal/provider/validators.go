package provider

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/helpers/validatordiag"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// stringRule is a validator made of what a value must be and a check that
// says whether it is, and if not, why.
type stringRule struct {
	description string
	check       func(string) (ok bool, why string)
	// withoutValue leaves the value out of the error, for values too long
	// to quote (a certificate).
	withoutValue bool
}

var _ validator.String = stringRule{}

func (r stringRule) Description(context.Context) string { return r.description }

func (r stringRule) MarkdownDescription(ctx context.Context) string { return r.Description(ctx) }

func (r stringRule) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	value := req.ConfigValue.ValueString()
	if ok, why := r.check(value); !ok {
		description := r.description
		if why != "" {
			description += " (" + why + ")"
		}
		if r.withoutValue {
			resp.Diagnostics.AddAttributeError(req.Path, "Invalid Attribute Value", fmt.Sprintf("Attribute %s %s.", req.Path, description))
			return
		}
		resp.Diagnostics.Append(validatordiag.InvalidAttributeValueDiagnostic(req.Path, description, strconv.Quote(value)))
	}
}

// dns1123Label checks a name as Kubernetes does for namespaces, Services and
// Service port names, so that a bad name fails at validate time rather than
// as a confusing API error.
func dns1123Label() stringRule {
	return stringRule{
		description: "must be a DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit",
		check: func(v string) (bool, string) {
			if v == "" {
				return false, "it is empty"
			}
			problems := validation.IsDNS1123Label(v)
			return len(problems) == 0, strings.Join(problems, "; ")
		},
	}
}

// qualifiedName checks an annotation name as Kubernetes does: an optional
// DNS subdomain prefix and a slash, then a name of at most 63 characters.
func qualifiedName() stringRule {
	return stringRule{
		description: "must be a Kubernetes annotation name, such as `example.com/expires`",
		check: func(v string) (bool, string) {
			problems := validation.IsQualifiedName(v)
			return len(problems) == 0, strings.Join(problems, "; ")
		},
	}
}

// trustedSliceManagersValidators check trusted_slice_managers: values of
// the managed-by label, each once.
func trustedSliceManagersValidators() []validator.List {
	return []validator.List{listvalidator.UniqueValues(), listvalidator.ValueStringsAre(stringRule{
		description: "must be a Kubernetes label value, such as `mesh.example.com`",
		check: func(v string) (bool, string) {
			if v == "" {
				return false, "it is empty"
			}
			problems := validation.IsValidLabelValue(v)
			return len(problems) == 0, strings.Join(problems, "; ")
		},
	})}
}

// hostURL checks host at validate time, as kube.ValidateHost does.
func hostURL() stringRule {
	return stringRule{
		description: "must be the URL of the API server, such as https://203.0.113.10:6443",
		check:       func(v string) (bool, string) { return kube.ValidateHost(v) == nil, "" },
	}
}

// durationBetween checks a Go duration string within bounds.
func durationBetween(least, most time.Duration) stringRule {
	return stringRule{
		description: fmt.Sprintf("must be a duration such as \"15s\" between %s and %s", least, most),
		check: func(v string) (bool, string) {
			d, err := time.ParseDuration(v)
			return err == nil && d >= least && d <= most, ""
		},
	}
}

// enumStrings and enumList keep schema text and validators on one list.
func enumStrings[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

func enumList[T ~string](values []T) string {
	return "`" + strings.Join(enumStrings(values), "`, `") + "`"
}

// certificatePEM checks a PEM certificate at validate time, as the client
// will read it.
func certificatePEM() stringRule {
	return stringRule{
		description:  "must be a PEM certificate (-----BEGIN CERTIFICATE-----); decode base64 outputs with base64decode()",
		withoutValue: true,
		check: func(v string) (bool, string) {
			if err := kube.ValidateCertificatePEM(v); err != nil {
				return false, err.Error()
			}
			return true, ""
		},
	}
}

// insecureWarning warns about insecure = true, which is allowed but rarely right.
type insecureWarning struct{}

var _ provider.ConfigValidator = insecureWarning{}

func (insecureWarning) Description(context.Context) string {
	return "warns when the API server's certificate is not verified"
}

func (v insecureWarning) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (insecureWarning) ValidateProvider(ctx context.Context, req provider.ValidateConfigRequest, resp *provider.ValidateConfigResponse) {
	var insecure types.Bool
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("insecure"), &insecure)...)
	if insecure.ValueBool() {
		resp.Diagnostics.AddAttributeWarning(path.Root("insecure"), "API Server Certificate Not Verified",
			"With insecure = true the provider does not check who it talks to: anyone on the path can read the "+
				"token or the client key. Set cluster_ca_certificate instead, unless this cluster is throwaway.")
	}
}

// labelSelector checks a label selector as the API server parses it.
func labelSelector() stringRule {
	return stringRule{
		description: "must be a Kubernetes label selector, such as `app=web,tier in (frontend,edge)`",
		check: func(v string) (bool, string) {
			if _, err := labels.Parse(v); err != nil {
				return false, err.Error()
			}
			return true, ""
		},
	}
}

// nodeArgumentsNeedNodes refuses node_address_type, node_selector and
// kube_proxy_health_port unless target is "nodes", and pod_health_checks
// when it is: each would be silently ignored.
type nodeArgumentsNeedNodes struct{}

var _ datasource.ConfigValidator = nodeArgumentsNeedNodes{}

func (nodeArgumentsNeedNodes) Description(context.Context) string {
	return `node_address_type, node_selector and kube_proxy_health_port need target = "nodes"; pod_health_checks and readiness_gate need target = "pods"`
}

func (v nodeArgumentsNeedNodes) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

// nodeOnlyArguments are the arguments of pools of nodes, and what each does.
var nodeOnlyArguments = []struct{ name, does string }{
	{"node_address_type", "chooses among nodes"},
	{"node_selector", "chooses among nodes"},
	{"kube_proxy_health_port", "is where nodes are health-checked"},
}

func (nodeArgumentsNeedNodes) ValidateDataSource(ctx context.Context, req datasource.ValidateConfigRequest, resp *datasource.ValidateConfigResponse) {
	attrs := configAttributes(req.Config)
	target := stringAttributes(ctx, req.Config, attrs, []string{"target"}, &resp.Diagnostics)[0]
	if target.IsUnknown() || attrs == nil {
		return
	}
	if target.ValueString() == targetNodes {
		var checks bool
		if v, ok := attrs["pod_health_checks"]; ok && v.IsKnown() && !v.IsNull() && v.As(&checks) == nil && checks {
			resp.Diagnostics.AddAttributeError(path.Root("pod_health_checks"), "Pod Argument With Node Target",
				"pod_health_checks gives pod endpoints their readinessProbe, and the pool is of nodes: target is \"nodes\". "+
					"Node entries always carry their health check.\n\n"+
					"Remove pod_health_checks, or set target = \"pods\" for a pool of pods.")
		}
		if v, ok := attrs["readiness_gate"]; ok && !v.IsNull() {
			resp.Diagnostics.AddAttributeError(path.Root("readiness_gate"), "Pod Argument With Node Target",
				"readiness_gate adds the pods that wait on a readiness gate to a pool of pods, and the pool is of nodes: "+
					"target is \"nodes\".\n\nRemove readiness_gate, or set target = \"pods\" for a pool of pods.")
		}
		return
	}
	for _, a := range nodeOnlyArguments {
		if v, ok := attrs[a.name]; ok && !v.IsNull() {
			resp.Diagnostics.AddAttributeError(path.Root(a.name), "Node Argument Without Node Target",
				fmt.Sprintf("%s %s, and the pool is of pods: target is %q.\n\n"+
					"Set target = \"nodes\" for a pool of nodes, or remove %s.", a.name, a.does, cmp.Or(target.ValueString(), targetPods), a.name))
		}
	}
}

// configStrings are the string attributes names of a configuration, as
// config.GetAttribute gives each, without the framework's walk of the schema
// and reflection (this validator runs twice per data source per plan), from
// one decoding of the configuration.
func configStrings(ctx context.Context, config tfsdk.Config, names []string, diags *diag.Diagnostics) []types.String {
	return stringAttributes(ctx, config, configAttributes(config), names, diags)
}

// configAttributes is the configuration's attributes decoded once; nil when
// it is not an object.
func configAttributes(config tfsdk.Config) map[string]tftypes.Value {
	var attrs map[string]tftypes.Value
	if err := config.Raw.As(&attrs); err != nil {
		return nil
	}
	return attrs
}

// stringAttributes is configStrings from attributes already decoded.
func stringAttributes(ctx context.Context, config tfsdk.Config, attrs map[string]tftypes.Value, names []string, diags *diag.Diagnostics) []types.String {
	out := make([]types.String, len(names))
	for i, name := range names {
		if raw, ok := attrs[name]; ok && raw.Type().Is(tftypes.String) {
			if v, err := types.StringType.ValueFromTerraform(ctx, raw); err == nil {
				if s, ok := v.(types.String); ok {
					out[i] = s
					continue
				}
			}
		}
		diags.Append(config.GetAttribute(ctx, path.Root(name), &out[i])...)
	}
	return out
}
