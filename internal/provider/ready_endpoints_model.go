package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/datasource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

const (
	defaultNamespace   = "default"
	defaultDefaultPort = 80
)

type readyEndpointsModel struct {
	ID                    types.String    `tfsdk:"id"`
	Service               types.String    `tfsdk:"service"`
	Namespace             types.String    `tfsdk:"namespace"`
	PortName              types.String    `tfsdk:"port_name"`
	DefaultPort           types.Int64     `tfsdk:"default_port"`
	TerminatingEndpoints  types.String    `tfsdk:"terminating_endpoints"`
	AddressType           types.String    `tfsdk:"address_type"`
	Zones                 types.Set       `tfsdk:"zones"`
	MinReady              types.Int64     `tfsdk:"min_ready"`
	ExpiryAnnotation      types.String    `tfsdk:"expiry_annotation"`
	Timeouts              timeouts.Value  `tfsdk:"timeouts"`
	LastChangeTriggerTime types.String    `tfsdk:"last_change_trigger_time"`
	Endpoints             []endpointModel `tfsdk:"endpoints"`
}

type endpointModel struct {
	Address     types.String `tfsdk:"address"`
	Port        types.Int64  `tfsdk:"port"`
	AddressType types.String `tfsdk:"address_type"`
	Pod         types.String `tfsdk:"pod"`
	NodeName    types.String `tfsdk:"node_name"`
	Zone        types.String `tfsdk:"zone"`
	Hostname    types.String `tfsdk:"hostname"`
	Ready       types.Bool   `tfsdk:"ready"`
	Serving     types.Bool   `tfsdk:"serving"`
	Terminating types.Bool   `tfsdk:"terminating"`
}

// withDefaults fills the optional arguments the configuration left out, so
// that state shows the values the read used.
func (m readyEndpointsModel) withDefaults() readyEndpointsModel {
	if m.Namespace.IsNull() {
		m.Namespace = types.StringValue(defaultNamespace)
	}
	if m.DefaultPort.IsNull() {
		m.DefaultPort = types.Int64Value(defaultDefaultPort)
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
	return poolRequest{
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
	}, diags
}

// withResult sets the computed attributes from the pool read.
func (m readyEndpointsModel) withResult(res endpoints.Result) readyEndpointsModel {
	m.LastChangeTriggerTime = types.StringNull()
	if !res.LastChangeTriggerTime.IsZero() {
		m.LastChangeTriggerTime = types.StringValue(res.LastChangeTriggerTime.UTC().Format(time.RFC3339Nano))
	}
	// Never nil: no ready endpoint is an empty list in state, not null.
	m.Endpoints = make([]endpointModel, 0, len(res.Endpoints))
	for _, e := range res.Endpoints {
		m.Endpoints = append(m.Endpoints, endpointModel{
			Address:     types.StringValue(e.Address),
			Port:        types.Int64Value(int64(e.Port)),
			AddressType: types.StringValue(string(e.AddressType)),
			Pod:         stringOrNull(e.Pod),
			NodeName:    stringOrNull(e.NodeName),
			Zone:        stringOrNull(e.Zone),
			Hostname:    stringOrNull(e.Hostname),
			Ready:       types.BoolValue(e.Ready),
			Serving:     types.BoolValue(e.Serving),
			Terminating: types.BoolValue(e.Terminating),
		})
	}
	return m
}

func stringOrNull(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}
