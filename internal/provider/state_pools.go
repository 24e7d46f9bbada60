package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
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
	// pools are the digests of state, sorted by pool name ("" for a
	// k8s_ready_endpoints, "<namespace>/<name>" in a k8s_services): a
	// sorted slice rather than a map, which held more for each Service
	// (BenchmarkStatePoolHeldBytesPerService; bench/README.md, "The fourth
	// round of issue 29").
	pools []namedDigest
	// skipped is the digest of a k8s_services' skipped list.
	skipped [sha256.Size]byte
}

// PoolDigest is what a comparison needs of one pool: the SHA-256 of its
// state encoding, and its members ("address:port", sorted), kept packed in
// one string (an IPv4 member in 7 bytes rather than its 14 to 21
// characters): a fleet of many Services holds one per Service.
type PoolDigest struct {
	Sum     [sha256.Size]byte
	members string
}

// namedDigest is the digest of the pool name.
type namedDigest struct {
	name string
	PoolDigest
}

// Members are the pool's members, "address:port", sorted.
func (d PoolDigest) Members() []string {
	return unpackMembers(d.members)
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
	return DecodeStatePoolFrom(ctx, typeName, json.NewDecoder(bytes.NewReader(attributes)))
}

// ErrStateSyntax marks a state that is not JSON, or ends within a value: the
// decoder it was read from cannot go on.
var ErrStateSyntax = errors.New("the state is not JSON")

// DecodeStatePoolFrom reads an instance of typeName from its attributes, the
// next value of dec (a state read as a stream): the pools a read found are
// digested one by one as they come, so that a fleet of many Services is
// never held whole. The value is read to its end before an error of the
// instance is returned, so that dec goes on with the next; an error wrapping
// ErrStateSyntax is of the stream itself.
func DecodeStatePoolFrom(ctx context.Context, typeName string, dec *json.Decoder) (*StatePool, error) {
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
	p := &StatePool{Type: typeName}
	fields, found, firstErr, err := readAttributes(dec, typeName, typ, p)
	if err != nil {
		return nil, err
	}
	if firstErr != nil {
		return nil, firstErr
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
	// The request the arguments make, and the one small found attribute
	// (the other, services, was digested as it came).
	var small string
	switch typeName {
	case ReadyEndpointsType:
		var r poolRequest
		r, err = requestOfConfig(ctx, config, &p.ready, readyEndpointsModel.withDefaults, readyEndpointsModel.request)
		p.Pool, small = &r.Request, "endpoints"
	case ServicesType:
		var r fleetRequest
		r, err = requestOfConfig(ctx, config, &p.services, servicesModel.withDefaults, servicesModel.request)
		p.Fleet, small = &r.FleetRequest, "skipped"
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", typeName, err)
	}
	d, err := digestOfJSON(found[small], typ.AttributeTypes[small])
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", typeName, small, err)
	}
	if typeName == ServicesType {
		p.skipped = d.Sum
	} else {
		p.pools = append(p.pools, namedDigest{"", d})
	}
	p.pools = sortedDigests(p.pools)
	return p, nil
}

// sortedDigests are pools sorted by name, the last of a name kept (as a
// map's last assignment would be), in a slice of their number.
func sortedDigests(pools []namedDigest) []namedDigest {
	slices.SortStableFunc(pools, func(a, b namedDigest) int { return strings.Compare(a.name, b.name) })
	out := make([]namedDigest, 0, len(pools))
	for i, d := range pools {
		if i+1 < len(pools) && pools[i+1].name == d.name {
			continue
		}
		out = append(out, d)
	}
	return out
}

// requestOfConfig reads the arguments of a state (config) into m, with the
// defaults the read used, and the request they make.
func requestOfConfig[M, R any](ctx context.Context, config tfsdk.Config, m *M, withDefaults func(M) M, request func(M, context.Context) (R, diag.Diagnostics)) (R, error) {
	var r R
	if diags := getConfig(ctx, config, m); diags.HasError() {
		return r, errors.New(diagnosticsText(diags))
	}
	*m = withDefaults(*m)
	r, diags := request(*m, ctx)
	if diags.HasError() {
		return r, errors.New(diagnosticsText(diags))
	}
	return r, nil
}

