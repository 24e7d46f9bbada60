package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// fleetRequest is what one read of k8s_services asks for.
type fleetRequest struct {
	// namespaces are read one by one; [""] means all of them at once.
	namespaces []string
	selector   string
	// names keeps only these Services; empty keeps all.
	names []string
	query endpoints.Query
	// nodes, when enabled, makes each Service's pool of nodes.
	nodes nodeTarget
	// minReady is the fewest ready endpoints each pool may have (draining
	// ones are not counted), minServices the
	// fewest Services; 0 means no guard.
	minReady, minServices int
	// wait is how long to wait for the guards to hold; 0 means not at all.
	wait time.Duration
}

// fleetState is what the reads of the namespaces in scope found.
type fleetState struct {
	services []corev1.Service
	slices   map[string]kube.SliceList // by namespace
	// nodes is the one list of Nodes every Service's node pool is made of.
	nodes []corev1.Node
}

func (s fleetState) allSlices() []discoveryv1.EndpointSlice {
	var all []discoveryv1.EndpointSlice
	for _, ns := range slices.Sorted(maps.Keys(s.slices)) {
		all = append(all, s.slices[ns].Items...)
	}
	return all
}

// readFleet lists the Services and the EndpointSlices of each namespace in
// scope (two requests each, plus continue pages), applies the rules to every
// selected Service, and when a guard fails and waiting is allowed, follows
// the slices until the guards hold, or the time is up.
func readFleet(ctx context.Context, client *kube.Client, r fleetRequest) (endpoints.FleetResult, diag.Diagnostics) {
	var diags diag.Diagnostics
	state := fleetState{slices: map[string]kube.SliceList{}}
	for _, ns := range r.namespaces {
		services, err := client.ListServices(ctx, ns, r.selector)
		if err != nil {
			return endpoints.FleetResult{}, append(diags, listServicesDiagnostic(ns, err))
		}
		state.services = append(state.services, r.selected(services.Items)...)
		list, err := client.ListServiceEndpointSlices(ctx, ns)
		if err != nil {
			return endpoints.FleetResult{}, append(diags, listServiceSlicesDiagnostic(ns, err))
		}
		state.slices[ns] = list
	}
	if r.nodes.enabled {
		nodes, err := client.ListNodes(ctx, r.nodes.selector)
		if err != nil {
			return endpoints.FleetResult{}, append(diags, listNodesDiagnostic(err))
		}
		state.nodes = nodes.Items
	}
	apply := func(s fleetState) (endpoints.FleetResult, error) {
		q := r.query
		q.Now = time.Now()
		if r.nodes.enabled {
			return endpoints.NodeFleet(s.services, s.allSlices(), s.nodes, q)
		}
		return endpoints.Fleet(s.services, s.allSlices(), q)
	}
	res, err := apply(state)
	if err != nil {
		return endpoints.FleetResult{}, append(diags, rulesDiagnostic(err))
	}

	waited := false
	if !r.guardsHold(res) && r.wait > 0 {
		waited = true
		var werr error
		res, werr = r.waitForGuards(ctx, client, state, res, apply)
		if werr != nil && !errors.Is(werr, context.DeadlineExceeded) && !errors.Is(werr, context.Canceled) {
			diags.Append(fleetWatchDiagnostic(werr))
		}
	}
	for _, p := range res.Pools {
		diags.Append(expiryWarnings(p.Warnings)...)
	}
	if len(res.Pools) < r.minServices {
		diags.Append(tooFewServicesDiagnostic(r, len(res.Pools), waited))
	}
	if short := r.shortPools(res); len(short) > 0 {
		diags.Append(tooFewInPoolsDiagnostic(r, short, waited))
	}
	return res, diags
}

// selected keeps the Services whose names were asked for.
func (r fleetRequest) selected(services []corev1.Service) []corev1.Service {
	if len(r.names) == 0 {
		return services
	}
	out := make([]corev1.Service, 0, len(r.names))
	for _, s := range services {
		if slices.Contains(r.names, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

func (r fleetRequest) guardsHold(res endpoints.FleetResult) bool {
	return len(res.Pools) >= r.minServices && len(r.shortPools(res)) == 0
}

// shortPools are the pools with fewer than minReady ready endpoints.
func (r fleetRequest) shortPools(res endpoints.FleetResult) []endpoints.ServicePool {
	var short []endpoints.ServicePool
	for _, p := range res.Pools {
		if endpoints.CountReady(p.Endpoints) < r.minReady {
			short = append(short, p)
		}
	}
	return short
}

// waitForGuards follows the EndpointSlices of every namespace in scope, one
// WATCH each, applying the rules at each change, until the guards hold or
// ctx ends. While there are fewer Services than min_services, a change of
// slices (the EndpointSlice controller writes one for every new Service with
// a selector) lists the Services of that namespace again. It returns the last
// result and the first error of a watch.
func (r fleetRequest) waitForGuards(ctx context.Context, client *kube.Client, state fleetState, res endpoints.FleetResult,
	apply func(fleetState) (endpoints.FleetResult, error),
) (endpoints.FleetResult, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	servicesIn := map[string][]corev1.Service{}
	for _, s := range state.services {
		ns := s.Namespace
		if len(r.namespaces) == 1 && r.namespaces[0] == "" {
			ns = ""
		}
		servicesIn[ns] = append(servicesIn[ns], s)
	}
	for _, ns := range r.namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := client.WatchServiceEndpointSlices(ctx, ns, state.slices[ns], func(items []discoveryv1.EndpointSlice) bool {
				mu.Lock()
				defer mu.Unlock()
				state.slices[ns] = kube.SliceList{Items: items}
				if len(res.Pools) < r.minServices {
					if list, err := client.ListServices(ctx, ns, r.selector); err == nil {
						servicesIn[ns] = r.selected(list.Items)
					}
				}
				state.services = state.services[:0:0]
				for _, n := range r.namespaces {
					state.services = append(state.services, servicesIn[n]...)
				}
				if next, err := apply(state); err == nil {
					res = next
				}
				if r.guardsHold(res) {
					stop()
					return true
				}
				return false
			})
			if err != nil && !errors.Is(err, context.Canceled) {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
					stop()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if firstErr == nil && !r.guardsHold(res) {
		firstErr = context.DeadlineExceeded
	}
	return res, firstErr
}

// describeShort names the Services short of min_ready with their counts of
// ready endpoints.
func describeShort(short []endpoints.ServicePool) string {
	var b []byte
	for i, p := range short {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "%s/%s (%d)", p.Service.Namespace, p.Service.Name, endpoints.CountReady(p.Endpoints))
	}
	return string(b)
}
