package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// readState is the read of every data source, whose model (its arguments,
// read by getConfig) is M and whose state, described by attributes, is S:
// the arguments from config, the cluster read by read, and the state
// written as the protocol carries it, nil on an error. The direct path
// sends those bytes as they are; the framework's Read decodes them
// (readForFramework).
func readState[M, S any](ctx context.Context, config tfsdk.Config, client *kube.Client, attributes object[S],
	read func(context.Context, *kube.Client, M) (S, diag.Diagnostics),
) ([]byte, diag.Diagnostics) {
	var model M
	diags := getConfig(ctx, config, &model)
	if diags.HasError() {
		return nil, diags
	}
	if client == nil {
		diags.Append(notConfiguredDiagnostic())
		return nil, diags
	}
	state, d := read(ctx, client, model)
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

// withWait bounds ctx by the read timeout of a guard; 0 means no wait, and
// ctx as it is.
func withWait(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	if wait <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, wait)
}
