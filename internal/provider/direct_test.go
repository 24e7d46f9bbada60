package provider

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// bothPaths is the provider the framework tests serve to the terraform CLI
// (testProviderFactories, outside acceptance runs) and that the protocol
// tests below call: every call is served by NewServer's server, and every
// validation and read again by the framework's server alone, configured
// the same way. A call for which the direct path did not serve when it
// should have (a data source it mirrors, a configured provider: that every
// data source of the provider is mirrored is
// TestTheDirectPathRefusesWhatItDoesNotMirror's to say), or whose
// diagnostics or state differ from the framework's,
// is a difference: a test error when the server has a test, else recorded
// for TestMain, which fails the run. So every test of the data sources
// through the CLI is also an equivalence test of the two paths.
type bothPaths struct {
	*directReads
	framework    tfprotov6.ProviderServer
	providerType tftypes.Type
	tb           testing.TB

	mu sync.Mutex
	// configured: the provider's configuration was known and gave a client,
	// so every read must be served directly.
	configured bool
	// lastRead and lastValidation name the path that served the last call.
	lastRead, lastValidation string
}

// pathsServed counts the calls each path served in bothPaths, over the run.
var pathsServed struct {
	directReads, frameworkReads, directValidations, frameworkValidations atomic.Int64
}

// pathDifferences are the differences of servers without a test.
var pathDifferences struct {
	sync.Mutex
	list []string
}

const (
	servedDirectly    = "direct"
	servedByFramework = "framework"
)

// newBothPaths is the factory of bothPaths servers; tb may be nil.
func newBothPaths(tb testing.TB) func() (tfprotov6.ProviderServer, error) {
	return func() (tfprotov6.ProviderServer, error) {
		server, err := NewServer("test")()
		if err != nil {
			return nil, err
		}
		direct, ok := server.(*directReads)
		if !ok {
			return nil, fmt.Errorf("NewServer gives a %T without the direct path (%s=%q)", server, envDirectReads, os.Getenv(envDirectReads))
		}
		framework, err := providerserver.NewProtocol6WithError(New("test")())()
		if err != nil {
			return nil, err
		}
		schemas, err := framework.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
		if err != nil {
			return nil, err
		}
		return &bothPaths{directReads: direct, framework: framework, providerType: schemas.Provider.ValueType(), tb: tb}, nil
	}
}

// providerForTests is the server of testProviderFactories: bothPaths, but in
// acceptance runs, which read a live cluster whose answer may change
// between two reads and count requests through fault proxies: those are
// served as a user's Terraform is, by NewServer.
func providerForTests() (tfprotov6.ProviderServer, error) {
	if os.Getenv("TF_ACC") != "" {
		return NewServer("test")()
	}
	return newBothPaths(nil)()
}

func (b *bothPaths) differ(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if b.tb != nil {
		b.tb.Helper()
		b.tb.Errorf("%s", msg)
		return
	}
	pathDifferences.Lock()
	defer pathDifferences.Unlock()
	pathDifferences.list = append(pathDifferences.list, msg)
}

func (b *bothPaths) GetProviderSchema(ctx context.Context, req *tfprotov6.GetProviderSchemaRequest) (*tfprotov6.GetProviderSchemaResponse, error) {
	if _, err := b.framework.GetProviderSchema(ctx, req); err != nil {
		return nil, err
	}
	return b.directReads.GetProviderSchema(ctx, req)
}

func (b *bothPaths) ConfigureProvider(ctx context.Context, req *tfprotov6.ConfigureProviderRequest) (*tfprotov6.ConfigureProviderResponse, error) {
	want, err := b.framework.ConfigureProvider(ctx, req)
	if err != nil {
		return nil, err
	}
	got, err := b.directReads.ConfigureProvider(ctx, req)
	if err != nil {
		return nil, err
	}
	if g, w := describeDiagnostics(got.Diagnostics), describeDiagnostics(want.Diagnostics); g != w {
		b.differ("ConfigureProvider: diagnostics\n got  %s\n want %s", g, w)
	}
	known := false
	if req.Config != nil {
		if config, err := req.Config.Unmarshal(b.providerType); err == nil {
			known = config.IsFullyKnown()
		}
	}
	b.mu.Lock()
	b.configured = known && !hasError(got.Diagnostics)
	b.mu.Unlock()
	return got, nil
}

