package provider

import (
	"context"
	"maps"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/datasource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

var (
	_ datasource.DataSourceWithConfigure        = (*readyEndpointsDataSource)(nil)
	_ datasource.DataSourceWithConfigValidators = (*readyEndpointsDataSource)(nil)
)

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
	attributes := map[string]schema.Attribute{
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
		"last_change_trigger_time": schema.StringAttribute{
			Computed: true,
			MarkdownDescription: "The latest `endpoints.kubernetes.io/last-change-trigger-time` among the Service's " +
				"EndpointSlices, in RFC 3339: when the last change they reflect (a pod or Service update) happened. " +
				"Null when no slice has it.",
		},
		"endpoints": endpointsAttribute(),
	}
	maps.Copy(attributes, poolArguments())
	resp.Schema = schema.Schema{
		MarkdownDescription: "The ready endpoints of a Kubernetes Service, read from its EndpointSlices: one entry per " +
			"pod address and port, without duplicates, in a stable order, ready to feed the pool of an external " +
			"load balancer that reaches pods directly; or, with `target = \"nodes\"`, the nodes on the Service's " +
			"`nodePort`, for one that cannot.",
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.BlockWithOpts(ctx, timeouts.Opts{
				ReadDescription: "How long the read may wait for `min_ready` endpoints, as a duration such as `\"5m\"`. " +
					"Without it the read does not wait.",
			}),
		},
		Attributes: attributes,
	}
}

func (d *readyEndpointsDataSource) ConfigValidators(context.Context) []datasource.ConfigValidator {
	return []datasource.ConfigValidator{nodeArgumentsNeedNodes{}}
}

func (d *readyEndpointsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = configuredClient(req.ProviderData, &resp.Diagnostics)
}

func (d *readyEndpointsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	readForFramework(ctx, d, req, resp)
}

// readState is the read with its state encoded, nil on an error;
// directReads sends it as it is.
func (d *readyEndpointsDataSource) readState(ctx context.Context, config tfsdk.Config) ([]byte, diag.Diagnostics) {
	var cfg readyEndpointsModel
	diags := getConfig(ctx, config, &cfg)
	if diags.HasError() {
		return nil, diags
	}
	if d.client == nil {
		diags.Append(notConfiguredDiagnostic())
		return nil, diags
	}
	state := cfg.withDefaults()
	request, d2 := state.request(ctx)
	diags.Append(d2...)
	if diags.HasError() {
		return nil, diags
	}
	if request.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, request.wait)
		defer cancel()
	}
	res, d2 := readPool(ctx, d.client, request)
	diags.Append(d2...)
	if diags.HasError() {
		return nil, diags
	}
	tflog.Debug(ctx, "read ready endpoints", map[string]any{
		"namespace": request.Namespace, "service": request.Service, "endpoints": len(res.Endpoints),
	})
	raw, err := stateFromConfig(config.Raw, state.stateValues(res))
	if err != nil {
		diags.Append(stateBugDiagnostic(err))
		return nil, diags
	}
	return raw, diags
}
