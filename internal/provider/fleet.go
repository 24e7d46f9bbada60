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
	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

// fleetRequest is what one read of k8s_services asks for: the fleet, and
// how long the read may wait for its guards.
type fleetRequest struct {
	pools.FleetRequest
	// wait is how long to wait for the guards to hold; 0 means not at all.
	wait time.Duration
}

// fleetState is what the reads of the namespaces in scope found.
type fleetState struct {
	services []corev1.Service
	slices   map[string]kube.SliceList // by namespace
	// nodes is the one list of Nodes every Service's node pool is made of.
	nodes []corev1.Node
	// pods are those of the namespaces in scope, for pod_health_checks.
	pods []corev1.Pod
}

// objects are the state as pools.FleetRequest.Compute takes it.
func (s fleetState) objects() pools.FleetObjects {
	var all []discoveryv1.EndpointSlice
	for _, ns := range slices.Sorted(maps.Keys(s.slices)) {
		all = append(all, s.slices[ns].Items...)
	}
	return pools.FleetObjects{Services: s.services, EndpointSlices: all, Nodes: s.nodes, Pods: s.pods}
}

// readFleet lists the Services and the EndpointSlices of each namespace in
// scope (two requests each, plus continue pages), makes every selected
// Service's pool with pools.FleetRequest.Compute, and when a guard fails and
// waiting is allowed, follows the slices until the guards hold, or the time
// is up.
func readFleet(ctx context.Context, client *kube.Client, r fleetRequest) (endpoints.FleetResult, diag.Diagnostics) {
	var diags diag.Diagnostics
	state := fleetState{slices: map[string]kube.SliceList{}}
	for _, ns := range r.Namespaces {
		services, err := client.ListServices(ctx, ns, r.Selector)
		if err != nil {
			return endpoints.FleetResult{}, append(diags, listServicesDiagnostic(ns, err))
		}
		state.services = append(state.services, r.Selected(services.Items)...)
		list, err := client.ListServiceEndpointSlices(ctx, ns)
		if err != nil {
			return endpoints.FleetResult{}, append(diags, listServiceSlicesDiagnostic(ns, err))
		}
		state.slices[ns] = list
	}
	if r.Nodes.Enabled {
		nodes, err := client.ListNodes(ctx, r.Nodes.Selector)
		if err != nil {
			return endpoints.FleetResult{}, append(diags, listNodesDiagnostic(err))
		}
		state.nodes = nodes.Items
	}
	apply := func(s fleetState) (endpoints.FleetResult, error) {
		return r.Compute(s.objects(), time.Now())
	}
	res, err := apply(state)
	if err != nil {
		return endpoints.FleetResult{}, append(diags, rulesDiagnostic(err))
	}

	waited := false
	if !r.GuardsHold(res) && r.wait > 0 {
		waited = true
		var werr error
		res, werr = r.waitForGuards(ctx, client, state, res, apply)
		if werr != nil && !errors.Is(werr, context.DeadlineExceeded) && !errors.Is(werr, context.Canceled) {
			diags.Append(fleetWatchDiagnostic(werr))
		}
	}
	// As for one pool, the Pods are read once the guards hold.
	if r.ReadsPods() && r.GuardsHold(res) {
		for _, ns := range r.Namespaces {
			pods, err := client.ListPods(ctx, ns, "")
			if err != nil {
				return endpoints.FleetResult{}, append(diags, listPodsDiagnostic(ns, err))
			}
			state.pods = append(state.pods, pods.Items...)
		}
		if res, err = apply(state); err != nil {
			return endpoints.FleetResult{}, append(diags, rulesDiagnostic(err))
		}
	}
	for _, p := range res.Pools {
		diags.Append(expiryWarnings(p.Warnings)...)
	}
	if len(res.Pools) < r.MinServices {
		diags.Append(tooFewServicesDiagnostic(r, len(res.Pools), waited))
	}
	if short := r.ShortPools(res); len(short) > 0 {
		diags.Append(tooFewInPoolsDiagnostic(r, short, waited))
	}
	return res, diags
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
		if r.AllNamespaces() {
			ns = ""
		}
		servicesIn[ns] = append(servicesIn[ns], s)
	}
	for _, ns := range r.Namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := client.WatchServiceEndpointSlices(ctx, ns, state.slices[ns], func(items []discoveryv1.EndpointSlice) bool {
				mu.Lock()
				defer mu.Unlock()
				state.slices[ns] = kube.SliceList{Items: items}
				if len(res.Pools) < r.MinServices {
					if list, err := client.ListServices(ctx, ns, r.Selector); err == nil {
						servicesIn[ns] = r.Selected(list.Items)
					}
				}
				state.services = state.services[:0:0]
				for _, n := range r.Namespaces {
					state.services = append(state.services, servicesIn[n]...)
				}
				if next, err := apply(state); err == nil {
					res = next
				}
				if r.GuardsHold(res) {
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
	if firstErr == nil && !r.GuardsHold(res) {
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
