package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The values a read builds by hand must have the types the schema declares,
// or Terraform rejects the state.
func TestStateValuesHaveTheSchemaTypes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		dataSource datasource.DataSource
		attribute  string
		built      tftypes.Type
	}{
		{"endpoints of k8s_ready_endpoints", newReadyEndpointsDataSource(), "endpoints", endpointListType},
		{"services of k8s_services", newServicesDataSource(), "services", servicesMapType},
		{"skipped of k8s_services", newServicesDataSource(), "skipped", skippedListType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var resp datasource.SchemaResponse
			tt.dataSource.Schema(ctx, datasource.SchemaRequest{}, &resp)
			attr, ok := resp.Schema.Attributes[tt.attribute]
			if !ok {
				t.Fatalf("the schema has no attribute %q", tt.attribute)
			}
			if want := attr.GetType().TerraformType(ctx); !want.Equal(tt.built) {
				t.Errorf("built type\n %s\nschema type\n %s", tt.built, want)
			}
		})
	}
}

func TestStateFromConfigLeavesTheConfigurationAlone(t *testing.T) {
	typ := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"given": tftypes.String, "computed": tftypes.String}}
	config := tftypes.NewValue(typ, map[string]tftypes.Value{
		"given":    tftypes.NewValue(tftypes.String, "web"),
		"computed": tftypes.NewValue(tftypes.String, nil),
	})
	before := config.Copy()
	state, err := stateFromConfig(config, map[string]tftypes.Value{"computed": tftypes.NewValue(tftypes.String, "shop/web")})
	if err != nil {
		t.Fatal(err)
	}
	if !config.Equal(before) {
		t.Errorf("the configuration changed to %s", config)
	}
	want := tftypes.NewValue(typ, map[string]tftypes.Value{
		"given":    tftypes.NewValue(tftypes.String, "web"),
		"computed": tftypes.NewValue(tftypes.String, "shop/web"),
	})
	if !state.Equal(want) {
		t.Errorf("state = %s, want %s", state, want)
	}
	if _, err := stateFromConfig(config, map[string]tftypes.Value{"typo": tftypes.NewValue(tftypes.String, "x")}); err == nil {
		t.Error("an attribute the schema lacks was accepted")
	}
}
