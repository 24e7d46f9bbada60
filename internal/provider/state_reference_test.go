package provider

import (
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// tftypesWriter is the reference the MessagePack writer is checked against
// (TestStateIsWhatTftypesWrites): the same descriptions (attribute.go)
// written as tftypes values of the schema's types, which tftypes then
// encodes itself. It follows the type it is given, and fails on what
// Terraform would refuse: a value of another type than the schema's, an
// object with an attribute missing, an attribute twice or out of order, a
// collection of another length than announced.
type tftypesWriter struct {
	root   tftypes.Type
	stack  []*tftypesFrame
	result *tftypes.Value
	err    error
}

// tftypesFrame is a list, map or object being written.
type tftypesFrame struct {
	typ      tftypes.Type
	n        int
	elems    []tftypes.Value
	attrs    map[string]tftypes.Value
	key      string
	keyGiven bool
}

var _ stateWriter = (*tftypesWriter)(nil)

func newTftypesWriter(t tftypes.Type) *tftypesWriter { return &tftypesWriter{root: t} }

// value is what was written, or why it is not a value of the type.
func (w *tftypesWriter) value() (tftypes.Value, error) {
	switch {
	case w.err != nil:
		return tftypes.Value{}, w.err
	case len(w.stack) != 0:
		return tftypes.Value{}, fmt.Errorf("%d collections not ended", len(w.stack))
	case w.result == nil:
		return tftypes.Value{}, fmt.Errorf("nothing written")
	}
	return *w.result, nil
}

func (w *tftypesWriter) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf(format, args...)
	}
}

// slot is the type of the next value.
func (w *tftypesWriter) slot() tftypes.Type {
	if len(w.stack) == 0 {
		if w.result != nil {
			w.fail("a second value after the first")
		}
		return w.root
	}
	f := w.stack[len(w.stack)-1]
	switch t := f.typ.(type) {
	case tftypes.List:
		return t.ElementType
	case tftypes.Map:
		if !f.keyGiven {
			w.fail("a map value without a key")
		}
		return t.ElementType
	case tftypes.Object:
		if !f.keyGiven {
			w.fail("an object attribute without a name")
		}
		return t.AttributeTypes[f.key]
	}
	return nil
}

func (w *tftypesWriter) emit(v tftypes.Value) {
	if len(w.stack) == 0 {
		w.result = &v
		return
	}
	f := w.stack[len(w.stack)-1]
	if _, isList := f.typ.(tftypes.List); isList {
		f.elems = append(f.elems, v)
		return
	}
	f.attrs[f.key] = v
	f.keyGiven = false
}

func (w *tftypesWriter) leaf(kind tftypes.Type, v any) {
	t := w.slot()
	if t == nil || !t.Is(kind) {
		w.fail("a %s where the schema has a %v", kind, t)
		return
	}
	w.emit(tftypes.NewValue(t, v))
}

func (w *tftypesWriter) null() {
	if t := w.slot(); t != nil {
		w.emit(tftypes.NewValue(t, nil))
	} else {
		w.fail("a null of no attribute of the schema")
	}
}

func (w *tftypesWriter) bool(b bool)  { w.leaf(tftypes.Bool, b) }
func (w *tftypesWriter) str(s string) { w.leaf(tftypes.String, s) }
func (w *tftypesWriter) int(n int64)  { w.leaf(tftypes.Number, n) }
func (w *tftypesWriter) list(n int)   { w.start(tftypes.List{}, n) }
func (w *tftypesWriter) mapOf(n int)  { w.start(tftypes.Map{}, n) }
func (w *tftypesWriter) object(n int) { w.start(tftypes.Object{}, n) }
func (w *tftypesWriter) strOrNull(s string) {
	if s == "" {
		w.null()
		return
	}
	w.str(s)
}

func (w *tftypesWriter) intOrNull(n *int) {
	if n == nil {
		w.null()
		return
	}
	w.int(int64(*n))
}

func (w *tftypesWriter) start(kind tftypes.Type, n int) {
	t := w.slot()
	if t == nil || !t.Is(kind) {
		w.fail("a %T where the schema has a %v", kind, t)
		return
	}
	if o, ok := t.(tftypes.Object); ok && n != len(o.AttributeTypes) {
		w.fail("an object of %d attributes where the schema has %d: %v", n, len(o.AttributeTypes), o)
	}
	w.stack = append(w.stack, &tftypesFrame{typ: t, n: n, attrs: map[string]tftypes.Value{}})
}

func (w *tftypesWriter) key(name string) {
	if len(w.stack) == 0 {
		w.fail("key %q outside a map or an object", name)
		return
	}
	f := w.stack[len(w.stack)-1]
	switch t := f.typ.(type) {
	case tftypes.List:
		w.fail("key %q in a list", name)
	case tftypes.Object:
		if _, ok := t.AttributeTypes[name]; !ok {
			w.fail("attribute %q is not in the schema", name)
		}
		if f.keyGiven || len(f.attrs) > 0 && strings.Compare(name, lastKey(f.attrs)) <= 0 {
			w.fail("attribute %q out of order or twice", name)
		}
	case tftypes.Map:
		if _, twice := f.attrs[name]; twice {
			w.fail("key %q twice", name)
		}
	}
	f.key, f.keyGiven = name, true
}

func lastKey(m map[string]tftypes.Value) string {
	last := ""
	for k := range m {
		last = max(last, k)
	}
	return last
}

func (w *tftypesWriter) end() {
	if len(w.stack) == 0 {
		w.fail("end outside a collection")
		return
	}
	f := w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
	if _, isList := f.typ.(tftypes.List); isList {
		if len(f.elems) != f.n {
			w.fail("a list of %d announced as %d", len(f.elems), f.n)
		}
		w.emit(tftypes.NewValue(f.typ, f.elems))
		return
	}
	if len(f.attrs) != f.n {
		w.fail("%d entries announced as %d in a %v", len(f.attrs), f.n, f.typ)
	}
	w.emit(tftypes.NewValue(f.typ, f.attrs))
}

func (w *tftypesWriter) configured(v tftypes.Value, t tftypes.Type) error {
	if slot := w.slot(); slot == nil || !slot.Equal(t) || !v.Type().Equal(t) {
		return fmt.Errorf("a configured %v where the schema has a %v", v.Type(), slot)
	}
	w.emit(v)
	return nil
}
