package testcluster

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// FaultProxy is an HTTP proxy in front of the API server that answers a
// share of the requests with an error instead of forwarding them, as an
// overloaded API server (429 with Retry-After, API priority and fairness)
// or a load balancer in between (502, 503) does. It listens on plain HTTP
// on loopback and forwards with the credentials of cfg, so that a client
// of it needs no certificate: its kubeconfig names only the server. Watches
// are streamed through (no buffering), and Cut ends every request in
// flight, watches mid-stream included.
type FaultProxy struct {
	// URL is the proxy's, http://127.0.0.1:port.
	URL string

	server   *http.Server
	listener net.Listener
	proxy    *httputil.ReverseProxy

	mu       sync.Mutex
	every    int // 0: no faults; n: one request in n gets an error
	cancels  map[*http.Request]context.CancelFunc
	served   atomic.Int64
	faulted  atomic.Int64
	sequence atomic.Int64
}

// StartFaultProxy starts a proxy to the API server of cfg.
func StartFaultProxy(cfg *rest.Config) (*FaultProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &FaultProxy{URL: "http://" + l.Addr().String(), listener: l, cancels: map[*http.Request]context.CancelFunc{}}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     transport,
		FlushInterval: -1,
		// A cut watch is a copy error each: the fault, not news.
		ErrorLog: log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "fault proxy: "+err.Error(), http.StatusBadGateway)
		},
	}
	p.server = &http.Server{Handler: p, ReadHeaderTimeout: 10e9}
	go func() { _ = p.server.Serve(l) }()
	return p, nil
}

// ServeHTTP forwards r, or answers it with an error while faults are on.
func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.served.Add(1)
	p.mu.Lock()
	every := p.every
	p.mu.Unlock()
	if every > 0 {
		n := p.sequence.Add(1)
		if n%int64(every) == 0 {
			p.faulted.Add(1)
			// 429s and 503s alternate: client-go retries both when they
			// carry Retry-After; a 500 it does not retry.
			switch (n / int64(every)) % 3 {
			case 0:
				w.Header().Set("Retry-After", "1")
				http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`, http.StatusTooManyRequests)
			case 1:
				w.Header().Set("Retry-After", "1")
				http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`, http.StatusServiceUnavailable)
			default:
				http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500}`, http.StatusInternalServerError)
			}
			return
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	r = r.WithContext(ctx)
	p.mu.Lock()
	p.cancels[r] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.cancels, r)
		p.mu.Unlock()
		cancel()
	}()
	p.proxy.ServeHTTP(w, r)
}

// Faults makes one request in every n get an error (429, 503, 500 in
// turn); 0 forwards every request again.
func (p *FaultProxy) Faults(every int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.every = every
}

// Cut ends every request in flight now (watches mid-stream); new ones are
// served.
func (p *FaultProxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.cancels)
	for _, cancel := range p.cancels {
		cancel()
	}
	return n
}

// Counts are the requests received and those answered with an error.
func (p *FaultProxy) Counts() (served, faulted int64) { return p.served.Load(), p.faulted.Load() }

// Kubeconfig is a kubeconfig whose one context is the proxy.
func (p *FaultProxy) Kubeconfig() string {
	return "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: " + strconv.Quote(p.URL) +
		"\nusers:\n- name: proxy\n  user: {}\ncontexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: proxy\ncurrent-context: proxy\n"
}

// Close stops the proxy and ends every request.
func (p *FaultProxy) Close() error {
	p.Cut()
	err := p.server.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
