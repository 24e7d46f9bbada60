package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
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
		expired, err := c.followSlices(ctx, namespace, selector, rv, current, satisfied)
		if err != nil || !expired {
			return err
		}
		list, err := relist(ctx)
		if err != nil {
			return err
		}
		reset(list)
		rv, ok = list.ResourceVersion, satisfied()
	}
	return nil
}

// sliceKey identifies a slice in a watch that may span namespaces.
func sliceKey(s *discoveryv1.EndpointSlice) string { return s.Namespace + "/" + s.Name }

// errWatchExpired ends a watch whose resourceVersion is too old to resume.
var errWatchExpired = errors.New("the watch's resourceVersion is too old")

// followSlices applies the events of the slices from rv on to current until
// satisfied holds (false, nil) or rv is too old to go on from (true, nil).
// client-go's RetryWatcher resumes the watch from the last version seen
// whenever the API server ends it; sliceSource keeps each WATCH request
// bounded and retried like every other request, and stops the wait at an
// error that no retry cures, which RetryWatcher alone would retry until
// the caller's deadline.
func (c *Client) followSlices(ctx context.Context, namespace, selector, rv string,
	current map[string]discoveryv1.EndpointSlice, satisfied func() bool,
) (expired bool, err error) {
	// client-go's watch tools log through klog, to the plugin's stderr: the
	// error this returns says what went wrong, once.
	watchCtx, cancel := context.WithCancel(klog.NewContext(ctx, logr.Discard()))
	defer cancel()
	source := &sliceSource{client: c, namespace: namespace, selector: selector, stop: cancel}
	w, err := watchtools.NewRetryWatcherWithContext(watchCtx, rv, source)
	if err != nil {
		return false, err
	}
	_, err = watchtools.UntilWithoutRetry(watchCtx, w, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			slice, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				return false, fmt.Errorf("unexpected %T in a watch of EndpointSlices", ev.Object)
			}
			if ev.Type == watch.Deleted {
				delete(current, sliceKey(slice))
			} else {
				current[sliceKey(slice)] = *slice
			}
			return satisfied(), nil
		case watch.Error:
			// RetryWatcher hands on only what it cannot resume from: a
			// version too old, or an error of its own.
			if err := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				return false, err
			}
			return false, errWatchExpired
		}
		return false, nil
	})
	w.Stop()
	<-w.Done()
	if failed := source.failure(); failed != nil {
		return false, failed
	}
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, errWatchExpired):
		return true, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	}
	return false, err
}

// sliceSource makes the WATCH requests of a RetryWatcher: each one bounded
// and retried by withRetries, and the wait stopped (stop) with the error of a
// request that gave up or of an event that no retry cures.
type sliceSource struct {
	client              *Client
	namespace, selector string
	stop                context.CancelFunc

	mu     sync.Mutex
	failed error
}

func (s *sliceSource) fail(err error) {
	s.mu.Lock()
	if s.failed == nil {
		s.failed = err
	}
	s.mu.Unlock()
	s.stop()
}

func (s *sliceSource) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *sliceSource) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	var w watch.Interface
	// The stream must live as long as the wait (ctx), not one attempt: the
	// attempt's context ends when the request returns its headers.
	err := s.client.withRetries(ctx, func(context.Context) error {
		var err error
		w, err = s.client.watcher.Get().MaxRetries(0).Namespace(s.namespace).Resource("endpointslices").
			Param("labelSelector", s.selector).
			Param("resourceVersion", opts.ResourceVersion).
			Param("allowWatchBookmarks", strconv.FormatBool(opts.AllowWatchBookmarks)).
			Param("watch", "true").
			Watch(ctx)
		return err
	})
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return s.failFast(ctx, w), nil
	case (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) && errors.As(err, &status):
		// Handed on as the event an API server sends in a watch, which
		// RetryWatcher passes on, so that the slices are listed again
		// (RetryWatcher alone would ask for the same version forever).
		expired := status.Status()
		events := make(chan watch.Event, 1)
		events <- watch.Event{Type: watch.Error, Object: &expired}
		close(events)
		return watch.NewProxyWatcher(events), nil
	case ctx.Err() == nil:
		s.fail(err)
	}
	return nil, err
}

// failFast passes the events of w on, but fails the wait at the first error
// event that a new watch would not cure: the API server resumes after a 5xx
// and is listed again after a 410; anything else is given to the caller.
func (s *sliceSource) failFast(ctx context.Context, w watch.Interface) watch.Interface {
	events := make(chan watch.Event)
	go func() {
		defer close(events)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				err := apierrors.FromObject(ev.Object)
				var status *apierrors.StatusError
				resumable := errors.As(err, &status) && status.ErrStatus.Code >= 500
				if !resumable && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
					s.fail(err)
					return
				}
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return &forwardedWatch{Interface: w, events: events}
}

// forwardedWatch is a watch whose events pass through a goroutine first; Stop
// stops the watch underneath, which ends the goroutine.
type forwardedWatch struct {
	watch.Interface
	events chan watch.Event
}

func (f *forwardedWatch) ResultChan() <-chan watch.Event { return f.events }
