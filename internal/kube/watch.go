package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
)

// WatchEndpointSlices follows the Service's EndpointSlices from the state in
// from, with one WATCH, until done says the slices are what the caller waits
// for or ctx ends. It returns the last state seen, with ctx's error when it
// ended first. When the API server ends the watch it is resumed from the last
// resourceVersion seen; when that version is too old, the slices are listed
// again. Its error starts with "watch endpointslices of service NAMESPACE/NAME: ".
func (c *Client) WatchEndpointSlices(ctx context.Context, namespace, service string, from SliceList,
	done func([]discoveryv1.EndpointSlice) bool,
) ([]discoveryv1.EndpointSlice, error) {
	current := map[string]discoveryv1.EndpointSlice{}
	reset := func(list SliceList) {
		clear(current)
		for _, s := range list.Items {
			current[s.Name] = s
		}
	}
	reset(from)
	snapshot := func() []discoveryv1.EndpointSlice {
		out := make([]discoveryv1.EndpointSlice, 0, len(current))
		for _, name := range slices.Sorted(maps.Keys(current)) {
			out = append(out, current[name])
		}
		return out
	}
	fail := func(err error) ([]discoveryv1.EndpointSlice, error) {
		return snapshot(), fmt.Errorf("watch endpointslices of service %s/%s: %w", namespace, service, err)
	}

	rv, satisfied := from.ResourceVersion, done(snapshot())
	for !satisfied {
		if err := ctx.Err(); err != nil {
			return snapshot(), err
		}
		var w watch.Interface
		// The stream must live as long as the wait (ctx), not one attempt:
		// the attempt's context ends when the request returns its headers.
		err := c.withRetries(ctx, func(context.Context) error {
			var err error
			w, err = c.watcher.Get().MaxRetries(0).Namespace(namespace).Resource("endpointslices").
				Param("labelSelector", serviceSelector(service)).
				Param("resourceVersion", rv).
				Param("allowWatchBookmarks", "true").
				Param("watch", "true").
				Watch(ctx)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return snapshot(), ctx.Err()
			}
			return fail(err)
		}
		var end watchEnd
		rv, end, err = follow(w, current, rv, func() bool { return done(snapshot()) })
		w.Stop()
		if err != nil {
			return fail(err)
		}
		switch end {
		case watchSatisfied:
			satisfied = true
		case watchExpired:
			list, err := c.ListEndpointSlices(ctx, namespace, service)
			if err != nil {
				return snapshot(), err
			}
			reset(list)
			rv, satisfied = list.ResourceVersion, done(snapshot())
		case watchClosed:
		}
	}
	return snapshot(), nil
}

// watchEnd is why follow returned.
type watchEnd int

const (
	// watchClosed: the API server ended the watch; the next one resumes it.
	watchClosed watchEnd = iota
	// watchSatisfied: the slices are what the caller waits for.
	watchSatisfied
	// watchExpired: the version the watch started from is too old.
	watchExpired
)

// follow applies the events of one watch to current until satisfied holds or
// the watch ends, and returns the last resourceVersion seen and why it stopped.
func follow(w watch.Interface, current map[string]discoveryv1.EndpointSlice, rv string, satisfied func() bool) (string, watchEnd, error) {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			slice, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				return rv, watchClosed, fmt.Errorf("unexpected %T in a watch of EndpointSlices", ev.Object)
			}
			if ev.Type == watch.Deleted {
				delete(current, slice.Name)
			} else {
				current[slice.Name] = *slice
			}
			rv = slice.ResourceVersion
		case watch.Bookmark:
			if slice, ok := ev.Object.(*discoveryv1.EndpointSlice); ok {
				rv = slice.ResourceVersion
			}
			continue
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return rv, watchExpired, nil
			}
			var status *apierrors.StatusError
			if errors.As(err, &status) && status.ErrStatus.Code >= 500 {
				return rv, watchClosed, nil // the next watch starts where this one stopped
			}
			return rv, watchClosed, err
		}
		if satisfied() {
			return rv, watchSatisfied, nil
		}
	}
	return rv, watchClosed, nil
}
