package provider

// The direct path: the one part of the provider served beside
// terraform-plugin-framework, and why.
//
// Terraform calls ReadDataSource once per data source in a plan and
// ValidateDataResourceConfig twice (when it validates the configuration,
// then again when it plans). For the data sources of this provider the
// framework's server adds to each call work that their schemas do not need:
//
//   - after Read, three passes over the whole state: a tftypes.Transform
//     that turns null list and set blocks into empty ones
//     (ReifyNullCollectionBlocks; these schemas have no such block),
//     semantic equality (which converts every attribute into framework
//     values; no attribute type here defines it), and a deep copy and
//     compare of the state. Each visits every value a read returns, so for
//     a Service with thousands of endpoints or a fleet of Services they
//     cost more than the read itself. Upstream, the framework's per-value
//     cost on large values: hashicorp/terraform-plugin-framework#775.
//   - around validation, a logger, a schema path lookup and a conversion of
//     the whole configuration into the framework's own data per attribute.
//
// The figures that justify each part are in bench/README.md ("What changed
// since before"). The same data source code runs on both paths: the data
// source's own Configure, its readState (the framework's Read calls it too,
// readForFramework) and its validators; only the framework's server around
// them is skipped.
//
// The fence. newDirectReads serves a data source directly only when the
// provider has no meta schema (provider_meta is not passed on here) and the
// data source's schema uses nothing but what this file mirrors
// (directlyServable): attributes of the framework's base types (a custom
// type could bring semantic equality or validation of its own), none
// write-only, no block but the timeouts block. Data sources have no
// identity in the framework version this provider is built with; a new kind
// of schema element must be added to directlyServable before it is used.
// Everything else, and every call it does not expect (no client configured
// yet, a configuration that does not decode), goes to the framework.
// K8S_TF_DIRECT_READS=0 turns the direct path off: NewServer then serves the
// framework's server alone. The equivalence tests run every data source test
// through both paths and assert which one served each call (bothPaths, in
// direct_test.go).

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/datasource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// envDirectReads is the switch of the direct path: "0" turns it off.
const envDirectReads = "K8S_TF_DIRECT_READS"

// NewServer returns the factory of the provider's protocol 6 server, which
// Serve serves and the tests call: the framework's server, with the direct
// path beside it unless K8S_TF_DIRECT_READS=0. Each server has a provider
// of its own, so the client its configuration made is never another's.
func NewServer(version string) func() (tfprotov6.ProviderServer, error) {
	return func() (tfprotov6.ProviderServer, error) {
		p := &k8sProvider{version: version, loader: kube.DefaultConfigLoader()}
		framework, err := providerserver.NewProtocol6WithError(p)()
		if err != nil {
			return nil, err
		}
		if os.Getenv(envDirectReads) == "0" {
			return framework, nil
		}
		return newDirectReads(framework, p), nil
	}
}

// directReads is the framework's server with the reads and validations of
// the data sources that directlyServable accepts served directly.
type directReads struct {
	tfprotov6.ProviderServer
	provider    *k8sProvider
	dataSources map[string]*directDataSource
	// refused says, by type name, why a data source is left to the framework.
	refused map[string]string
}

// stateReader is a data source that reads its state encoded, as the
// protocol carries it (readState, in data_source_read.go).
type stateReader interface {
	readState(ctx context.Context, config tfsdk.Config) ([]byte, diag.Diagnostics)
}

type directDataSource struct {
	factory func() datasource.DataSource
	schema  func() (schema.Schema, tftypes.Type)
}

func newDirectReads(framework tfprotov6.ProviderServer, p *k8sProvider) *directReads {
	s := &directReads{ProviderServer: framework, provider: p, dataSources: map[string]*directDataSource{}, refused: map[string]string{}}
	ctx := context.Background()
	for _, factory := range p.DataSources(ctx) {
		ds := factory()
		var meta datasource.MetadataResponse
		ds.Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: "k8s"}, &meta)
		var resp datasource.SchemaResponse
		ds.Schema(ctx, datasource.SchemaRequest{}, &resp)
		if err := directlyServable(p, ds, resp.Schema); err != nil {
			s.refused[meta.TypeName] = err.Error()
			continue
		}
		s.dataSources[meta.TypeName] = &directDataSource{
			factory: factory,
			schema: sync.OnceValues(func() (schema.Schema, tftypes.Type) {
				return resp.Schema, resp.Schema.Type().TerraformType(ctx)
			}),
		}
	}
	return s
}

