package provider

import (
	"fmt"
	"maps"
)

// The shape of Consul-Terraform-Sync's `services` variable, from Kubernetes
// endpoints. The mapping is documented in templates/functions/cts_services.md.tmpl.

// CTS health statuses, as Consul's health checks name them.
const (
	ctsPassing  = "passing"
	ctsWarning  = "warning"
	ctsCritical = "critical"
)

// ctsZoneMeta is the node_meta key of an endpoint's zone: the well-known
// label Kubernetes copies from the node.
const ctsZoneMeta = "topology.kubernetes.io/zone"

// ctsService is one Kubernetes Service and its endpoints.
type ctsService struct {
	Namespace, Name string
	Labels          map[string]string
	Endpoints       []poolMember
}

// ctsInstance is one element of CTS's services map: one service instance.
type ctsInstance struct {
	ID                  string
	Name                string
	Kind                string
	Address             string
	Port                int64
	Meta                map[string]string
	Tags                []string
	Namespace           string
	Status              string
	Node                string
	NodeID              string
	NodeAddress         string
	NodeDatacenter      string
	NodeTaggedAddresses map[string]string
	NodeMeta            map[string]string
	CTSUserDefinedMeta  map[string]string
}

// ctsStatus maps the endpoint conditions to a Consul health status: ready is
// passing, a draining pod (serving while terminating) is warning, anything
// else (not ready, not serving) is critical.
func ctsStatus(e poolMember) string {
	switch {
	case e.Ready:
		return ctsPassing
	case e.Serving && e.Terminating:
		return ctsWarning
	default:
		return ctsCritical
	}
}

// ctsInstances gives one instance per endpoint, keyed by its id
// "<namespace>/<name>/<address:port>": unique, since the data sources give an
// address and port once per Service, and stable, since it depends on nothing
// else. It never mutates its input; maps and lists in the result are never
// nil, as CTS gives them.
func ctsInstances(services []ctsService) (map[string]ctsInstance, error) {
	out := map[string]ctsInstance{}
	for _, s := range services {
		if s.Name == "" || s.Namespace == "" {
			return nil, fmt.Errorf("a service needs a name and a namespace (got name %q, namespace %q)", s.Name, s.Namespace)
		}
		for _, e := range s.Endpoints {
			if err := checkMember(e.Address, e.Port); err != nil {
				return nil, fmt.Errorf("service %s/%s: %w", s.Namespace, s.Name, err)
			}
			id := s.Namespace + "/" + s.Name + "/" + hostPortMember(e.Address, e.Port)
			if _, dup := out[id]; dup {
				return nil, fmt.Errorf("endpoint %s is given twice", id)
			}
			nodeMeta := map[string]string{}
			if e.Zone != "" {
				nodeMeta[ctsZoneMeta] = e.Zone
			}
			meta := map[string]string{}
			maps.Copy(meta, s.Labels)
			out[id] = ctsInstance{
				ID:      id,
				Name:    s.Name,
				Address: e.Address,
				// Consul's node address is where a service is reached when it
				// gives no address of its own, and modules read either field
				// as the member (F5's reads node_address, A10's address,
				// PAN-OS's address then node_address): a pod, or a node of a
				// node pool, is reached at its own address, so both say it.
				NodeAddress:         e.Address,
				Port:                e.Port,
				Meta:                meta,
				Tags:                []string{},
				Namespace:           s.Namespace,
				Status:              ctsStatus(e),
				Node:                e.NodeName,
				NodeTaggedAddresses: map[string]string{},
				NodeMeta:            nodeMeta,
				CTSUserDefinedMeta:  map[string]string{},
			}
		}
	}
	return out, nil
}