// readAttributes reads an instance's attributes object from dec: the
// arguments, with what a read found null, and the small found attributes
// (endpoints, skipped) as JSON; the services of a k8s_services are digested
// into p as they come. firstErr is the first digest that failed (the value
// is read on); err an error of the stream.
func readAttributes(dec *json.Decoder, typeName string, typ tftypes.Object, p *StatePool) (fields, found map[string]json.RawMessage, firstErr, err error) {
	if err := wantDelim(dec, '{'); err != nil {
		return nil, nil, nil, err
	}
	fields, found = map[string]json.RawMessage{}, map[string]json.RawMessage{}
	for dec.More() {
		key, err := stringToken(dec)
		if err != nil {
			return nil, nil, nil, err
		}
		switch {
		case key == "services" && typeName == ServicesType:
			fields[key] = json.RawMessage("null")
			mapType, ok := typ.AttributeTypes["services"].(tftypes.Map)
			if !ok {
				return nil, nil, nil, fmt.Errorf("%s: services is not a map", typeName)
			}
			if err := eachStateService(dec, func(name string, raw json.RawMessage) {
				d, err := digestOfJSON(raw, mapType.ElementType)
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%s: services[%q]: %w", typeName, name, err)
				}
				p.pools = append(p.pools, namedDigest{name, d})
			}); err != nil {
				return nil, nil, nil, err
			}
		case slices.Contains(foundAttributes[typeName], key):
			fields[key] = json.RawMessage("null")
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, nil, nil, fmt.Errorf("%w: %w", ErrStateSyntax, err)
			}
			found[key] = raw
		default:
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, nil, nil, fmt.Errorf("%w: %w", ErrStateSyntax, err)
			}
			fields[key] = raw
		}
	}
	return fields, found, firstErr, wantDelim(dec, '}')
}

// eachStateService calls each with the name and JSON of each Service of a
// k8s_services' services map (null: none), one at a time.
func eachStateService(dec *json.Decoder, each func(name string, raw json.RawMessage)) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStateSyntax, err)
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("%w: services is %v, not an object", ErrStateSyntax, tok)
	}
	for dec.More() {
		name, err := stringToken(dec)
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("%w: %w", ErrStateSyntax, err)
		}
		each(name, raw)
	}
	return wantDelim(dec, '}')
}

// wantDelim reads the delimiter d from dec.
func wantDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStateSyntax, err)
	}
	if got, ok := tok.(json.Delim); !ok || got != d {
		return fmt.Errorf("%w: %v where %v was expected", ErrStateSyntax, tok, d)
	}
	return nil
}

// stringToken reads an object's key, or a string value, from dec.
func stringToken(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrStateSyntax, err)
	}
	s, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("%w: %v where a string was expected", ErrStateSyntax, tok)
	}
	return s, nil
}

// digestOfJSON is the digest of a value of state, given as JSON: its
// MessagePack encoding as the read writes it (state_digest.go), with
// last_change_trigger_time null, and the members of its endpoints.
func digestOfJSON(raw json.RawMessage, typ tftypes.Type) (PoolDigest, error) {
	v, err := decodeStateJSON(raw)
	if err != nil {
		return PoolDigest{}, err
	}
	list := v
	if _, isObject := typ.(tftypes.Object); isObject {
		object, _ := v.(map[string]any)
		list = object["endpoints"]
	}
	openedInState(list)
	var w msgpackWriter
	if err := writeStateValue(&w, v, typ); err != nil {
		return PoolDigest{}, err
	}
	return PoolDigest{Sum: sha256.Sum256(w.b), members: packMembers(membersOfState(list))}, nil
}

// State is the digest of the pool name of state ("" for a
// k8s_ready_endpoints, "<namespace>/<name>" in a k8s_services); false when
// state has no such pool.
func (p *StatePool) State(name string) (PoolDigest, bool) {
	i, ok := p.StateIndex(name)
	if !ok {
		return PoolDigest{}, false
	}
	return p.pools[i].PoolDigest, true
}

// StateIndex is the index of the pool name among the pools of state
// (StateName), for what keeps a record of each; false when state has no
// such pool.
func (p *StatePool) StateIndex(name string) (int, bool) {
	return slices.BinarySearchFunc(p.pools, name, func(d namedDigest, name string) int { return strings.Compare(d.name, name) })
}

