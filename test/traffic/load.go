package traffic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// Load is a bounded stream of GET requests: Rate a second for Duration,
// then it stops by itself. Each request is bounded by Timeout.
type Load struct {
	URL string
	// Rate in requests per second, 1 to 1000.
	Rate int
	// Duration of the stream, up to 10 minutes.
	Duration time.Duration
	// Stop, when closed, ends the stream before Duration: nothing is sent
	// after it, and the requests in flight end as they would.
	Stop <-chan struct{}
	// Timeout of one request; 0 is 2 s.
	Timeout time.Duration
	// KeepAlive reuses connections; by default each request opens its own,
	// as the clients of a load balancer mostly do, so that each one is
	// routed afresh.
	KeepAlive bool
}

// Result counts what a Load got. A request failed when it got no response
// within its timeout, or a status other than 200.
type Result struct {
	Total, Failed int
	// Failures counts the failed requests by reason (at most 20 reasons;
	// the others are counted under "other").
	Failures map[string]int
	// FailedAt are when the first 20 failures came, with their reasons:
	// what a test lines up with the reloads when a request failed.
	FailedAt []Failure
	// ByPod counts the answers by the pod that gave them (X-Pod header);
	// FirstAnswer and LastAnswer are when each pod's first and last answer
	// arrived.
	ByPod                   map[string]int
	FirstAnswer, LastAnswer map[string]time.Time
	Started, Ended          time.Time
}

// Failure is one failed request: when its answer (or its error) came, and
// why it failed.
type Failure struct {
	At     time.Time
	Reason string
}

// Pods are the pods that answered, sorted.
func (r Result) Pods() []string {
	var pods []string
	for pod := range r.ByPod {
		pods = append(pods, pod)
	}
	sort.Strings(pods)
	return pods
}

func (r Result) String() string {
	var reasons []string
	for reason, n := range r.Failures {
		reasons = append(reasons, fmt.Sprintf("%d× %s", n, reason))
	}
	sort.Strings(reasons)
	return fmt.Sprintf("%d/%d failed %v, answers by pod %v", r.Failed, r.Total, reasons, r.ByPod)
}

// The pods' addresses of the tests; with loopback, the only destinations a
// Load accepts.
var testPodPrefixes = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/48")}

// checkTarget refuses a URL that is not on loopback or a test pod's address.
func checkTarget(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	addr, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return fmt.Errorf("load target %s: want an IP address on loopback or of a test pod, not %q", raw, u.Hostname())
	}
	if addr.IsLoopback() {
		return nil
	}
	for _, p := range testPodPrefixes {
		if p.Contains(addr) {
			return nil
		}
	}
	return fmt.Errorf("load target %s: only loopback and the test pods' addresses (%v) are allowed", raw, testPodPrefixes)
}

// Run sends the requests of l, at evenly spaced times, and returns when the
// last has ended (at most Duration + Timeout), or when ctx ends or Stop is
// closed (the requests not sent are not counted).
func Run(ctx context.Context, l Load) (Result, error) {
	if l.Rate < 1 || l.Rate > 1000 {
		return Result{}, fmt.Errorf("rate %d: want 1 to 1000 requests a second", l.Rate)
	}
	if l.Duration <= 0 || l.Duration > 10*time.Minute {
		return Result{}, fmt.Errorf("duration %s: want more than 0 and at most 10 minutes", l.Duration)
	}
	if err := checkTarget(l.URL); err != nil {
		return Result{}, err
	}
	if l.Timeout <= 0 {
		l.Timeout = 2 * time.Second
	}
	client := &http.Client{
		Timeout: l.Timeout,
		Transport: &http.Transport{
			DisableKeepAlives:   !l.KeepAlive,
			MaxIdleConnsPerHost: 100,
			DialContext:         (&net.Dialer{Timeout: l.Timeout}).DialContext,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	total := int(int64(l.Rate) * int64(l.Duration) / int64(time.Second))
	if total < 1 {
		total = 1
	}
	interval := l.Duration / time.Duration(total)
	// Requests in flight are bounded: a target that hangs cannot make the
	// client pile up more than the requests of one timeout.
	slots := make(chan struct{}, l.Rate*int(l.Timeout/time.Second+1))

	var mu sync.Mutex
	r := Result{Failures: map[string]int{}, ByPod: map[string]int{}, FirstAnswer: map[string]time.Time{}, LastAnswer: map[string]time.Time{}}
	record := func(pod, failure string) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now() // under the lock: the times come in the order kept
		r.Total++
		if failure != "" {
			r.Failed++
			if len(r.FailedAt) < 20 {
				r.FailedAt = append(r.FailedAt, Failure{At: now, Reason: failure})
			}
			if _, ok := r.Failures[failure]; !ok && len(r.Failures) >= 20 {
				failure = "other"
			}
			r.Failures[failure]++
			return
		}
		r.ByPod[pod]++
		if _, ok := r.FirstAnswer[pod]; !ok {
			r.FirstAnswer[pod] = now
		}
		r.LastAnswer[pod] = now
	}
	var wg sync.WaitGroup
	r.Started = time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
send:
	for i := range total {
		timer.Reset(time.Until(r.Started.Add(time.Duration(i) * interval)))
		select {
		case <-ctx.Done():
			break send
		case <-l.Stop:
			break send
		case <-timer.C:
		}
		select {
		case slots <- struct{}{}:
		default:
			record("", "too many requests in flight")
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			record(get(ctx, client, l.URL))
		}()
	}
	wg.Wait()
	r.Ended = time.Now()
	return r, nil
}

// get sends one request and returns the pod that answered, or why it failed.
func get(ctx context.Context, client *http.Client, target string) (pod, failure string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return "", err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", reason(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16)); err != nil {
		return "", "reading the body: " + reason(err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Sprintf("status %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Pod"), ""
}

// reason is an error without the parts that differ from one request to the
// next (the client's port), so that failures of one kind count together.
func reason(err error) string {
	var netErr *net.OpError
	if errors.As(err, &netErr) && netErr.Err != nil {
		return netErr.Op + ": " + netErr.Err.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout") {
		return "timeout"
	}
	return err.Error()
}
