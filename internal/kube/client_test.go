package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// These tests speak real HTTP to a stand-in API server, to pin down what the
// client does with each kind of answer. The acceptance tests prove the same
// against a real kube-apiserver.

func testOptions() Options {
	o := DefaultOptions()
	o.RequestTimeout = 300 * time.Millisecond
	o.Backoff = time.Millisecond
	o.MaxRetryAfter = 20 * time.Millisecond
	o.PageSize = 2
	return o
}

// newTestClient serves h, telling it which request (from 1) it answers.
func newTestClient(t *testing.T, h func(w http.ResponseWriter, r *http.Request, call int32)) (*Client, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(w, r, calls.Add(1))
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(&rest.Config{Host: srv.URL}, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	return c, &calls
}

// wantRequests fails the test unless the server got n requests; why says
// what more requests would mean.
func wantRequests(t *testing.T, calls *atomic.Int32, n int32, why ...string) {
	t.Helper()
	if got := calls.Load(); got != n {
		t.Errorf("%d requests, want %d %v", got, n, why)
	}
}

// sliceList is a LIST answer of EndpointSlices at resourceVersion rv.
func sliceList(rv string, items ...discoveryv1.EndpointSlice) discoveryv1.EndpointSliceList {
	return discoveryv1.EndpointSliceList{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSliceList"},
		ListMeta: metav1.ListMeta{ResourceVersion: rv},
		Items:    items,
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.APIVersion, st.Kind = "v1", "Status"
	writeJSON(w, int(st.Code), st)
}

var (
	servicesGR = schema.GroupResource{Resource: "services"}
	webService = corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
)

func TestGetServiceReadsTheServiceAndAsksForProtobuf(t *testing.T) {
	c, calls := newTestClient(t, func(w http.ResponseWriter, r *http.Request, _ int32) {
		if r.URL.Path != "/api/v1/namespaces/shop/services/web" {
			t.Errorf("path = %s", r.URL.Path)
		}
		if !strings.HasPrefix(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf") {
			t.Errorf("Accept = %q, want protobuf first", r.Header.Get("Accept"))
		}
		writeJSON(w, 200, webService)
	})
	svc, err := c.GetService(context.Background(), "shop", "web")
	if err != nil {
		t.Fatal(err)
	}
	if svc.Name != "web" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" {
		t.Errorf("service = %+v", svc)
	}
	wantRequests(t, calls, 1)
}

func TestErrorsThatARetryCannotCureAreGivenAtOnceAndWrapped(t *testing.T) {
	tests := []struct {
		name   string
		status *apierrors.StatusError
		is     func(error) bool
	}{
		{"not found", apierrors.NewNotFound(servicesGR, "web"), apierrors.IsNotFound},
		{"forbidden", apierrors.NewForbidden(servicesGR, "web", errors.New("no RBAC rule")), apierrors.IsForbidden},
		{"unauthorized", apierrors.NewUnauthorized("bad token"), apierrors.IsUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, calls := newTestClient(t, func(w http.ResponseWriter, _ *http.Request, _ int32) { writeStatus(w, tt.status) })
			_, err := c.GetService(context.Background(), "shop", "web")
			if err == nil || !strings.HasPrefix(err.Error(), "get service shop/web: ") {
				t.Fatalf("error = %v, want it to start with the SPEC text", err)
			}
			if !tt.is(err) {
				t.Errorf("error %v lost its API status through wrapping", err)
			}
			wantRequests(t, calls, 1, "this error must not be retried")
		})
	}
}

func TestTooManyRequestsIsRetriedAfterTheAskedDelay(t *testing.T) {
	c, calls := newTestClient(t, func(w http.ResponseWriter, _ *http.Request, call int32) {
		if call == 1 {
			w.Header().Set("Retry-After", "1")
			writeStatus(w, apierrors.NewTooManyRequests("slow down", 1))
			return
		}
		writeJSON(w, 200, webService)
	})
	if _, err := c.GetService(context.Background(), "shop", "web"); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, calls, 2)
}

