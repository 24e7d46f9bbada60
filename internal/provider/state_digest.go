package provider

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strconv"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// A pool of state is digested from its JSON (`terraform state pull`)
// straight into the MessagePack that the read writes, without building
// tftypes values: for each Service of a fleet, ValueFromJSON, the transform
// that nulls trigger times and MarshalMsgPack were three quarters of a
// check's CPU. The bytes are those tftypes writes of ValueFromJSON's value
// (TestAStateDigestIsWhatTftypesWrites), but for one thing: a map's entries
// are in order of key, as the read writes them, where tftypes writes Go's
// map order, which differs from one encoding to the next (a Service of two
// labels in a k8s_services then differed from state at random).

// writeStateValue writes v, a value of state decoded from JSON (numbers as
// json.Number), of type typ, as tftypes.ValueFromJSON (attributes not in
// the type ignored, those missing null) and MarshalMsgPack would, maps in
// order of key; last_change_trigger_time is written null wherever it is.
func writeStateValue(w *msgpackWriter, v any, typ tftypes.Type) error {
	if v == nil {
		w.null()
		return nil
	}
	switch {
	case typ.Is(tftypes.String):
		switch s := v.(type) {
		case string:
			w.str(s)
		case json.Number:
			w.str(string(s))
		case bool:
			w.str(strconv.FormatBool(s))
		default:
			return fmt.Errorf("%T where a string was expected", v)
		}
	case typ.Is(tftypes.Number):
		f, err := stateNumber(v)
		if err != nil {
			return err
		}
		w.number(f)
	case typ.Is(tftypes.Bool):
		b, err := stateBool(v)
		if err != nil {
			return err
		}
		w.bool(b)
	case typ.Is(tftypes.List{}), typ.Is(tftypes.Set{}):
		items, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%T where a list was expected", v)
		}
		elem := elementType(typ)
		w.arrayLen(len(items))
		for i, item := range items {
			if err := writeStateValue(w, item, elem); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case typ.Is(tftypes.Map{}), typ.Is(tftypes.Object{}):
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%T where a map or an object was expected", v)
		}
		// A map's entries are its keys, of one type; an object's its
		// attributes, each of its own. Both in order of key.
		object, isObject := typ.(tftypes.Object)
		var keys []string
		var typeOf func(string) tftypes.Type
		if isObject {
			keys, typeOf = sortedKeys(object.AttributeTypes), func(k string) tftypes.Type { return object.AttributeTypes[k] }
		} else {
			elem := typ.(tftypes.Map).ElementType //nolint:forcetypeassert // Is above
			keys, typeOf = sortedKeys(m), func(string) tftypes.Type { return elem }
		}
		w.mapLen(len(keys))
		for _, k := range keys {
			w.str(k)
			value := m[k]
			if isObject && k == "last_change_trigger_time" {
				value = nil
			}
			if err := writeStateValue(w, value, typeOf(k)); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	default:
		// Tuples and dynamic values: the schemas of the pools have none.
		return fmt.Errorf("a value of type %s is not digested", typ)
	}
	return nil
}

// stateNumber is a number of state as ValueFromJSON takes it: a JSON
// number or a string, at 512 bits.
func stateNumber(v any) (*big.Float, error) {
	var text string
	switch n := v.(type) {
	case json.Number:
		text = string(n)
	case string:
		text = n
	default:
		return nil, fmt.Errorf("%T where a number was expected", v)
	}
	f, _, err := big.ParseFloat(text, 10, 512, big.ToNearestEven)
	if err != nil {
		return nil, fmt.Errorf("number %q: %w", text, err)
	}
	return f, nil
}

// stateBool is a bool of state as ValueFromJSON takes it.
func stateBool(v any) (bool, error) {
	switch b := v.(type) {
	case bool:
		return b, nil
	case string:
		switch b {
		case "true", "1":
			return true, nil
		case "false", "0":
			return false, nil
		}
	}
	return false, fmt.Errorf("%v where a bool was expected", v)
}

func elementType(typ tftypes.Type) tftypes.Type {
	if l, ok := typ.(tftypes.List); ok {
		return l.ElementType
	}
	return typ.(tftypes.Set).ElementType //nolint:forcetypeassert // a list or a set
}

// number writes n as tftypes writes a Number: a whole number that fits an
// int64 as an integer, else a float64 that is exact, else its text.
func (w *msgpackWriter) number(n *big.Float) {
	if n.IsInf() {
		w.float(math.Inf(n.Sign()))
		return
	}
	if i, acc := n.Int64(); acc == big.Exact {
		w.int(i)
		return
	}
	if f, acc := n.Float64(); acc == big.Exact && !n.IsInt() {
		w.float(f)
		return
	}
	w.str(n.Text('f', -1))
}

// float writes f as a float 64 (MessagePack's 0xcb).
func (w *msgpackWriter) float(f float64) {
	bits := math.Float64bits(f)
	w.b = append(w.b, 0xcb, byte(bits>>56), byte(bits>>48), byte(bits>>40), byte(bits>>32),
		byte(bits>>24), byte(bits>>16), byte(bits>>8), byte(bits))
}

// decodeStateJSON decodes raw, a value of state, with numbers as
// json.Number.
func decodeStateJSON(raw []byte) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// membersOfState are the "address:port" of an endpoints list of state
// decoded from JSON, sorted; an endpoint without both is left out.
func membersOfState(list any) []string {
	items, _ := list.([]any)
	out := make([]string, 0, len(items))
	for _, item := range items {
		e, _ := item.(map[string]any)
		address, ok := e["address"].(string)
		if !ok {
			continue
		}
		port, err := stateNumber(e["port"])
		if err != nil {
			continue
		}
		n, _ := port.Int64()
		out = append(out, net.JoinHostPort(address, strconv.FormatInt(n, 10)))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// packMembers packs members ("address:port") into one string: an IPv4
// address with its port as 4 then 6 bytes, anything else as 0, its length
// (uvarint) and its text. unpackMembers gives them back.
func packMembers(members []string) string {
	var b []byte
	for _, m := range members {
		host, portText, splitErr := net.SplitHostPort(m)
		port, portErr := strconv.ParseUint(portText, 10, 16)
		if ip, ipErr := netip.ParseAddr(host); splitErr == nil && portErr == nil && ipErr == nil && ip.Is4() && ip.String() == host {
			a := ip.As4()
			b = append(b, 4, a[0], a[1], a[2], a[3], byte(port>>8), byte(port))
			continue
		}
		b = append(b, 0)
		b = binary.AppendUvarint(b, uint64(len(m)))
		b = append(b, m...)
	}
	return string(b)
}

// unpackMembers are the members packMembers packed; nil for none.
func unpackMembers(packed string) []string {
	var out []string
	for len(packed) > 0 {
		if packed[0] == 4 && len(packed) >= 7 {
			ip := netip.AddrFrom4([4]byte{packed[1], packed[2], packed[3], packed[4]})
			port := uint16(packed[5])<<8 | uint16(packed[6])
			out = append(out, net.JoinHostPort(ip.String(), strconv.Itoa(int(port))))
			packed = packed[7:]
			continue
		}
		n, size := binary.Uvarint([]byte(packed[1:min(len(packed), 11)]))
		start := 1 + size
		if size <= 0 || uint64(len(packed)-start) < n {
			return out
		}
		out = append(out, packed[start:start+int(n)])
		packed = packed[start+int(n):]
	}
	return out
}
