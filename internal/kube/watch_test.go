package kube

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func readySlice(name, rv string) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{
		TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: name, ResourceVersion: rv},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}},
	}
}

// watchEvents answers a WATCH with these events, as JSON lines, then ends it.
func watchEvents(w http.ResponseWriter, events ...metav1.WatchEvent) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for _, e := range events {
		_ = enc.Encode(e)
	}
}

func event(kind string, obj any) metav1.WatchEvent {
	raw, _ := json.Marshal(obj)
	e := metav1.WatchEvent{Type: kind}
	e.Object.Raw = raw
	return e
}

// watchServer answers a LIST of EndpointSlices and a watch of them, and
// counts each.
type watchServer struct{ lists, watches atomic.Int32 }

func (s *watchServer) handler(list discoveryv1.EndpointSliceList, watch func(w http.ResponseWriter, r *http.Request)) func(http.ResponseWriter, *http.Request, int32) {
	return func(w http.ResponseWriter, r *http.Request, _ int32) {
		if r.URL.Query().Get("watch") != "true" {
			s.lists.Add(1)
			writeJSON(w, 200, list)
			return
		}
		s.watches.Add(1)
		watch(w, r)
	}
}

// wantWatch watches web from resourceVersion 10 until there are n slices,
// and expects them named want after watches watches and lists lists.
func (s *watchServer) wantWatch(t *testing.T, ctx context.Context, c *Client, n int, want string, watches, lists int32) {
	t.Helper()
	var got []discoveryv1.EndpointSlice
	err := c.WatchEndpointSlices(ctx, "shop", "web", SliceList{ResourceVersion: "10"},
		func(sl []discoveryv1.EndpointSlice) bool { got = sl; return len(sl) == n })
	if err != nil {
		t.Fatal(err)
	}
	if names(got) != want || s.watches.Load() != watches || s.lists.Load() != lists {
		t.Errorf("slices %s after %d watches and %d lists, want %s after %d and %d", names(got), s.watches.Load(), s.lists.Load(), want, watches, lists)
	}
}

func TestWatchEndpointSlicesFollowsEventsUntilDone(t *testing.T) {
	var srv watchServer
	c, _ := newTestClient(t, srv.handler(discoveryv1.EndpointSliceList{}, func(w http.ResponseWriter, r *http.Request) {
		if got := r.URL.Query().Get("resourceVersion"); got != "10" {
			t.Errorf("watch from resourceVersion %q, want the list's, 10", got)
		}
		watchEvents(w, event("ADDED", readySlice("a", "11")), event("ADDED", readySlice("b", "12")))
	}))
	srv.wantWatch(t, context.Background(), c, 2, "a,b", 1, 0)
}

func TestWatchEndpointSlicesListsAgainWhenItsVersionIsTooOld(t *testing.T) {
	var srv watchServer
	c, _ := newTestClient(t, srv.handler(sliceList("20", readySlice("a", "20")), func(w http.ResponseWriter, r *http.Request) {
		expired := apierrors.NewResourceExpired("too old resource version: 10 (15)").Status()
		expired.APIVersion, expired.Kind = "v1", "Status"
		watchEvents(w, event("ERROR", expired))
	}))
	srv.wantWatch(t, context.Background(), c, 1, "a", 1, 1)
}