func TestServerErrorsAreRetriedABoundedNumberOfTimes(t *testing.T) {
	c, calls := newTestClient(t, func(w http.ResponseWriter, _ *http.Request, _ int32) {
		writeStatus(w, apierrors.NewServiceUnavailable("etcd is down"))
	})
	_, err := c.GetService(context.Background(), "shop", "web")
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") {
		t.Fatalf("error = %v", err)
	}
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("error %v lost its API status", err)
	}
	wantRequests(t, calls, 3)
}

func TestADroppedConnectionIsRetried(t *testing.T) {
	c, calls := newTestClient(t, func(w http.ResponseWriter, _ *http.Request, call int32) {
		if call == 1 {
			hijacker, ok := w.(http.Hijacker)
			if !ok {
				t.Error("the test server cannot drop connections")
				return
			}
			conn, _, err := hijacker.Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_ = conn.Close()
			return
		}
		writeJSON(w, 200, webService)
	})
	if _, err := c.GetService(context.Background(), "shop", "web"); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, calls, 2)
}

func TestAStalledServerGivesATimeoutErrorInsteadOfHanging(t *testing.T) {
	release := make(chan struct{})
	c, calls := newTestClient(t, func(_ http.ResponseWriter, r *http.Request, _ int32) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	_, err := c.GetService(context.Background(), "shop", "web")
	var timeout *TimeoutError
	if !errors.As(err, &timeout) {
		t.Fatalf("error = %v, want a *TimeoutError", err)
	}
	if !strings.Contains(err.Error(), "did not answer within 300ms") {
		t.Errorf("error = %v, want the bound in it", err)
	}
	wantRequests(t, calls, 3)
}

func TestACancelledReadStopsRetrying(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c, calls := newTestClient(t, func(w http.ResponseWriter, _ *http.Request, _ int32) {
		cancel()
		writeStatus(w, apierrors.NewInternalError(errors.New("boom")))
	})
	if _, err := c.GetService(ctx, "shop", "web"); err == nil {
		t.Fatal("want an error")
	}
	wantRequests(t, calls, 1)
}

// slicePages serves the EndpointSlices named in pages, one page per request,
// chaining them with continue tokens "1", "2", ...
type slicePages struct {
	t     *testing.T
	pages [][]string
	// expireOnce makes the first request with this continue token fail with
	// 410 Expired, as after an API server restart or an etcd compaction.
	expireOnce string
	// failFrom makes every request for this page and after fail with a 500.
	failFrom int

	mu      sync.Mutex
	expired bool
}

func (p *slicePages) serve(w http.ResponseWriter, r *http.Request, _ int32) {
	q := r.URL.Query()
	if r.URL.Path != "/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices" {
		p.t.Errorf("path = %s", r.URL.Path)
	}
	if got := q.Get("labelSelector"); got != "kubernetes.io/service-name=web" {
		p.t.Errorf("labelSelector = %q", got)
	}
	if got := q.Get("limit"); got != "2" {
		p.t.Errorf("limit = %q", got)
	}
	token := q.Get("continue")
	p.mu.Lock()
	expire := token != "" && token == p.expireOnce && !p.expired
	if expire {
		p.expired = true
	}
	p.mu.Unlock()
	if expire {
		writeStatus(w, apierrors.NewResourceExpired("The provided continue parameter is too old"))
		return
	}
	page := 0
	if token != "" {
		_, _ = fmt.Sscan(token, &page)
	}
	if p.failFrom > 0 && page >= p.failFrom {
		writeStatus(w, apierrors.NewInternalError(errors.New("etcd went away")))
		return
	}
	list := discoveryv1.EndpointSliceList{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSliceList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42"},
	}
	for _, name := range p.pages[page] {
		list.Items = append(list.Items, discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: name},
			AddressType: discoveryv1.AddressTypeIPv4,
		})
	}
	if page+1 < len(p.pages) {
		list.Continue = fmt.Sprint(page + 1)
	}
	writeJSON(w, 200, list)
}

func names(items []discoveryv1.EndpointSlice) string {
	var out []string
	for _, s := range items {
		out = append(out, s.Name)
	}
	return strings.Join(out, ",")
}

