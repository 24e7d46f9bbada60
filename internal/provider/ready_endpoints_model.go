package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

const (
	defaultNamespace   = "default"
	defaultDefaultPort = 80
)

type readyEndpointsModel struct {
	ID          types.String    `tfsdk:"id"`
	Service     types.String    `tfsdk:"service"`
	Namespace   types.String    `tfsdk:"namespace"`
	PortName    types.String    `tfsdk:"port_name"`
	DefaultPort types.Int64     `tfsdk:"default_port"`
	Endpoints   []endpointModel `tfsdk:"endpoints"`
}

type endpointModel struct {
	Address     types.String `tfsdk:"address"`
	Port        types.Int64  `tfsdk:"port"`
	AddressType types.String `tfsdk:"address_type"`
	Pod         types.String `tfsdk:"pod"`
	NodeName    types.String `tfsdk:"node_name"`
	Zone        types.String `tfsdk:"zone"`
	Hostname    types.String `tfsdk:"hostname"`
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
	m.ID = types.StringValue(m.Namespace.ValueString() + "/" + m.Service.ValueString())
	return m
}

func (m readyEndpointsModel) query() endpoints.Query {
	// default_port is validated to 1-65535, so it fits.
	return endpoints.Query{PortName: m.PortName.ValueString(), DefaultPort: int32(m.DefaultPort.ValueInt64())}
}

// endpointModels never returns nil: no ready endpoint is an empty list in
// state, not null.
func endpointModels(eps []endpoints.Endpoint) []endpointModel {
	out := make([]endpointModel, 0, len(eps))
	for _, e := range eps {
		out = append(out, endpointModel{
			Address:     types.StringValue(e.Address),
			Port:        types.Int64Value(int64(e.Port)),
			AddressType: types.StringValue(string(e.AddressType)),
			Pod:         stringOrNull(e.Pod),
			NodeName:    stringOrNull(e.NodeName),
			Zone:        stringOrNull(e.Zone),
			Hostname:    stringOrNull(e.Hostname),
		})
	}
	return out
}

func stringOrNull(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}
