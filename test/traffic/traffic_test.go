package traffic

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

func TestLoadRefusesWhatIsNotBounded(t *testing.T) {
	for name, tc := range map[string]struct {
		load Load
		want string
	}{
		"a host name":          {Load{URL: "http://localhost:1/", Rate: 1, Duration: time.Second}, "want an IP address"},
		"an address elsewhere": {Load{URL: "http://192.0.2.1/", Rate: 1, Duration: time.Second}, "only loopback and the test pods' addresses"},
		"IPv6 elsewhere":       {Load{URL: "http://[2001:db8::1]/", Rate: 1, Duration: time.Second}, "only loopback"},
		"no rate":              {Load{URL: "http://127.0.0.1:1/", Rate: 0, Duration: time.Second}, "want 1 to 1000"},
		"too fast":             {Load{URL: "http://127.0.0.1:1/", Rate: 1001, Duration: time.Second}, "want 1 to 1000"},
		"no end":               {Load{URL: "http://127.0.0.1:1/", Rate: 1, Duration: 0}, "at most 10 minutes"},
		"too long":             {Load{URL: "http://127.0.0.1:1/", Rate: 1, Duration: 11 * time.Minute}, "at most 10 minutes"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := Run(context.Background(), tc.load)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, %v; want an error containing %q", r, err, tc.want)
			}
			if r.Total != 0 {
				t.Errorf("sent %d requests before refusing", r.Total)
			}
		})
	}
}

func TestLoadCountsWhatLoopbackAnswers(t *testing.T) {
	// Nothing listens on a port just released: every request is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	r, err := Run(context.Background(), Load{URL: "http://" + addr + "/", Rate: 40, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Total != 20 || r.Failed != 20 || r.Failures["dial: connect: connection refused"] != 20 || len(r.ByPod) != 0 {
		t.Errorf("against a closed port: %v, want 20/20 failed, all refused", r)
	}
	// Each failure is kept with its time, in the order they came, within
	// the stream.
	if len(r.FailedAt) != 20 {
		t.Fatalf("%d failures kept with their times, want 20", len(r.FailedAt))
	}
	for i, f := range r.FailedAt {
		if f.Reason != "dial: connect: connection refused" || f.At.Before(r.Started) || f.At.After(r.Ended) || (i > 0 && f.At.Before(r.FailedAt[i-1].At)) {
			t.Errorf("failure %d: %v at %s, want refused, after the one before, within %s-%s", i, f.Reason, f.At, r.Started, r.Ended)
		}
	}
}

// A load stopped halfway sends nothing more and counts what it sent.
func TestLoadEndsWhenStopped(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	stop := make(chan struct{})
	time.AfterFunc(500*time.Millisecond, func() { close(stop) })
	r, err := Run(context.Background(), Load{URL: "http://" + addr + "/", Rate: 40, Duration: time.Minute, Stop: stop})
	if err != nil {
		t.Fatal(err)
	}
	if r.Total < 15 || r.Total > 25 || r.Failed != r.Total || r.Ended.Sub(r.Started) > 5*time.Second {
		t.Errorf("stopped after 500 ms of 40 requests a second: %v in %s, want about 20 requests, all refused, and an end within seconds", r, r.Ended.Sub(r.Started))
	}
}

// network starts a network with the pods named, ready.
func network(t *testing.T, pods ...string) map[string]*testcluster.NetPod {
	t.Helper()
	if reason := testcluster.NetworkUnavailable(); reason != "" {
		t.Skip(reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := testcluster.StartNetwork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	byName := map[string]*testcluster.NetPod{}
	for i, name := range pods {
		p, err := n.AddPod(ctx, name, n.PodIPs(i+1), []int32{8080}, testcluster.HealthReady)
		if err != nil {
			t.Fatal(err)
		}
		byName[name] = p
	}
	return byName
}

func TestLoadCountsTheAnswersOfAPod(t *testing.T) {
	pods := network(t, "web-a", "web-b")
	a := pods["web-a"]
	r, err := Run(context.Background(), Load{URL: "http://" + net.JoinHostPort(a.IPs[1], "8080") + "/", Rate: 50, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Total != 50 || r.Failed != 0 || r.ByPod["web-a"] != 50 || len(r.ByPod) != 1 {
		t.Errorf("web-a over IPv6: %v, want 50 answers of web-a", r)
	}
	if first, last := r.FirstAnswer["web-a"], r.LastAnswer["web-a"]; first.Before(r.Started) || !last.After(first) || last.After(r.Ended) {
		t.Errorf("first answer %s, last %s, outside the run %s to %s", first, last, r.Started, r.Ended)
	}
	if err := pods["web-b"].SetHealth(testcluster.HealthNotReady); err != nil {
		t.Fatal(err)
	}
	r, err = Run(context.Background(), Load{URL: "http://" + net.JoinHostPort(pods["web-b"].IPs[0], "8080") + "/healthz", Rate: 20, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Total != 10 || r.Failed != 10 || r.Failures["status 503"] != 10 {
		t.Errorf("/healthz of web-b not ready: %v, want 10/10 failed with status 503", r)
	}
}

// writeBackend writes an HAProxy backend in the shape that
// examples/pools/haproxy renders, with both addresses of each pod.
func writeBackend(t *testing.T, path string, pods ...*testcluster.NetPod) {
	t.Helper()
	writePool(t, path, "backend demo_web\n    balance roundrobin\n    option httpchk GET /healthz\n", "", pods, func(p *testcluster.NetPod, ip string) string {
		return fmt.Sprintf("    server %s-%s-8080 %s check\n", p.Name, strings.NewReplacer(".", "-", ":", "-").Replace(ip), net.JoinHostPort(ip, "8080"))
	})
}

// writePool writes a pool file: head, a server line for each address of
// each pod, and tail.
func writePool(t *testing.T, path, head, tail string, pods []*testcluster.NetPod, server func(p *testcluster.NetPod, ip string) string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(head)
	for _, p := range pods {
		for _, ip := range p.IPs {
			b.WriteString(server(p, ip))
		}
	}
	b.WriteString(tail)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, url string, rate int, d time.Duration) Result {
	t.Helper()
	r, err := Run(context.Background(), Load{URL: url, Rate: rate, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// gone waits up to 5 s for pid to be gone or a zombie.
func gone(pid int) bool {
	for range 50 {
		if !running(pid) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// running reports whether pid is a process that has not exited.
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}
