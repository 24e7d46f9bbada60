package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/datasource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

const (
	defaultNamespace     = "default"
	defaultPortWhenUnset = 80
)

type readyEndpointsModel struct {
	ID        types.String `tfsdk:"id"`
	Service   types.String `tfsdk:"service"`
	Namespace types.String `tfsdk:"namespace"`
	poolArgumentsModel
	MinReady              types.Int64    `tfsdk:"min_ready"`
	Timeouts              timeouts.Value `tfsdk:"timeouts"`
	LastChangeTriggerTime types.String   `tfsdk:"last_change_trigger_time"`
	// Endpoints is computed: the read builds it as a Terraform value
	// (stateValues), never through this field.
	Endpoints types.List `tfsdk:"endpoints"`
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
	m.ID = types.StringValue(m.Namespace.ValueString() + "/" + m.Service.ValueString())
	return m
}

// request turns the arguments into what readPool needs.
func (m readyEndpointsModel) request(ctx context.Context) (poolRequest, diag.Diagnostics) {
	var diags diag.Diagnostics
	// Without a timeouts block the read does not wait for min_ready.
	wait, d := m.Timeouts.Read(ctx, 0)
	diags.Append(d...)
	r := poolRequest{
		Request: pools.Request{
			Namespace: m.Namespace.ValueString(),
			Service:   m.Service.ValueString(),
			MinReady:  int(m.MinReady.ValueInt64()),
		},
		wait: wait,
	}
	r.Query, r.Nodes, d = m.query(ctx)
	diags.Append(d...)
	return r, diags
}

// stateValues are the computed attributes of state: the defaults the read
// used, and what it found.
func (m readyEndpointsModel) stateValues(res endpoints.Result) computedValues {
	return m.withStateValues(computedValues{
		"id":                       func(w *msgpackWriter) { w.str(m.ID.ValueString()) },
		"namespace":                func(w *msgpackWriter) { w.str(m.Namespace.ValueString()) },
		"min_ready":                func(w *msgpackWriter) { w.int(m.MinReady.ValueInt64()) },
		"last_change_trigger_time": func(w *msgpackWriter) { writeLastChange(w, res.LastChangeTriggerTime) },
		"endpoints":                func(w *msgpackWriter) { writeEndpoints(w, res.Endpoints) },
	})
}