// directlyServable says why a data source must be left to the framework, if
// it must: anything in its schema or its provider that the direct path does
// not mirror.
func directlyServable(p provider.Provider, ds datasource.DataSource, sch schema.Schema) error {
	if _, ok := p.(provider.ProviderWithMetaSchema); ok {
		return fmt.Errorf("the provider has a meta schema")
	}
	if _, ok := ds.(stateReader); !ok {
		return fmt.Errorf("it does not read its state encoded")
	}
	for _, name := range sortedKeys(sch.Attributes) {
		if err := mirroredAttribute(sch.Attributes[name]); err != nil {
			return fmt.Errorf("attribute %s: %w", name, err)
		}
	}
	for _, name := range sortedKeys(sch.Blocks) {
		block, ok := sch.Blocks[name].(schema.SingleNestedBlock)
		if !ok || name != "timeouts" || len(block.Blocks) != 0 || len(block.Validators) != 0 {
			return fmt.Errorf("block %s: only a timeouts block is mirrored", name)
		}
		if _, ok := block.CustomType.(timeouts.Type); !ok {
			return fmt.Errorf("block %s: not the timeouts package's block", name)
		}
		for _, child := range sortedKeys(block.Attributes) {
			if err := mirroredAttribute(block.Attributes[child]); err != nil {
				return fmt.Errorf("block %s, attribute %s: %w", name, child, err)
			}
		}
	}
	return nil
}

// mirroredAttribute refuses what the direct path does not mirror.
func mirroredAttribute(a schema.Attribute) error {
	if a.IsWriteOnly() {
		return fmt.Errorf("write-only")
	}
	switch a.(type) {
	case schema.StringAttribute, schema.Int64Attribute, schema.BoolAttribute, schema.SetAttribute,
		schema.ListAttribute, schema.MapAttribute, schema.ListNestedAttribute, schema.MapNestedAttribute:
	default:
		return fmt.Errorf("a %T", a)
	}
	if !baseType(a.GetType()) {
		return fmt.Errorf("custom type %T", a.GetType())
	}
	return nil
}

// baseType is whether t is made of the framework's own types only.
func baseType(t attr.Type) bool {
	switch t := t.(type) {
	case basetypes.StringType, basetypes.Int64Type, basetypes.BoolType:
		return true
	case basetypes.ListType:
		return baseType(t.ElemType)
	case basetypes.SetType:
		return baseType(t.ElemType)
	case basetypes.MapType:
		return baseType(t.ElemType)
	case basetypes.ObjectType:
		for _, at := range t.AttrTypes {
			if !baseType(at) {
				return false
			}
		}
		return true
	}
	return false
}

func (s *directReads) ReadDataSource(ctx context.Context, req *tfprotov6.ReadDataSourceRequest) (*tfprotov6.ReadDataSourceResponse, error) {
	return directOr(ctx, req, s.readDirectly, s.ProviderServer.ReadDataSource)
}

// readDirectly serves a read as the framework's ReadDataSource would, less
// its passes after Read; false leaves it to the framework: a data source it
// does not serve, a provider not configured for reads (unknown
// configuration, deferral, a configure error), a configuration that does
// not decode (the framework says what is wrong with it).
func (s *directReads) readDirectly(ctx context.Context, req *tfprotov6.ReadDataSourceRequest) (*tfprotov6.ReadDataSourceResponse, bool) {
	data := s.provider.data.Load()
	if data == nil {
		return nil, false
	}
	ds, sch, config, ok := s.decode(req.TypeName, req.Config)
	if !ok {
		return nil, false
	}
	dataSource := ds.factory()
	diags := configure(ctx, dataSource, data)
	resp := &tfprotov6.ReadDataSourceResponse{}
	if !diags.HasError() {
		//nolint:forcetypeassert // directlyServable takes only stateReaders
		state, d := dataSource.(stateReader).readState(ctx, tfsdk.Config{Raw: config, Schema: sch})
		diags.Append(d...)
		if state != nil && !diags.HasError() {
			resp.State = &tfprotov6.DynamicValue{MsgPack: state}
		}
	}
	resp.Diagnostics = protocolDiagnostics(diags)
	return resp, true
}

