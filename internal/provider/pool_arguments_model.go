package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

// poolArgumentsModel holds the arguments of poolArguments, embedded in the
// model of every data source that gives pools, so that they are read,
// defaulted and turned into a query in one place.
type poolArgumentsModel struct {
	PortName             types.String `tfsdk:"port_name"`
	DefaultPort          types.Int64  `tfsdk:"default_port"`
	TerminatingEndpoints types.String `tfsdk:"terminating_endpoints"`
	AddressType          types.String `tfsdk:"address_type"`
	Zones                types.Set    `tfsdk:"zones"`
	Target               types.String `tfsdk:"target"`
	NodeAddressType      types.String `tfsdk:"node_address_type"`
	NodeSelector         types.String `tfsdk:"node_selector"`
	PodHealthChecks      types.Bool   `tfsdk:"pod_health_checks"`
	KubeProxyHealthPort  types.Int64  `tfsdk:"kube_proxy_health_port"`
	ExpiryAnnotation     types.String `tfsdk:"expiry_annotation"`
	TrustedSliceManagers types.List   `tfsdk:"trusted_slice_managers"`
	ReadinessGate        types.String `tfsdk:"readiness_gate"`
}

// withDefaults fills the computed arguments the configuration left out, so
// that state shows the values the read used.
func (p poolArgumentsModel) withDefaults() poolArgumentsModel {
	if p.DefaultPort.IsNull() {
		p.DefaultPort = types.Int64Value(defaultPortWhenUnset)
	}
	if p.TerminatingEndpoints.IsNull() {
		p.TerminatingEndpoints = types.StringValue(string(endpoints.TerminatingExclude))
	}
	if p.TrustedSliceManagers.IsNull() {
		p.TrustedSliceManagers = types.ListValueMust(types.StringType, nil)
	}
	return p
}

// inherit gives the arguments the configuration left out the provider's
// value, where it has one.
func (p *poolArgumentsModel) inherit(data *providerData) {
	if p.TrustedSliceManagers.IsNull() && data.trustedSliceManagers != nil {
		p.TrustedSliceManagers = stringList(data.trustedSliceManagers)
	}
}

// trustedSliceManagers is trusted_slice_managers as set by withDefaults.
func (p poolArgumentsModel) trustedSliceManagers() []string {
	out := make([]string, 0, len(p.TrustedSliceManagers.Elements()))
	for _, e := range p.TrustedSliceManagers.Elements() {
		if s, ok := e.(types.String); ok {
			out = append(out, s.ValueString())
		}
	}
	return out
}

// stringList is values as a list of strings.
func stringList(values []string) types.List {
	elements := make([]attr.Value, len(values))
	for i, v := range values {
		elements[i] = types.StringValue(v)
	}
	return types.ListValueMust(types.StringType, elements)
}

// fill sets in the request of either data source what the rules need of
// the arguments (q), whether the pool is of nodes and whether the read
// checks the pods' health.
func (p poolArgumentsModel) fill(ctx context.Context, q *endpoints.Query, nodes *pools.NodeTarget, podHealthChecks *bool) diag.Diagnostics {
	var zones []string
	diags := p.Zones.ElementsAs(ctx, &zones, false)
	*q = endpoints.Query{
		PortName: p.PortName.ValueString(),
		// default_port is validated to 1-65535, so it fits.
		DefaultPort:      int32(p.DefaultPort.ValueInt64()),
		Terminating:      endpoints.TerminatingPolicy(p.TerminatingEndpoints.ValueString()),
		AddressType:      discoveryv1.AddressType(p.AddressType.ValueString()),
		Zones:            zones,
		ExpiryAnnotation: p.ExpiryAnnotation.ValueString(),
		// kube_proxy_health_port is validated to 1-65535, so it fits.
		KubeProxyHealthPort:  int32(p.KubeProxyHealthPort.ValueInt64()),
		TrustedSliceManagers: p.trustedSliceManagers(),
		ReadinessGate:        corev1.PodConditionType(p.ReadinessGate.ValueString()),
	}
	var d diag.Diagnostics
	*nodes, d = nodeArguments(q, p.Target, p.NodeAddressType, p.NodeSelector)
	diags.Append(d...)
	*podHealthChecks = p.PodHealthChecks.ValueBool()
	return diags
}
