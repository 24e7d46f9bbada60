// Package pools is the one path from a data source's arguments to its pool,
// in plain Go: a request (what k8s_ready_endpoints or k8s_services asks for)
// and the function from (request, cluster objects) to result. The data
// sources call it with what they read from the API, the sync companion with
// what its informers hold, so both give the same pool for the same objects.
// It knows neither Terraform nor client-go: the objects come in, the rules of
// package endpoints make the pool.
package pools

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// NodeTarget says whether a pool is of nodes rather than pods, and which.
type NodeTarget struct {
	Enabled bool
	// Selector is node_selector as given, sent with the LIST of Nodes so
	// that the API server leaves out what the rules would; its parsed form is
	// Query.NodeSelector.
	Selector string
}

// Request is what one k8s_ready_endpoints asks for.
type Request struct {
	Namespace, Service string
	Query              endpoints.Query
	Nodes              NodeTarget
	// PodHealthChecks gives each pod endpoint the health check of its pod's
	// readinessProbe, from Objects.Pods.
	PodHealthChecks bool
	// MinReady is the fewest ready endpoints the pool may have (draining
	// ones are not counted); 0 means no guard.
	MinReady int
}

// Objects are the cluster objects one pool is made of.
type Objects struct {
	Service        *corev1.Service
	EndpointSlices []discoveryv1.EndpointSlice
	// Nodes are read only for a pool of nodes.
	Nodes []corev1.Node
	// Pods are read only for pod health checks: those the Service selects.
	Pods []corev1.Pod
}

// Compute is the pool of r from objects o at time now (for expiry).
func (r Request) Compute(o Objects, now time.Time) (endpoints.Result, error) {
	q := r.Query
	q.Now = now
	if r.Nodes.Enabled {
		return endpoints.Nodes(o.Service, o.EndpointSlices, o.Nodes, q)
	}
	res, err := endpoints.GatedPool(o.Service, o.EndpointSlices, o.Pods, q)
	if err != nil || !r.PodHealthChecks {
		return res, err
	}
	return endpoints.WithPodHealthChecks(res, o.Service, o.Pods), nil
}

// ReadsPods says whether the pool needs the Pods behind its Service: for
// their health checks, or for those waiting on a readiness gate.
func (r Request) ReadsPods() bool {
	return (r.PodHealthChecks || r.Query.ReadinessGate != "") && !r.Nodes.Enabled
}

// CheckService refuses, before anything else is read, a Service that cannot
// give the pool asked for: for nodes, one without a nodePort.
func (r Request) CheckService(svc *corev1.Service) error {
	if !r.Nodes.Enabled {
		return nil
	}
	_, err := endpoints.NodePort(svc, r.Query)
	return err
}

// Short says whether res has fewer ready endpoints than MinReady.
func (r Request) Short(res endpoints.Result) bool {
	return endpoints.CountReady(res.Endpoints) < r.MinReady
}

// FleetRequest is what one k8s_services asks for.
type FleetRequest struct {
	// Namespaces are read one by one; [""] means all of them at once.
	Namespaces []string
	// Selector is label_selector as given.
	Selector string
	// Names keeps only these Services; empty keeps all.
	Names []string
	Query endpoints.Query
	Nodes NodeTarget
	// PodHealthChecks is as in Request, from FleetObjects.Pods.
	PodHealthChecks bool
	// MinReady is the fewest ready endpoints each pool may have (draining
	// ones are not counted), MinServices the fewest Services; 0 means no
	// guard.
	MinReady, MinServices int
}

// AllNamespaces says whether the request covers every namespace.
func (r FleetRequest) AllNamespaces() bool {
	return len(r.Namespaces) == 1 && r.Namespaces[0] == ""
}

// FleetObjects are the cluster objects of the namespaces a fleet covers.
type FleetObjects struct {
	// Services are those that the label selector picks, in any order; the
	// names are applied by Compute.
	Services []corev1.Service
	// EndpointSlices are those of the namespaces in scope.
	EndpointSlices []discoveryv1.EndpointSlice
	// Nodes are read only for pools of nodes.
	Nodes []corev1.Node
	// Pods are read only for pod health checks: those of the namespaces in
	// scope.
	Pods []corev1.Pod
}

// Compute is the fleet of r from objects o at time now (for expiry).
func (r FleetRequest) Compute(o FleetObjects, now time.Time) (endpoints.FleetResult, error) {
	q := r.Query
	q.Now = now
	services := r.Selected(o.Services)
	if r.Nodes.Enabled {
		return endpoints.NodeFleet(services, o.EndpointSlices, o.Nodes, q)
	}
	res, err := endpoints.GatedFleet(services, o.EndpointSlices, o.Pods, q)
	if err != nil || !r.PodHealthChecks {
		return res, err
	}
	return endpoints.FleetWithPodHealthChecks(res, o.Pods), nil
}

// ReadsPods says whether the fleet needs the Pods of its namespaces: for
// their health checks, or for those waiting on a readiness gate.
func (r FleetRequest) ReadsPods() bool {
	return (r.PodHealthChecks || r.Query.ReadinessGate != "") && !r.Nodes.Enabled
}

// Selected keeps the Services whose names were asked for.
func (r FleetRequest) Selected(services []corev1.Service) []corev1.Service {
	if len(r.Names) == 0 {
		return services
	}
	out := make([]corev1.Service, 0, len(r.Names))
	for _, s := range services {
		if slices.Contains(r.Names, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// GuardsHold says whether res meets MinServices and MinReady.
func (r FleetRequest) GuardsHold(res endpoints.FleetResult) bool {
	return len(res.Pools) >= r.MinServices && len(r.ShortPools(res)) == 0
}

// ShortPools are the pools with fewer than MinReady ready endpoints.
func (r FleetRequest) ShortPools(res endpoints.FleetResult) []endpoints.ServicePool {
	var short []endpoints.ServicePool
	for _, p := range res.Pools {
		if endpoints.CountReady(p.Endpoints) < r.MinReady {
			short = append(short, p)
		}
	}
	return short
}
