package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/datasource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	discoveryv1 "k8s.io/api/discovery/v1"

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

func (d *readyEndpointsDataSource) Schema(ctx context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The ready endpoints of a Kubernetes Service, read from its EndpointSlices: one entry per " +
			"pod address and port, without duplicates, in a stable order, ready to feed the pool of an external " +
			"load balancer that reaches pods directly.",
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.BlockWithOpts(ctx, timeouts.Opts{
				ReadDescription: "How long the read may wait for `min_ready` endpoints, as a duration such as `\"5m\"`. " +
					"Without it the read does not wait.",
			}),
		},
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "`<namespace>/<service>`.",
			},
			"service": schema.StringAttribute{
				Required:            true,
				MarkdownDescription: "Name of the Kubernetes Service.",
				Validators:          []validator.String{dns1123Label()},
			},
			"namespace": schema.StringAttribute{
				Optional:            true,
				Computed:            true,
				MarkdownDescription: "Namespace of the Service. Defaults to `default`.",
				Validators:          []validator.String{dns1123Label()},
			},
			"port_name": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Name of the port to use, among the ports of the Service. The read fails when the " +
					"Service has no port of that name. When unset, the Service's only port is used, or `default_port` " +
					"when the Service has several ports or none.",
				Validators: []validator.String{dns1123Label()},
			},
			"default_port": schema.Int64Attribute{
				Optional: true,
				Computed: true,
				MarkdownDescription: "Port of the endpoints whose EndpointSlice gives no number for the chosen port " +
					"(or lists no ports at all), and of every endpoint when no port is chosen. Defaults to `80`.",
				Validators: []validator.Int64{int64validator.Between(1, 65535)},
			},
			"terminating_endpoints": schema.StringAttribute{
				Optional: true,
				Computed: true,
				MarkdownDescription: "What to do with endpoints that are terminating but still serving (pods in their " +
					"grace period): " + enumList(endpoints.TerminatingPolicies) + ". `exclude` (the default) leaves them out; " +
					"`fallback` gives them only when no endpoint is ready, as kube-proxy does since Kubernetes 1.28; " +
					"`include` gives them beside the ready ones, for pools that drain connections gracefully. Endpoints " +
					"that no longer serve are never given.",
				Validators: []validator.String{stringvalidator.OneOf(enumStrings(endpoints.TerminatingPolicies)...)},
			},
			"address_type": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Keep only the endpoints of one address family, `IPv4` or `IPv6`, for a pool that " +
					"takes one. When unset, both.",
				Validators: []validator.String{stringvalidator.OneOf(string(discoveryv1.AddressTypeIPv4), string(discoveryv1.AddressTypeIPv6))},
			},
			"zones": schema.SetAttribute{
				Optional:    true,
				ElementType: types.StringType,
				MarkdownDescription: "Keep only the endpoints in these zones (`topology.kubernetes.io/zone` of their " +
					"node), for zone-local pools. Endpoints whose zone is unknown are left out. When unset, all zones.",
				Validators: []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
			},
			"min_ready": schema.Int64Attribute{
				Optional: true,
				Computed: true,
				MarkdownDescription: "The fewest endpoints the result may have. With fewer, the read fails with an error " +
					"that says how many were found, so that an apply stops before it empties or shrinks a pool. With a " +
					"`timeouts { read = ... }` block, the read first waits up to that long for enough endpoints, by " +
					"watching the Service's EndpointSlices (this needs `watch` on `endpointslices`). `0`, the default, " +
					"means no guard.",
				Validators: []validator.Int64{int64validator.AtLeast(0)},
			},
			"expiry_annotation": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Name of an EndpointSlice annotation holding the time after which the slice's " +
					"endpoints are stale, as an RFC 3339 time or Unix seconds. Slices whose time has passed are left " +
					"out, so that endpoints which registered themselves and stopped renewing leave the pool even when " +
					"nothing deletes them. The slices Kubernetes mirrors from a hand-managed Endpoints object carry its " +
					"annotations. A value that cannot be read gives a warning naming the slice, which is kept.",
				Validators: []validator.String{qualifiedName()},
			},
			"last_change_trigger_time": schema.StringAttribute{
				Computed: true,
				MarkdownDescription: "The latest `endpoints.kubernetes.io/last-change-trigger-time` among the Service's " +
					"EndpointSlices, in RFC 3339: when the last change they reflect (a pod or Service update) happened. " +
					"Null when no slice has it.",
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
						"ready": schema.BoolAttribute{
							Computed:            true,
							MarkdownDescription: "The endpoint's `ready` condition; `true` when the slice gives none.",
						},
						"serving": schema.BoolAttribute{
							Computed:            true,
							MarkdownDescription: "The endpoint's `serving` condition; `true` when the slice gives none, as the `discovery/v1` API and kube-proxy read it.",
						},
						"terminating": schema.BoolAttribute{
							Computed:            true,
							MarkdownDescription: "The endpoint's `terminating` condition; `false` when the slice gives none.",
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
	request, diags := state.request(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	if request.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, request.wait)
		defer cancel()
	}
	res, diags := readPool(ctx, d.client, request)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	tflog.Debug(ctx, "read ready endpoints", map[string]any{
		"namespace": request.namespace, "service": request.service, "endpoints": len(res.Endpoints),
	})
	raw, err := stateFromConfig(req.Config.Raw, state.stateValues(res))
	if err != nil {
		resp.Diagnostics.AddError("Unable to Build State", "Building the state of the read failed. This is a bug in the provider; please report it.\n\n"+err.Error())
		return
	}
	resp.State.Raw = raw
}
