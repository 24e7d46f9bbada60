package provider

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// getConfig fills target, a pointer to a data source's model (the struct of
// its arguments, each field named by its tfsdk tag), from config, as the
// framework's Config.GetAttribute does for each field, at a fraction of the
// cost of the framework's reflection: Config.Get walks the model on every
// call and compiles a regular expression for every field name it checks
// (isValidFieldName in the framework's internal/reflect, once per field per
// call). Here the fields of each model type are found once, and each value
// comes from its attribute's type, as the framework takes it
// (ValueFromTerraform). A model holds the arguments only: the computed
// attributes are the read's to write (attribute.go), so an attribute the
// model has no field for must be computed, and a field must name an
// attribute. Anything else it does not expect (a value its field cannot
// hold) goes to the framework's GetAttribute, field by field, so that the
// framework says what is wrong; TestGetConfigFillsModelsAsTheFrameworkDoes
// compares the two.
func getConfig(ctx context.Context, config tfsdk.Config, target any) diag.Diagnostics {
	model := reflect.ValueOf(target)
	if model.Kind() != reflect.Pointer || model.Elem().Kind() != reflect.Struct || config.Schema == nil {
		return diag.Diagnostics{modelBugDiagnostic(fmt.Errorf("%T is not a pointer to a model, or there is no schema", target))}
	}
	fields, err := modelFieldsOf(model.Elem().Type(), config)
	if err != nil {
		return diag.Diagnostics{modelBugDiagnostic(err)}
	}
	if fillModel(ctx, config, target) {
		return nil
	}
	var diags diag.Diagnostics
	for _, f := range fields {
		diags.Append(config.GetAttribute(ctx, path.Root(f.name), model.Elem().FieldByIndex(f.index).Addr().Interface())...)
	}
	return diags
}

// fillModel is getConfig's own path; false leaves the rest to the framework.
func fillModel(ctx context.Context, config tfsdk.Config, target any) bool {
	model := reflect.ValueOf(target)
	if model.Kind() != reflect.Pointer || model.Elem().Kind() != reflect.Struct || config.Schema == nil {
		return false
	}
	var attrs map[string]tftypes.Value
	if config.Raw.As(&attrs) != nil {
		return false
	}
	fields, err := modelFieldsOf(model.Elem().Type(), config)
	if err != nil {
		return false
	}
	for _, f := range fields {
		raw, ok := attrs[f.name]
		if !ok {
			return false
		}
		value, err := f.typ.ValueFromTerraform(ctx, raw)
		if err != nil {
			return false
		}
		field := model.Elem().FieldByIndex(f.index)
		v := reflect.ValueOf(value)
		if !v.IsValid() || !v.Type().AssignableTo(field.Type()) {
			return false
		}
		field.Set(v)
	}
	return true
}

// modelField is a field of a model: the attribute it holds (its tfsdk tag),
// where it is, through embedded structs, and the attribute's type.
type modelField struct {
	name  string
	index []int
	typ   attr.Type
}

var modelFields sync.Map // reflect.Type -> []modelField

// modelFieldsOf lists the fields of a model type with a tfsdk tag, those of
// its embedded untagged structs included, as the framework reads them, each
// with its attribute's type in config's schema. It is found once per model
// type (Schema.Type builds every attribute's type, the computed endpoints'
// included, on every call). Each model type has one schema: a field without
// an attribute, or an argument or block without a field, is an error.
func modelFieldsOf(t reflect.Type, config tfsdk.Config) ([]modelField, error) {
	if cached, ok := modelFields.Load(t); ok {
		if fields, ok := cached.([]modelField); ok {
			return fields, nil
		}
	}
	schemaType, ok := config.Schema.Type().(attr.TypeWithAttributeTypes)
	if !ok {
		return nil, fmt.Errorf("the schema of %s is not an object", t)
	}
	types := schemaType.AttributeTypes()
	var fields []modelField
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			at := append(slices.Clone(index), i)
			tag := f.Tag.Get("tfsdk")
			if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, at)
				continue
			}
			if tag == "" || tag == "-" || !f.IsExported() {
				continue
			}
			fields = append(fields, modelField{name: tag, index: at, typ: types[tag]})
		}
	}
	walk(t, nil)
	held := map[string]bool{}
	for _, f := range fields {
		if f.typ == nil {
			return nil, fmt.Errorf("field %s of %s names no attribute of the schema", f.name, t)
		}
		held[f.name] = true
	}
	for name, a := range config.Schema.GetAttributes() {
		if !held[name] && (a.IsRequired() || a.IsOptional()) {
			return nil, fmt.Errorf("%s has no field for the argument %s", t, name)
		}
	}
	for name := range config.Schema.GetBlocks() {
		if !held[name] {
			return nil, fmt.Errorf("%s has no field for the block %s", t, name)
		}
	}
	modelFields.Store(t, fields)
	return fields, nil
}

// modelBugDiagnostic is a model that does not match its schema.
func modelBugDiagnostic(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Unable to Read the Configuration",
		"Reading the arguments of the data source failed. This is a bug in the provider; please report it.\n\n"+err.Error())
}
