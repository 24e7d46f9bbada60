package provider

import (
	"context"
	"reflect"
	"slices"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// getConfig fills target, a pointer to a data source's model, from config,
// as config.Get(ctx, target) does, at a fraction of its cost: Get walks the
// model by reflection on every call and compiles a regular expression for
// every field name it checks (a tenth of the provider's CPU in a plan of 100
// reads). Here the fields of each model type are found once, and each value
// comes from its attribute's type, as Get takes it (ValueFromTerraform).
// Anything it does not expect (a field without an attribute, a value its
// field cannot hold) goes to config.Get, so that the framework says what is
// wrong; TestGetConfigFillsModelsAsTheFrameworkDoes compares the two.
func getConfig(ctx context.Context, config tfsdk.Config, target any) diag.Diagnostics {
	if fillModel(ctx, config, target) {
		return nil
	}
	return config.Get(ctx, target)
}

// fillModel is getConfig's own path; false leaves the rest to config.Get.
func fillModel(ctx context.Context, config tfsdk.Config, target any) bool {
	model := reflect.ValueOf(target)
	if model.Kind() != reflect.Pointer || model.Elem().Kind() != reflect.Struct {
		return false
	}
	var attrs map[string]tftypes.Value
	if config.Schema == nil || config.Raw.As(&attrs) != nil {
		return false
	}
	fields := modelFieldsOf(model.Elem().Type(), config)
	if fields == nil || len(fields) != len(attrs) {
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
// included, on every call), and only from a schema that has an attribute
// for every field and no other; nil otherwise. Each model type has one
// schema; a value that does not fit its type fails ValueFromTerraform, and
// getConfig leaves it to config.Get.
func modelFieldsOf(t reflect.Type, config tfsdk.Config) []modelField {
	if cached, ok := modelFields.Load(t); ok {
		if fields, ok := cached.([]modelField); ok {
			return fields
		}
	}
	schemaType, ok := config.Schema.Type().(attr.TypeWithAttributeTypes)
	if !ok {
		return nil
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
	if len(fields) != len(types) {
		return nil
	}
	for _, f := range fields {
		if f.typ == nil {
			return nil
		}
	}
	modelFields.Store(t, fields)
	return fields
}
