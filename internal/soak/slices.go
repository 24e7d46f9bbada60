package soak

import (
	"context"
	"fmt"
	"slices"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// The judge's view of the EndpointSlices: the companion settles on what it
// sees of them, not on the driver's writes. The EndpointSlice controller
// writes a burst's slices over a second or more when it is busy, so that
// the changes the driver wrote in 0.4 s can reach the companion as two
// settled windows, each one run that applies a real change. The check that
// no run is for nothing windows a workspace's changes by when its pools'
// slices showed them (sliceSeen), as the companion does; faults and the
// latency still go by the driver's writes.

// sliceMembers are a Service's ready endpoints as its IPv4 EndpointSlices
// say, address:port, sorted and without duplicates, computed here apart
// from the provider's own rules: an endpoint whose ready condition is true
// or unset (the API's "consumers should interpret this unknown state as
// ready"), with its slice's first port.
func sliceMembers(list []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, sl := range list {
		if sl.AddressType != discoveryv1.AddressTypeIPv4 || len(sl.Ports) == 0 || sl.Ports[0].Port == nil {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				out = append(out, fmt.Sprintf("%s:%d", addr, *sl.Ports[0].Port))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// watchSlices keeps, until ctx ends, each pool's members as its
// EndpointSlices show them, and pairs them with the changes (sliceMatch),
// from a shared informer of the cluster's EndpointSlices.
func (j *judge) watchSlices(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(j.s.client, 0)
	inf := factory.Discovery().V1().EndpointSlices()
	lister := inf.Lister()
	changed := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		sl, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || sl.Labels[discoveryv1.LabelServiceName] == "" {
			return
		}
		p := pool{namespace: sl.Namespace, service: sl.Labels[discoveryv1.LabelServiceName]}
		all, err := lister.EndpointSlices(p.namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: p.service}))
		if err != nil {
			return
		}
		j.sliceMatch(p, sliceMembers(all), time.Now())
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(sctx.Done()) {
		if !ok {
			return fmt.Errorf("the judge's informer of %v did not sync within 2 minutes", typ)
		}
	}
	return nil
}

// sliceMatch pairs what p's slices now show with the changes of p, as
// state's members are paired (MatchState), in the judge's own list of
// them: the last change of p not yet shown whose pool the slices show is
// shown at now, the earlier ones superseded.
func (j *judge) sliceMatch(p pool, members []string, now time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if prev, ok := j.sliced[p]; ok && slices.Equal(prev, members) {
		return
	}
	j.sliced[p] = members
	MatchState(j.slicePairs, p.String(), members, now)
}

// sliceSeenLocked is when each change's pool was shown by its slices: when
// it, or a later change of its pool that superseded it, was (Resolutions).
// The caller holds j.mu (the verdict does).
func (j *judge) sliceSeenLocked() map[*change]time.Time {
	resolved := Resolutions(j.slicePairs)
	out := map[*change]time.Time{}
	for i, c := range j.changes {
		if t, ok := resolved[j.slicePairs[i]]; ok {
			out[c] = t
		}
	}
	return out
}
