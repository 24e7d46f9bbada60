// Package provider is the Terraform glue: schemas, configuration and state.
// Cluster I/O lives in internal/kube and the endpoint rules in
// internal/endpoints.
package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

var (
	_ provider.ProviderWithConfigValidators = (*k8sProvider)(nil)
	_ provider.ProviderWithFunctions        = (*k8sProvider)(nil)
)

type k8sProvider struct {
	version string
	loader  kube.ConfigLoader
	// client is the one Configure made, for directReads; nil while the
	// configuration is unknown or did not give one.
	client atomic.Pointer[kube.Client]
}

// New returns the provider factory that main serves.
func New(version string) func() provider.Provider {
	return func() provider.Provider {
		return &k8sProvider{version: version, loader: kube.DefaultConfigLoader()}
	}
}

func (p *k8sProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "k8s"
	resp.Version = p.version
}

func (p *k8sProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = providerSchema()
}

func (p *k8sProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	if !req.Config.Raw.IsFullyKnown() {
		// Some argument comes from a resource not created yet. Contacting a
		// cluster chosen from the rest, or from defaults, would read the
		// wrong one: defer the reads where Terraform allows it, else the
		// data source explains what to do.
		if req.ClientCapabilities.DeferralAllowed {
			resp.Deferred = &provider.Deferred{Reason: provider.DeferredReasonProviderConfigUnknown}
		}
		tflog.Debug(ctx, "provider configuration not known yet; no client made")
		p.client.Store(nil)
		return
	}
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var loaded kube.LoadedConfig
	var err error
	if inline, isInline := cfg.inline(ctx, &resp.Diagnostics); isInline {
		if resp.Diagnostics.HasError() {
			return
		}
		loaded, err = inline.Load()
		if err != nil {
			resp.Diagnostics.AddError("Invalid Provider Credentials",
				"The provider could not use the connection given by its arguments.\n\n"+
					"Check host, the PEM certificates and keys, proxy_url and the exec block.\n\n"+err.Error())
			return
		}
	} else {
		loaded, err = p.loader.Load(cfg.Kubeconfig.ValueString(), cfg.Context.ValueString())
		if err != nil {
			resp.Diagnostics.Append(loadDiagnostic(cfg, err))
			return
		}
	}
	client, err := kube.NewClient(loaded.Rest, cfg.clientOptions(p.version))
	if err != nil {
		resp.Diagnostics.AddError("Unable to Create Kubernetes Client",
			"The provider loaded its configuration from "+loaded.Source+" but could not build a client from it.\n\n"+
				"Check the certificates and credentials of that configuration.\n\n"+err.Error())
		return
	}
	tflog.Info(ctx, "cluster configuration loaded", map[string]any{"source": loaded.Source, "host": loaded.Rest.Host})
	resp.DataSourceData = client
	p.client.Store(client)
}

func loadDiagnostic(cfg providerModel, err error) diag.Diagnostic {
	const summary = "Unable to Load Kubeconfig"
	attempted, cause := "The provider found no usable cluster configuration.", err
	var loadErr *kube.LoadError
	if errors.As(err, &loadErr) {
		cause = loadErr.Err
		attempted = "The provider found no usable cluster configuration. It looked at:\n  - " +
			strings.Join(loadErr.Tried, "\n  - ")
		if loadErr.Context != "" {
			attempted += "\nfor context " + strconv.Quote(loadErr.Context) + "."
		}
	}
	detail := attempted + "\n\n" +
		"Set kubeconfig to a readable kubeconfig file (or $KUBECONFIG, or create ~/.kube/config), and context to one " +
		"of its contexts, or give the connection with host and credentials. The provider looks, in order, at the " +
		"kubeconfig argument, the files of $KUBECONFIG, ~/.kube/config and the service account of the pod it runs " +
		"in; it never falls back to localhost.\n\n" +
		cause.Error()
	var unknownContext *kube.UnknownContextError
	switch {
	case errors.As(err, &unknownContext):
		return diag.NewAttributeErrorDiagnostic(path.Root("context"), summary, detail)
	case cfg.Kubeconfig.ValueString() != "":
		return diag.NewAttributeErrorDiagnostic(path.Root("kubeconfig"), summary, detail)
	default:
		return diag.NewErrorDiagnostic(summary, detail)
	}
}

func (p *k8sProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newReadyEndpointsDataSource, newServicesDataSource}
}

// Functions need no cluster: they reshape what the data sources read.
func (p *k8sProvider) Functions(context.Context) []func() function.Function {
	return []func() function.Function{newMembersFunction, newCTSServicesFunction}
}

func (p *k8sProvider) Resources(context.Context) []func() resource.Resource {
	return nil
}

// configuredClient is the client Configure made, for a data source's
// Configure: nil until the provider is configured.
func configuredClient(providerData any, diags *diag.Diagnostics) *kube.Client {
	if providerData == nil {
		return nil
	}
	client, ok := providerData.(*kube.Client)
	if !ok {
		diags.AddError("Unexpected Provider Data",
			fmt.Sprintf("Expected *kube.Client, got %T. This is a bug in the provider; please report it.", providerData))
	}
	return client
}
