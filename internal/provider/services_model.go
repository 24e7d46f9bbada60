package provider

import (
	"context"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/datasource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

// servicesModel holds the arguments of k8s_services, as getConfig reads
// them (the computed attributes are written from the read's result:
// servicesAttributes).
type servicesModel struct {
	Namespace     types.String `tfsdk:"namespace"`
	Namespaces    types.Set    `tfsdk:"namespaces"`
	AllNamespaces types.Bool   `tfsdk:"all_namespaces"`
	LabelSelector types.String `tfsdk:"label_selector"`
	Names         types.Set    `tfsdk:"names"`
	poolArgumentsModel
	MinReady    types.Int64    `tfsdk:"min_ready"`
	MinServices types.Int64    `tfsdk:"min_services"`
	Timeouts    timeouts.Value `tfsdk:"timeouts"`
}

// withDefaults fills the optional arguments the configuration left out, so
// that state shows the values the read used.
func (m servicesModel) withDefaults() servicesModel {
	if m.Namespace.IsNull() && m.Namespaces.IsNull() && !m.AllNamespaces.ValueBool() {
		m.Namespace = types.StringValue(defaultNamespace)
	}
	m.poolArgumentsModel = m.poolArgumentsModel.withDefaults()
	if m.MinReady.IsNull() {
		m.MinReady = types.Int64Value(0)
	}
	if m.MinServices.IsNull() {
		m.MinServices = types.Int64Value(0)
	}
	return m
}

// request turns the arguments into what readFleet needs.
func (m servicesModel) request(ctx context.Context) (fleetRequest, diag.Diagnostics) {
	var namespaces, names []string
	diags := m.Namespaces.ElementsAs(ctx, &namespaces, false)
	diags.Append(m.Names.ElementsAs(ctx, &names, false)...)
	wait, d := m.Timeouts.Read(ctx, 0)
	diags.Append(d...)
	switch {
	case m.AllNamespaces.ValueBool():
		namespaces = []string{""}
	case len(namespaces) == 0:
		namespaces = []string{m.Namespace.ValueString()}
	}
	slices.Sort(namespaces)
	r := fleetRequest{
		FleetRequest: pools.FleetRequest{
			Namespaces:  namespaces,
			Selector:    m.LabelSelector.ValueString(),
			Names:       names,
			MinReady:    int(m.MinReady.ValueInt64()),
			MinServices: int(m.MinServices.ValueInt64()),
		},
		wait: wait,
	}
	diags.Append(m.fill(ctx, &r.Query, &r.Nodes, &r.PodHealthChecks)...)
	return r, diags
}

// fleetID names the namespaces read: comma-separated, or * for all.
func fleetID(namespaces []string) string {
	if len(namespaces) == 1 && namespaces[0] == "" {
		return "*"
	}
	return strings.Join(namespaces, ",")
}
