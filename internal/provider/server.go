package provider

import (
	"context"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// NewServer returns the factory of the provider's protocol 6 server, which
// main serves and the tests call: the framework's server, with the reads of
// the data sources served beside it (directReads). Each server has a provider
// of its own, so the client its configuration made is never another's.
func NewServer(version string) func() (tfprotov6.ProviderServer, error) {
	return func() (tfprotov6.ProviderServer, error) {
		p := &k8sProvider{version: version, loader: kube.DefaultConfigLoader()}
		framework, err := providerserver.NewProtocol6WithError(p)()
		if err != nil {
			return nil, err
		}
		return newDirectReads(framework, p), nil
	}
}

// directReads serves ReadDataSource for the provider's data sources without
// the framework's passes over the state after Read: a tftypes.Transform that
// turns null list and set blocks into empty ones (these schemas have no such
// block), semantic equality (no attribute type here defines it), and a deep
// copy and compare of the whole state. Each pass visits every value a read
// returns, so together they cost more than the read itself for a Service
// with thousands of endpoints or a fleet of Services (bench/README.md).
// Everything else, and a read the provider is not configured for (unknown
// configuration, deferral, a configure error), goes to the framework, and
// the data source's Configure and Read are the framework's own, so a read
// gives the same state and diagnostics either way (TestDirectReadsGiveWhatTheFrameworkGives).
type directReads struct {
	tfprotov6.ProviderServer
	provider    *k8sProvider
	dataSources map[string]*directDataSource
}

// stateReader is a data source that reads its state encoded, as the
// protocol carries it.
type stateReader interface {
	readState(ctx context.Context, config tfsdk.Config) ([]byte, diag.Diagnostics)
}

type directDataSource struct {
	factory func() datasource.DataSource
	schema  func() (schema.Schema, tftypes.Type)
}

func newDirectReads(framework tfprotov6.ProviderServer, p *k8sProvider) *directReads {
	s := &directReads{ProviderServer: framework, provider: p, dataSources: map[string]*directDataSource{}}
	for _, factory := range p.DataSources(context.Background()) {
		ds := factory()
		if _, ok := ds.(stateReader); !ok {
			continue // the framework reads it
		}
		var meta datasource.MetadataResponse
		ds.Metadata(context.Background(), datasource.MetadataRequest{ProviderTypeName: "k8s"}, &meta)
		s.dataSources[meta.TypeName] = &directDataSource{
			factory: factory,
			schema: sync.OnceValues(func() (schema.Schema, tftypes.Type) {
				var resp datasource.SchemaResponse
				factory().Schema(context.Background(), datasource.SchemaRequest{}, &resp)
				return resp.Schema, resp.Schema.Type().TerraformType(context.Background())
			}),
		}
	}
	return s
}

func (s *directReads) ReadDataSource(ctx context.Context, req *tfprotov6.ReadDataSourceRequest) (*tfprotov6.ReadDataSourceResponse, error) {
	ds, ours := s.dataSources[req.TypeName]
	client := s.provider.client.Load()
	if !ours || client == nil || req.Config == nil {
		return s.ProviderServer.ReadDataSource(ctx, req)
	}
	sch, typ := ds.schema()
	config, err := req.Config.Unmarshal(typ)
	if err != nil {
		return s.ProviderServer.ReadDataSource(ctx, req) // the framework says what is wrong with it
	}
	dataSource := ds.factory()
	var diags diag.Diagnostics
	if configurable, ok := dataSource.(datasource.DataSourceWithConfigure); ok {
		var configured datasource.ConfigureResponse
		configurable.Configure(ctx, datasource.ConfigureRequest{ProviderData: client}, &configured)
		diags.Append(configured.Diagnostics...)
	}
	resp := &tfprotov6.ReadDataSourceResponse{}
	if !diags.HasError() {
		//nolint:forcetypeassert // newDirectReads takes only stateReaders
		state, d := dataSource.(stateReader).readState(ctx, tfsdk.Config{Raw: config, Schema: sch})
		diags.Append(d...)
		if state != nil && !diags.HasError() {
			resp.State = &tfprotov6.DynamicValue{MsgPack: state}
		}
	}
	resp.Diagnostics = protocolDiagnostics(diags)
	return resp, nil
}

// protocolDiagnostics is diags as the protocol carries them.
func protocolDiagnostics(diags diag.Diagnostics) []*tfprotov6.Diagnostic {
	out := make([]*tfprotov6.Diagnostic, 0, len(diags))
	for _, d := range diags {
		pd := &tfprotov6.Diagnostic{Severity: tfprotov6.DiagnosticSeverityWarning, Summary: d.Summary(), Detail: d.Detail()}
		if d.Severity() == diag.SeverityError {
			pd.Severity = tfprotov6.DiagnosticSeverityError
		}
		if withPath, ok := d.(diag.DiagnosticWithPath); ok {
			pd.Attribute = attributePath(withPath.Path())
		}
		out = append(out, pd)
	}
	return out
}

// attributePath is p as the protocol carries it.
func attributePath(p path.Path) *tftypes.AttributePath {
	out := tftypes.NewAttributePath()
	for _, step := range p.Steps() {
		switch s := step.(type) {
		case path.PathStepAttributeName:
			out = out.WithAttributeName(string(s))
		case path.PathStepElementKeyInt:
			out = out.WithElementKeyInt(int(s))
		case path.PathStepElementKeyString:
			out = out.WithElementKeyString(string(s))
		case path.PathStepElementKeyValue:
			// A set's element, as the framework names it (validators of sets).
			v, err := s.ToTerraformValue(context.Background())
			if err != nil {
				return out
			}
			out = out.WithElementKeyValue(v)
		default:
			return out
		}
	}
	return out
}
