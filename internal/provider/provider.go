// Package provider is the Terraform glue: schemas, configuration and state.
// Cluster I/O lives in internal/kube and the endpoint rules in
// internal/endpoints.
package provider

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

var _ provider.Provider = (*k8sProvider)(nil)

type k8sProvider struct {
	version string
	loader  kube.ConfigLoader
}

type providerModel struct {
	Kubeconfig types.String `tfsdk:"kubeconfig"`
	Context    types.String `tfsdk:"context"`
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
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads Kubernetes clusters for infrastructure code, starting with the ready endpoints " +
			"of a Service for the pools of external load balancers.",
		Attributes: map[string]schema.Attribute{
			"kubeconfig": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Path of the kubeconfig file to connect with. A leading `~/` is the home directory " +
					"of the user running Terraform. When unset, the provider reads the files listed in `$KUBECONFIG` " +
					"(merged as `kubectl` does), else `~/.kube/config`, else the service account of the pod it runs in. " +
					"A kubeconfig that cannot be loaded is an error; the provider never falls back to `localhost`.",
			},
			"context": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Context of the kubeconfig to use. When unset, the kubeconfig's `current-context`. " +
					"A context the kubeconfig does not define is an error that lists the ones it does.",
			},
		},
	}
}

func (p *k8sProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Kubeconfig.IsUnknown() || cfg.Context.IsUnknown() {
		// The data source explains this when it is read; contacting a cluster
		// chosen from defaults would read the wrong one.
		tflog.Debug(ctx, "provider configuration not known yet; no client made")
		return
	}
	loaded, err := p.loader.Load(cfg.Kubeconfig.ValueString(), cfg.Context.ValueString())
	if err != nil {
		resp.Diagnostics.Append(loadDiagnostic(cfg, err))
		return
	}
	opts := kube.DefaultOptions()
	opts.UserAgent = "terraform-provider-k8s/" + p.version
	client, err := kube.NewClient(loaded.Rest, opts)
	if err != nil {
		resp.Diagnostics.AddError("Unable to Create Kubernetes Client",
			"The provider loaded its configuration from "+loaded.Source+" but could not build a client from it.\n\n"+
				"Check the certificates and credentials of that configuration.\n\n"+err.Error())
		return
	}
	tflog.Info(ctx, "cluster configuration loaded", map[string]any{"source": loaded.Source, "host": loaded.Rest.Host})
	resp.DataSourceData = client
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
		"of its contexts. The provider looks, in order, at the kubeconfig argument, the files of $KUBECONFIG, " +
		"~/.kube/config and the service account of the pod it runs in; it never falls back to localhost.\n\n" +
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
	return []func() datasource.DataSource{newReadyEndpointsDataSource}
}

func (p *k8sProvider) Resources(context.Context) []func() resource.Resource {
	return nil
}