// record notes which path served the last call of a kind (last).
func (b *bothPaths) record(last *string, direct bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	*last = servedByFramework
	if direct {
		*last = servedDirectly
	}
}

func (b *bothPaths) ValidateDataResourceConfig(ctx context.Context, req *tfprotov6.ValidateDataResourceConfigRequest) (*tfprotov6.ValidateDataResourceConfigResponse, error) {
	want, err := b.framework.ValidateDataResourceConfig(ctx, req)
	if err != nil {
		return nil, err
	}
	got, direct := b.validateDirectly(ctx, req)
	b.record(&b.lastValidation, direct)
	if !direct {
		pathsServed.frameworkValidations.Add(1)
		if _, mirrored := b.dataSources[req.TypeName]; mirrored {
			b.differ("ValidateDataResourceConfig of %s was left to the framework", req.TypeName)
		}
		return b.ProviderServer.ValidateDataResourceConfig(ctx, req)
	}
	pathsServed.directValidations.Add(1)
	// The framework visits attributes in map order: the same diagnostics in
	// some order.
	if g, w := sortedDiagnostics(got.Diagnostics), sortedDiagnostics(want.Diagnostics); !slices.Equal(g, w) {
		b.differ("ValidateDataResourceConfig of %s: diagnostics\n got  %q\n want %q", req.TypeName, g, w)
	}
	return got, nil
}

func (b *bothPaths) ReadDataSource(ctx context.Context, req *tfprotov6.ReadDataSourceRequest) (*tfprotov6.ReadDataSourceResponse, error) {
	want, err := b.framework.ReadDataSource(ctx, req)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	configured := b.configured
	b.mu.Unlock()
	got, direct := b.readDirectly(ctx, req)
	b.record(&b.lastRead, direct)
	switch {
	case direct:
		pathsServed.directReads.Add(1)
	default:
		pathsServed.frameworkReads.Add(1)
		if _, mirrored := b.dataSources[req.TypeName]; mirrored && configured {
			b.differ("ReadDataSource of %s was left to the framework, though the provider is configured", req.TypeName)
		}
		if got, err = b.ProviderServer.ReadDataSource(ctx, req); err != nil {
			return nil, err
		}
	}
	if direct && !configured {
		b.differ("ReadDataSource of %s was served directly before the provider was configured", req.TypeName)
	}
	if g, w := describeDiagnostics(got.Diagnostics), describeDiagnostics(want.Diagnostics); g != w {
		b.differ("ReadDataSource of %s: diagnostics\n got  %s\n want %s", req.TypeName, g, w)
	}
	if hasError(want.Diagnostics) {
		// Terraform drops the state of a read that failed; the framework
		// sends the configuration back as it came, the direct path sends none.
		return got, nil
	}
	if (got.State == nil) != (want.State == nil) {
		b.differ("ReadDataSource of %s: state %v, the framework's %v", req.TypeName, got.State != nil, want.State != nil)
		return got, nil
	}
	if got.State == nil {
		return got, nil
	}
	typ := b.dataSources[req.TypeName]
	if typ == nil {
		return got, nil
	}
	_, stateType := typ.schema()
	gotState, gerr := got.State.Unmarshal(stateType)
	wantState, werr := want.State.Unmarshal(stateType)
	if gerr != nil || werr != nil || !gotState.Equal(wantState) {
		b.differ("ReadDataSource of %s: the direct read's state differs from the framework's (%v, %v):\n got  %s\n want %s",
			req.TypeName, gerr, werr, abbreviated(gotState), abbreviated(wantState))
	}
	return got, nil
}

