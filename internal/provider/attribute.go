package provider

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// Each attribute of a data source, and of every object in its state, is
// described once, by an attribute: its name, its framework declaration
// (type, description, required, optional or computed, validators) and how a
// read writes its value. The framework schema (object.schema), the state
// a read writes (writeState, through the MessagePack writer of msgpack.go)
// and the reference the tests compare it with (tftypesWriter, in
// state_reference_test.go) all come from the same list, so adding an
// attribute is adding its entry.

// attribute describes one attribute of an object whose Go value is T.
type attribute[T any] struct {
	name   string
	schema schema.Attribute
	// write writes the attribute's value from v. Every computed attribute
	// has one; an argument that is not computed has none, and state holds
	// it as configured.
	write func(w stateWriter, v *T)
}

// object is the attributes of an object of state, in order of name, as
// state writes them.
type object[T any] struct {
	attributes []attribute[T]
	byName     map[string]int
}

// newObject describes an object by its attributes. A computed attribute
// without a writer, an argument with one, or a name given twice is a bug of
// the description: it panics, so that any test fails before a read could
// leave such an attribute null in state.
func newObject[T any](attributes []attribute[T]) object[T] {
	o := object[T]{attributes: slices.Clone(attributes), byName: map[string]int{}}
	slices.SortFunc(o.attributes, func(a, b attribute[T]) int { return strings.Compare(a.name, b.name) })
	for i, a := range o.attributes {
		if _, twice := o.byName[a.name]; twice {
			panic(fmt.Sprintf("attribute %q is described twice", a.name))
		}
		o.byName[a.name] = i
		switch computed := a.schema.IsComputed(); {
		case computed && a.write == nil:
			panic(fmt.Sprintf("computed attribute %q has no writer: a read would leave it null", a.name))
		case !computed && a.write != nil:
			panic(fmt.Sprintf("attribute %q is an argument and has a writer: state must hold it as configured", a.name))
		}
	}
	return o
}

// with is o and more attributes, such as the pool arguments every data
// source that gives pools has.
func (o object[T]) with(more []attribute[T]) object[T] {
	return newObject(append(slices.Clone(o.attributes), more...))
}

// schema is the object's attributes as the framework declares them.
func (o object[T]) schema() map[string]schema.Attribute {
	out := make(map[string]schema.Attribute, len(o.attributes))
	for _, a := range o.attributes {
		out[a.name] = a.schema
	}
	return out
}

// write writes v as an object of computed attributes (a nested object).
func (o object[T]) write(w stateWriter, v *T) {
	w.object(len(o.attributes))
	for i := range o.attributes {
		w.key(o.attributes[i].name)
		o.attributes[i].write(w, v)
	}
	w.end()
}

// writeList writes items as a list of objects o describes.
func writeList[E any](w stateWriter, o object[E], items []E) {
	w.list(len(items))
	for i := range items {
		o.write(w, &items[i])
	}
	w.end()
}

// writeState writes the state of a data source that o describes: its
// configuration as given (blocks included), with each computed attribute
// written from v.
func writeState[T any](w stateWriter, o object[T], config tftypes.Value, v *T) error {
	typ, ok := config.Type().(tftypes.Object)
	if !ok {
		return fmt.Errorf("the configuration is a %s, not an object", config.Type())
	}
	var given map[string]tftypes.Value
	if err := config.As(&given); err != nil {
		return fmt.Errorf("reading the configuration: %w", err)
	}
	for _, a := range o.attributes {
		if _, ok := typ.AttributeTypes[a.name]; !ok {
			return fmt.Errorf("the configuration has no attribute %q", a.name)
		}
	}
	names := make([]string, 0, len(typ.AttributeTypes))
	for name := range typ.AttributeTypes {
		names = append(names, name)
	}
	slices.Sort(names)
	w.object(len(names))
	for _, name := range names {
		w.key(name)
		if i, ok := o.byName[name]; ok && o.attributes[i].write != nil {
			o.attributes[i].write(w, v)
			continue
		}
		if err := w.configured(given[name], typ.AttributeTypes[name]); err != nil {
			return fmt.Errorf("attribute %q: %w", name, err)
		}
	}
	w.end()
	return nil
}

// encodeState is writeState as the protocol carries state, MessagePack.
func encodeState[T any](o object[T], config tftypes.Value, v *T) ([]byte, error) {
	w := &msgpackWriter{b: make([]byte, 0, 1024)}
	if err := writeState(w, o, config, v); err != nil {
		return nil, err
	}
	return w.b, nil
}

// stateWriter is what a description writes values to: the MessagePack
// writer of the reads (msgpack.go), or the tests' tftypes reference.
type stateWriter interface {
	null()
	bool(b bool)
	str(s string)
	// strOrNull is s, or null when s is empty: the API gave no value.
	strOrNull(s string)
	int(n int64)
	// intOrNull is *n, or null.
	intOrNull(n *int)
	// list, mapOf and object start a collection of n values, each after
	// its key for a map or an object (in order of name for an object),
	// that end closes.
	list(n int)
	mapOf(n int)
	object(n int)
	key(name string)
	end()
	// configured is a value of the configuration, of type t, as given.
	configured(v tftypes.Value, t tftypes.Type) error
}

// writeStrings writes a list of strings.
func writeStrings(w stateWriter, values []string) {
	w.list(len(values))
	for _, v := range values {
		w.str(v)
	}
	w.end()
}

// writeStringMap writes m as a map of strings, keys in order, without the
// key skip.
func writeStringMap(w stateWriter, m map[string]string, skip string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != skip {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	w.mapOf(len(keys))
	for _, k := range keys {
		w.key(k)
		w.str(m[k])
	}
	w.end()
}
