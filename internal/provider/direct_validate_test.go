package provider

import (
	"context"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The provider's own validation must give, for every configuration, the
// diagnostics the framework's gives (in some order: the framework visits
// attributes in map order), before and after the provider is configured.
func TestDirectValidationGivesWhatTheFrameworkGives(t *testing.T) {
	ctx := context.Background()
	boolean := func(b bool) tftypes.Value { return tftypes.NewValue(tftypes.Bool, b) }
	unknown := func(t tftypes.Type) tftypes.Value { return tftypes.NewValue(t, tftypes.UnknownValue) }
	pool := "k8s_ready_endpoints"
	fleet := "k8s_services"
	tests := []struct {
		name, typeName string
		args           map[string]tftypes.Value
	}{
		{"a Service", pool, map[string]tftypes.Value{"service": tfString("api")}},
		{"no Service", pool, nil},
		{"every argument valid", pool, map[string]tftypes.Value{
			"service": tfString("api"), "namespace": tfString("shop"), "port_name": tfString("http"), "default_port": tfNumber(8080),
			"terminating_endpoints": tfString("include"), "address_type": tfString("IPv6"), "zones": stringSet("a", "b"),
			"target": tfString("nodes"), "node_address_type": tfString("ExternalIP"), "node_selector": tfString("pool=edge"),
			"expiry_annotation": tfString("example.com/expires"), "min_ready": tfNumber(2), "timeouts": readTimeouts(tfString("30s")),
			"trusted_slice_managers": tfStringList("mesh.example.com"),
		}},
		{"every argument wrong", pool, map[string]tftypes.Value{
			"service": tfString("Not_A_Name"), "namespace": tfString("-shop"), "port_name": tfString("HTTP!"), "default_port": tfNumber(70000),
			"terminating_endpoints": tfString("sometimes"), "address_type": tfString("IPv5"), "zones": stringSet(""),
			"target": tfString("vms"), "node_address_type": tfString("Internal"), "node_selector": tfString("a b c"),
			"expiry_annotation": tfString("not a key!"), "min_ready": tfNumber(-1), "timeouts": readTimeouts(tfString("soon")),
			"trusted_slice_managers": tfStringList("", "a b", "x", "x"),
		}},
		{"node arguments without target nodes", pool, map[string]tftypes.Value{
			"service": tfString("api"), "node_address_type": tfString("ExternalIP"), "node_selector": tfString("pool=edge")}},
		{"an empty Service name and a zero port", pool, map[string]tftypes.Value{"service": tfString(""), "default_port": tfNumber(0)}},
		{"a read-only attribute set", pool, map[string]tftypes.Value{"service": tfString("api"), "id": tfString("shop/api")}},
		{"unknown arguments", pool, map[string]tftypes.Value{
			"service": unknown(tftypes.String), "zones": unknown(tftypes.Set{ElementType: tftypes.String}),
			"target": unknown(tftypes.String), "node_selector": tfString("pool=edge"), "timeouts": readTimeouts(unknown(tftypes.String)),
		}},
		{"a fleet of the default namespace", fleet, nil},
		{"a fleet with every argument valid", fleet, map[string]tftypes.Value{
			"namespaces": stringSet("shop", "blog"), "label_selector": tfString("tier=front"), "names": stringSet("api"),
			"port_name": tfString("http"), "min_ready": tfNumber(1), "min_services": tfNumber(3), "timeouts": readTimeouts(tfString("1m")),
		}},
		{"a fleet with every argument wrong", fleet, map[string]tftypes.Value{
			"namespace": tfString("shop"), "namespaces": stringSet("Shop"), "all_namespaces": boolean(true),
			"label_selector": tfString("a b c"), "names": stringSet("", "x"), "min_ready": tfNumber(-2), "min_services": tfNumber(-1),
			"terminating_endpoints": tfString("never"), "timeouts": readTimeouts(tfString("1 minute")),
		}},
		{"a fleet with read-only attributes set", fleet, map[string]tftypes.Value{
			"services": unknown(attributeType(servicesAttributes, "services")), "skipped": unknown(attributeType(servicesAttributes, "skipped"))}},
	}
	// Computed nested attributes set in the configuration (Terraform itself
	// refuses that) are the framework's to walk.
	leftToFramework := map[string]bool{"a fleet with read-only attributes set": true}
	api := fleetFixture(t)
	kubeconfig := writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL})
	for _, configured := range []bool{false, true} {
		direct, framework := unconfiguredServer(t, NewServer("test")), unconfiguredServer(t, providerserver.NewProtocol6WithError(New("test")()))
		if configured {
			direct = newProtocolProviderOf(t, NewServer("test"), kubeconfig)
			framework = newProtocolProviderOf(t, providerserver.NewProtocol6WithError(New("test")()), kubeconfig)
		}
		for _, tt := range tests {
			name := tt.name
			if configured {
				name += ", provider configured"
			}
			t.Run(name, func(t *testing.T) {
				typ := direct.schemas[tt.typeName]
				config := configValue(typ, tt.args)
				req := &tfprotov6.ValidateDataResourceConfigRequest{TypeName: tt.typeName, Config: dynamicValue(t, config)}
				server, isDirect := direct.server.(*directReads)
				if !isDirect {
					t.Fatalf("NewServer gives a %T", direct.server)
				}
				if _, ok := server.validateDirectly(ctx, req); ok == leftToFramework[tt.name] {
					t.Fatalf("validated directly: %v, want %v", ok, !leftToFramework[tt.name])
				}
				got, err := direct.server.ValidateDataResourceConfig(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				want, err := framework.server.ValidateDataResourceConfig(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if g, w := sortedDiagnostics(got.Diagnostics), sortedDiagnostics(want.Diagnostics); !slices.Equal(g, w) {
					t.Errorf("diagnostics\n got  %q\n want %q", g, w)
				}
			})
		}
	}
}

// unconfiguredServer is a server as Terraform has it before it configures
// the provider: schemas read, nothing else.
func unconfiguredServer(tb testing.TB, newServer func() (tfprotov6.ProviderServer, error)) *protocolProvider {
	tb.Helper()
	server, err := newServer()
	if err != nil {
		tb.Fatal(err)
	}
	schema, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		tb.Fatal(err)
	}
	p := &protocolProvider{server: server, schemas: map[string]tftypes.Type{}}
	for name, s := range schema.DataSourceSchemas {
		p.schemas[name] = s.ValueType()
	}
	return p
}