// abbreviated is v as text, cut where a state of thousands of endpoints
// would drown the message.
func abbreviated(v tftypes.Value) string {
	s := v.String()
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// reportPathDifferences prints what bothPaths recorded without a test, and
// how many calls each path served; false when there was a difference.
func reportPathDifferences() bool {
	pathDifferences.Lock()
	defer pathDifferences.Unlock()
	if len(pathDifferences.list) == 0 {
		return true
	}
	fmt.Fprintf(os.Stderr, "FAIL: %d calls of the CLI tests differ between the direct path and the framework:\n%s\n",
		len(pathDifferences.list), strings.Join(pathDifferences.list, "\n"))
	return false
}

// The direct path must give, for every read, the state and the diagnostics
// the framework gives, and serve every read of a configured provider.
func TestDirectReadsGiveWhatTheFrameworkGives(t *testing.T) {
	api := fleetFixture(t)
	svc, slices := manyEndpoints("big", 2000)
	api.addService(svc)
	api.addSlices(slices...)
	kubeconfig := writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL})
	p := newProtocolProviderOf(t, newBothPaths(t), kubeconfig)
	both, ok := p.server.(*bothPaths)
	if !ok {
		t.Fatalf("a %T, not both paths", p.server)
	}
	tests := []struct {
		name, typeName string
		args           map[string]tftypes.Value
	}{
		{"a Service with 2,000 endpoints", "k8s_ready_endpoints", map[string]tftypes.Value{"service": tfString("big")}},
		{"draining endpoints and a default port", "k8s_ready_endpoints", map[string]tftypes.Value{
			"service": tfString("big"), "terminating_endpoints": tfString("include"), "default_port": tfNumber(9000)}},
		{"a port the Service does not have", "k8s_ready_endpoints", map[string]tftypes.Value{"service": tfString("big"), "port_name": tfString("grpc")}},
		{"a Service that does not exist", "k8s_ready_endpoints", map[string]tftypes.Value{"namespace": tfString("shop"), "service": tfString("nope")}},
		{"too few endpoints", "k8s_ready_endpoints", map[string]tftypes.Value{"namespace": tfString("shop"), "service": tfString("api"), "min_ready": tfNumber(3)}},
		{"a fleet of two namespaces", "k8s_services", map[string]tftypes.Value{"namespaces": stringSet("shop", "blog"), "port_name": tfString("http")}},
		{"a fleet of every namespace with a selector", "k8s_services", map[string]tftypes.Value{"all_namespaces": tftypes.NewValue(tftypes.Bool, true), "label_selector": tfString("tier=front")}},
		{"a fleet short of its guards", "k8s_services", map[string]tftypes.Value{"namespace": tfString("shop"), "min_services": tfNumber(9), "min_ready": tfNumber(2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			both.tb = t
			p.read(t, tt.typeName, tt.args)
			if both.lastRead != servedDirectly {
				t.Errorf("served by the %s path", both.lastRead)
			}
		})
	}
}

// Every data source test through the CLI is served by both paths.
func TestTheCLITestsRunBothPaths(t *testing.T) {
	if os.Getenv("TF_ACC") != "" {
		t.Skip("acceptance runs serve the provider as users get it")
	}
	api := standInWithOneEndpoint(t, "10.5.0.1")
	reads, frameworkReads := pathsServed.directReads.Load(), pathsServed.frameworkReads.Load()
	validations := pathsServed.directValidations.Load()
	resource.UnitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviderFactories,
		Steps:                    []resource.TestStep{{Config: api.config(t, readWeb)}},
	})
	if got := pathsServed.directReads.Load() - reads; got == 0 {
		t.Error("no read was served directly")
	}
	if got := pathsServed.frameworkReads.Load() - frameworkReads; got != 0 {
		t.Errorf("%d reads were left to the framework", got)
	}
	if got := pathsServed.directValidations.Load() - validations; got == 0 {
		t.Error("no validation was served directly")
	}
}

