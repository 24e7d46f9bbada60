package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/datasource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

const (
	defaultNamespace     = "default"
	defaultPortWhenUnset = 80
)

// readyEndpointsModel holds the arguments of k8s_ready_endpoints, as
// getConfig reads them (the computed attributes are written from the read's
// result: readyEndpointsAttributes).
type readyEndpointsModel struct {
	Service   types.String `tfsdk:"service"`
	Namespace types.String `tfsdk:"namespace"`
	poolArgumentsModel
	MinReady types.Int64    `tfsdk:"min_ready"`
	Timeouts timeouts.Value `tfsdk:"timeouts"`
}

// withDefaults fills the optional arguments the configuration left out, so
// that state shows the values the read used.
func (m readyEndpointsModel) withDefaults() readyEndpointsModel {
	if m.Namespace.IsNull() {
		m.Namespace = types.StringValue(defaultNamespace)
	}
	m.poolArgumentsModel = m.poolArgumentsModel.withDefaults()
	if m.MinReady.IsNull() {
		m.MinReady = types.Int64Value(0)
	}
	return m
}

// request turns the arguments into what readPool needs.
func (m readyEndpointsModel) request(ctx context.Context) (poolRequest, diag.Diagnostics) {
	// Without a timeouts block the read does not wait for min_ready.
	wait, diags := m.Timeouts.Read(ctx, 0)
	r := poolRequest{
		Request: pools.Request{
			Namespace: m.Namespace.ValueString(),
			Service:   m.Service.ValueString(),
			MinReady:  int(m.MinReady.ValueInt64()),
		},
		wait: wait,
	}
	diags.Append(m.fill(ctx, &r.Query, &r.Nodes, &r.PodHealthChecks)...)
	return r, diags
}
