package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

var _ datasource.DataSourceWithConfigure = (*readyEndpointsDataSource)(nil)

type readyEndpointsDataSource struct {
	client *kube.Client
}

func newReadyEndpointsDataSource() datasource.DataSource {
	return &readyEndpointsDataSource{}
}

func (d *readyEndpointsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_ready_endpoints"
}

func (d *readyEndpointsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The ready endpoints of a Kubernetes Service, read from its EndpointSlices: one entry per " +
			"pod address and port, without duplicates, in a stable order, ready to feed the pool of an external " +
			"load balancer that reaches pods directly.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "`<namespace>/<service>`.",
			},
			"service": schema.StringAttribute{
				Required:            true,
				MarkdownDescription: "Name of the Kubernetes Service.",
				Validators:          []validator.String{dns1123Label{}},
			},
			"namespace": schema.StringAttribute{
				Optional:            true,
				Computed:            true,
				MarkdownDescription: "Namespace of the Service. Defaults to `default`.",
				Validators:          []validator.String{dns1123Label{}},
			},
			"port_name": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Name of the port to use, among the ports of the Service. The read fails when the " +
					"Service has no port of that name. When unset, the Service's only port is used, or `default_port` " +
					"when the Service has several ports or none.",
				Validators: []validator.String{dns1123Label{}},
			},
			"default_port": schema.Int64Attribute{
				Optional: true,
				Computed: true,
				MarkdownDescription: "Port of the endpoints whose EndpointSlice gives no number for the chosen port " +
					"(or lists no ports at all), and of every endpoint when no port is chosen. Defaults to `80`.",
				Validators: []validator.Int64{int64validator.Between(1, 65535)},
			},
			"endpoints": schema.ListNestedAttribute{
				Computed: true,
				MarkdownDescription: "The ready endpoints, sorted IPv4 before IPv6, then by address numerically, then " +
					"by port. An empty list when none is ready.",
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"address": schema.StringAttribute{
							Computed:            true,
							MarkdownDescription: "IP address of the endpoint (the first of its addresses), in canonical form.",
						},
						"port": schema.Int64Attribute{
							Computed: true,
							MarkdownDescription: "Port the endpoint listens on: the Service's `targetPort` as Kubernetes " +
								"resolved it, or `default_port`.",
						},
						"address_type": schema.StringAttribute{
							Computed:            true,
							MarkdownDescription: "`IPv4` or `IPv6`.",
						},
						"pod": schema.StringAttribute{
							Computed:            true,
							MarkdownDescription: "Name of the pod behind the endpoint; null when the slice names none.",
						},
						"node_name": schema.StringAttribute{
							Computed:            true,
							MarkdownDescription: "Node the endpoint runs on; null when the slice does not say.",
						},
						"zone": schema.StringAttribute{
							Computed:            true,
							MarkdownDescription: "Zone of the endpoint; null when the slice does not say.",
						},
						"hostname": schema.StringAttribute{
							Computed:            true,
							MarkdownDescription: "Hostname of the endpoint (set for the pods of a StatefulSet behind a headless Service); null when the slice does not say.",
						},
					},
				},
			},
		},
	}
}

func (d *readyEndpointsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	if req.ProviderData == nil {
		return
	}
	client, ok := req.ProviderData.(*kube.Client)
	if !ok {
		resp.Diagnostics.AddError("Unexpected Provider Data",
			fmt.Sprintf("Expected *kube.Client, got %T. This is a bug in the provider; please report it.", req.ProviderData))
		return
	}
	d.client = client
}

func (d *readyEndpointsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg readyEndpointsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d.client == nil {
		resp.Diagnostics.Append(notConfiguredDiagnostic())
		return
	}
	state := cfg.withDefaults()
	namespace, service := state.Namespace.ValueString(), state.Service.ValueString()

	svc, err := d.client.GetService(ctx, namespace, service)
	if err != nil {
		resp.Diagnostics.Append(getServiceDiagnostic(namespace, service, err))
		return
	}
	slices, err := d.client.ListEndpointSlices(ctx, namespace, service)
	if err != nil {
		resp.Diagnostics.Append(listEndpointSlicesDiagnostic(namespace, service, err))
		return
	}
	ready, err := endpoints.Ready(svc, slices, state.query())
	if err != nil {
		resp.Diagnostics.Append(rulesDiagnostic(err))
		return
	}
	state.Endpoints = endpointModels(ready)
	tflog.Debug(ctx, "read ready endpoints", map[string]any{
		"namespace": namespace, "service": service, "endpointslices": len(slices), "endpoints": len(ready),
	})
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}