// K8S_TF_DIRECT_READS=0 serves the framework alone, and it still reads.
func TestTheDirectPathCanBeTurnedOff(t *testing.T) {
	for value, direct := range map[string]bool{"0": false, "1": true, "": true} {
		t.Run(envDirectReads+"="+value, func(t *testing.T) {
			t.Setenv(envDirectReads, value)
			server, err := NewServer("test")()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := server.(*directReads); ok != direct {
				t.Fatalf("NewServer gives a %T; direct path: %v, want %v", server, ok, direct)
			}
			api := standInWithOneEndpoint(t, "10.5.0.2")
			p := newProtocolProviderOf(t, func() (tfprotov6.ProviderServer, error) { return server, nil },
				writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
			state, diags := p.read(t, "k8s_ready_endpoints", map[string]tftypes.Value{"service": tfString("web")})
			failOnDiagnostics(t, "read", diags)
			if !strings.Contains(state.String(), "10.5.0.2") {
				t.Errorf("state %s lacks the endpoint", state)
			}
		})
	}
}

// The direct path serves a data source only when its schema and provider
// use nothing but what it mirrors.
func TestTheDirectPathRefusesWhatItDoesNotMirror(t *testing.T) {
	ctx := context.Background()
	p := &k8sProvider{}
	base := func() (datasource.DataSource, schema.Schema) {
		ds := newReadyEndpointsDataSource()
		var resp datasource.SchemaResponse
		ds.Schema(ctx, datasource.SchemaRequest{}, &resp)
		return ds, resp.Schema
	}
	for _, factory := range p.DataSources(ctx) {
		ds := factory()
		var resp datasource.SchemaResponse
		ds.Schema(ctx, datasource.SchemaRequest{}, &resp)
		if err := directlyServable(p, ds, resp.Schema); err != nil {
			t.Errorf("%T is left to the framework: %v", ds, err)
		}
	}
	tests := []struct {
		name   string
		change func(*schema.Schema)
		p      provider.Provider
		want   string
	}{
		{"a custom type", func(s *schema.Schema) {
			s.Attributes["extra"] = schema.StringAttribute{Optional: true, CustomType: customString{}}
		}, p, "attribute extra: custom type"},
		{"a custom type inside a nested attribute", func(s *schema.Schema) {
			s.Attributes["extra"] = schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{
				Attributes: map[string]schema.Attribute{"x": schema.StringAttribute{Computed: true, CustomType: customString{}}}}}
		}, p, "attribute extra: custom type"},
		{"an object attribute", func(s *schema.Schema) {
			s.Attributes["extra"] = schema.SingleNestedAttribute{Optional: true, Attributes: map[string]schema.Attribute{"x": schema.StringAttribute{Optional: true}}}
		}, p, "attribute extra: a schema.SingleNestedAttribute"},
		{"a list block", func(s *schema.Schema) {
			s.Blocks["rule"] = schema.ListNestedBlock{NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{"x": schema.StringAttribute{Optional: true}}}}
		}, p, "block rule: only a timeouts block"},
		{"a single block that is not timeouts", func(s *schema.Schema) {
			s.Blocks["options"] = schema.SingleNestedBlock{Attributes: map[string]schema.Attribute{"x": schema.StringAttribute{Optional: true}}}
		}, p, "block options: only a timeouts block"},
		{"a provider meta schema", func(*schema.Schema) {}, metaProvider{p}, "meta schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, sch := base()
			tt.change(&sch)
			err := directlyServable(tt.p, ds, sch)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("directlyServable: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// customString is a custom string type, as a provider would declare one
// with semantic equality.
type customString struct{ basetypes.StringType }

func (customString) Equal(o attr.Type) bool { _, ok := o.(customString); return ok }

// metaProvider is the provider with a meta schema.
type metaProvider struct{ *k8sProvider }

func (metaProvider) MetaSchema(context.Context, provider.MetaSchemaRequest, *provider.MetaSchemaResponse) {
}

func describeDiagnostics(diags []*tfprotov6.Diagnostic) string {
	out := ""
	for _, d := range diags {
		out += fmt.Sprintf("[%v %q %q %v] ", d.Severity, d.Summary, d.Detail, d.Attribute)
	}
	return out
}

func hasError(diags []*tfprotov6.Diagnostic) bool {
	for _, d := range diags {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			return true
		}
	}
	return false
}