func TestListEndpointSlicesReadsEveryPage(t *testing.T) {
	pages := &slicePages{t: t, pages: [][]string{{"a", "b"}, {"c", "d"}, {"e"}}}
	c, calls := newTestClient(t, pages.serve)
	list, err := c.ListEndpointSlices(context.Background(), "shop", "web")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(list.Items); got != "a,b,c,d,e" {
		t.Errorf("slices = %s, want a,b,c,d,e", got)
	}
	if list.ResourceVersion != "42" {
		t.Errorf("resourceVersion = %q, want the list's, 42", list.ResourceVersion)
	}
	wantRequests(t, calls, 3)
}

func TestListEndpointSlicesOfAServiceWithoutSlicesIsEmptyNotNil(t *testing.T) {
	c, _ := newTestClient(t, (&slicePages{t: t, pages: [][]string{{}}}).serve)
	list, err := c.ListEndpointSlices(context.Background(), "shop", "web")
	if err != nil || list.Items == nil || len(list.Items) != 0 {
		t.Fatalf("items = %v, err = %v; want an empty list", list.Items, err)
	}
}

func TestAnExpiredContinueTokenStartsTheListOver(t *testing.T) {
	pages := &slicePages{t: t, pages: [][]string{{"a", "b"}, {"c", "d"}, {"e"}}, expireOnce: "2"}
	c, calls := newTestClient(t, pages.serve)
	list, err := c.ListEndpointSlices(context.Background(), "shop", "web")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(list.Items); got != "a,b,c,d,e" {
		t.Errorf("slices = %s, want each once: a,b,c,d,e", got)
	}
	// pages 0, 1, the expired 2, then 0, 1, 2 again
	wantRequests(t, calls, 6)
}

func TestAContinueTokenThatAlwaysExpiresStartsTheListOverABoundedNumberOfTimes(t *testing.T) {
	c, calls := newTestClient(t, func(w http.ResponseWriter, r *http.Request, _ int32) {
		if r.URL.Query().Get("continue") != "" {
			writeStatus(w, apierrors.NewResourceExpired("The provided continue parameter is too old"))
			return
		}
		writeJSON(w, 200, discoveryv1.EndpointSliceList{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSliceList"},
			ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "1"},
			Items:    []discoveryv1.EndpointSlice{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "a"}, AddressType: discoveryv1.AddressTypeIPv4}},
		})
	})
	list, err := c.ListEndpointSlices(context.Background(), "shop", "web")
	if !apierrors.IsResourceExpired(err) || list.Items != nil {
		t.Fatalf("items = %v, err = %v; want no items and the expired error", names(list.Items), err)
	}
	// the list and maxRelists lists more, each a first page and an expired one
	if want := int32(2 * (1 + maxRelists)); calls.Load() != want {
		t.Errorf("%d requests, want %d", calls.Load(), want)
	}
}

func TestAFailingPageFailsTheWholeListRatherThanGivingPartOfIt(t *testing.T) {
	pages := &slicePages{t: t, pages: [][]string{{"a", "b"}, {"c", "d"}, {"e"}}, failFrom: 1}
	c, _ := newTestClient(t, pages.serve)
	list, err := c.ListEndpointSlices(context.Background(), "shop", "web")
	if err == nil || list.Items != nil {
		t.Fatalf("items = %v, err = %v; want no items and an error", names(list.Items), err)
	}
	if !strings.HasPrefix(err.Error(), "list endpointslices of service shop/web: ") {
		t.Errorf("error = %v, want it to start with the SPEC text", err)
	}
}

