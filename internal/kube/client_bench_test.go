package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// benchClient is a client of a stand-in API server over loopback HTTP that
// answers with h. Its rate limit is out of reach, so that the benchmarks
// measure the client rather than the limiter's waits.
func benchClient(b *testing.B, h http.HandlerFunc) *Client {
	b.Helper()
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	opts := DefaultOptions()
	opts.QPS, opts.Burst = 1e9, 1e9
	c, err := NewClient(&rest.Config{Host: srv.URL}, opts)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkListEndpointSlices is the client's cost of one LIST, retries and
// paging included: one page, as for most Services, and five, as for a
// Service with many slices.
func BenchmarkListEndpointSlices(b *testing.B) {
	for _, pages := range []int{1, 5} {
		b.Run(fmt.Sprintf("pages=%d", pages), func(b *testing.B) {
			c := benchClient(b, func(w http.ResponseWriter, r *http.Request) {
				page, _ := strconv.Atoi(r.URL.Query().Get("continue"))
				list := discoveryv1.EndpointSliceList{
					TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSliceList"},
					ListMeta: metav1.ListMeta{ResourceVersion: "42"},
				}
				for i := range 10 {
					list.Items = append(list.Items, readySlice(fmt.Sprintf("web-%d-%d", page, i), "42"))
				}
				if page+1 < pages {
					list.Continue = strconv.Itoa(page + 1)
				}
				writeJSON(w, 200, list)
			})
			b.ReportAllocs()
			for b.Loop() {
				list, err := c.ListEndpointSlices(context.Background(), "shop", "web")
				if err != nil || len(list.Items) != 10*pages {
					b.Fatalf("%d slices, %v", len(list.Items), err)
				}
			}
		})
	}
}

// BenchmarkGetService is the client's cost of one GET.
func BenchmarkGetService(b *testing.B) {
	c := benchClient(b, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, webService) })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.GetService(context.Background(), "shop", "web"); err != nil {
			b.Fatal(err)
		}
	}
}
