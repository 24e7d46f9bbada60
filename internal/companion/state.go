package companion

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vigie/terraform-provider-k8s/internal/provider"
)

// A state (`terraform state pull`, format version 4) is read as a stream:
// `state pull` goes through the configured backend, so any backend works
// (local, S3, the cloud block), and the companion keeps of it only what a
// comparison needs, one instance at a time, never the whole text.

// rawInstance is an instance of a resource whose type was not yet known
// when its instances came, kept until it is.
type rawInstance struct {
	IndexKey json.RawMessage `json:"index_key"`
	// Provider is the instance's provider configuration, where it differs
	// by instance: OpenTofu's provider for_each.
	Provider   string          `json:"provider"`
	Attributes json.RawMessage `json:"attributes"`
}

// instance is one pool data source instance of state.
type instance struct {
	// address is its address in the configuration,
	// module.m.data.k8s_ready_endpoints.web["a"].
	address string
	// resource is the address without the instance key, as the
	// configuration names it: module.m.data.k8s_ready_endpoints.web.
	resource string
	// cluster is the provider configuration the instance reads with, as
	// state names it after the provider's address: "" for the default one,
	// "east" for an alias, `by_region["eu"]` for an instance of OpenTofu's
	// provider for_each.
	cluster string
	pool    *provider.StatePool
	watched watchedPool
}

// statePools are the pool data sources of a state.
type statePools struct {
	// found are those of the provider configuration served.
	found []instance
	// ignored are those of other configurations, by address.
	ignored []string
	// undecodable are those whose attributes this provider version cannot
	// read (written by a newer one), by address: why.
	undecodable map[string]string
	id          stateID
	// same says that the state is the one last read (same lineage and
	// serial): the rest of it was not decoded, and found is empty.
	same bool
}

// stateID identifies a state: Terraform and OpenTofu write a new serial
// with every change of the state of a lineage.
type stateID struct {
	lineage string
	serial  int64
}

// everyCluster, as poolsOfState's alias, keeps the pools of every provider
// configuration.
const everyCluster = "*"

// poolsOfState reads the pool data sources of a state, those of the provider
// configuration alias, or of all with everyCluster (others are returned by
// address in ignored). A pool whose attributes this provider version cannot
// read is named in undecodable, and the others are read.
func poolsOfState(ctx context.Context, raw []byte, alias string) (statePools, error) {
	return readStatePools(ctx, bytes.NewReader(raw), alias, stateID{})
}

// readStatePools is poolsOfState of the state r streams. When the state is
// last (its lineage and serial), the rest is not decoded: same is set.
func readStatePools(ctx context.Context, r io.Reader, alias string, last stateID) (statePools, error) {
	dec := json.NewDecoder(r)
	out := statePools{undecodable: map[string]string{}}
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return out, errNoState
	}
	if err != nil {
		return out, fmt.Errorf("the state is not JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return out, fmt.Errorf("the state is not JSON: it starts with %v", tok)
	}
	version := 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return out, fmt.Errorf("the state is not JSON: %w", err)
		}
		switch key {
		case "version":
			err = dec.Decode(&version)
			if err == nil && version != 4 {
				return out, fmt.Errorf("the state has format version %d; this companion reads version 4", version)
			}
		case "serial":
			err = dec.Decode(&out.id.serial)
		case "lineage":
			err = dec.Decode(&out.id.lineage)
		case "resources":
			if last.lineage != "" && out.id == last {
				out.same = true
				return out, nil
			}
			err = readResources(ctx, dec, alias, &out)
		default:
			err = skipValue(dec)
		}
		if err != nil {
			return out, stateError(err)
		}
	}
	if version != 4 {
		return out, fmt.Errorf("the state has format version %d; this companion reads version 4", version)
	}
	return out, nil
}

// stateError is err as the error of a state that cannot be read.
func stateError(err error) error {
	if errors.Is(err, provider.ErrStateSyntax) {
		return err
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %w", provider.ErrStateSyntax, err)
	}
	return err
}

// readResources reads the resources array of a state into out.
func readResources(ctx context.Context, dec *json.Decoder, alias string, out *statePools) error {
	if err := wantDelim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		if err := readResource(ctx, dec, alias, out); err != nil {
			return err
		}
	}
	return wantDelim(dec, ']')
}

// resourceHead is what a resource of state says before its instances.
type resourceHead struct {
	module, mode, typ, name, provider string
}

// pools says whether the resource is a pool data source.
func (h resourceHead) pools() bool {
	return h.mode == "data" && (h.typ == provider.ReadyEndpointsType || h.typ == provider.ServicesType)
}

