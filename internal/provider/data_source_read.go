package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/datasource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// k8sDataSource is a data source of this provider, whose model (its
// arguments, read by getConfig) is M and whose state is S: what differs
// between them is its kind, and each of them is one value of it
// (newReadyEndpointsDataSource, newServicesDataSource).
var (
	_ datasource.DataSourceWithConfigure        = (*k8sDataSource[readyEndpointsModel, readyEndpointsState])(nil)
	_ datasource.DataSourceWithConfigValidators = (*k8sDataSource[readyEndpointsModel, readyEndpointsState])(nil)
)

type k8sDataSource[M, S any] struct {
	*dataSourceKind[M, S]
	data *providerData
}

// dataSourceKind is what a data source is: its type name after the
// provider's ("_services"), its description and that of its read timeout,
// its attributes, its read and its configuration validators.
type dataSourceKind[M, S any] struct {
	typeName, description, readTimeout string
	attributes                         object[S]
	read                               func(context.Context, *kube.Client, M) (S, diag.Diagnostics)
	validators                         func() []datasource.ConfigValidator
}

// new is the factory of a data source of this kind, as the provider lists
// them.
func (k *dataSourceKind[M, S]) new() datasource.DataSource {
	return &k8sDataSource[M, S]{dataSourceKind: k}
}

func (d *k8sDataSource[M, S]) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + d.typeName
}

func (d *k8sDataSource[M, S]) Schema(ctx context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: d.description,
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.BlockWithOpts(ctx, timeouts.Opts{ReadDescription: d.readTimeout}),
		},
		Attributes: d.attributes.schema(),
	}
}

func (d *k8sDataSource[M, S]) ConfigValidators(context.Context) []datasource.ConfigValidator {
	return d.validators()
}

func (d *k8sDataSource[M, S]) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (d *k8sDataSource[M, S]) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	readForFramework(ctx, d, req, resp)
}

// readState is the read, its state encoded (stateReader): through the one
// read of every data source, with this one's attributes and reader.
func (d *k8sDataSource[M, S]) readState(ctx context.Context, config tfsdk.Config) ([]byte, diag.Diagnostics) {
	return readState(ctx, config, d.data, d.attributes, d.read)
}

// readState is the read of every data source, whose model (its arguments,
// read by getConfig) is M and whose state, described by attributes, is S:
// the arguments from config (with the provider's defaults of those left
// unset), the cluster read by read, and the state written as the protocol
// carries it, nil on an error. The direct path sends those bytes as they
// are; the framework's Read decodes them (readForFramework).
func readState[M, S any](ctx context.Context, config tfsdk.Config, data *providerData, attributes object[S],
	read func(context.Context, *kube.Client, M) (S, diag.Diagnostics),
) ([]byte, diag.Diagnostics) {
	var model M
	diags := getConfig(ctx, config, &model)
	if diags.HasError() {
		return nil, diags
	}
	if data == nil || data.client == nil {
		diags.Append(notConfiguredDiagnostic())
		return nil, diags
	}
	if m, ok := any(&model).(interface{ inherit(*providerData) }); ok {
		m.inherit(data)
	}
	state, d := read(ctx, data.client, model)
	diags.Append(d...)
	if diags.HasError() {
		return nil, diags
	}
	raw, err := encodeState(attributes, config.Raw, &state)
	if err != nil {
		diags.Append(stateBugDiagnostic(err))
		return nil, diags
	}
	return raw, diags
}

// readForFramework is the framework's Read of a data source that reads its
// state encoded (stateReader): the state decoded into the response.
func readForFramework(ctx context.Context, ds stateReader, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	state, diags := ds.readState(ctx, req.Config)
	resp.Diagnostics.Append(diags...)
	if state == nil {
		return
	}
	v, err := (&tfprotov6.DynamicValue{MsgPack: state}).Unmarshal(req.Config.Raw.Type())
	if err != nil {
		resp.Diagnostics.Append(stateBugDiagnostic(err))
		return
	}
	resp.State.Raw = v
}

// readWaiting is the read of a data source that may wait for its guards:
// nothing when making the request failed (diags says why), else read, with
// ctx bounded by wait (withWait). What it reads is for the state only when
// diags has no error (readState drops it otherwise).
func readWaiting[R, Res any](ctx context.Context, client *kube.Client, request R, wait time.Duration, diags diag.Diagnostics,
	read func(context.Context, *kube.Client, R) (Res, diag.Diagnostics),
) (Res, diag.Diagnostics) {
	var res Res
	if diags.HasError() {
		return res, diags
	}
	ctx, cancel := withWait(ctx, wait)
	defer cancel()
	res, d := read(ctx, client, request)
	diags.Append(d...)
	return res, diags
}

// withWait bounds ctx by the read timeout of a guard; 0 means no wait, and
// ctx as it is.
func withWait(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	if wait <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, wait)
}