// StatePools is how many pools state has.
func (p *StatePool) StatePools() int { return len(p.pools) }

// StateName is the name of the pool i of state, in name order.
func (p *StatePool) StateName(i int) string { return p.pools[i].name }

// SkippedSum is the digest of a k8s_services' skipped list in state.
func (p *StatePool) SkippedSum() [sha256.Size]byte { return p.skipped }

// A Digester gives the digests of what a read would write, as state holds
// them: the same writer as the read, hashed, with no Terraform values built.
// It reuses its buffer; one is not for concurrent use.
type Digester struct{ w msgpackWriter }

// Pool is the digest of the endpoints of a k8s_ready_endpoints read giving
// res. last_change_trigger_time is not in it: it moves with every slice
// update, pools do not.
func (d *Digester) Pool(res endpoints.Result) [sha256.Size]byte {
	d.w.b = d.w.b[:0]
	writeList(&d.w, endpointObject, opened(res.Endpoints))
	return sha256.Sum256(d.w.b)
}

// ServicePool is the digest of one Service of a k8s_services read.
func (d *Digester) ServicePool(pool endpoints.ServicePool) [sha256.Size]byte {
	pool.LastChangeTriggerTime = time.Time{}
	pool.Endpoints = opened(pool.Endpoints)
	d.w.b = d.w.b[:0]
	serviceObject.write(&d.w, &pool)
	return sha256.Sum256(d.w.b)
}

// Skipped is the digest of a k8s_services' skipped list.
func (d *Digester) Skipped(skipped []endpoints.SkippedService) [sha256.Size]byte {
	d.w.b = d.w.b[:0]
	writeList(&d.w, skippedObject, skipped)
	return sha256.Sum256(d.w.b)
}

// Members are the "address:port" of endpoints (IPv6 in brackets), sorted,
// as PoolDigest.Members gives those of state.
func Members(eps []endpoints.Endpoint) []string {
	out := make([]string, 0, len(eps))
	for _, e := range eps {
		out = append(out, net.JoinHostPort(e.Address, strconv.FormatInt(int64(e.Port), 10)))
	}
	slices.Sort(out)
	return slices.Compact(out)
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

// A digest counts the endpoint of a pod that waits for its readiness gate
// (gate_pending) as the ready endpoint it becomes once its gate is open:
// ready, serving, not pending. The apply that gives the load balancer the
// pod opens the gate; the kubelet then makes the pod Ready and its slice
// lists it ready, which changes the endpoint's conditions but not the pool
// the load balancer was given, so it is not a change to run for. Only
// such endpoints are not terminating and not ready in a pool (the rules
// take a not-ready endpoint only when it is serving and terminating), so
// the comparison loses nothing else.

// waitsOrJustOpened says whether an endpoint of a pool is one of those.
func waitsOrJustOpened(e *endpoints.Endpoint) bool {
	return !e.Terminating && (e.GatePending || !e.Ready)
}

// opened is eps with the endpoints that wait for their gate, or whose gate
// just opened, counted as ready; eps itself when there are none.
func opened(eps []endpoints.Endpoint) []endpoints.Endpoint {
	if !slices.ContainsFunc(eps, func(e endpoints.Endpoint) bool { return waitsOrJustOpened(&e) }) {
		return eps
	}
	out := slices.Clone(eps)
	for i := range out {
		if waitsOrJustOpened(&out[i]) {
			out[i].Ready, out[i].Serving, out[i].GatePending = true, true, false
		}
	}
	return out
}

// openedInState does what opened does to an endpoints list of state
// decoded from JSON, in place, by the same rule (waitsOrJustOpened).
func openedInState(list any) {
	items, _ := list.([]any)
	for _, item := range items {
		e, _ := item.(map[string]any)
		ready, isBool := e["ready"].(bool)
		counted := endpoints.Endpoint{Ready: ready}
		counted.Terminating, _ = e["terminating"].(bool)
		counted.GatePending, _ = e["gate_pending"].(bool)
		if !isBool || !waitsOrJustOpened(&counted) {
			continue
		}
		e["ready"], e["serving"] = true, true
		if _, ok := e["gate_pending"]; ok {
			e["gate_pending"] = false
		}
	}
}
