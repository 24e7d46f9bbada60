package provider

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// Faults between the provider and a real API server, injected by an HTTPS
// proxy in front of it: stalls, throttling, server errors, connections cut
// in the middle of a LIST, and a continue token that expires between pages.

// faultProxy forwards requests to the API server, except where fault
// answers them itself. It counts requests by kind.
type faultProxy struct {
	*httptest.Server
	// fault sees each request (n counts them from 1) before it is
	// forwarded; it returns true when it answered the request itself.
	fault func(w http.ResponseWriter, r *http.Request, n int) bool

	mu     sync.Mutex
	counts map[string]int
}

func (c *testCluster) startFaultProxy(t *testing.T, fault func(http.ResponseWriter, *http.Request, int) bool) *faultProxy {
	t.Helper()
	forward := c.startForwarder(t)
	p := &faultProxy{fault: fault, counts: map[string]int{}}
	p.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.counts[requestKind(r)]++
		n := 0
		for _, v := range p.counts {
			n += v
		}
		p.mu.Unlock()
		if p.fault != nil && p.fault(w, r, n) {
			return
		}
		forward.ServeHTTP(w, r)
	}))
	p.StartTLS()
	t.Cleanup(p.Close)
	return p
}

// requestKind is "GET services", "LIST endpointslices" or "WATCH endpointslices".
func requestKind(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[len(parts)-2] == "services":
		return "GET services"
	case r.URL.Query().Get("watch") == "true":
		return "WATCH " + parts[len(parts)-1]
	default:
		return "LIST " + parts[len(parts)-1]
	}
}

func (p *faultProxy) count(kind string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[kind]
}

// watches is how many WATCH requests went through the proxy.
func (p *faultProxy) watches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for kind, v := range p.counts {
		if strings.HasPrefix(kind, "WATCH ") {
			n += v
		}
	}
	return n
}

// changeOnceWatching makes change once the next read through the proxy has
// opened a WATCH, that is once it waits: the change is then one the read can
// only learn by its watch, however long the CLI takes to get to the read.
func (p *faultProxy) changeOnceWatching(t *testing.T, change func()) {
	t.Helper()
	before := p.watches()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			return p.watches() > before, nil
		})
		switch {
		case ctx.Err() != nil:
			// The test ended.
		case err != nil:
			t.Errorf("the read opened no WATCH in 2 minutes: %v", err)
		default:
			change()
		}
	}()
}

func (p *faultProxy) caPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Certificate().Raw}))
}

// providerVia reads through the proxy as token, each request bounded by timeout.
func (p *faultProxy) providerVia(token, timeout string) string {
	return fmt.Sprintf(`
provider "k8s" {
  host                   = %q
  cluster_ca_certificate = %q
  token                  = %q
  request_timeout        = %q
}
`, p.URL, p.caPEM(), token, timeout)
}

func isList(r *http.Request) bool {
	return strings.HasSuffix(r.URL.Path, "/endpointslices") && r.URL.Query().Get("watch") != "true"
}

