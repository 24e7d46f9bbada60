// Command trivialprovider is the bench's measure of Terraform's own floor: a
// provider built with the same framework as the k8s provider, whose one data
// source, trivial_constant, returns a constant without any I/O. A plan of N
// of them is what N data sources cost before any provider does any work.
package main

import (
	"context"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func main() {
	err := providerserver.Serve(context.Background(), func() provider.Provider { return trivial{} }, providerserver.ServeOpts{
		// Only debug mode uses the address; it must have a hostname.
		Address: "local.invalid/vigie/trivial",
	})
	if err != nil {
		log.Fatal(err)
	}
}

type trivial struct{}

var (
	_ provider.Provider     = trivial{}
	_ datasource.DataSource = constant{}
)

func (trivial) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "trivial"
}

func (trivial) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse) {}

func (trivial) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {}

func (trivial) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{func() datasource.DataSource { return constant{} }}
}

func (trivial) Resources(context.Context) []func() resource.Resource { return nil }

// constant takes a name, as k8s_ready_endpoints takes a service, and gives a
// constant value.
type constant struct{}

type constantModel struct {
	Name  types.String `tfsdk:"name"`
	Value types.String `tfsdk:"value"`
}

func (constant) Metadata(_ context.Context, _ datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = "trivial_constant"
}

func (constant) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"name":  schema.StringAttribute{Required: true},
		"value": schema.StringAttribute{Computed: true},
	}}
}

func (constant) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m constantModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	m.Value = types.StringValue("constant")
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
