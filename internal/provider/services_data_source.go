package provider

import (
	"context"
	"maps"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/datasource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/datasourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

var (
	_ datasource.DataSourceWithConfigure        = (*servicesDataSource)(nil)
	_ datasource.DataSourceWithConfigValidators = (*servicesDataSource)(nil)
)

type servicesDataSource struct {
	client *kube.Client
}

func newServicesDataSource() datasource.DataSource {
	return &servicesDataSource{}
}

func (d *servicesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_services"
}

func (d *servicesDataSource) Schema(ctx context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	attributes := map[string]schema.Attribute{
		"id": schema.StringAttribute{
			Computed:            true,
			MarkdownDescription: "The namespaces read, comma-separated, or `*` for all of them.",
		},
		"namespace": schema.StringAttribute{
			Optional: true,
			Computed: true,
			MarkdownDescription: "Namespace of the Services. Defaults to `default` when neither `namespaces` nor " +
				"`all_namespaces` is set.",
			Validators: []validator.String{dns1123Label()},
		},
		"namespaces": schema.SetAttribute{
			Optional:            true,
			ElementType:         types.StringType,
			MarkdownDescription: "Several namespaces to read, instead of `namespace`: one LIST of Services and one of EndpointSlices each.",
			Validators:          []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(dns1123Label())},
		},
		"all_namespaces": schema.BoolAttribute{
			Optional: true,
			MarkdownDescription: "Read the Services of every namespace, with one cluster-wide LIST of Services and one " +
				"of EndpointSlices (this needs a ClusterRole).",
		},
		"label_selector": schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "Keep only the Services whose labels match this selector, in Kubernetes syntax " +
				"(`app=web,tier in (frontend,edge),!canary`). When unset, every Service.",
			Validators: []validator.String{labelSelector()},
		},
		"names": schema.SetAttribute{
			Optional:            true,
			ElementType:         types.StringType,
			MarkdownDescription: "Keep only the Services of these names. When unset, every name.",
			Validators:          []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(dns1123Label())},
		},
		"min_ready": schema.Int64Attribute{
			Optional: true,
			Computed: true,
			MarkdownDescription: "The fewest endpoints each Service's pool may have. With fewer in any of them, the read " +
				"fails with an error that names every Service short of it, so that an apply stops before it empties " +
				"or shrinks a pool. With a `timeouts { read = ... }` block, the read first waits up to that long, by " +
				"watching the EndpointSlices (this needs `watch` on `endpointslices`). `0`, the default, means no guard.",
			Validators: []validator.Int64{int64validator.AtLeast(0)},
		},
		"min_services": schema.Int64Attribute{
			Optional: true,
			Computed: true,
			MarkdownDescription: "The fewest Services `services` may hold. With fewer, the read fails, so that a " +
				"selector typo or a missing namespace does not empty every pool. Waits like `min_ready` under " +
				"`timeouts`. `0`, the default, means no guard.",
			Validators: []validator.Int64{int64validator.AtLeast(0)},
		},
		"services": schema.MapNestedAttribute{
			Computed: true,
			MarkdownDescription: "The selected Services, keyed `\"<namespace>/<name>\"`, each with the facts of the " +
				"Service a pool needs and its `endpoints`: the same list, by the same rules, that " +
				"`k8s_ready_endpoints` gives for that Service. An empty map when no Service matches.",
			NestedObject: schema.NestedAttributeObject{Attributes: serviceAttributes()},
		},
		"skipped": schema.ListNestedAttribute{
			Computed: true,
			MarkdownDescription: "The selected Services left out of `services`, sorted by namespace and name, with " +
				"the reason: a Service without the port `port_name` names.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"namespace": schema.StringAttribute{Computed: true, MarkdownDescription: "Namespace of the Service."},
				"name":      schema.StringAttribute{Computed: true, MarkdownDescription: "Name of the Service."},
				"reason":    schema.StringAttribute{Computed: true, MarkdownDescription: "Why it is left out."},
			}},
		},
	}
	maps.Copy(attributes, poolArguments())
	resp.Schema = schema.Schema{
		MarkdownDescription: "Every Service of a namespace, of several, or of the cluster, that a label selector " +
			"picks, with its pool, in ONE read: one LIST of Services and one LIST of EndpointSlices per namespace " +
			"(one each with `all_namespaces`), whether it covers one Service or thousands. The result is a map " +
			"for `for_each`, one pool per Service.",
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.BlockWithOpts(ctx, timeouts.Opts{
				ReadDescription: "How long the read may wait for `min_ready` and `min_services`, as a duration " +
					"such as `\"5m\"`. Without it the read does not wait.",
			}),
		},
		Attributes: attributes,
	}
}

func (d *servicesDataSource) ConfigValidators(context.Context) []datasource.ConfigValidator {
	return []datasource.ConfigValidator{
		datasourcevalidator.Conflicting(path.MatchRoot("namespace"), path.MatchRoot("namespaces"), path.MatchRoot("all_namespaces")),
		nodeArgumentsNeedNodes{},
	}
}

func (d *servicesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = configuredClient(req.ProviderData, &resp.Diagnostics)
}

func (d *servicesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	readForFramework(ctx, d, req, resp)
}

// readState is the read with its state encoded, nil on an error;
// directReads sends it as it is.
func (d *servicesDataSource) readState(ctx context.Context, config tfsdk.Config) ([]byte, diag.Diagnostics) {
	var cfg servicesModel
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
	res, d2 := readFleet(ctx, d.client, request)
	diags.Append(d2...)
	if diags.HasError() {
		return nil, diags
	}
	tflog.Debug(ctx, "read services", map[string]any{"services": len(res.Pools), "skipped": len(res.Skipped)})
	raw, err := stateFromConfig(config.Raw, state.stateValues(request.Namespaces, res))
	if err != nil {
		diags.Append(stateBugDiagnostic(err))
		return nil, diags
	}
	return raw, diags
}
