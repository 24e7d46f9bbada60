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
// settled windows, each one run that applies a real change; and a pod
// replaced reaches it as two changes when the new pod is ready more than
// the quiet time after the old one left. The check that no run is for
// nothing windows a workspace's changes by when its pools' slices changed
// (shownChanges), as the companion does; the latency still goes from the
// driver's writes.

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
// EndpointSlices show them and when they changed (sliceChanged), from a
// shared informer of the cluster's EndpointSlices.
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
		// The pool as the driver names it (the fleet's Services are those
		// of their namespace).
		p := pool{namespace: sl.Namespace, service: sl.Labels[discoveryv1.LabelServiceName], fleet: sl.Namespace == nsFleet}
		all, err := lister.EndpointSlices(p.namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: p.service}))
		if err != nil {
			return
		}
		j.sliceChanged(p, sliceMembers(all), time.Now())
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

// sliceChanged records a change of p's members as its slices show them at
// now: an event the companion sees. The first sight of a pool (the
// informer's first list) is none.
func (j *judge) sliceChanged(p pool, members []string, now time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	prev, ok := j.sliced[p]
	if ok && slices.Equal(prev, members) {
		return
	}
	j.sliced[p] = members
	if ok {
		j.sliceEvents[p] = append(j.sliceEvents[p], now)
	}
}

// shownChanges are what the companion could see of one workspace's
// changes, for countRuns: each change of a pool's members as its slices
// showed it (events), with the write of the driver's latest change of that
// pool before it (an event that no change preceded is not the driver's and
// is left out); and, at their writes, the changes that no event followed
// before the next change of their pool (undone before the controller
// wrote them, or never shown). A change the controller writes in two
// steps (a pod replaced: the old one's removal, then the new one's
// readiness) is two events, as the companion sees them.
func shownChanges(written map[pool][]time.Time, events map[pool][]time.Time) []madeChange {
	var out []madeChange
	for p, writes := range written {
		writes = slices.Clone(writes)
		slices.SortFunc(writes, time.Time.Compare)
		followed := make([]bool, len(writes))
		for _, t := range events[p] {
			// The latest write at or before t.
			i, found := slices.BinarySearchFunc(writes, t, time.Time.Compare)
			if !found {
				i--
			}
			if i < 0 {
				continue
			}
			followed[i] = true
			out = append(out, madeChange{at: writes[i], sliced: t})
		}
		for i, at := range writes {
			if !followed[i] {
				out = append(out, madeChange{at: at})
			}
		}
	}
	return out
}