// known says whether what the resource is has been read.
func (h resourceHead) known() bool { return h.mode != "" && h.typ != "" && h.name != "" }

func (h resourceHead) address() string {
	resource := "data." + h.typ + "." + h.name
	if h.module != "" {
		resource = h.module + "." + resource
	}
	return resource
}

// readResource reads one resource of state: the instances of a pool data
// source as they come (Terraform and OpenTofu write a resource's
// instances last), those of any other resource skipped.
func readResource(ctx context.Context, dec *json.Decoder, alias string, out *statePools) error {
	if err := wantDelim(dec, '{'); err != nil {
		return err
	}
	var h resourceHead
	var early []rawInstance
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return err
		}
		switch key {
		case "module":
			err = dec.Decode(&h.module)
		case "mode":
			err = dec.Decode(&h.mode)
		case "type":
			err = dec.Decode(&h.typ)
		case "name":
			err = dec.Decode(&h.name)
		case "provider":
			err = dec.Decode(&h.provider)
		case "instances":
			switch {
			case h.known() && !h.pools():
				err = skipValue(dec)
			case h.known():
				err = readInstances(ctx, dec, h, alias, out)
			default:
				err = dec.Decode(&early)
			}
		default:
			err = skipValue(dec)
		}
		if err != nil {
			return err
		}
	}
	if h.pools() {
		for _, in := range early {
			attrs := json.NewDecoder(bytes.NewReader(in.Attributes))
			pool, err := provider.DecodeStatePoolFrom(ctx, h.typ, attrs)
			out.add(h, in.IndexKey, in.Provider, alias, pool, err)
		}
	}
	return wantDelim(dec, '}')
}

// readInstances reads the instances of the pool data source h.
func readInstances(ctx context.Context, dec *json.Decoder, h resourceHead, alias string, out *statePools) error {
	if err := wantDelim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		if err := wantDelim(dec, '{'); err != nil {
			return err
		}
		var (
			indexKey      json.RawMessage
			configuration string
			pool          *provider.StatePool
			poolErr       error
		)
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return err
			}
			switch key {
			case "index_key":
				err = dec.Decode(&indexKey)
			case "provider":
				err = dec.Decode(&configuration)
			case "attributes":
				pool, poolErr = provider.DecodeStatePoolFrom(ctx, h.typ, dec)
				if errors.Is(poolErr, provider.ErrStateSyntax) {
					return poolErr
				}
			default:
				err = skipValue(dec)
			}
			if err != nil {
				return err
			}
		}
		if err := wantDelim(dec, '}'); err != nil {
			return err
		}
		out.add(h, indexKey, configuration, alias, pool, poolErr)
	}
	return wantDelim(dec, ']')
}

// add records an instance of the pool data source h: found when it is of
// the configuration alias, ignored when not, undecodable when its
// attributes could not be read.
func (out *statePools) add(h resourceHead, indexKey json.RawMessage, instanceProvider, alias string, pool *provider.StatePool, err error) {
	resource := h.address()
	address := resource + indexSuffix(indexKey)
	configuration := cmp.Or(instanceProvider, h.provider)
	a := providerAlias(configuration)
	switch {
	case alias != everyCluster && a != alias:
		out.ignored = append(out.ignored, fmt.Sprintf("%s (provider %s)", address, configuration))
	case err != nil:
		out.undecodable[address] = err.Error()
	case pool == nil:
		out.undecodable[address] = "the instance has no attributes"
	default:
		out.found = append(out.found, instance{address: address, resource: resource, cluster: a, pool: pool, watched: watch(pool)})
	}
}

// skipValue reads the next value of dec, whatever it is, keeping nothing.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// wantDelim reads the delimiter d from dec.
func wantDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if got, ok := tok.(json.Delim); !ok || got != d {
		return fmt.Errorf("%w: %v where %v was expected", provider.ErrStateSyntax, tok, d)
	}
	return nil
}

// providerAlias is the alias of a state's provider address,
// provider["host/ns/k8s"].east, with its instance key for an instance of a
// provider for_each (provider["host/ns/k8s"].by_region["eu"]), or "" without
// one.
func providerAlias(p string) string {
	i := strings.Index(p, "\"]")
	if i < 0 {
		return ""
	}
	return strings.TrimPrefix(p[i+2:], ".")
}

// indexSuffix is the instance key as an address writes it: [0], ["a"].
func indexSuffix(key json.RawMessage) string {
	if len(key) == 0 || string(key) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(key, &s) == nil {
		return "[" + strconv.Quote(s) + "]"
	}
	return "[" + string(key) + "]"
}