func writeAPIStatus(w http.ResponseWriter, code int, reason, message string, retryAfter int) {
	w.Header().Set("Content-Type", "application/json")
	if retryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfter))
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"message":%q,"code":%d}`, reason, message, code)
}

// manySlices gives Service web n hand-written EndpointSlices of one ready
// endpoint each, so that reading them takes several pages, and returns the
// endpoints a read must give.
func (c *testCluster) manySlices(t *testing.T, ns string, n int) []knownvalue.Check {
	t.Helper()
	c.createService(t, selectorlessWebService(ns, 8080))
	want := make([]knownvalue.Check, 0, n)
	for i := range n {
		addr := fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%03d", i), Labels: map[string]string{
				discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "tf-acc-tests",
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
		}
		if _, err := c.client.DiscoveryV1().EndpointSlices(ns).Create(c.ctx(t), s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create slice %d: %v", i, err)
		}
		want = append(want, bareIPv4(addr, 8080))
	}
	return want
}

func TestAccFaults(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	want := c.manySlices(t, ns, 300) // two pages
	token := c.identityToken(t, ns, "faults", documentedRole)
	read := dataSource(ns, "")
	whole := []statecheck.StateCheck{expectEndpoints(want...)}

	t.Run("a stalled API server fails the read within its bound", func(t *testing.T) {
		p := c.startFaultProxy(t, func(_ http.ResponseWriter, r *http.Request, _ int) bool {
			<-r.Context().Done() // accept, never answer
			return true
		})
		start := time.Now()
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: testProviderFactories,
			Steps: []resource.TestStep{{
				Config: p.providerVia(token, "1s") + read,
				ExpectError: phrase("Unable to Read Service", "did not answer in time",
					fmt.Sprintf("get service %s/web: gave up after 3 attempts: the API server did not answer within 1s", ns)),
			}},
		})
		t.Logf("a plan against the stalled API server failed after %s", time.Since(start).Round(time.Millisecond))
		if got := p.count("GET services"); got < 3 {
			t.Errorf("%d GET services, want at least 3 attempts", got)
		}
	})

	t.Run("429 with Retry-After is retried and the read succeeds", func(t *testing.T) {
		p := c.startFaultProxy(t, func(w http.ResponseWriter, r *http.Request, n int) bool {
			if n%3 == 1 { // the first try of every other request is throttled
				writeAPIStatus(w, http.StatusTooManyRequests, "TooManyRequests", "slow down", 1)
				return true
			}
			return false
		})
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: testProviderFactories,
			Steps:                    []resource.TestStep{{Config: p.providerVia(token, "15s") + read, ConfigStateChecks: whole}},
		})
	})

	t.Run("429 and 5xx that do not stop are a clear error after bounded retries", func(t *testing.T) {
		for _, fault := range []struct {
			code          int
			reason, error string
		}{
			{http.StatusTooManyRequests, "TooManyRequests", "slow down"},
			{http.StatusServiceUnavailable, "ServiceUnavailable", "etcd is unavailable"},
		} {
			p := c.startFaultProxy(t, func(w http.ResponseWriter, _ *http.Request, _ int) bool {
				writeAPIStatus(w, fault.code, fault.reason, fault.error, 1)
				return true
			})
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testProviderFactories,
				Steps: []resource.TestStep{{
					Config:      p.providerVia(token, "15s") + read,
					ExpectError: phrase(fmt.Sprintf("get service %s/web: gave up after 3 attempts: %s", ns, fault.error)),
				}},
			})
			if got := p.count("GET services"); got != 3 {
				t.Errorf("%d: %d GET services, want exactly 3 attempts", fault.code, got)
			}
		}
	})

	t.Run("a connection cut in the middle of a LIST is retried, never taken as the whole list", func(t *testing.T) {
		var mu sync.Mutex
		cut := map[string]bool{}
		apiServer := c.startForwarder(t)
		p := c.startFaultProxy(t, func(w http.ResponseWriter, r *http.Request, _ int) bool {
			page := r.URL.Query().Get("continue")
			mu.Lock()
			first := !cut[page]
			cut[page] = true
			mu.Unlock()
			if !isList(r) || !first {
				return false
			}
			// Send half of the real answer, then drop the connection.
			rec := httptest.NewRecorder()
			apiServer.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body[:len(body)/2])
			panic(http.ErrAbortHandler)
		})
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: testProviderFactories,
			Steps:                    []resource.TestStep{{Config: p.providerVia(token, "15s") + read, ConfigStateChecks: whole}},
		})
	})

	t.Run("a LIST whose every answer is cut fails rather than giving part of the list", func(t *testing.T) {
		p := c.startFaultProxy(t, func(w http.ResponseWriter, r *http.Request, _ int) bool {
			if !isList(r) || r.URL.Query().Get("continue") == "" {
				return false
			}
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
			w.Header().Set("Content-Length", "100000")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(bytes.Repeat([]byte{0}, 100))
			panic(http.ErrAbortHandler)
		})
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: testProviderFactories,
			Steps: []resource.TestStep{{
				Config:      p.providerVia(token, "15s") + read,
				ExpectError: phrase(fmt.Sprintf("list endpointslices of service %s/web: gave up after 3 attempts", ns)),
			}},
		})
	})

	t.Run("an API server restarted between the pages of a LIST", func(t *testing.T) {
		local := localCluster(t)
		var (
			once       sync.Once
			restartErr error
		)
		p := c.startFaultProxy(t, func(_ http.ResponseWriter, r *http.Request, _ int) bool {
			if isList(r) && r.URL.Query().Get("continue") != "" {
				once.Do(func() { restartErr = local.RestartAPIServer(context.Background()) })
			}
			return false
		})
		defer func() {
			once.Do(func() {}) // waits for a restart under way, and orders its error before this read
			if restartErr != nil {
				t.Errorf("restart of kube-apiserver: %v", restartErr)
			}
		}()
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: testProviderFactories,
			Steps:                    []resource.TestStep{{Config: p.providerVia(token, "15s") + read, ConfigStateChecks: whole}},
		})
	})

	t.Run("a continue token that expired between pages starts the list over", func(t *testing.T) {
		// Kubernetes 1.34 serves continued LISTs from its watch cache, even
		// across a restart, so the 410 that an older or busier API server
		// gives once etcd compacted the snapshot is sent here by the proxy,
		// with the API server's own words.
		var (
			once sync.Once
			mu   sync.Mutex
			seen []string // the LIST requests in order: "first", "next" or "expired"
		)
		p := c.startFaultProxy(t, func(w http.ResponseWriter, r *http.Request, _ int) bool {
			if !isList(r) {
				return false
			}
			kind := "first"
			if r.URL.Query().Get("continue") != "" {
				kind = "next"
				once.Do(func() { kind = "expired" })
			}
			mu.Lock()
			seen = append(seen, kind)
			mu.Unlock()
			if kind == "expired" {
				writeAPIStatus(w, http.StatusGone, "Expired", "The provided continue parameter is too old to display a consistent "+
					"list result. You can start a new list without the continue parameter.", 0)
				return true
			}
			return false
		})
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: testProviderFactories,
			Steps:                    []resource.TestStep{{Config: p.providerVia(token, "15s") + read, ConfigStateChecks: whole}},
		})
		mu.Lock()
		defer mu.Unlock()
		got := strings.Join(seen, ",")
		if !strings.HasPrefix(got, "first,expired,first,next") {
			t.Errorf("LIST requests %s: want the read to start over from the first page after the expired token", got)
		}
	})
}

// startForwarder forwards requests to the API server. It trusts the
// cluster's CA and carries the client's own credentials: it adds none.
func (c *testCluster) startForwarder(t *testing.T) http.Handler {
	target, err := url.Parse(c.rest.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(&rest.Config{Host: c.rest.Host, TLSClientConfig: rest.TLSClientConfig{
		CAData: c.rest.CAData, CAFile: c.rest.CAFile, ServerName: c.rest.ServerName, Insecure: c.rest.Insecure,
	}})
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	forward.Transport = transport
	return forward
}

// localCluster is the local control plane that TestMain started; with
// another cluster (K8S_TF_KUBECONFIG), whose processes the test cannot
// stop, the test is skipped.
func localCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	if localControlPlane == nil {
		t.Skip("needs the local control plane, whose API server the test stops (unset " + envKubeconfig + ")")
	}
	return localControlPlane
}