func TestOneClientServesConcurrentReads(t *testing.T) {
	c, calls := newTestClient(t, func(w http.ResponseWriter, _ *http.Request, _ int32) { writeJSON(w, 200, webService) })
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := c.GetService(context.Background(), "shop", "web"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	wantRequests(t, calls, 20)
}

func TestTheRateLimitIsTheOneAskedForAndSharedByBothAPIGroups(t *testing.T) {
	opts := testOptions()
	opts.QPS, opts.Burst = 7, 9
	c, err := NewClient(&rest.Config{Host: "https://127.0.0.1:1"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	limiter := c.core.GetRateLimiter()
	if limiter == nil || limiter.QPS() != 7 {
		t.Fatalf("core rate limiter = %v, want 7 QPS", limiter)
	}
	if c.discovery.GetRateLimiter() != limiter || c.watcher.GetRateLimiter() != limiter {
		t.Error("the Service, EndpointSlice and watch requests do not share one rate limiter")
	}
}

func TestABodyCutShortIsRetried(t *testing.T) {
	c, calls := newTestClient(t, func(w http.ResponseWriter, _ *http.Request, call int32) {
		if call == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"kind":"Service","apiVersion":"v1","metadata":{"name":`))
			panic(http.ErrAbortHandler)
		}
		writeJSON(w, 200, webService)
	})
	if _, err := c.GetService(context.Background(), "shop", "web"); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, calls, 2)
}

func TestListNodesReadsEveryPageClusterWideAndKeepsOnlyWhatPoolsNeed(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	full := func(name string) corev1.Node {
		return corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "edge"}, Annotations: map[string]string{"big": "yes"},
				DeletionTimestamp: &deleted, Finalizers: []string{"example.com/hold"}},
			Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24", Taints: []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{
					{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
					{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
				},
				Addresses: []corev1.NodeAddress{
					{Type: corev1.NodeHostName, Address: name},
					{Type: corev1.NodeInternalIP, Address: "192.168.0.1"},
					{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
				},
				Images: []corev1.ContainerImage{{Names: []string{"registry.invalid/app:1"}, SizeBytes: 1 << 20}},
			},
		}
	}
	c, calls := newTestClient(t, func(w http.ResponseWriter, r *http.Request, call int32) {
		if r.URL.Path != "/api/v1/nodes" {
			t.Errorf("path = %s, want the cluster-wide /api/v1/nodes", r.URL.Path)
		}
		if got := r.URL.Query().Get("labelSelector"); got != "pool=edge" {
			t.Errorf("labelSelector = %q, want pool=edge", got)
		}
		list := corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}, ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
		list.Items = []corev1.Node{full(fmt.Sprintf("node-%d", call))}
		if call == 1 {
			list.Continue = "next"
		}
		writeJSON(w, 200, list)
	})
	list, err := c.ListNodes(context.Background(), "pool=edge")
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || len(list.Items) != 2 || list.Items[0].Name != "node-1" || list.Items[1].Name != "node-2" || list.ResourceVersion != "7" {
		t.Fatalf("%d requests gave %+v", calls.Load(), list)
	}
	got := list.Items[0]
	want := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"pool": "edge"}, DeletionTimestamp: &deleted},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.1"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.1"}},
		},
	}
	// The decoded time is the same instant, in the local time zone.
	if got.DeletionTimestamp == nil || !got.DeletionTimestamp.Equal(&deleted) {
		t.Errorf("deletionTimestamp = %v, want %v", got.DeletionTimestamp, deleted)
	}
	got.DeletionTimestamp = want.DeletionTimestamp
	if !reflect.DeepEqual(got, want) {
		t.Errorf("node kept as\n %+v\nwant\n %+v", got, want)
	}
}

func TestListNodesForbiddenIsWrappedWithItsPrefix(t *testing.T) {
	c, _ := newTestClient(t, func(w http.ResponseWriter, _ *http.Request, _ int32) {
		writeStatus(w, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no")))
	})
	_, err := c.ListNodes(context.Background(), "")
	if !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), "list nodes: ") {
		t.Errorf("error = %v, want a forbidden error starting with \"list nodes: \"", err)
	}
}

// The Pods' pages are decoded apart from the codecs: an answer of the API
// that refuses them is still its Status, by ListPods and by PodPages.
func TestListPodsForbiddenIsTheAPIsStatusWrappedWithItsPrefix(t *testing.T) {
	// As an API server answers a client that asks for protobuf.
	var status bytes.Buffer
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no")).Status()
	if err := codecs.EncoderForVersion(protobufSerializer(t), metav1.SchemeGroupVersion).Encode(&forbidden, &status); err != nil {
		t.Fatal(err)
	}
	c, _ := newTestClient(t, func(w http.ResponseWriter, _ *http.Request, _ int32) {
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write(status.Bytes())
	})
	_, err := c.ListPods(context.Background(), "shop", "")
	const want = "list pods in namespace shop: pods is forbidden: no"
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("ListPods: error = %v, want the API's, %q", err, want)
	}
	err = c.PodPages(context.Background(), "shop", "", func([]corev1.Pod, bool) { t.Error("a page was given") })
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("PodPages: error = %v, want the API's, %q", err, want)
	}
}
