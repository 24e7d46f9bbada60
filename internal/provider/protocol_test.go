package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// protocolProvider is the provider served in process and called the way
// Terraform calls it over gRPC, minus the wire: GetProviderSchema, then
// ConfigureProvider, then reads. It measures and pins what the provider
// itself does per read, without the CLI around it.
type protocolProvider struct {
	server  tfprotov6.ProviderServer
	schemas map[string]tftypes.Type
}

// newProtocolProvider configures a provider whose only argument is the
// kubeconfig at path.
func newProtocolProvider(tb testing.TB, kubeconfig string) *protocolProvider {
	tb.Helper()
	return newProtocolProviderOf(tb, NewServer("test"), kubeconfig)
}

// newProtocolProviderOf is newProtocolProvider for the server newServer makes.
func newProtocolProviderOf(tb testing.TB, newServer func() (tfprotov6.ProviderServer, error), kubeconfig string) *protocolProvider {
	tb.Helper()
	return newProtocolProviderWith(tb, newServer, map[string]tftypes.Value{"kubeconfig": tftypes.NewValue(tftypes.String, kubeconfig)})
}

// newProtocolProviderWith is newProtocolProvider configured with args.
func newProtocolProviderWith(tb testing.TB, newServer func() (tfprotov6.ProviderServer, error), args map[string]tftypes.Value) *protocolProvider {
	tb.Helper()
	ctx := context.Background()
	server, err := newServer()
	if err != nil {
		tb.Fatal(err)
	}
	schema, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		tb.Fatal(err)
	}
	failOnDiagnostics(tb, "GetProviderSchema", schema.Diagnostics)
	p := &protocolProvider{server: server, schemas: map[string]tftypes.Type{}}
	for name, s := range schema.DataSourceSchemas {
		p.schemas[name] = s.ValueType()
	}
	config := configValue(schema.Provider.ValueType(), args)
	resp, err := server.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{
		TerraformVersion: "1.11.0",
		Config:           dynamicValue(tb, config),
	})
	if err != nil {
		tb.Fatal(err)
	}
	failOnDiagnostics(tb, "ConfigureProvider", resp.Diagnostics)
	return p
}

// read reads a data source whose configuration sets the given arguments and
// leaves every other one null, and returns its state.
func (p *protocolProvider) read(tb testing.TB, typeName string, args map[string]tftypes.Value) (tftypes.Value, []*tfprotov6.Diagnostic) {
	tb.Helper()
	typ, ok := p.schemas[typeName]
	if !ok {
		tb.Fatalf("no data source %s", typeName)
	}
	resp, err := p.server.ReadDataSource(context.Background(), &tfprotov6.ReadDataSourceRequest{
		TypeName: typeName,
		Config:   dynamicValue(tb, configValue(typ, args)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	if resp.State == nil {
		return tftypes.Value{}, resp.Diagnostics
	}
	state, err := resp.State.Unmarshal(typ)
	if err != nil {
		tb.Fatal(err)
	}
	return state, resp.Diagnostics
}

// configValue is an object of type typ with the given attributes and every
// other one null (nested blocks empty), as Terraform sends a configuration.
func configValue(typ tftypes.Type, set map[string]tftypes.Value) tftypes.Value {
	obj, ok := typ.(tftypes.Object)
	if !ok {
		panic(fmt.Sprintf("configuration type %s is not an object", typ))
	}
	vals := map[string]tftypes.Value{}
	for name, t := range obj.AttributeTypes {
		if v, ok := set[name]; ok {
			vals[name] = v
			continue
		}
		vals[name] = tftypes.NewValue(t, nil)
	}
	return tftypes.NewValue(typ, vals)
}

func dynamicValue(tb testing.TB, v tftypes.Value) *tfprotov6.DynamicValue {
	tb.Helper()
	dv, err := tfprotov6.NewDynamicValue(v.Type(), v)
	if err != nil {
		tb.Fatal(err)
	}
	return &dv
}

func failOnDiagnostics(tb testing.TB, call string, diags []*tfprotov6.Diagnostic) {
	tb.Helper()
	for _, d := range diags {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			tb.Fatalf("%s: %s: %s", call, d.Summary, d.Detail)
		}
	}
}

// stateJSON renders a state value as indented JSON with sorted keys: nulls
// as null, numbers exact, so that two states compare as text.
func stateJSON(tb testing.TB, v tftypes.Value) []byte {
	tb.Helper()
	plain, err := plainValue(v)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := json.MarshalIndent(plain, "", " ")
	if err != nil {
		tb.Fatal(err)
	}
	return append(out, '\n')
}

func plainValue(v tftypes.Value) (any, error) {
	if v.IsNull() {
		return nil, nil
	}
	if !v.IsKnown() {
		return "<unknown>", nil
	}
	typ := v.Type()
	switch {
	case typ.Is(tftypes.String):
		var s string
		err := v.As(&s)
		return s, err
	case typ.Is(tftypes.Bool):
		var b bool
		err := v.As(&b)
		return b, err
	case typ.Is(tftypes.Number):
		var f big.Float
		err := v.As(&f)
		return json.Number(f.Text('f', -1)), err
	case typ.Is(tftypes.List{}), typ.Is(tftypes.Set{}), typ.Is(tftypes.Tuple{}):
		var elems []tftypes.Value
		if err := v.As(&elems); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(elems))
		for _, e := range elems {
			p, err := plainValue(e)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		return out, nil
	case typ.Is(tftypes.Map{}), typ.Is(tftypes.Object{}):
		var attrs map[string]tftypes.Value
		if err := v.As(&attrs); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(attrs))
		for k, e := range attrs {
			p, err := plainValue(e)
			if err != nil {
				return nil, err
			}
			out[k] = p
		}
		return out, nil
	}
	return nil, fmt.Errorf("no plain form for a value of type %s", typ)
}
