package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/kube"
	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

// readFleet reads the fleet through pools.FleetRequest.Read over the API
// (two requests per namespace in scope, plus continue pages); when a guard
// fails and waiting is allowed, the read follows the slices until the
// guards hold, or the time is up.
func readFleet(ctx context.Context, client *kube.Client, r fleetRequest) (endpoints.FleetResult, diag.Diagnostics) {
	opts := pools.FleetReadOptions{Now: time.Now}
	if r.wait > 0 {
		opts.WaitForGuards = func(ctx context.Context, snapshot *pools.FleetSnapshot, guards func() pools.FleetGuards) error {
			return r.waitForGuards(ctx, client, snapshot, guards)
		}
	}
	res, err := r.Read(ctx, podPagesUnder(&podPagesGC, client.Reader()), opts)
	short, diags, ok := shortRead(err, func(s *pools.FleetShortError) error { return s.WaitErr }, fleetWatchDiagnostic)
	if !ok {
		return endpoints.FleetResult{}, diags
	}
	services, leftOut := make([]string, len(res.Pools)), make([][]endpoints.LeftOutSlice, len(res.Pools))
	for i, p := range res.Pools {
		diags.Append(expiryWarnings(p.Warnings)...)
		services[i], leftOut[i] = p.Service.Namespace+"/"+p.Service.Name, p.LeftOut
	}
	diags.Append(leftOutWarning(services, leftOut)...)
	if short != nil && short.Services < r.MinServices {
		diags.Append(tooFewServicesDiagnostic(r, short.Services, short.Waited))
	}
	if short != nil && len(short.Short) > 0 {
		diags.Append(tooFewInPoolsDiagnostic(r, short.Short, short.Waited))
	}
	return res, diags
}

// waitForGuards follows the EndpointSlices of every namespace in scope, one
// WATCH each, updating snapshot and asking guards at each change, until the
// guards hold or ctx ends. While there are fewer Services than min_services,
// a change of slices (the EndpointSlice controller writes one for every new
// Service with a selector) lists the Services of that namespace again. It
// returns the first error of a watch, or ctx's when the guards never held.
func (r fleetRequest) waitForGuards(ctx context.Context, client *kube.Client, snapshot *pools.FleetSnapshot, guards func() pools.FleetGuards) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu       sync.Mutex
		firstErr error
		held     bool
		wg       sync.WaitGroup
	)
	for _, ns := range r.Namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			from := snapshot.Slices[ns]
			mu.Unlock()
			err := client.WatchServiceEndpointSlices(ctx, ns, from, func(items []discoveryv1.EndpointSlice) bool {
				mu.Lock()
				defer mu.Unlock()
				snapshot.Slices[ns] = pools.Slices{Items: items}
				g := guards()
				if g.TooFewServices {
					if list, err := client.ListServices(ctx, ns, r.Selector); err == nil {
						snapshot.Services[ns] = r.Selected(list.Items)
						g = guards()
					}
				}
				if g.Hold {
					held = true
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
	if firstErr == nil && !held {
		firstErr = context.DeadlineExceeded
	}
	return firstErr
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
