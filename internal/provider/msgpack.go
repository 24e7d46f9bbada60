package provider

import (
	"fmt"
	"math"
	"slices"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The reads write their state as the plugin protocol carries it, MessagePack,
// straight from what they found. Building it as tftypes values first and
// encoding those (tftypes.Value.MarshalMsgPack) cost more than the rest of a
// read: a big.Float for every number, a copy of the attribute path for every
// value and a sort of the attribute names of every object. The bytes are the
// ones tftypes writes (TestStateIsWhatTftypesWrites): the shortest form of
// every length and integer, and object attributes in order of name.

// msgpackWriter appends MessagePack values to its buffer.
type msgpackWriter struct {
	b []byte
}

func (w *msgpackWriter) null() { w.b = append(w.b, 0xc0) }

func (w *msgpackWriter) bool(v bool) {
	if v {
		w.b = append(w.b, 0xc3)
	} else {
		w.b = append(w.b, 0xc2)
	}
}

func (w *msgpackWriter) str(s string) {
	switch n := len(s); {
	case n < 32:
		w.b = append(w.b, 0xa0|byte(n))
	case n < 256:
		w.b = append(w.b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		w.b = append(w.b, 0xda, byte(n>>8), byte(n))
	default:
		w.b = append(w.b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	w.b = append(w.b, s...)
}

// strOrNull is s, or null when s is empty: the API gave no value.
func (w *msgpackWriter) strOrNull(s string) {
	if s == "" {
		w.null()
		return
	}
	w.str(s)
}

// int is a whole number in its shortest form, as tftypes writes a Number
// that is an exact int64.
func (w *msgpackWriter) int(n int64) {
	switch {
	case n >= 0 && n <= math.MaxInt8:
		w.b = append(w.b, byte(n))
	case n >= 0 && n <= math.MaxUint8:
		w.b = append(w.b, 0xcc, byte(n))
	case n >= 0 && n <= math.MaxUint16:
		w.b = append(w.b, 0xcd, byte(n>>8), byte(n))
	case n >= 0 && n <= math.MaxUint32:
		w.b = append(w.b, 0xce, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	case n >= 0:
		w.b = append(w.b, 0xcf, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	case n >= -32:
		w.b = append(w.b, byte(n))
	case n >= math.MinInt8:
		w.b = append(w.b, 0xd0, byte(n))
	case n >= math.MinInt16:
		w.b = append(w.b, 0xd1, byte(n>>8), byte(n))
	case n >= math.MinInt32:
		w.b = append(w.b, 0xd2, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	default:
		w.b = append(w.b, 0xd3, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// intOrNull is *n, or null.
func (w *msgpackWriter) intOrNull(n *int) {
	if n == nil {
		w.null()
		return
	}
	w.int(int64(*n))
}

// arrayLen starts a list or a set of n elements.
func (w *msgpackWriter) arrayLen(n int) { w.header(n, 0x90, 0xdc, 0xdd) }

// mapLen starts a map or an object of n entries.
func (w *msgpackWriter) mapLen(n int) { w.header(n, 0x80, 0xde, 0xdf) }

func (w *msgpackWriter) header(n int, fix, b16, b32 byte) {
	switch {
	case n < 16:
		w.b = append(w.b, fix|byte(n))
	case n <= math.MaxUint16:
		w.b = append(w.b, b16, byte(n>>8), byte(n))
	default:
		w.b = append(w.b, b32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// strings is a list of strings.
func (w *msgpackWriter) strings(values []string) {
	w.arrayLen(len(values))
	for _, v := range values {
		w.str(v)
	}
}

// stringMap is m as a map of strings, keys in order, without the key skip.
func (w *msgpackWriter) stringMap(m map[string]string, skip string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != skip {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	w.mapLen(len(keys))
	for _, k := range keys {
		w.str(k)
		w.str(m[k])
	}
}

// value is a value of the configuration, of type t.
func (w *msgpackWriter) value(v tftypes.Value, t tftypes.Type) error {
	if v.IsNull() {
		w.null()
		return nil
	}
	if v.IsKnown() && t.Is(tftypes.String) {
		var s string
		if err := v.As(&s); err != nil {
			return err
		}
		w.str(s)
		return nil
	}
	// Sets, numbers, the timeouts block, unknown values: few and small.
	encoded, err := tfprotov6.NewDynamicValue(t, v)
	if err != nil {
		return err
	}
	w.b = append(w.b, encoded.MsgPack...)
	return nil
}

// computedValues writes the computed attributes of a state, by name.
type computedValues map[string]func(w *msgpackWriter)

// stateFromConfig is the state of a data source, encoded: its configuration
// as given, with the computed attributes written by computed. Every
// computed attribute must be given, so that no unknown value from the
// configuration is left in state.
func stateFromConfig(config tftypes.Value, computed computedValues) ([]byte, error) {
	typ, ok := config.Type().(tftypes.Object)
	if !ok {
		return nil, fmt.Errorf("the configuration is a %s, not an object", config.Type())
	}
	var given map[string]tftypes.Value
	if err := config.As(&given); err != nil {
		return nil, fmt.Errorf("reading the configuration: %w", err)
	}
	for name := range computed {
		if _, ok := typ.AttributeTypes[name]; !ok {
			return nil, fmt.Errorf("the schema has no attribute %q", name)
		}
	}
	names := make([]string, 0, len(typ.AttributeTypes))
	for name := range typ.AttributeTypes {
		names = append(names, name)
	}
	slices.Sort(names)
	w := &msgpackWriter{b: make([]byte, 0, 1024)}
	w.mapLen(len(names))
	for _, name := range names {
		w.str(name)
		if write, ok := computed[name]; ok {
			write(w)
			continue
		}
		v, ok := given[name]
		if !ok {
			return nil, fmt.Errorf("the configuration has no attribute %q", name)
		}
		if err := w.value(v, typ.AttributeTypes[name]); err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
	}
	return w.b, nil
}
