package provider

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// getConfig must fill a model exactly as the framework's Config.GetAttribute does for each field,
// for every kind of value a configuration can hold: null, known, unknown,
// sets, numbers, booleans and the timeouts block.
func TestGetConfigFillsModelsAsTheFrameworkDoes(t *testing.T) {
	ctx := context.Background()
	unknownString := tftypes.NewValue(tftypes.String, tftypes.UnknownValue)
	tests := []struct {
		name   string
		source datasource.DataSource
		model  func() any
		args   map[string]tftypes.Value
	}{
		{"a pool with nothing set but its Service", newReadyEndpointsDataSource(), func() any { return &readyEndpointsModel{} },
			map[string]tftypes.Value{"service": tfString("api")}},
		{"a pool with every argument set", newReadyEndpointsDataSource(), func() any { return &readyEndpointsModel{} },
			map[string]tftypes.Value{
				"service": tfString("api"), "namespace": tfString("shop"), "port_name": tfString("http"), "default_port": tfNumber(8080),
				"terminating_endpoints": tfString("include"), "address_type": tfString("IPv6"), "zones": stringSet("a", "b"),
				"target": tfString("nodes"), "node_address_type": tfString("ExternalIP"), "node_selector": tfString("pool=edge"),
				"expiry_annotation": tfString("example.com/expires"), "min_ready": tfNumber(2), "timeouts": readTimeouts(tfString("30s")),
			}},
		{"a pool with unknown arguments", newReadyEndpointsDataSource(), func() any { return &readyEndpointsModel{} },
			map[string]tftypes.Value{"service": unknownString, "zones": tftypes.NewValue(tftypes.Set{ElementType: tftypes.String}, tftypes.UnknownValue)}},
		{"a fleet with nothing set", newServicesDataSource(), func() any { return &servicesModel{} }, nil},
		{"a fleet with every argument set", newServicesDataSource(), func() any { return &servicesModel{} },
			map[string]tftypes.Value{
				"namespaces": stringSet("shop", "blog"), "all_namespaces": tftypes.NewValue(tftypes.Bool, false),
				"label_selector": tfString("tier=front"), "names": stringSet("api"), "port_name": tfString("http"),
				"min_ready": tfNumber(1), "min_services": tfNumber(3), "timeouts": readTimeouts(tfString("1m")),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var resp datasource.SchemaResponse
			tt.source.Schema(ctx, datasource.SchemaRequest{}, &resp)
			config := tfsdk.Config{Raw: configValue(resp.Schema.Type().TerraformType(ctx), tt.args), Schema: resp.Schema}
			got, want := tt.model(), tt.model()
			if !fillModel(ctx, config, got) {
				t.Fatalf("getConfig left this configuration to the framework")
			}
			if diags := frameworkGetAttributes(ctx, config, want); diags.HasError() {
				t.Fatalf("the framework's GetAttribute: %v", diags)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("getConfig gives\n%#v\nthe framework gives\n%#v", got, want)
			}
		})
	}
}

// A model that does not match the schema is the framework's to report.
func TestGetConfigLeavesAMismatchedModelToTheFramework(t *testing.T) {
	ctx := context.Background()
	var resp datasource.SchemaResponse
	newReadyEndpointsDataSource().Schema(ctx, datasource.SchemaRequest{}, &resp)
	config := tfsdk.Config{Raw: configValue(resp.Schema.Type().TerraformType(ctx), nil), Schema: resp.Schema}
	var wrong servicesModel
	if fillModel(ctx, config, &wrong) {
		t.Fatal("getConfig filled a fleet's model from a pool's configuration")
	}
	if diags := getConfig(ctx, config, &wrong); !diags.HasError() {
		t.Error("no error for a model that does not match the schema")
	}
}

// frameworkGetAttributes fills each tagged field of model, a pointer to a
// struct, with the framework's own Config.GetAttribute.
func frameworkGetAttributes(ctx context.Context, config tfsdk.Config, model any) diag.Diagnostics {
	var diags diag.Diagnostics
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			tag := f.Tag.Get("tfsdk")
			if f.Anonymous && tag == "" {
				walk(v.Field(i))
				continue
			}
			if tag != "" {
				diags.Append(config.GetAttribute(ctx, path.Root(tag), v.Field(i).Addr().Interface())...)
			}
		}
	}
	walk(reflect.ValueOf(model).Elem())
	return diags
}

// A model must hold every argument, and name only attributes of its schema.
func TestGetConfigRefusesAModelWithoutAnArgument(t *testing.T) {
	ctx := context.Background()
	var resp datasource.SchemaResponse
	newReadyEndpointsDataSource().Schema(ctx, datasource.SchemaRequest{}, &resp)
	config := tfsdk.Config{Raw: configValue(resp.Schema.Type().TerraformType(ctx), map[string]tftypes.Value{"service": tfString("api")}), Schema: resp.Schema}
	var partial struct {
		Service types.String `tfsdk:"service"`
	}
	diags := getConfig(ctx, config, &partial)
	if !diags.HasError() || !strings.Contains(diagnosticsText(diags), "has no field for the argument") {
		t.Errorf("a model without most arguments: %v", diags)
	}
}
