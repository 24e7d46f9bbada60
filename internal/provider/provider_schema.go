package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/boolvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

type providerModel struct {
	Kubeconfig           types.String `tfsdk:"kubeconfig"`
	Context              types.String `tfsdk:"context"`
	Host                 types.String `tfsdk:"host"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	Token                types.String `tfsdk:"token"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
	Insecure             types.Bool   `tfsdk:"insecure"`
	TLSServerName        types.String `tfsdk:"tls_server_name"`
	ProxyURL             types.String `tfsdk:"proxy_url"`
	Exec                 *execModel   `tfsdk:"exec"`
	RequestTimeout       types.String `tfsdk:"request_timeout"`
	QPS                  types.Int64  `tfsdk:"qps"`
	Burst                types.Int64  `tfsdk:"burst"`
	TrustedSliceManagers types.List   `tfsdk:"trusted_slice_managers"`
}

type execModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Command    types.String `tfsdk:"command"`
	Args       types.List   `tfsdk:"args"`
	Env        types.Map    `tfsdk:"env"`
}

// clientOptions are the request bounds and rate limit of this provider block.
func (m providerModel) clientOptions(version string) kube.Options {
	opts := kube.DefaultOptions()
	opts.UserAgent = "terraform-provider-k8s/" + version
	if d, err := time.ParseDuration(m.RequestTimeout.ValueString()); err == nil {
		opts.RequestTimeout = d
	}
	if !m.QPS.IsNull() {
		opts.QPS = float32(m.QPS.ValueInt64())
	}
	if !m.Burst.IsNull() {
		opts.Burst = int(m.Burst.ValueInt64())
	}
	// client-go's token bucket never lets more than burst through at once,
	// so a burst below qps would cap the rate at burst.
	opts.Burst = max(opts.Burst, int(opts.QPS))
	return opts
}

// inline returns the connection given by the arguments, and whether there is
// one: host set means the arguments, not a kubeconfig, say how to connect.
func (m providerModel) inline(ctx context.Context, diags *diag.Diagnostics) (kube.InlineConfig, bool) {
	if m.Host.IsNull() {
		return kube.InlineConfig{}, false
	}
	c := kube.InlineConfig{
		Host:              m.Host.ValueString(),
		CACertificate:     m.ClusterCACertificate.ValueString(),
		Token:             m.Token.ValueString(),
		ClientCertificate: m.ClientCertificate.ValueString(),
		ClientKey:         m.ClientKey.ValueString(),
		Insecure:          m.Insecure.ValueBool(),
		InsecureSet:       !m.Insecure.IsNull(),
		TLSServerName:     m.TLSServerName.ValueString(),
		ProxyURL:          m.ProxyURL.ValueString(),
	}
	if m.Exec != nil {
		c.Exec = &kube.ExecConfig{APIVersion: m.Exec.APIVersion.ValueString(), Command: m.Exec.Command.ValueString()}
		diags.Append(m.Exec.Args.ElementsAs(ctx, &c.Exec.Args, false)...)
		diags.Append(m.Exec.Env.ElementsAs(ctx, &c.Exec.Env, false)...)
	}
	return c, true
}

