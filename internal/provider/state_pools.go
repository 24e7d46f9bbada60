package provider

import (
	"context"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strconv"

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
// asked for, and what its last read wrote.
type StatePool struct {
	// Type is ReadyEndpointsType or ServicesType.
	Type string
	// Pool is the request of a k8s_ready_endpoints, Fleet of a k8s_services.
	Pool  *pools.Request
	Fleet *pools.FleetRequest

	value    tftypes.Value
	ready    readyEndpointsModel
	services servicesModel
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
	value, err := tftypes.ValueFromJSONWithOpts(attributes, typ, tftypes.ValueFromJSONOpts{IgnoreUndefinedAttributes: true})
	if err != nil {
		return nil, fmt.Errorf("%s: state does not match the schema of this provider version: %w", typeName, err)
	}
	config := tfsdk.Config{Raw: value, Schema: resp.Schema}
	p := &StatePool{Type: typeName, value: value}
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
	}
	return p, nil
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
	next, err := p.encode(p.ready.stateValues(res))
	if err != nil {
		return nil, err
	}
	before, after := withoutTriggerTimes(p.value), withoutTriggerTimes(next)
	if before.Equal(after) {
		return nil, nil
	}
	return []PoolChange{poolChange("", attribute(before, "endpoints"), attribute(after, "endpoints"))}, nil
}

// CompareFleet is what a read of a k8s_services giving res would change in
// state, one PoolChange per Service that differs; nil when nothing.
func (p *StatePool) CompareFleet(res endpoints.FleetResult) ([]PoolChange, error) {
	if p.Fleet == nil {
		return nil, fmt.Errorf("%s is not a k8s_services", p.Type)
	}
	next, err := p.encode(p.services.stateValues(p.Fleet.Namespaces, res))
	if err != nil {
		return nil, err
	}
	before, after := withoutTriggerTimes(p.value), withoutTriggerTimes(next)
	if before.Equal(after) {
		return nil, nil
	}
	var changes []PoolChange
	oldServices, newServices := mapOf(attribute(before, "services")), mapOf(attribute(after, "services"))
	names := map[string]bool{}
	for name := range oldServices {
		names[name] = true
	}
	for name := range newServices {
		names[name] = true
	}
	sorted := make([]string, 0, len(names))
	for name := range names {
		sorted = append(sorted, name)
	}
	slices.Sort(sorted)
	for _, name := range sorted {
		o, n := oldServices[name], newServices[name]
		if o.Equal(n) {
			continue
		}
		changes = append(changes, poolChange(name, attribute(o, "endpoints"), attribute(n, "endpoints")))
	}
	if !attribute(before, "skipped").Equal(attribute(after, "skipped")) {
		changes = append(changes, PoolChange{Name: "skipped"})
	}
	if len(changes) == 0 {
		// Something else of the object, such as id: a change all the same.
		changes = append(changes, PoolChange{Name: "(data source)"})
	}
	return changes, nil
}

// encode is the state a read would write, from the state's own arguments.
func (p *StatePool) encode(computed computedValues) (tftypes.Value, error) {
	raw, err := stateFromConfig(p.value, computed)
	if err != nil {
		return tftypes.Value{}, err
	}
	return (&tfprotov6.DynamicValue{MsgPack: raw}).Unmarshal(p.value.Type())
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

// attribute is the attribute name of object v, or a null value.
func attribute(v tftypes.Value, name string) tftypes.Value {
	var attrs map[string]tftypes.Value
	if v.IsNull() || !v.IsKnown() || v.As(&attrs) != nil {
		return tftypes.NewValue(tftypes.DynamicPseudoType, nil)
	}
	if a, ok := attrs[name]; ok {
		return a
	}
	return tftypes.NewValue(tftypes.DynamicPseudoType, nil)
}

func mapOf(v tftypes.Value) map[string]tftypes.Value {
	var m map[string]tftypes.Value
	if v.IsNull() || !v.IsKnown() || v.As(&m) != nil {
		return nil
	}
	return m
}

// poolChange names the members of two endpoints lists and their difference.
func poolChange(name string, before, after tftypes.Value) PoolChange {
	c := PoolChange{Name: name, Before: members(before), After: members(after)}
	c.Added = minus(c.After, c.Before)
	c.Removed = minus(c.Before, c.After)
	return c
}

// members are the "address:port" of an endpoints list, sorted.
func members(list tftypes.Value) []string {
	var items []tftypes.Value
	if list.IsNull() || !list.IsKnown() || list.As(&items) != nil {
		return nil
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		var address string
		var port big.Float
		if attribute(item, "address").As(&address) != nil || attribute(item, "port").As(&port) != nil {
			continue
		}
		n, _ := port.Int64()
		out = append(out, net.JoinHostPort(address, strconv.FormatInt(n, 10)))
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
