package provider

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// ValidateDataResourceConfig validates the configuration of the provider's
// data sources as the framework does, step for step (the data source's
// Configure, its ConfigValidators, then every attribute: read-only and
// required checks, its validators, deprecation), without what the framework
// adds to every step: a logger and a schema path lookup per attribute, and
// the conversion of the whole configuration into the framework's own data
// for each one. Terraform validates every data source twice in a plan (when
// it validates the configuration and again when it plans), which made
// validation a third of the provider's CPU in a plan of 100 reads. Anything
// this does not expect (a kind of attribute or block these schemas do not
// have, an unknown block) goes to the framework;
// TestDirectValidationGivesWhatTheFrameworkGives compares the two.
func (s *directReads) ValidateDataResourceConfig(ctx context.Context, req *tfprotov6.ValidateDataResourceConfigRequest) (*tfprotov6.ValidateDataResourceConfigResponse, error) {
	ds, ours := s.dataSources[req.TypeName]
	if !ours || req.Config == nil {
		return s.ProviderServer.ValidateDataResourceConfig(ctx, req)
	}
	sch, typ := ds.schema()
	config, err := req.Config.Unmarshal(typ)
	if err != nil {
		return s.ProviderServer.ValidateDataResourceConfig(ctx, req)
	}
	// The framework gives data sources what the provider's Configure gave
	// them, nothing before it ran.
	var providerData any
	if client := s.provider.client.Load(); client != nil {
		providerData = client
	}
	diags, ok := validateDataSourceConfig(ctx, ds.factory(), providerData, tfsdk.Config{Raw: config, Schema: sch}, sch)
	if !ok {
		return s.ProviderServer.ValidateDataResourceConfig(ctx, req)
	}
	return &tfprotov6.ValidateDataResourceConfigResponse{Diagnostics: protocolDiagnostics(diags)}, nil
}

// validateDataSourceConfig is the framework's ValidateDataSourceConfig for
// these schemas; false when the schema or the value is one it leaves to the
// framework.
func validateDataSourceConfig(ctx context.Context, ds datasource.DataSource, providerData any, config tfsdk.Config, sch schema.Schema) (diag.Diagnostics, bool) {
	var attrs map[string]tftypes.Value
	if err := config.Raw.As(&attrs); err != nil {
		return nil, false
	}
	var diags diag.Diagnostics
	if configurable, ok := ds.(datasource.DataSourceWithConfigure); ok {
		var resp datasource.ConfigureResponse
		configurable.Configure(ctx, datasource.ConfigureRequest{ProviderData: providerData}, &resp)
		diags.Append(resp.Diagnostics...)
		if diags.HasError() {
			return diags, true
		}
	}
	req := datasource.ValidateConfigRequest{Config: config}
	if withValidators, ok := ds.(datasource.DataSourceWithConfigValidators); ok {
		for _, v := range withValidators.ConfigValidators(ctx) {
			var resp datasource.ValidateConfigResponse
			v.ValidateDataSource(ctx, req, &resp)
			diags.Append(resp.Diagnostics...)
		}
	}
	if withValidate, ok := ds.(datasource.DataSourceWithValidateConfig); ok {
		var resp datasource.ValidateConfigResponse
		withValidate.ValidateConfig(ctx, req, &resp)
		diags.Append(resp.Diagnostics...)
	}
	for _, name := range sortedKeys(sch.Attributes) {
		raw, ok := attrs[name]
		if !ok || !validateAttribute(ctx, sch.Attributes[name], path.Root(name), raw, config, &diags) {
			return nil, false
		}
	}
	for _, name := range sortedKeys(sch.Blocks) {
		raw, ok := attrs[name]
		if !ok || !validateBlock(ctx, sch.Blocks[name], path.Root(name), raw, config, &diags) {
			return nil, false
		}
	}
	if sch.DeprecationMessage != "" {
		diags.AddWarning("Deprecated", sch.DeprecationMessage)
	}
	return diags, true
}