func TestWatchEndpointSlicesStopsWhenTheWaitEnds(t *testing.T) {
	c, _ := newTestClient(t, func(w http.ResponseWriter, r *http.Request, _ int32) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done() // a watch with nothing to say
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var got []discoveryv1.EndpointSlice
	err := c.WatchEndpointSlices(ctx, "shop", "web", SliceList{Items: []discoveryv1.EndpointSlice{readySlice("a", "1")}, ResourceVersion: "1"},
		func(s []discoveryv1.EndpointSlice) bool { got = s; return len(s) == 2 })
	if err == nil || names(got) != "a" {
		t.Fatalf("got %s, %v; want the last state seen and the context's error", names(got), err)
	}
}

func TestWatchEndpointSlicesResumesFromTheLastVersionSeenWhenTheServerEndsTheWatch(t *testing.T) {
	var watches atomic.Int32
	c, _ := newTestClient(t, func(w http.ResponseWriter, r *http.Request, _ int32) {
		if r.URL.Query().Get("watch") != "true" {
			t.Errorf("a LIST, want only watches")
			return
		}
		from := r.URL.Query().Get("resourceVersion")
		switch watches.Add(1) {
		case 1:
			if from != "10" {
				t.Errorf("first watch from %q, want 10", from)
			}
			watchEvents(w, event("ADDED", readySlice("a", "11")))
		default:
			if from != "11" {
				t.Errorf("resumed watch from %q, want the last version seen, 11", from)
			}
			watchEvents(w, event("ADDED", readySlice("b", "12")))
		}
	})
	var got []discoveryv1.EndpointSlice
	err := c.WatchEndpointSlices(context.Background(), "shop", "web", SliceList{ResourceVersion: "10"},
		func(s []discoveryv1.EndpointSlice) bool { got = s; return len(s) == 2 })
	if err != nil {
		t.Fatal(err)
	}
	if names(got) != "a,b" || watches.Load() != 2 {
		t.Errorf("slices %s after %d watches, want a,b after 2", names(got), watches.Load())
	}
}

func TestAWatchThatCannotStartFailsTheWaitWithinItsBounds(t *testing.T) {
	tests := []struct {
		name     string
		status   *apierrors.StatusError
		requests int32
		want     string
	}{
		{"forbidden is given at once", apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", errors.New("no watch")),
			1, "watch endpointslices of service shop/web: endpointslices.discovery.k8s.io is forbidden"},
		{"a server error is retried, then given", apierrors.NewServiceUnavailable("etcd is down"),
			3, "watch endpointslices of service shop/web: gave up after 3 attempts: etcd is down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, calls := newTestClient(t, func(w http.ResponseWriter, _ *http.Request, _ int32) { writeStatus(w, tt.status) })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := c.WatchEndpointSlices(ctx, "shop", "web", SliceList{ResourceVersion: "10"},
				func([]discoveryv1.EndpointSlice) bool { return false })
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to start with %q", err, tt.want)
			}
			if ctx.Err() != nil {
				t.Error("the wait ran out its deadline instead of failing")
			}
			if calls.Load() != tt.requests {
				t.Errorf("%d requests, want %d", calls.Load(), tt.requests)
			}
		})
	}
}

func TestAnErrorEventThatANewWatchWouldNotCureFailsTheWait(t *testing.T) {
	var watches atomic.Int32
	c, _ := newTestClient(t, func(w http.ResponseWriter, _ *http.Request, _ int32) {
		watches.Add(1)
		bad := apierrors.NewBadRequest("unsupported selector").Status()
		bad.APIVersion, bad.Kind = "v1", "Status"
		watchEvents(w, event("ERROR", bad))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.WatchEndpointSlices(ctx, "shop", "web", SliceList{ResourceVersion: "10"},
		func([]discoveryv1.EndpointSlice) bool { return false })
	if !apierrors.IsBadRequest(err) || ctx.Err() != nil {
		t.Fatalf("error = %v (deadline: %v), want the bad request at once", err, ctx.Err())
	}
	if watches.Load() != 1 {
		t.Errorf("%d watches, want 1", watches.Load())
	}
}

func TestAWatchRefusedForATooOldVersionListsAgain(t *testing.T) {
	var srv watchServer
	c, _ := newTestClient(t, srv.handler(sliceList("20", readySlice("a", "20")), func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, apierrors.NewResourceExpired("too old resource version: 10 (15)"))
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.wantWatch(t, ctx, c, 1, "a", 1, 1)
}