func providerSchema() schema.Schema {
	needsHost := []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("host"))}
	return schema.Schema{
		MarkdownDescription: "Reads Kubernetes clusters for infrastructure code, starting with the ready endpoints " +
			"of a Service for the pools of external load balancers.",
		Attributes: map[string]schema.Attribute{
			"kubeconfig": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Path of the kubeconfig file to connect with. A leading `~/` is the home directory " +
					"of the user running Terraform. When unset (and `host` is unset), the provider reads the file of " +
					"`KUBE_CONFIG_PATH`, else the files listed in `KUBE_CONFIG_PATHS`, else, when `KUBE_HOST` is set " +
					"and `context` is not, connects with the `KUBE_*` variables alone, else reads the files listed in " +
					"`$KUBECONFIG` (merged as `kubectl` does), else `~/.kube/config`, else uses the service account of " +
					"the pod it runs in (see [Environment variables](#environment-variables)). A kubeconfig that cannot " +
					"be loaded is an error; the provider never falls back to `localhost`. Conflicts with `host`.",
			},
			"context": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Context of the kubeconfig to use. When unset, `KUBE_CTX`, else the kubeconfig's " +
					"`current-context`, whose cluster and user `KUBE_CTX_CLUSTER` and `KUBE_CTX_AUTH_INFO` replace when " +
					"set (a context set here is used as the kubeconfig defines it). A context the kubeconfig does not " +
					"define is an error that lists the ones it does. Conflicts with `host`.",
			},
			"host": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "URL of the API server, such as `https://203.0.113.10:6443` or an EKS endpoint. " +
					"When set, the connection is made from `host` and the arguments below only (or the variables that " +
					"stand for those left unset), and no kubeconfig is read. Unset, `KUBE_HOST` stands for it when " +
					"neither `kubeconfig` nor `context` is set.",
				Validators: []validator.String{hostURL()},
			},
			"cluster_ca_certificate": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "PEM certificate of the CA that signed the API server's certificate. Unset, " +
					"`KUBE_CLUSTER_CA_CERT_DATA` (unless `insecure = true`), else the system's CAs are trusted. Needs `host`.",
				Validators: append([]validator.String{certificatePEM()}, needsHost...),
			},
			"token": schema.StringAttribute{
				Optional:  true,
				Sensitive: true,
				MarkdownDescription: "Bearer token to authenticate with. Unset, `KUBE_TOKEN` (unless `client_certificate` " +
					"or `exec` is set). Needs `host`; conflicts with `client_certificate` and `exec`.",
				Validators: needsHost,
			},
			"client_certificate": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "PEM client certificate to authenticate with, with `client_key`. Unset, " +
					"`KUBE_CLIENT_CERT_DATA` (unless `token` or `exec` is set). Needs `host`; conflicts with `token` and `exec`.",
				Validators: append([]validator.String{certificatePEM()}, needsHost...),
			},
			"client_key": schema.StringAttribute{
				Optional:  true,
				Sensitive: true,
				MarkdownDescription: "PEM private key of `client_certificate`. Unset, `KUBE_CLIENT_KEY_DATA`, with " +
					"`KUBE_CLIENT_CERT_DATA`. Needs `host`.",
				Validators: needsHost,
			},
			"insecure": schema.BoolAttribute{
				Optional: true,
				MarkdownDescription: "Skip the verification of the API server's certificate. For throwaway clusters " +
					"only: anyone on the path can read the credentials. Unset, `KUBE_INSECURE` (`true` or `false`; " +
					"unless `cluster_ca_certificate` is set). Conflicts with `cluster_ca_certificate`. Needs `host`.",
				Validators: []validator.Bool{boolvalidator.AlsoRequires(path.MatchRoot("host"))},
			},
			"tls_server_name": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Name to verify the API server's certificate against, when it differs from the " +
					"host of `host` (a tunnel, an IP). Unset, `KUBE_TLS_SERVER_NAME`. Needs `host`.",
				Validators: needsHost,
			},
			"request_timeout": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: fmt.Sprintf("Bound of each API request, connection included, as a duration such "+
					"as `\"5s\"`. A request that fails in a way a retry may cure (429, 5xx, a dropped connection, this "+
					"timeout) is tried %d times in all, so a read on a dead or stalled API server fails within about "+
					"%d times this bound. Defaults to `\"%s\"`.", kube.DefaultOptions().Attempts, kube.DefaultOptions().Attempts,
					kube.DefaultOptions().RequestTimeout),
				Validators: []validator.String{durationBetween(time.Second, 10*time.Minute)},
			},
			"qps": schema.Int64Attribute{
				Optional: true,
				MarkdownDescription: fmt.Sprintf("Client-side limit of requests per second to the API server, shared by "+
					"all reads of this provider block. Defaults to `%d`, high enough that large plans are not slowed "+
					"(client-go's own default of 5 would make 100 reads wait seconds); lower it to spare a busy API "+
					"server, whose priority and fairness settings protect it in any case.", int(kube.DefaultOptions().QPS)),
				Validators: []validator.Int64{int64validator.Between(1, 10000)},
			},
			"burst": schema.Int64Attribute{
				Optional: true,
				MarkdownDescription: fmt.Sprintf("Requests that may go at once above `qps`. Defaults to `%d`; "+
					"at least `qps`.", kube.DefaultOptions().Burst),
				Validators: []validator.Int64{int64validator.Between(1, 20000)},
			},
			"trusted_slice_managers": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				MarkdownDescription: "Default of the data sources' `trusted_slice_managers`: the managers of EndpointSlices " +
					"(their `endpointslice.kubernetes.io/managed-by` label) whose slices count for a Service with a selector, " +
					"beside the control plane's EndpointSlice controller. When unset, only that controller's slices count " +
					"for such Services.",
				Validators: trustedSliceManagersValidators(),
			},
			"proxy_url": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "URL of an HTTP(S) or SOCKS5 proxy to reach the API server through. Unset, " +
					"`KUBE_PROXY_URL`. Needs `host`.",
				Validators: needsHost,
			},
		},
		Blocks: map[string]schema.Block{
			"exec": schema.SingleNestedBlock{
				MarkdownDescription: "A credential plugin that prints an ExecCredential, run for a token when needed: " +
					"`aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`. Needs `host`; conflicts with `token` and `client_certificate`.",
				Validators: []validator.Object{
					objectvalidator.AlsoRequires(path.MatchRoot("host"), path.MatchRoot("exec").AtName("api_version"), path.MatchRoot("exec").AtName("command")),
				},
				Attributes: map[string]schema.Attribute{
					// Required within exec, yet Optional here: the framework
					// would make the whole exec block required (its issue
					// 740), so the block's AlsoRequires checks both.
					"api_version": schema.StringAttribute{
						Optional: true,
						MarkdownDescription: "Required within `exec`. ExecCredential version the plugin speaks: " + "`" +
							kube.ExecAPIVersions[0] + "` or `" + kube.ExecAPIVersions[1] + "`.",
						Validators: []validator.String{stringvalidator.OneOf(kube.ExecAPIVersions...)},
					},
					"command": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "Required within `exec`. Command to run, found on `PATH` if it has no slash.",
						Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
					},
					"args": schema.ListAttribute{
						Optional:            true,
						ElementType:         types.StringType,
						MarkdownDescription: "Arguments of the command.",
					},
					"env": schema.MapAttribute{
						Optional:            true,
						Sensitive:           true,
						ElementType:         types.StringType,
						MarkdownDescription: "Environment variables for the command, beside Terraform's own.",
					},
				},
			},
		},
	}
}
