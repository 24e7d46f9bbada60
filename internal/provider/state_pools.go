package provider

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

// The sync companion (internal/companion) reads the pools of a Terraform
// state through this file, with the code a read runs: the same conversion of
// the arguments into a pools request, the same pools.Compute and the same
// state writer. "Would a plan change this pool?" is then answered by
// comparing what a read would write with what state holds.

// The data source types that give pools.
const (
	ReadyEndpointsType = "k8s_ready_endpoints"
	ServicesType       = "k8s_services"
)

// StatePool is one instance of a pool data source in Terraform state: what it
// asked for, and a digest of what its last read wrote. State is read once per
// run; a pool is compared on every change of the cluster, so what is kept is
// small (a SHA-256 of each pool's state encoding, and its members) and a
// comparison writes the pool with the read's own writer and hashes it,
// without building Terraform values.
type StatePool struct {
	// Type is ReadyEndpointsType or ServicesType.
	Type string
	// Pool is the request of a k8s_ready_endpoints, Fleet of a k8s_services.
	Pool  *pools.Request
	Fleet *pools.FleetRequest

	ready    readyEndpointsModel
	services servicesModel
	// pools are the digests of state, by pool name ("" for a
	// k8s_ready_endpoints, "<namespace>/<name>" in a k8s_services).
	pools map[string]poolDigest
	// skipped is the digest of a k8s_services' skipped list.
	skipped [sha256.Size]byte
}

// poolDigest is what a comparison needs of one pool of state.
type poolDigest struct {
	sum     [sha256.Size]byte
	members []string
}

// The attributes that hold what a read found, large for a big pool or
// fleet: left out of the arguments, digested instead.
var foundAttributes = map[string][]string{
	ReadyEndpointsType: {"endpoints"},
	ServicesType:       {"services", "skipped"},
}

