package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/datasource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

const (
	defaultNamespace     = "default"
	defaultPortWhenUnset = 80
)

type readyEndpointsModel struct {
	ID                    types.String   `tfsdk:"id"`
	Service               types.String   `tfsdk:"service"`
	Namespace             types.String   `tfsdk:"namespace"`
	PortName              types.String   `tfsdk:"port_name"`
	DefaultPort           types.Int64    `tfsdk:"default_port"`
	TerminatingEndpoints  types.String   `tfsdk:"terminating_endpoints"`
	AddressType           types.String   `tfsdk:"address_type"`
	Zones                 types.Set      `tfsdk:"zones"`
	MinReady              types.Int64    `tfsdk:"min_ready"`
	Target                types.String   `tfsdk:"target"`
	NodeAddressType       types.String   `tfsdk:"node_address_type"`
	NodeSelector          types.String   `tfsdk:"node_selector"`
	ExpiryAnnotation      types.String   `tfsdk:"expiry_annotation"`
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
	if m.DefaultPort.IsNull() {
		m.DefaultPort = types.Int64Value(defaultPortWhenUnset)
	}
	if m.TerminatingEndpoints.IsNull() {
		m.TerminatingEndpoints = types.StringValue(string(endpoints.TerminatingExclude))
	}
	if m.MinReady.IsNull() {
		m.MinReady = types.Int64Value(0)
	}
	m.ID = types.StringValue(m.Namespace.ValueString() + "/" + m.Service.ValueString())
	return m
}

// request turns the arguments into what readPool needs.
func (m readyEndpointsModel) request(ctx context.Context) (poolRequest, diag.Diagnostics) {
	var zones []string
	diags := m.Zones.ElementsAs(ctx, &zones, false)
	// Without a timeouts block the read does not wait for min_ready.
	wait, d := m.Timeouts.Read(ctx, 0)
	diags.Append(d...)
	r := poolRequest{
		namespace: m.Namespace.ValueString(),
		service:   m.Service.ValueString(),
		query: endpoints.Query{
			PortName: m.PortName.ValueString(),
			// default_port is validated to 1-65535, so it fits.
			DefaultPort:      int32(m.DefaultPort.ValueInt64()),
			Terminating:      endpoints.TerminatingPolicy(m.TerminatingEndpoints.ValueString()),
			AddressType:      discoveryv1.AddressType(m.AddressType.ValueString()),
			Zones:            zones,
			ExpiryAnnotation: m.ExpiryAnnotation.ValueString(),
		},
		minReady: int(m.MinReady.ValueInt64()),
		wait:     wait,
	}
	r.nodes, d = nodeArguments(&r.query, m.Target, m.NodeAddressType, m.NodeSelector)
	diags.Append(d...)
	return r, diags
}

// stateValues are the computed attributes of state: the defaults the read
// used, and what it found.
func (m readyEndpointsModel) stateValues(res endpoints.Result) map[string]tftypes.Value {
	trigger := tftypes.NewValue(tftypes.String, nil)
	if !res.LastChangeTriggerTime.IsZero() {
		trigger = tftypes.NewValue(tftypes.String, res.LastChangeTriggerTime.UTC().Format(time.RFC3339Nano))
	}
	return map[string]tftypes.Value{
		"id":                       tftypes.NewValue(tftypes.String, m.ID.ValueString()),
		"namespace":                tftypes.NewValue(tftypes.String, m.Namespace.ValueString()),
		"default_port":             tftypes.NewValue(tftypes.Number, m.DefaultPort.ValueInt64()),
		"terminating_endpoints":    tftypes.NewValue(tftypes.String, m.TerminatingEndpoints.ValueString()),
		"min_ready":                tftypes.NewValue(tftypes.Number, m.MinReady.ValueInt64()),
		"last_change_trigger_time": trigger,
		"endpoints":                endpointsValue(res.Endpoints),
	}
}
