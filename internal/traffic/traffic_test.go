package traffic

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/internal/testcluster"
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
	var b strings.Builder
	b.WriteString("backend demo_web\n    balance roundrobin\n    option httpchk GET /healthz\n")
	for _, p := range pods {
		for _, ip := range p.IPs {
			fmt.Fprintf(&b, "    server %s-%s-8080 %s check\n", p.Name, strings.NewReplacer(".", "-", ":", "-").Replace(ip), net.JoinHostPort(ip, "8080"))
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func startHAProxy(t *testing.T, backend string) *HAProxy {
	t.Helper()
	if _, err := HAProxyPath(); err != nil {
		t.Skip(err)
	}
	h, err := StartHAProxy(context.Background(), HAProxyOptions{Dir: t.TempDir(), Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h
}

func load(t *testing.T, url string, rate int, d time.Duration) Result {
	t.Helper()
	r, err := Run(context.Background(), Load{URL: url, Rate: rate, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestHAProxyServesEachPodAndReloadsWithoutDroppingARequest(t *testing.T) {
	pods := network(t, "web-a", "web-b", "web-c", "web-d")
	backend := filepath.Join(t.TempDir(), "backend.cfg")
	writeBackend(t, backend, pods["web-a"], pods["web-b"], pods["web-c"])
	h := startHAProxy(t, backend)

	for _, ipv6 := range []bool{false, true} {
		// Round robin over 6 servers: each pod twice in 6 requests.
		r := load(t, h.URL(ipv6), 30, time.Second)
		if want := []string{"web-a", "web-b", "web-c"}; r.Failed != 0 || r.Total != 30 || !slices.Equal(r.Pods(), want) {
			t.Errorf("through HAProxy (IPv6 %t): %v, want 30 answers from %v", ipv6, r, want)
		}
	}

	// web-a leaves the pool and web-d joins it, under load.
	writeBackend(t, backend, pods["web-b"], pods["web-c"], pods["web-d"])
	during := make(chan Result, 1)
	go func() {
		r, _ := Run(context.Background(), Load{URL: h.URL(false), Rate: 50, Duration: 3 * time.Second})
		during <- r
	}()
	time.Sleep(time.Second)
	before, _, err := h.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, _, err := h.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := <-during; r.Failed != 0 || r.Total != 150 || r.ByPod["web-d"] == 0 {
		t.Errorf("during the reload: %v, want 150 answers, none failed, web-d among them", r)
	}
	if len(before) == 0 || len(after) == 0 || slices.Equal(before, after) {
		t.Errorf("workers %v before the reload, %v after: want new ones", before, after)
	}
	r := load(t, h.URL(true), 30, time.Second)
	if want := []string{"web-b", "web-c", "web-d"}; r.Failed != 0 || !slices.Equal(r.Pods(), want) {
		t.Errorf("after the reload: %v, want answers from %v only", r, want)
	}

	// The same through the shell command a provisioner or a companion runs:
	// web-a comes back.
	writeBackend(t, backend, pods["web-a"], pods["web-b"], pods["web-c"], pods["web-d"])
	if out, err := exec.Command("sh", "-c", h.ReloadCommand()).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", h.ReloadCommand(), err, out)
	}
	// A Reload while that one is still under way waits for the master.
	if err := h.Reload(context.Background()); err != nil {
		t.Fatalf("reload while the command's is under way: %v", err)
	}
	pid, err := os.ReadFile(filepath.Join(h.opts.Dir, "haproxy.pid"))
	if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(h.PID()) {
		t.Errorf("haproxy.pid holds %q (%v), want the master's pid %d", pid, err, h.PID())
	}
	for range 100 { // the command returns before the new workers serve
		if r = load(t, h.URL(false), 40, 250*time.Millisecond); r.ByPod["web-a"] > 0 {
			break
		}
	}
	if want := []string{"web-a", "web-b", "web-c", "web-d"}; r.Failed != 0 || !slices.Equal(r.Pods(), want) {
		t.Errorf("after the reload command: %v, want answers from %v", r, want)
	}

	// A backend that does not load is refused, and the running one goes on.
	if err := os.WriteFile(backend, []byte("backend demo_web\n    server broken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "haproxy -c") {
		t.Errorf("reload of a broken backend: %v, want the error of haproxy -c", err)
	}
	if r := load(t, h.URL(false), 20, 500*time.Millisecond); r.Failed != 0 || r.Total != 10 {
		t.Errorf("after a refused reload: %v, want 10 answers", r)
	}

	master := h.PID()
	h.Stop()
	for _, pid := range append(after, master) {
		if !gone(pid) {
			t.Errorf("haproxy process %d still runs 5 s after Stop", pid)
		}
	}
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

// TestHAProxyDiesWithTheTestProcess starts HAProxy in a child process, kills
// the child with SIGKILL and expects the master and its worker gone.
func TestHAProxyDiesWithTheTestProcess(t *testing.T) {
	if _, err := HAProxyPath(); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHAProxyChildProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "TRAFFIC_HAPROXY_CHILD="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	var pids []int
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "HAPROXY "); ok {
			for _, field := range strings.Fields(rest) {
				pid, err := strconv.Atoi(field)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, pid)
			}
			break
		}
	}
	deadline.Stop()
	if len(pids) < 2 {
		t.Fatalf("the child reported haproxy pids %v, want the master and a worker", pids)
	}
	for _, pid := range pids {
		if !running(pid) {
			t.Fatalf("haproxy process %d is not running before the kill", pid)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("haproxy process %d still runs 5 s after its test process was killed", pid)
		}
	}
}

// TestHAProxyChildProcess is the child of TestHAProxyDiesWithTheTestProcess.
func TestHAProxyChildProcess(t *testing.T) {
	dir := os.Getenv("TRAFFIC_HAPROXY_CHILD")
	if dir == "" {
		t.Skip("the child of TestHAProxyDiesWithTheTestProcess")
	}
	backend := filepath.Join(dir, "backend.cfg")
	if err := os.WriteFile(backend, []byte("backend b\n    server s 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := StartHAProxy(context.Background(), HAProxyOptions{Dir: dir, Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	workers, _, err := h.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print("HAPROXY ", h.PID())
	for _, w := range workers {
		fmt.Print(" ", w)
	}
	fmt.Println()
	time.Sleep(2 * time.Minute) // killed long before
}