// validateAttribute is the framework's AttributeValidate for the kinds of
// attribute these schemas have.
func validateAttribute(ctx context.Context, a schema.Attribute, p path.Path, raw tftypes.Value, config tfsdk.Config, diags *diag.Diagnostics) bool {
	if a.IsWriteOnly() || (!a.IsRequired() && !a.IsOptional() && !a.IsComputed()) {
		return false
	}
	value, err := a.GetType().ValueFromTerraform(ctx, raw)
	if err != nil {
		return false
	}
	null, unknown := value.IsNull(), value.IsUnknown()
	if a.IsComputed() && !a.IsOptional() && !null {
		diags.AddAttributeError(p, "Invalid Configuration for Read-Only Attribute",
			"Cannot set value for this attribute as the provider has marked it as read-only. Remove the configuration line setting the value.\n\n"+
				"Refer to the provider documentation or contact the provider developers for additional information about configurable and read-only attributes that are supported.")
	}
	if a.IsRequired() && null {
		diags.AddAttributeError(p, "Missing Configuration for Required Attribute",
			fmt.Sprintf("Must set a configuration value for the %s attribute as the provider has marked it as required.\n\n", p.String())+
				"Refer to the provider documentation or contact the provider developers for additional information about configurable attributes that are required.")
	}
	var ok bool
	switch a := a.(type) {
	case schema.StringAttribute:
		ok = runValidators(ctx, value, a.StringValidators(), basetypes.StringValuable.ToStringValue,
			func(v basetypes.StringValue) validator.StringRequest {
				return validator.StringRequest{Config: config, ConfigValue: v, Path: p, PathExpression: p.Expression()}
			},
			func(v validator.String, req validator.StringRequest) diag.Diagnostics {
				var resp validator.StringResponse
				v.ValidateString(ctx, req, &resp)
				return resp.Diagnostics
			}, diags)
	case schema.Int64Attribute:
		ok = runValidators(ctx, value, a.Int64Validators(), basetypes.Int64Valuable.ToInt64Value,
			func(v basetypes.Int64Value) validator.Int64Request {
				return validator.Int64Request{Config: config, ConfigValue: v, Path: p, PathExpression: p.Expression()}
			},
			func(v validator.Int64, req validator.Int64Request) diag.Diagnostics {
				var resp validator.Int64Response
				v.ValidateInt64(ctx, req, &resp)
				return resp.Diagnostics
			}, diags)
	case schema.BoolAttribute:
		ok = runValidators(ctx, value, a.BoolValidators(), basetypes.BoolValuable.ToBoolValue,
			func(v basetypes.BoolValue) validator.BoolRequest {
				return validator.BoolRequest{Config: config, ConfigValue: v, Path: p, PathExpression: p.Expression()}
			},
			func(v validator.Bool, req validator.BoolRequest) diag.Diagnostics {
				var resp validator.BoolResponse
				v.ValidateBool(ctx, req, &resp)
				return resp.Diagnostics
			}, diags)
	case schema.SetAttribute:
		ok = runValidators(ctx, value, a.SetValidators(), basetypes.SetValuable.ToSetValue,
			func(v basetypes.SetValue) validator.SetRequest {
				return validator.SetRequest{Config: config, ConfigValue: v, Path: p, PathExpression: p.Expression()}
			},
			func(v validator.Set, req validator.SetRequest) diag.Diagnostics {
				var resp validator.SetResponse
				v.ValidateSet(ctx, req, &resp)
				return resp.Diagnostics
			}, diags)
	case schema.ListNestedAttribute:
		// The computed lists of state: nothing to walk while null.
		ok = null && len(a.Validators) == 0
	case schema.MapNestedAttribute:
		ok = null && len(a.Validators) == 0
	}
	if !ok {
		return false
	}
	if a.GetDeprecationMessage() != "" && !null && !unknown {
		diags.AddAttributeWarning(p, "Attribute Deprecated", a.GetDeprecationMessage())
	}
	return true
}

// runValidators runs an attribute's validators as the framework does: on
// the value converted to its base type, each with a response of its own.
func runValidators[V any, B attr.Value, R any, Valuable any](ctx context.Context, value attr.Value, validators []V,
	toBase func(Valuable, context.Context) (B, diag.Diagnostics), request func(B) R, run func(V, R) diag.Diagnostics, diags *diag.Diagnostics,
) bool {
	if len(validators) == 0 {
		return true
	}
	valuable, ok := value.(Valuable)
	if !ok {
		return false
	}
	base, d := toBase(valuable, ctx)
	diags.Append(d...)
	if d.HasError() {
		return true
	}
	req := request(base)
	for _, v := range validators {
		diags.Append(run(v, req)...)
	}
	return true
}

// validateBlock is the framework's BlockValidate for a single nested block
// without validators of its own (timeouts): its attributes, with null
// values when the block is absent.
func validateBlock(ctx context.Context, b schema.Block, p path.Path, raw tftypes.Value, config tfsdk.Config, diags *diag.Diagnostics) bool {
	block, ok := b.(schema.SingleNestedBlock)
	if !ok || len(block.Validators) != 0 || len(block.Blocks) != 0 || !raw.IsKnown() {
		return false
	}
	objectType, ok := raw.Type().(tftypes.Object)
	if !ok {
		return false
	}
	var attrs map[string]tftypes.Value
	if !raw.IsNull() {
		if err := raw.As(&attrs); err != nil {
			return false
		}
	}
	for _, name := range sortedKeys(block.Attributes) {
		child, ok := attrs[name]
		if raw.IsNull() {
			child, ok = tftypes.NewValue(objectType.AttributeTypes[name], nil), objectType.AttributeTypes[name] != nil
		}
		if !ok || !validateAttribute(ctx, block.Attributes[name], p.AtName(name), child, config, diags) {
			return false
		}
	}
	if block.DeprecationMessage != "" && !raw.IsNull() {
		diags.AddAttributeWarning(p, "Block Deprecated", block.DeprecationMessage)
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