func sortedDiagnostics(diags []*tfprotov6.Diagnostic) []string {
	out := make([]string, 0, len(diags))
	for _, d := range diags {
		out = append(out, describeDiagnostics([]*tfprotov6.Diagnostic{d}))
	}
	slices.Sort(out)
	return out
}

// configStrings reads string attributes as the framework's GetAttribute does.
func TestConfigStringsReadWhatGetAttributeReads(t *testing.T) {
	ctx := context.Background()
	var sch datasource.SchemaResponse
	newReadyEndpointsDataSource().Schema(ctx, datasource.SchemaRequest{}, &sch)
	typ := sch.Schema.Type().TerraformType(ctx)
	for _, target := range []tftypes.Value{
		tftypes.NewValue(tftypes.String, nil),
		tftypes.NewValue(tftypes.String, tftypes.UnknownValue),
		tftypes.NewValue(tftypes.String, "nodes"),
		tftypes.NewValue(tftypes.String, ""),
	} {
		config := tfsdk.Config{Raw: configValue(typ, map[string]tftypes.Value{"target": target}), Schema: sch.Schema}
		var diags diag.Diagnostics
		names := []string{"target", "node_selector"}
		got := configStrings(ctx, config, names, &diags)
		for i, name := range names {
			var want types.String
			wantDiags := config.GetAttribute(ctx, path.Root(name), &want)
			if !got[i].Equal(want) || diags.HasError() || wantDiags.HasError() {
				t.Errorf("target %s: configStrings gives %s %s (%v), GetAttribute %s (%v)", target, name, got[i], diags, want, wantDiags)
			}
		}
	}
}
