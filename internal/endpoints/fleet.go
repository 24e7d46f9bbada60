package endpoints

import (
	"cmp"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// ServicePool is the pool of one Service of a fleet.
type ServicePool struct {
	Service *corev1.Service
	Result
}

// SkippedService is a Service left out of a fleet, and why.
type SkippedService struct {
	Namespace, Name, Reason string
}

// FleetResult is the pools of a fleet of Services, each Service once, sorted
// by namespace then name.
type FleetResult struct {
	Pools   []ServicePool
	Skipped []SkippedService
}

// Fleet gives each Service its pool, by the same rules as Pool, from the
// EndpointSlices of their namespaces: the slices are grouped by namespace and
// kubernetes.io/service-name label once, so the cost grows with the number of
// slices, not with Services times slices. Slices of other Services are
// ignored. A Service without the query's port is not an error in a fleet: it
// is skipped, with the reason. Services are given once each by namespace and
// name. It never modifies its arguments.
func Fleet(services []corev1.Service, endpointSlices []discoveryv1.EndpointSlice, q Query) (FleetResult, error) {
	return fleet(services, endpointSlices, q, Pool)
}

// NodeFleet gives each Service its node pool, by the same rules as Nodes,
// from one list of nodes, whose eligibility is judged once for all Services.
// A Service without the query's port, or whose port has no nodePort, is
// skipped, with the reason. Otherwise it is like Fleet.
func NodeFleet(services []corev1.Service, endpointSlices []discoveryv1.EndpointSlice, nodes []corev1.Node, q Query) (FleetResult, error) {
	eligible := eligibleNodes(nodes, q)
	return fleet(services, endpointSlices, q, func(svc *corev1.Service, s []discoveryv1.EndpointSlice, q Query) (Result, error) {
		return nodePool(svc, s, eligible, q)
	})
}

func fleet(services []corev1.Service, endpointSlices []discoveryv1.EndpointSlice, q Query,
	poolOf func(*corev1.Service, []discoveryv1.EndpointSlice, Query) (Result, error),
) (FleetResult, error) {
	type serviceKey struct{ namespace, name string }
	byService := map[serviceKey][]discoveryv1.EndpointSlice{}
	for i := range endpointSlices {
		s := &endpointSlices[i]
		name, ok := s.Labels[discoveryv1.LabelServiceName]
		if !ok {
			continue
		}
		k := serviceKey{s.Namespace, name}
		byService[k] = append(byService[k], *s)
	}

	order := make([]int, 0, len(services))
	seen := map[serviceKey]bool{}
	for i := range services {
		k := serviceKey{services[i].Namespace, services[i].Name}
		if !seen[k] {
			seen[k] = true
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(services[a].Namespace, services[b].Namespace), cmp.Compare(services[a].Name, services[b].Name))
	})

	res := FleetResult{Pools: []ServicePool{}, Skipped: []SkippedService{}}
	for _, i := range order {
		svc := &services[i]
		pool, err := poolOf(svc, byService[serviceKey{svc.Namespace, svc.Name}], q)
		var noPort *PortNotFoundError
		var noNodePort *NoNodePortError
		switch {
		case errors.As(err, &noPort) || errors.As(err, &noNodePort):
			res.Skipped = append(res.Skipped, SkippedService{Namespace: svc.Namespace, Name: svc.Name, Reason: err.Error()})
		case err != nil:
			return FleetResult{}, err
		default:
			res.Pools = append(res.Pools, ServicePool{Service: svc, Result: pool})
		}
	}
	return res, nil
}
