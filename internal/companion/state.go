package companion

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/vigie/terraform-provider-k8s/internal/provider"
)

// rawState is the part of a state (`terraform state pull`, format version 4)
// the companion reads. `state pull` goes through the configured backend, so
// any backend works: local, S3, the cloud block.
type rawState struct {
	Version   int           `json:"version"`
	Serial    int64         `json:"serial"`
	Lineage   string        `json:"lineage"`
	Resources []rawResource `json:"resources"`
}

type rawResource struct {
	Module    string        `json:"module"`
	Mode      string        `json:"mode"`
	Type      string        `json:"type"`
	Name      string        `json:"name"`
	Provider  string        `json:"provider"`
	Instances []rawInstance `json:"instances"`
}

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
	serial      int64
}

// everyCluster, as poolsOfState's alias, keeps the pools of every provider
// configuration.
const everyCluster = "*"

// poolsOfState reads the pool data sources of a state, those of the provider
// configuration alias, or of all with everyCluster (others are returned by
// address in ignored). A pool whose attributes this provider version cannot
// read is named in undecodable, and the others are read.
func poolsOfState(ctx context.Context, raw []byte, alias string) (statePools, error) {
	var st rawState
	if err := json.Unmarshal(raw, &st); err != nil {
		return statePools{}, fmt.Errorf("the state is not JSON: %w", err)
	}
	if st.Version != 4 {
		return statePools{}, fmt.Errorf("the state has format version %d; this companion reads version 4", st.Version)
	}
	out := statePools{serial: st.Serial, undecodable: map[string]string{}}
	for _, r := range st.Resources {
		if r.Mode != "data" || (r.Type != provider.ReadyEndpointsType && r.Type != provider.ServicesType) {
			continue
		}
		resource := "data." + r.Type + "." + r.Name
		if r.Module != "" {
			resource = r.Module + "." + resource
		}
		for _, in := range r.Instances {
			address := resource + indexSuffix(in.IndexKey)
			configuration := cmp.Or(in.Provider, r.Provider)
			a := providerAlias(configuration)
			if alias != everyCluster && a != alias {
				out.ignored = append(out.ignored, fmt.Sprintf("%s (provider %s)", address, configuration))
				continue
			}
			pool, err := provider.DecodeStatePool(ctx, r.Type, in.Attributes)
			if err != nil {
				out.undecodable[address] = err.Error()
				continue
			}
			out.found = append(out.found, instance{address: address, resource: resource, cluster: a, pool: pool, watched: watch(pool)})
		}
	}
	return out, nil
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
