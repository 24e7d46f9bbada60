// Package provider is the Terraform glue: schemas, configuration and state.
// Cluster I/O lives in internal/kube and the endpoint rules in
// internal/endpoints.
package provider

import (
	"context"
	"sync/atomic"

	"github.com/hashicorp/terraform-plugin-framework-validators/providervalidator"
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
	// data is what Configure gave the data sources, for the direct path
	// (direct.go); nil while the configuration is unknown or did not give
	// a client.
	data atomic.Pointer[providerData]
}

// providerData is what the provider's Configure gives its data sources:
// the client, and the provider's defaults of their arguments.
type providerData struct {
	client *kube.Client
	// trustedSliceManagers is the provider's trusted_slice_managers, nil
	// when unset.
	trustedSliceManagers []string
}

// New returns the provider factory of the framework alone: the tests and
// the bench serve it to compare with NewServer's server, which main serves
// (Serve).
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

func (p *k8sProvider) ConfigValidators(context.Context) []provider.ConfigValidator {
	return []provider.ConfigValidator{
		providervalidator.Conflicting(path.MatchRoot("host"), path.MatchRoot("kubeconfig")),
		providervalidator.Conflicting(path.MatchRoot("host"), path.MatchRoot("context")),
		providervalidator.Conflicting(path.MatchRoot("token"), path.MatchRoot("client_certificate")),
		providervalidator.Conflicting(path.MatchRoot("token"), path.MatchRoot("exec")),
		providervalidator.Conflicting(path.MatchRoot("client_certificate"), path.MatchRoot("exec")),
		providervalidator.Conflicting(path.MatchRoot("insecure"), path.MatchRoot("cluster_ca_certificate")),
		providervalidator.RequiredTogether(path.MatchRoot("client_certificate"), path.MatchRoot("client_key")),
		insecureWarning{},
	}
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
		p.data.Store(nil)
		return
	}
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var loaded kube.LoadedConfig
	var err error
	inline, isInline := cfg.inline(ctx, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if isInline {
		loaded, err = p.loader.LoadInline(inline)
	} else {
		loaded, err = p.loader.Load(cfg.Kubeconfig.ValueString(), cfg.Context.ValueString())
	}
	if err != nil {
		resp.Diagnostics.Append(configurationDiagnostic(cfg, isInline, err))
		return
	}
	client, err := kube.NewClient(loaded.Rest, cfg.clientOptions(p.version))
	if err != nil {
		resp.Diagnostics.Append(clientDiagnostic(loaded.Source, err))
		return
	}
	tflog.Info(ctx, "cluster configuration loaded", map[string]any{"source": loaded.Source, "host": loaded.Rest.Host})
	data := &providerData{client: client}
	resp.Diagnostics.Append(cfg.TrustedSliceManagers.ElementsAs(ctx, &data.trustedSliceManagers, false)...)
	resp.DataSourceData = data
	resp.ResourceData = data
	p.data.Store(data)
}

func (p *k8sProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newReadyEndpointsDataSource, newServicesDataSource}
}

// Functions need no cluster: they reshape what the data sources read.
func (p *k8sProvider) Functions(context.Context) []func() function.Function {
	return []func() function.Function{newMembersFunction, newCTSServicesFunction}
}

func (p *k8sProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newReadinessGateResource}
}

// configuredData is what Configure gave, for a data source's Configure:
// nil until the provider is configured.
func configuredData(data any, diags *diag.Diagnostics) *providerData {
	if data == nil {
		return nil
	}
	d, ok := data.(*providerData)
	if !ok {
		diags.Append(unexpectedProviderDataDiagnostic(data))
	}
	return d
}