// DecodeStatePool reads an instance of typeName from its attributes in state,
// as JSON (`terraform state pull` or `terraform show -json`).
func DecodeStatePool(ctx context.Context, typeName string, attributes []byte) (*StatePool, error) {
	var ds datasource.DataSource
	switch typeName {
	case ReadyEndpointsType:
		ds = newReadyEndpointsDataSource()
	case ServicesType:
		ds = newServicesDataSource()
	default:
		return nil, fmt.Errorf("%s is not a data source that gives pools", typeName)
	}
	var resp datasource.SchemaResponse
	ds.Schema(ctx, datasource.SchemaRequest{}, &resp)
	typ, ok := resp.Schema.Type().TerraformType(ctx).(tftypes.Object)
	if !ok {
		return nil, fmt.Errorf("%s: the schema is not an object", typeName)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(attributes, &fields); err != nil {
		return nil, fmt.Errorf("%s: state is not a JSON object: %w", typeName, err)
	}
	found := map[string]json.RawMessage{}
	for _, name := range foundAttributes[typeName] {
		found[name] = fields[name]
		fields[name] = json.RawMessage("null")
	}
	arguments, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	value, err := tftypes.ValueFromJSONWithOpts(arguments, typ, tftypes.ValueFromJSONOpts{IgnoreUndefinedAttributes: true})
	if err != nil {
		return nil, fmt.Errorf("%s: state does not match the schema of this provider version: %w", typeName, err)
	}
	config := tfsdk.Config{Raw: value, Schema: resp.Schema}
	p := &StatePool{Type: typeName, pools: map[string]poolDigest{}}
	switch typeName {
	case ReadyEndpointsType:
		if diags := getConfig(ctx, config, &p.ready); diags.HasError() {
			return nil, fmt.Errorf("%s: %s", typeName, diagnosticsText(diags))
		}
		p.ready = p.ready.withDefaults()
		r, diags := p.ready.request(ctx)
		if diags.HasError() {
			return nil, fmt.Errorf("%s: %s", typeName, diagnosticsText(diags))
		}
		p.Pool = &r.Request
		d, err := digestOfJSON(found["endpoints"], typ.AttributeTypes["endpoints"])
		if err != nil {
			return nil, fmt.Errorf("%s: endpoints: %w", typeName, err)
		}
		p.pools[""] = d
	case ServicesType:
		if diags := getConfig(ctx, config, &p.services); diags.HasError() {
			return nil, fmt.Errorf("%s: %s", typeName, diagnosticsText(diags))
		}
		p.services = p.services.withDefaults()
		r, diags := p.services.request(ctx)
		if diags.HasError() {
			return nil, fmt.Errorf("%s: %s", typeName, diagnosticsText(diags))
		}
		p.Fleet = &r.FleetRequest
		mapType, ok := typ.AttributeTypes["services"].(tftypes.Map)
		if !ok {
			return nil, fmt.Errorf("%s: services is not a map", typeName)
		}
		var services map[string]json.RawMessage
		if err := json.Unmarshal(found["services"], &services); err != nil {
			return nil, fmt.Errorf("%s: services: %w", typeName, err)
		}
		for key, raw := range services {
			d, err := digestOfJSON(raw, mapType.ElementType)
			if err != nil {
				return nil, fmt.Errorf("%s: services[%q]: %w", typeName, key, err)
			}
			p.pools[key] = d
		}
		d, err := digestOfJSON(found["skipped"], typ.AttributeTypes["skipped"])
		if err != nil {
			return nil, fmt.Errorf("%s: skipped: %w", typeName, err)
		}
		p.skipped = d.sum
	}
	return p, nil
}

// digestOfJSON is the digest of a value of state, given as JSON: its
// MessagePack encoding as the read writes it (tftypes writes the same bytes:
// TestStateIsWhatTftypesWrites), with last_change_trigger_time null, and the
// members of its endpoints.
func digestOfJSON(raw json.RawMessage, typ tftypes.Type) (poolDigest, error) {
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	v, err := tftypes.ValueFromJSONWithOpts(raw, typ, tftypes.ValueFromJSONOpts{IgnoreUndefinedAttributes: true})
	if err != nil {
		return poolDigest{}, err
	}
	v = withoutTriggerTimes(v)
	encoded, err := tfprotov6.NewDynamicValue(typ, v)
	if err != nil {
		return poolDigest{}, err
	}
	list := v
	if _, isObject := typ.(tftypes.Object); isObject {
		list = attributeValue(v, "endpoints")
	}
	return poolDigest{sum: sha256.Sum256(encoded.MsgPack), members: members(list)}, nil
}

// PoolChange is how one pool computed now differs from state.
type PoolChange struct {
	// Name is "" for a k8s_ready_endpoints, "<namespace>/<name>" for a
	// Service of a k8s_services, and "skipped" for its skipped list.
	Name string
	// Before and After are the members, "address:port" (IPv6 in brackets),
	// sorted; Added and Removed what changed between them. A change of an
	// endpoint's other attributes (ready, zone, weight...) changes neither.
	Before, After, Added, Removed []string
}

// ComparePool is what a read of a k8s_ready_endpoints giving res would change
// in state; nil when nothing. last_change_trigger_time alone is no change:
// it moves with every slice update, pools do not.
func (p *StatePool) ComparePool(res endpoints.Result) ([]PoolChange, error) {
	if p.Pool == nil {
		return nil, fmt.Errorf("%s is not a k8s_ready_endpoints", p.Type)
	}
	w := &msgpackWriter{}
	writeList(w, endpointObject, res.Endpoints)
	old := p.pools[""]
	if sha256.Sum256(w.b) == old.sum {
		return nil, nil
	}
	return []PoolChange{poolChange("", old.members, membersOf(res.Endpoints))}, nil
}

// CompareFleet is what a read of a k8s_services giving res would change in
// state, one PoolChange per Service that differs; nil when nothing.
func (p *StatePool) CompareFleet(res endpoints.FleetResult) ([]PoolChange, error) {
	if p.Fleet == nil {
		return nil, fmt.Errorf("%s is not a k8s_services", p.Type)
	}
	var changes []PoolChange
	seen := make(map[string]bool, len(res.Pools))
	w := &msgpackWriter{}
	for i := range res.Pools {
		pool := res.Pools[i]
		pool.LastChangeTriggerTime = time.Time{}
		key := pool.Service.Namespace + "/" + pool.Service.Name
		seen[key] = true
		w.b = w.b[:0]
		serviceObject.write(w, &pool)
		old, inState := p.pools[key]
		if inState && sha256.Sum256(w.b) == old.sum {
			continue
		}
		changes = append(changes, poolChange(key, old.members, membersOf(pool.Endpoints)))
	}
	for key, old := range p.pools {
		if !seen[key] {
			changes = append(changes, poolChange(key, old.members, nil))
		}
	}
	slices.SortFunc(changes, func(a, b PoolChange) int { return strings.Compare(a.Name, b.Name) })
	w.b = w.b[:0]
	writeList(w, skippedObject, res.Skipped)
	if sha256.Sum256(w.b) != p.skipped {
		changes = append(changes, PoolChange{Name: "skipped"})
	}
	return changes, nil
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

// poolChange names the members of a pool before and after, and their
// difference.
func poolChange(name string, before, after []string) PoolChange {
	c := PoolChange{Name: name, Before: before, After: after}
	c.Added = minus(c.After, c.Before)
	c.Removed = minus(c.Before, c.After)
	return c
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

// membersOf are the "address:port" of endpoints, sorted.
func membersOf(eps []endpoints.Endpoint) []string {
	out := make([]string, 0, len(eps))
	for _, e := range eps {
		out = append(out, net.JoinHostPort(e.Address, strconv.FormatInt(int64(e.Port), 10)))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// minus is the sorted members of a not in b.
func minus(a, b []string) []string {
	var out []string
	for _, m := range a {
		if _, found := slices.BinarySearch(b, m); !found {
			out = append(out, m)
		}
	}
	return out
}

// diagnosticsText is the summaries and details of the errors of diags.
func diagnosticsText(diags diag.Diagnostics) string {
	var b []byte
	for _, d := range diags.Errors() {
		if len(b) > 0 {
			b = append(b, "; "...)
		}
		b = fmt.Appendf(b, "%s: %s", d.Summary(), d.Detail())
	}
	return string(b)
}
