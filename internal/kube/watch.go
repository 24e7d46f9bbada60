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
// from, with one WATCH, calling done with every new state, until done says
// the slices are what the caller waits for (nil) or ctx ends (ctx's error).
// When the API server ends the watch it is resumed from the last
// resourceVersion seen; when that version is too old, the slices are listed
// again. Its error starts with "watch endpointslices of service NAMESPACE/NAME: ".
func (c *Client) WatchEndpointSlices(ctx context.Context, namespace, service string, from SliceList,
	done func([]discoveryv1.EndpointSlice) bool,
) error {
	relist := func(ctx context.Context) (SliceList, error) { return c.ListEndpointSlices(ctx, namespace, service) }
	err := c.watchSlices(ctx, namespace, serviceSelector(service), from, relist, done)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("watch endpointslices of service %s/%s: %w", namespace, service, err)
	}
	return err
}

// WatchServiceEndpointSlices is WatchEndpointSlices for every EndpointSlice
// of a namespace (every namespace when it is empty) that is labelled for a
// Service, as ListServiceEndpointSlices lists them. Its error starts with
// "watch endpointslices in namespace NAMESPACE: " or "... in all namespaces: ".
func (c *Client) WatchServiceEndpointSlices(ctx context.Context, namespace string, from SliceList,
	done func([]discoveryv1.EndpointSlice) bool,
) error {
	relist := func(ctx context.Context) (SliceList, error) { return c.ListServiceEndpointSlices(ctx, namespace) }
	err := c.watchSlices(ctx, namespace, discoveryv1.LabelServiceName, from, relist, done)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("watch endpointslices in %s: %w", Scope(namespace), err)
	}
	return err
}

func (c *Client) watchSlices(ctx context.Context, namespace, selector string, from SliceList,
	relist func(context.Context) (SliceList, error), done func([]discoveryv1.EndpointSlice) bool,
) error {
	current := map[string]discoveryv1.EndpointSlice{}
	reset := func(list SliceList) {
		clear(current)
		for _, s := range list.Items {
			current[sliceKey(&s)] = s
		}
	}
	reset(from)
	satisfied := func() bool {
		out := make([]discoveryv1.EndpointSlice, 0, len(current))
		for _, k := range slices.Sorted(maps.Keys(current)) {
			out = append(out, current[k])
		}
		return done(out)
	}

	rv, ok := from.ResourceVersion, satisfied()
	for !ok {
		if err := ctx.Err(); err != nil {
			return err
		}
		var w watch.Interface
		// The stream must live as long as the wait (ctx), not one attempt:
		// the attempt's context ends when the request returns its headers.
		err := c.withRetries(ctx, func(context.Context) error {
			var err error
			w, err = c.watcher.Get().MaxRetries(0).Namespace(namespace).Resource("endpointslices").
				Param("labelSelector", selector).
				Param("resourceVersion", rv).
				Param("allowWatchBookmarks", "true").
				Param("watch", "true").
				Watch(ctx)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		var end watchEnd
		rv, end, err = follow(w, current, rv, satisfied)
		w.Stop()
		if err != nil {
			return err
		}
		switch end {
		case watchSatisfied:
			ok = true
		case watchExpired:
			list, err := relist(ctx)
			if err != nil {
				return err
			}
			reset(list)
			rv, ok = list.ResourceVersion, satisfied()
		case watchClosed:
		}
	}
	return nil
}

// sliceKey identifies a slice in a watch that may span namespaces.
func sliceKey(s *discoveryv1.EndpointSlice) string { return s.Namespace + "/" + s.Name }

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
				delete(current, sliceKey(slice))
			} else {
				current[sliceKey(slice)] = *slice
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
