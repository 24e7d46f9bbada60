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

// writeUpstream writes an nginx upstream in the shape that
// examples/pools/nginx renders (provider::k8s::members: IPv6 in brackets),
// with both addresses of each pod; no pod is the example's placeholder for
// an empty pool.
func writeUpstream(t *testing.T, path string, pods ...*testcluster.NetPod) {
	t.Helper()
	var b strings.Builder
	b.WriteString("upstream demo_web {\n")
	for _, p := range pods {
		for _, ip := range p.IPs {
			fmt.Fprintf(&b, "    server %s max_fails=3 fail_timeout=10s;\n", net.JoinHostPort(ip, "8080"))
		}
	}
	if len(pods) == 0 {
		b.WriteString("    # No ready pod: a placeholder that takes no traffic, as NGINX refuses an empty upstream.\n    server 127.0.0.1:1 down;\n")
	}
	b.WriteString("}\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func startNginx(t *testing.T, upstream string) *Nginx {
	t.Helper()
	if _, err := NginxPath(); err != nil {
		t.Skip(err)
	}
	n, err := StartNginx(context.Background(), NginxOptions{Dir: t.TempDir(), Upstream: upstream})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

func TestNginxServesEachPodAndReloadsWithoutDroppingARequest(t *testing.T) {
	pods := network(t, "web-a", "web-b", "web-c", "web-d")
	upstream := filepath.Join(t.TempDir(), "upstream.conf")

	// No ready pod: the example's placeholder, which nginx loads and which
	// answers 502.
	writeUpstream(t, upstream)
	n := startNginx(t, upstream)
	for _, ipv6 := range []bool{false, true} {
		if r := load(t, n.URL(ipv6), 20, 500*time.Millisecond); r.Total != 10 || r.Failed != 10 || r.Failures["status 502"] != 10 {
			t.Errorf("through nginx on the empty pool (IPv6 %t): %v, want 10 answers 502", ipv6, r)
		}
	}

	writeUpstream(t, upstream, pods["web-a"], pods["web-b"], pods["web-c"])
	if err := n.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, ipv6 := range []bool{false, true} {
		// Round robin over 6 servers: each pod twice in 6 requests.
		r := load(t, n.URL(ipv6), 30, time.Second)
		if want := []string{"web-a", "web-b", "web-c"}; r.Failed != 0 || r.Total != 30 || !slices.Equal(r.Pods(), want) {
			t.Errorf("through nginx (IPv6 %t): %v, want 30 answers from %v", ipv6, r, want)
		}
	}

	// web-a leaves the pool and web-d joins it, under load.
	writeUpstream(t, upstream, pods["web-b"], pods["web-c"], pods["web-d"])
	during := make(chan Result, 1)
	go func() {
		r, _ := Run(context.Background(), Load{URL: n.URL(false), Rate: 50, Duration: 3 * time.Second})
		during <- r
	}()
	time.Sleep(time.Second)
	before, err := n.Workers()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, err := n.Workers()
	if err != nil {
		t.Fatal(err)
	}
	if r := <-during; r.Failed != 0 || r.Total != 150 || r.ByPod["web-d"] == 0 {
		t.Errorf("during the reload: %v, want 150 answers, none failed, web-d among them", r)
	}
	if len(before) == 0 || len(after) == 0 || slices.Equal(before, after) {
		t.Errorf("workers %v before the reload, %v after: want new ones", before, after)
	}
	r := load(t, n.URL(true), 30, time.Second)
	if want := []string{"web-b", "web-c", "web-d"}; r.Failed != 0 || !slices.Equal(r.Pods(), want) {
		t.Errorf("after the reload: %v, want answers from %v only", r, want)
	}

	// The same through the shell command a provisioner or a companion runs
	// (nginx -t, nginx -s reload): web-a comes back.
	writeUpstream(t, upstream, pods["web-a"], pods["web-b"], pods["web-c"], pods["web-d"])
	if out, err := exec.Command("sh", "-c", n.ReloadCommand()).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", n.ReloadCommand(), err, out)
	}
	pid, err := os.ReadFile(n.PIDFile())
	if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(n.PID()) {
		t.Errorf("nginx.pid holds %q (%v), want the master's pid %d", pid, err, n.PID())
	}
	for range 100 { // the command returns before the new worker serves
		if r = load(t, n.URL(false), 40, 250*time.Millisecond); r.ByPod["web-a"] > 0 {
			break
		}
	}
	// The first answers may still come from the old worker, until it has
	// closed its listening sockets.
	r = load(t, n.URL(false), 40, time.Second)
	if want := []string{"web-a", "web-b", "web-c", "web-d"}; r.Failed != 0 || !slices.Equal(r.Pods(), want) {
		t.Errorf("after the reload command: %v, want answers from %v", r, want)
	}

	// An upstream that does not load is refused, and the running one goes on.
	if err := os.WriteFile(upstream, []byte("upstream demo_web {\n    server;\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "nginx -t") {
		t.Errorf("reload of a broken upstream: %v, want the error of nginx -t", err)
	}
	if r := load(t, n.URL(false), 20, 500*time.Millisecond); r.Failed != 0 || r.Total != 10 {
		t.Errorf("after a refused reload: %v, want 10 answers", r)
	}

	workers, err := n.Workers()
	if err != nil {
		t.Fatal(err)
	}
	processes := append(slices.Clone(workers), n.PID(), n.GuardPID())
	n.Stop()
	for _, pid := range processes {
		if !gone(pid) {
			t.Errorf("nginx process %d still runs 5 s after Stop", pid)
		}
	}
	if _, err := os.Stat(n.PIDFile()); !os.IsNotExist(err) {
		t.Errorf("nginx.pid after Stop: %v, want it removed by a master that shut down", err)
	}
}

// The master killed with SIGKILL leaves its worker serving (nginx's
// workers do not watch their master); the guard ends it.
func TestNginxWorkerGoesWithAKilledMaster(t *testing.T) {
	upstream := filepath.Join(t.TempDir(), "upstream.conf")
	writeUpstream(t, upstream)
	n := startNginx(t, upstream)
	workers, err := n.Workers()
	if err != nil || len(workers) == 0 {
		t.Fatalf("workers %v, %v: want one", workers, err)
	}
	if err := syscall.Kill(n.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, pid := range append(workers, n.GuardPID()) {
		if !gone(pid) {
			t.Errorf("process %d still runs 5 s after the nginx master was killed", pid)
		}
	}
}

// TestNginxDiesWithTheTestProcess starts nginx in a child process, kills
// the child with SIGKILL and expects the guard, the master and its worker
// gone.
func TestNginxDiesWithTheTestProcess(t *testing.T) {
	if _, err := NginxPath(); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNginxChildProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "TRAFFIC_NGINX_CHILD="+t.TempDir())
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
		if rest, ok := strings.CutPrefix(lines.Text(), "NGINX "); ok {
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
	if len(pids) < 3 {
		t.Fatalf("the child reported nginx pids %v, want the guard, the master and a worker", pids)
	}
	for _, pid := range pids {
		if !running(pid) {
			t.Fatalf("process %d is not running before the kill", pid)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("process %d still runs 5 s after its test process was killed", pid)
		}
	}
}

// TestNginxChildProcess is the child of TestNginxDiesWithTheTestProcess.
func TestNginxChildProcess(t *testing.T) {
	dir := os.Getenv("TRAFFIC_NGINX_CHILD")
	if dir == "" {
		t.Skip("the child of TestNginxDiesWithTheTestProcess")
	}
	upstream := filepath.Join(dir, "upstream.conf")
	if err := os.WriteFile(upstream, []byte("upstream b {\n    server 127.0.0.1:1;\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := StartNginx(context.Background(), NginxOptions{Dir: filepath.Join(dir, "nginx"), Upstream: upstream})
	if err != nil {
		t.Fatal(err)
	}
	workers, err := n.Workers()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print("NGINX ", n.GuardPID(), " ", n.PID())
	for _, w := range workers {
		fmt.Print(" ", w)
	}
	fmt.Println()
	time.Sleep(2 * time.Minute) // killed long before
}

func TestNginxReloadCommandQuotesWhatNeedsIt(t *testing.T) {
	got := NginxReloadCommand("/usr/sbin/nginx", "/tmp/a b/nginx")
	want := "/usr/sbin/nginx -t -q -p '/tmp/a b/nginx/' -e '/tmp/a b/nginx/error.log' -c '/tmp/a b/nginx/nginx.conf' && " +
		"/usr/sbin/nginx -s reload -p '/tmp/a b/nginx/' -e '/tmp/a b/nginx/error.log' -c '/tmp/a b/nginx/nginx.conf'"
	if got != want {
		t.Errorf("NginxReloadCommand =\n%s\nwant\n%s", got, want)
	}
}
