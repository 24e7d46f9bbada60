package provider

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"math/big"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// tftypesDigest is the digest of a value of state as tftypes makes it:
// ValueFromJSON, trigger times null, MarshalMsgPack; the reference of
// digestOfJSON. The endpoints that wait for their readiness gate are
// counted ready first, as a comparison counts them (openedInState; what
// that changes is TestAGateOpeningIsNotAChangeOfThePool's).
func tftypesDigest(t *testing.T, raw string, typ tftypes.Type) PoolDigest {
	t.Helper()
	decoded, err := decodeStateJSON([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	decodedList := decoded
	if _, isObject := typ.(tftypes.Object); isObject {
		object, _ := decoded.(map[string]any)
		decodedList = object["endpoints"]
	}
	openedInState(decodedList)
	counted, err := json.Marshal(decoded)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tftypes.ValueFromJSONWithOpts(counted, typ, tftypes.ValueFromJSONOpts{IgnoreUndefinedAttributes: true})
	if err != nil {
		t.Fatal(err)
	}
	v = withoutTriggerTimes(v)
	encoded, err := tfprotov6.NewDynamicValue(typ, v)
	if err != nil {
		t.Fatal(err)
	}
	list := v
	if _, isObject := typ.(tftypes.Object); isObject {
		list = attributeValue(v, "endpoints")
	}
	return PoolDigest{Sum: sha256.Sum256(encoded.MsgPack), members: packMembers(members(list))}
}

func stateTypes(t *testing.T) (endpoints, service tftypes.Type) {
	t.Helper()
	ctx := context.Background()
	var ready, fleet datasource.SchemaResponse
	newReadyEndpointsDataSource().Schema(ctx, datasource.SchemaRequest{}, &ready)
	newServicesDataSource().Schema(ctx, datasource.SchemaRequest{}, &fleet)
	r, _ := ready.Schema.Type().TerraformType(ctx).(tftypes.Object)
	f, _ := fleet.Schema.Type().TerraformType(ctx).(tftypes.Object)
	m, _ := f.AttributeTypes["services"].(tftypes.Map)
	return r.AttributeTypes["endpoints"], m.ElementType
}

// The digest of a pool of state, written from its JSON straight into
// MessagePack, is the one tftypes makes of the same JSON (where a map has
// at most one entry: tftypes writes maps in Go's random order), with its
// members: numbers as integers, floats, text or strings, bools as strings,
// attributes missing or unknown to this version, trigger times ignored,
// IPv6 members in brackets.
func TestAStateDigestIsWhatTftypesWrites(t *testing.T) {
	endpointsType, serviceType := stateTypes(t)
	endpoint := `{"address": "10.0.0.1", "port": 8080, "ready": true, "serving": true, "terminating": false,
	  "node_name": "node-a", "zone": "zone-a", "target_ref": {"kind": "Pod", "name": "web-1", "namespace": "shop"}, "weight": 1}`
	for name, tc := range map[string]struct {
		raw string
		typ tftypes.Type
	}{
		"an endpoints list":               {"[" + endpoint + `, {"address": "fd00::1", "port": 443, "ready": false}]`, endpointsType},
		"an empty list":                   {`[]`, endpointsType},
		"null":                            {`null`, endpointsType},
		"numbers given as text":           {`[{"address": "10.0.0.2", "port": "8080", "ready": "true"}]`, endpointsType},
		"a port not whole":                {`[{"address": "10.0.0.3", "port": 8080.5}]`, endpointsType},
		"a port beyond int64":             {`[{"address": "10.0.0.4", "port": 123456789012345678901234567890}]`, endpointsType},
		"a port beyond float64's digits":  {`[{"address": "10.0.0.5", "port": 0.1}]`, endpointsType},
		"an attribute of a newer version": {`[{"address": "10.0.0.6", "port": 80, "new_attribute": {"x": 1}}]`, endpointsType},
		"a Service of a fleet": {`{"namespace": "shop", "name": "web", "labels": {"tier": "front"}, "annotations": {"team": "web"},
		  "last_change_trigger_time": "2026-01-01T00:00:00Z", "endpoints": [` + endpoint + `]}`, serviceType},
		"a Service without its maps": {`{"namespace": "shop", "name": "web", "endpoints": []}`, serviceType},
	} {
		got, err := digestOfJSON(json.RawMessage(tc.raw), tc.typ)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want := tftypesDigest(t, tc.raw, tc.typ)
		if got.Sum != want.Sum {
			t.Errorf("%s: the digest differs from tftypes'", name)
		}
		if !slices.Equal(got.Members(), want.Members()) {
			t.Errorf("%s: members %v, tftypes' %v", name, got.Members(), want.Members())
		}
	}
	if d, _ := digestOfJSON(json.RawMessage("["+endpoint+"]"), endpointsType); !slices.Equal(d.Members(), []string{"10.0.0.1:8080"}) {
		t.Errorf("members %v, want [10.0.0.1:8080]: the test proves nothing", d.Members())
	}
	for name, raw := range map[string]string{
		"a string where a list is":    `"not a list"`,
		"a list where a number is":    `[{"address": "10.0.0.1", "port": [1]}]`,
		"a bool that is not one":      `[{"address": "10.0.0.1", "ready": "yes"}]`,
		"a number that is not one":    `[{"address": "10.0.0.1", "port": "eighty"}]`,
		"an object where a string is": `[{"address": {"ip": "10.0.0.1"}}]`,
	} {
		if _, err := digestOfJSON(json.RawMessage(raw), endpointsType); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// withoutTriggerTimes is v with every last_change_trigger_time null.
func withoutTriggerTimes(v tftypes.Value) tftypes.Value {
	out, err := tftypes.Transform(v, func(p *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		steps := p.Steps()
		if len(steps) > 0 && steps[len(steps)-1] == tftypes.AttributeName("last_change_trigger_time") {
			return tftypes.NewValue(v.Type(), nil), nil
		}
		return v, nil
	})
	if err != nil {
		return v
	}
	return out
}

// attributeValue is the attribute name of object v, or a null value.
func attributeValue(v tftypes.Value, name string) tftypes.Value {
	var attrs map[string]tftypes.Value
	if v.IsNull() || !v.IsKnown() || v.As(&attrs) != nil {
		return tftypes.NewValue(tftypes.DynamicPseudoType, nil)
	}
	if a, ok := attrs[name]; ok {
		return a
	}
	return tftypes.NewValue(tftypes.DynamicPseudoType, nil)
}

// members are the "address:port" of an endpoints list of state, sorted.
func members(list tftypes.Value) []string {
	var items []tftypes.Value
	if list.IsNull() || !list.IsKnown() || list.As(&items) != nil {
		return nil
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		var address string
		var port big.Float
		if attributeValue(item, "address").As(&address) != nil || attributeValue(item, "port").As(&port) != nil {
			continue
		}
		n, _ := port.Int64()
		out = append(out, net.JoinHostPort(address, strconv.FormatInt(n, 10)))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Members packed are the members unpacked: IPv4 ones in 7 bytes, the
// others (IPv6 in brackets, anything that is not an address and a port) as
// their text; none is nil.
func TestMembersPackedAreTheMembersUnpacked(t *testing.T) {
	for _, members := range [][]string{
		nil,
		{"10.0.0.1:8080"},
		{"0.0.0.0:0", "10.0.0.1:80", "255.255.255.255:65535", "[fd00::1]:443", "[::ffff:10.0.0.1]:80"},
		{"not an address", "10.0.0.1:99999", "host:80", "10.0.0.1:http", strings.Repeat("x", 300)},
	} {
		packed := packMembers(members)
		if got := unpackMembers(packed); !slices.Equal(got, members) {
			t.Errorf("%q: unpacked %q", members, got)
		}
	}
	if n := len(packMembers([]string{"10.20.30.40:8080", "10.20.30.41:8080"})); n != 14 {
		t.Errorf("two IPv4 members packed in %d bytes, want 14", n)
	}
}