// decode is the data source typeName when the direct path serves it, with
// its schema and its configuration decoded; false when it does not, or the
// configuration does not decode.
func (s *directReads) decode(typeName string, raw *tfprotov6.DynamicValue) (ds *directDataSource, sch schema.Schema, config tftypes.Value, ok bool) {
	ds, ours := s.dataSources[typeName]
	if !ours || raw == nil {
		return nil, sch, config, false
	}
	sch, typ := ds.schema()
	config, err := raw.Unmarshal(typ)
	return ds, sch, config, err == nil
}

// configure is the framework's ConfigureDataSource: the data source given
// what the provider's Configure gave (providerData), and what it said.
func configure(ctx context.Context, ds datasource.DataSource, providerData any) diag.Diagnostics {
	configurable, ok := ds.(datasource.DataSourceWithConfigure)
	if !ok {
		return nil
	}
	var resp datasource.ConfigureResponse
	configurable.Configure(ctx, datasource.ConfigureRequest{ProviderData: providerData}, &resp)
	var diags diag.Diagnostics
	diags.Append(resp.Diagnostics...)
	return diags
}

func (s *directReads) ValidateDataResourceConfig(ctx context.Context, req *tfprotov6.ValidateDataResourceConfigRequest) (*tfprotov6.ValidateDataResourceConfigResponse, error) {
	return directOr(ctx, req, s.validateDirectly, s.ProviderServer.ValidateDataResourceConfig)
}

// directOr serves a call on the direct path when direct takes it, else on
// the framework's server.
func directOr[Req, Resp any](ctx context.Context, req Req, direct func(context.Context, Req) (Resp, bool), framework func(context.Context, Req) (Resp, error)) (Resp, error) {
	if resp, ok := direct(ctx, req); ok {
		return resp, nil
	}
	return framework(ctx, req)
}

// validateDirectly validates the configuration of a data source as the
// framework does, step for step (the data source's Configure, its
// ConfigValidators, then every attribute: read-only and required checks,
// its validators, deprecation), without what the framework adds to every
// step. False leaves it to the framework: a data source it does not serve,
// a configuration that does not decode, a value it does not expect (a
// computed nested attribute set in the configuration, which Terraform
// itself refuses).
func (s *directReads) validateDirectly(ctx context.Context, req *tfprotov6.ValidateDataResourceConfigRequest) (*tfprotov6.ValidateDataResourceConfigResponse, bool) {
	ds, sch, config, ok := s.decode(req.TypeName, req.Config)
	if !ok {
		return nil, false
	}
	// The framework gives data sources what the provider's Configure gave
	// them, nothing before it ran.
	var providerData any
	if data := s.provider.data.Load(); data != nil {
		providerData = data
	}
	diags, ok := validateDataSourceConfig(ctx, ds.factory(), providerData, tfsdk.Config{Raw: config, Schema: sch}, sch)
	if !ok {
		return nil, false
	}
	return &tfprotov6.ValidateDataResourceConfigResponse{Diagnostics: protocolDiagnostics(diags)}, true
}

