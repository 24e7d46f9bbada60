package provider

import (
	"math"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The reads write their state as the plugin protocol carries it, MessagePack,
// straight from what they found. Building it as tftypes values first and
// encoding those (tftypes.Value.MarshalMsgPack) cost more than the rest of a
// read: a big.Float for every number, a copy of the attribute path for every
// value and a sort of the attribute names of every object. The bytes are the
// ones tftypes writes (TestStateIsWhatTftypesWrites): the shortest form of
// every length and integer, and object attributes in order of name, which
// the descriptions of attribute.go give.

// msgpackWriter appends MessagePack values to its buffer.
type msgpackWriter struct {
	b []byte
}

var _ stateWriter = (*msgpackWriter)(nil)

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

func (w *msgpackWriter) list(n int)   { w.arrayLen(n) }
func (w *msgpackWriter) mapOf(n int)  { w.mapLen(n) }
func (w *msgpackWriter) object(n int) { w.mapLen(n) }
func (w *msgpackWriter) key(k string) { w.str(k) }

// end has nothing to write: MessagePack gives lengths first.
func (w *msgpackWriter) end() {}

// configured is a value of the configuration, of type t.
func (w *msgpackWriter) configured(v tftypes.Value, t tftypes.Type) error {
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