// validateDataSourceConfig is the framework's ValidateDataSourceConfig for
// the schemas directlyServable accepts; false when the value is one it
// leaves to the framework.
func validateDataSourceConfig(ctx context.Context, ds datasource.DataSource, providerData any, config tfsdk.Config, sch schema.Schema) (diag.Diagnostics, bool) {
	var attrs map[string]tftypes.Value
	if err := config.Raw.As(&attrs); err != nil {
		return nil, false
	}
	diags := configure(ctx, ds, providerData)
	if diags.HasError() {
		return diags, true
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
// attribute mirroredAttribute accepts.
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
		ok = runValidators(ctx, value, a.StringValidators(), basetypes.StringValuable.ToStringValue, validator.String.ValidateString,
			func(v basetypes.StringValue) validator.StringRequest {
				return validator.StringRequest{Config: config, ConfigValue: v, Path: p, PathExpression: p.Expression()}
			}, func(r *validator.StringResponse) diag.Diagnostics { return r.Diagnostics }, diags)
	case schema.Int64Attribute:
		ok = runValidators(ctx, value, a.Int64Validators(), basetypes.Int64Valuable.ToInt64Value, validator.Int64.ValidateInt64,
			func(v basetypes.Int64Value) validator.Int64Request {
				return validator.Int64Request{Config: config, ConfigValue: v, Path: p, PathExpression: p.Expression()}
			}, func(r *validator.Int64Response) diag.Diagnostics { return r.Diagnostics }, diags)
	case schema.BoolAttribute:
		ok = runValidators(ctx, value, a.BoolValidators(), basetypes.BoolValuable.ToBoolValue, validator.Bool.ValidateBool,
			func(v basetypes.BoolValue) validator.BoolRequest {
				return validator.BoolRequest{Config: config, ConfigValue: v, Path: p, PathExpression: p.Expression()}
			}, func(r *validator.BoolResponse) diag.Diagnostics { return r.Diagnostics }, diags)
	case schema.SetAttribute:
		ok = runValidators(ctx, value, a.SetValidators(), basetypes.SetValuable.ToSetValue, validator.Set.ValidateSet,
			func(v basetypes.SetValue) validator.SetRequest {
				return validator.SetRequest{Config: config, ConfigValue: v, Path: p, PathExpression: p.Expression()}
			}, func(r *validator.SetResponse) diag.Diagnostics { return r.Diagnostics }, diags)
	case schema.ListAttribute:
		if !a.IsOptional() && !a.IsRequired() {
			ok = null && !hasValidators(a)
			break
		}
		ok = runValidators(ctx, value, a.ListValidators(), basetypes.ListValuable.ToListValue, validator.List.ValidateList,
			func(v basetypes.ListValue) validator.ListRequest {
				return validator.ListRequest{Config: config, ConfigValue: v, Path: p, PathExpression: p.Expression()}
			}, func(r *validator.ListResponse) diag.Diagnostics { return r.Diagnostics }, diags)
	case schema.MapAttribute, schema.ListNestedAttribute, schema.MapNestedAttribute:
		// The computed attributes of state: nothing to walk while null.
		ok = null && !a.IsOptional() && !a.IsRequired() && !hasValidators(a)
	}
	if !ok {
		return false
	}
	if a.GetDeprecationMessage() != "" && !null && !unknown {
		diags.AddAttributeWarning(p, "Attribute Deprecated", a.GetDeprecationMessage())
	}
	return true
}

// hasValidators is whether a computed collection attribute has validators,
// which validateAttribute leaves to the framework.
func hasValidators(a schema.Attribute) bool {
	switch a := a.(type) {
	case schema.ListAttribute:
		return len(a.Validators) != 0
	case schema.MapAttribute:
		return len(a.Validators) != 0
	case schema.ListNestedAttribute:
		return len(a.Validators) != 0
	case schema.MapNestedAttribute:
		return len(a.Validators) != 0
	}
	return true
}

// runValidators runs an attribute's validators as the framework does: on
// the value converted to its base type, each with a response of its own.
// The framework has a validator interface, a request and a response type
// per base type, with nothing in common that Go's generics can build or
// read: request builds the request of the value, and diagnostics reads a
// response's.
func runValidators[V any, B attr.Value, R any, Resp any, Valuable any](ctx context.Context, value attr.Value, validators []V,
	toBase func(Valuable, context.Context) (B, diag.Diagnostics), validate func(V, context.Context, R, *Resp),
	request func(B) R, diagnostics func(*Resp) diag.Diagnostics, diags *diag.Diagnostics,
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
		var resp Resp
		validate(v, ctx, req, &resp)
		diags.Append(diagnostics(&resp)...)
	}
	return true
}

// validateBlock is the framework's BlockValidate for the timeouts block:
// its attributes, with null values when the block is absent.
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
