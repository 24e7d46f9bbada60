package traffic

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// loadBalancer is what the tests drive of HAProxy and nginx alike.
type loadBalancer interface {
	URL(ipv6 bool) string
	Port() int
	PID() int
	PIDFile() string
	Reload(ctx context.Context) error
	ReloadCommand() string
	Workers(ctx context.Context) ([]int, error)
	Stop()
}

// lbUnderTest is one load balancer as the tests start it: its pool file,
// rendered as the example renders it, and how it answers.
type lbUnderTest struct {
	name string
	path func() (string, error)
	// write renders the pool file with both addresses of each pod.
	write func(t *testing.T, path string, pods ...*testcluster.NetPod)
	start func(dir, pool string) (loadBalancer, error)
	// emptyStatus is its answer on a pool without a pod; broken is a pool
	// file that does not check, and check the name of the check's command.
	emptyStatus   string
	broken, check string
	// processes is how many processes its child reports: the master, a
	// worker, and the guard of its process group if it has one.
	processes int
	// removesPIDFile: its master removes its pid file when it stops.
	removesPIDFile bool
}

var haproxyUnderTest = lbUnderTest{
	name: "haproxy", path: HAProxyPath, write: writeBackend,
	start: func(dir, pool string) (loadBalancer, error) {
		return StartHAProxy(context.Background(), HAProxyOptions{Dir: dir, Backend: pool})
	},
	emptyStatus: "status 503", broken: "backend demo_web\n    server broken\n", check: "haproxy -c",
	processes: 2,
}

var nginxUnderTest = lbUnderTest{
	name: "nginx", path: NginxPath, write: writeUpstream,
	start: func(dir, pool string) (loadBalancer, error) {
		return StartNginx(context.Background(), NginxOptions{Dir: dir, Upstream: pool})
	},
	emptyStatus: "status 502", broken: "upstream demo_web {\n    server;\n}\n", check: "nginx -t",
	processes: 3, removesPIDFile: true,
}

var loadBalancers = []lbUnderTest{haproxyUnderTest, nginxUnderTest}

// startLB starts the load balancer on a pool file without a pod (the
// empty pool), skipping the test when it is not installed; it stops at
// the end of the test.
func startLB(t *testing.T, lb lbUnderTest, pool *string) loadBalancer {
	t.Helper()
	if _, err := lb.path(); err != nil {
		t.Skip(err)
	}
	file := filepath.Join(t.TempDir(), "pool.conf")
	if pool != nil {
		*pool = file
	}
	lb.write(t, file)
	running, err := lb.start(t.TempDir(), file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(running.Stop)
	return running
}

func TestLoadBalancerServesEachPodAndReloadsWithoutDroppingARequest(t *testing.T) {
	for _, lb := range loadBalancers {
		t.Run(lb.name, func(t *testing.T) {
			pods := network(t, "web-a", "web-b", "web-c", "web-d")
			var pool string
			running := startLB(t, lb, &pool)
			pick := func(names ...string) []*testcluster.NetPod {
				var picked []*testcluster.NetPod
				for _, name := range names {
					picked = append(picked, pods[name])
				}
				return picked
			}

			// No ready pod: the load balancer loads the pool and answers
			// an error.
			for _, ipv6 := range []bool{false, true} {
				if r := load(t, running.URL(ipv6), 20, 500*time.Millisecond); r.Total != 10 || r.Failed != 10 || r.Failures[lb.emptyStatus] != 10 {
					t.Errorf("on the empty pool (IPv6 %t): %v, want 10 answers %s", ipv6, r, lb.emptyStatus)
				}
			}

			lb.write(t, pool, pick("web-a", "web-b", "web-c")...)
			if err := running.Reload(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, ipv6 := range []bool{false, true} {
				// Round robin over 6 servers: each pod twice in 6 requests.
				r := load(t, running.URL(ipv6), 30, time.Second)
				if want := []string{"web-a", "web-b", "web-c"}; r.Failed != 0 || r.Total != 30 || !slices.Equal(r.Pods(), want) {
					t.Errorf("IPv6 %t: %v, want 30 answers from %v", ipv6, r, want)
				}
			}

			// web-a leaves the pool and web-d joins it, under load.
			lb.write(t, pool, pick("web-b", "web-c", "web-d")...)
			during := make(chan Result, 1)
			go func() {
				r, _ := Run(context.Background(), Load{URL: running.URL(false), Rate: 50, Duration: 3 * time.Second})
				during <- r
			}()
			time.Sleep(time.Second)
			before, err := running.Workers(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := running.Reload(context.Background()); err != nil {
				t.Fatal(err)
			}
			after, err := running.Workers(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if r := <-during; r.Failed != 0 || r.Total != 150 || r.ByPod["web-d"] == 0 {
				t.Errorf("during the reload: %v, want 150 answers, none failed, web-d among them", r)
			}
			if len(before) == 0 || len(after) == 0 || slices.Equal(before, after) {
				t.Errorf("workers %v before the reload, %v after: want new ones", before, after)
			}
			r := load(t, running.URL(true), 30, time.Second)
			if want := []string{"web-b", "web-c", "web-d"}; r.Failed != 0 || !slices.Equal(r.Pods(), want) {
				t.Errorf("after the reload: %v, want answers from %v only", r, want)
			}

			// The same through the shell command a provisioner or a
			// companion runs: web-a comes back.
			lb.write(t, pool, pick("web-a", "web-b", "web-c", "web-d")...)
			if out, err := exec.Command("sh", "-c", running.ReloadCommand()).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", running.ReloadCommand(), err, out)
			}
			// A Reload while that one is still under way waits for it.
			if err := running.Reload(context.Background()); err != nil {
				t.Fatalf("reload while the command's is under way: %v", err)
			}
			pid, err := os.ReadFile(running.PIDFile())
			if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(running.PID()) {
				t.Errorf("%s holds %q (%v), want the master's pid %d", running.PIDFile(), pid, err, running.PID())
			}
			// The first answers may still come from the old workers, until
			// they have closed their listening sockets.
			r = load(t, running.URL(false), 40, time.Second)
			if want := []string{"web-a", "web-b", "web-c", "web-d"}; r.Failed != 0 || !slices.Equal(r.Pods(), want) {
				t.Errorf("after the reload command: %v, want answers from %v", r, want)
			}

			// A pool that does not load is refused, and the running one
			// goes on.
			if err := os.WriteFile(pool, []byte(lb.broken), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := running.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), lb.check) {
				t.Errorf("reload of a broken pool: %v, want the error of %s", err, lb.check)
			}
			if r := load(t, running.URL(false), 20, 500*time.Millisecond); r.Failed != 0 || r.Total != 10 {
				t.Errorf("after a refused reload: %v, want 10 answers", r)
			}

			workers, err := running.Workers(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			processes := append(slices.Clone(workers), running.PID())
			if guarded, ok := running.(interface{ GuardPID() int }); ok {
				processes = append(processes, guarded.GuardPID())
			}
			running.Stop()
			for _, pid := range processes {
				if !gone(pid) {
					t.Errorf("process %d still runs 5 s after Stop", pid)
				}
			}
			if _, err := os.Stat(running.PIDFile()); lb.removesPIDFile && !os.IsNotExist(err) {
				t.Errorf("%s after Stop: %v, want it removed by a master that shut down", running.PIDFile(), err)
			}
		})
	}
}

// TestLoadBalancerDiesWithTheTestProcess starts each load balancer in a
// child process, kills the child with SIGKILL and expects its processes
// gone.
func TestLoadBalancerDiesWithTheTestProcess(t *testing.T) {
	for _, lb := range loadBalancers {
		t.Run(lb.name, func(t *testing.T) {
			if _, err := lb.path(); err != nil {
				t.Skip(err)
			}
			pids := startChild(t, lb.name)
			if len(pids)-1 < lb.processes {
				t.Fatalf("the child %d reported pids %v, want %d", pids[0], pids[1:], lb.processes)
			}
			for _, pid := range pids[1:] {
				if !running(pid) {
					t.Fatalf("process %d is not running before the kill", pid)
				}
			}
			if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			for _, pid := range pids[1:] {
				if !gone(pid) {
					t.Errorf("process %d still runs 5 s after its test process was killed", pid)
				}
			}
		})
	}
}

// startChild runs TestLoadBalancerChildProcess for the load balancer named
// and returns the child's pid, then those it reported.
func startChild(t *testing.T, name string) []int {
	t.Helper()
	cmd, line, err := testcluster.ChildTestLine(t.Cleanup, 2*time.Minute, "TestLoadBalancerChildProcess", "PIDS ",
		"TRAFFIC_LB_CHILD="+name, "TRAFFIC_LB_CHILD_DIR="+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pids := []int{cmd.Process.Pid}
	for _, field := range strings.Fields(line) {
		pid, err := strconv.Atoi(field)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestLoadBalancerChildProcess is the child of
// TestLoadBalancerDiesWithTheTestProcess: it prints the pids of the load
// balancer it started (the guard if any, the master, the workers) and
// waits to be killed.
func TestLoadBalancerChildProcess(t *testing.T) {
	name, dir := os.Getenv("TRAFFIC_LB_CHILD"), os.Getenv("TRAFFIC_LB_CHILD_DIR")
	if name == "" {
		t.Skip("the child of TestLoadBalancerDiesWithTheTestProcess")
	}
	i := slices.IndexFunc(loadBalancers, func(lb lbUnderTest) bool { return lb.name == name })
	lb := loadBalancers[i]
	pool := filepath.Join(dir, "pool.conf")
	lb.write(t, pool)
	running, err := lb.start(filepath.Join(dir, name), pool)
	if err != nil {
		t.Fatal(err)
	}
	workers, err := running.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print("PIDS")
	if guarded, ok := running.(interface{ GuardPID() int }); ok {
		fmt.Print(" ", guarded.GuardPID())
	}
	fmt.Print(" ", running.PID())
	for _, w := range workers {
		fmt.Print(" ", w)
	}
	fmt.Println()
	time.Sleep(2 * time.Minute) // killed long before
}

// TestAnHAProxyReloadThatCannotTakeOverTheOldSocketsResetsWhatWaitsOnThem
// shows what the rollout test counts apart: the old worker is stopped while
// the master reloads, so the master cannot get its sockets within its
// second; it says so in its log (HAProxyLostSockets), the new worker binds
// its own, and the connections queued on the old worker's are reset once it
// goes on and closes them.
func TestAnHAProxyReloadThatCannotTakeOverTheOldSocketsResetsWhatWaitsOnThem(t *testing.T) {
	if _, err := HAProxyPath(); err != nil {
		t.Skip(err)
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("X-Pod", "web-a") }))
	defer backend.Close()
	dir := t.TempDir()
	pool := filepath.Join(dir, "backend.cfg")
	if err := os.WriteFile(pool, []byte("backend demo_web\n    server web-a "+backend.Listener.Addr().String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := StartHAProxy(context.Background(), HAProxyOptions{Dir: filepath.Join(dir, "haproxy"), Backend: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	workers, err := h.Workers(context.Background())
	if err != nil || len(workers) != 1 {
		t.Fatalf("workers %v, %v; want one", workers, err)
	}
	done := make(chan Result, 1)
	go func() {
		r, _ := Run(context.Background(), Load{URL: h.URL(true), Rate: 100, Duration: 3 * time.Second})
		done <- r
	}()
	time.Sleep(500 * time.Millisecond)
	if err := syscall.Kill(workers[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(h.PID(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := syscall.Kill(workers[0], syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r := <-done
	log, _ := os.ReadFile(filepath.Join(dir, "haproxy", "haproxy.log"))
	if !strings.Contains(string(log), HAProxyLostSockets) {
		t.Errorf("HAProxy's log does not say %q:\n%s", HAProxyLostSockets, log)
	}
	if r.Failures["read: read: connection reset by peer"] == 0 {
		t.Errorf("no connection reset: %v", r)
	}
}

// TestAReloadKeepsTheListeningSocketsOfBothAddresses: a connection that
// waits to be accepted waits on a listening socket, and a reload that
// replaces that socket resets what waits on it as the old one is closed. So
// each load balancer's reload keeps the very sockets (the same inodes) on
// 127.0.0.1 and [::1]. HAProxy 2.6 takes over the old worker's sockets only
// when the bind line says what the kernel made of them: a socket bound to a
// given IPv6 address is v6only whatever the line says, and without
// `v6only` on it the new worker bound a socket of its own at each reload
// (a reset or two every few dozen reloads on a busy host: the rollout
// test's failure of 2026-12-06).
func TestAReloadKeepsTheListeningSocketsOfBothAddresses(t *testing.T) {
	for _, lb := range loadBalancers {
		t.Run(lb.name, func(t *testing.T) {
			running := startLB(t, lb, nil)
			port := running.Port()
			before := listeningSockets(t, port)
			if len(before) != 2 {
				t.Fatalf("listening sockets on port %d: %v, want one on 127.0.0.1 and one on [::1]", port, before)
			}
			for i := range 3 {
				if err := running.Reload(context.Background()); err != nil {
					t.Fatal(err)
				}
				if after := listeningSockets(t, port); !maps.Equal(after, before) {
					t.Fatalf("after reload %d the listening sockets are %v, were %v: want the same ones", i+1, after, before)
				}
			}
		})
	}
}

// listeningSockets are the inodes of the TCP sockets listening on port, by
// the file of /proc/net they are in (tcp, tcp6).
func listeningSockets(t *testing.T, port int) map[string]string {
	t.Helper()
	sockets := map[string]string{}
	for _, file := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(filepath.Join("/proc/net", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			// sl local_address rem_address st ... inode: fields 1, 3 and 9.
			fields := strings.Fields(line)
			if len(fields) < 10 || fields[3] != "0A" || !strings.HasSuffix(fields[1], fmt.Sprintf(":%04X", port)) {
				continue
			}
			if _, dup := sockets[file]; dup {
				sockets[file] += "," + fields[9]
				continue
			}
			sockets[file] = fields[9]
		}
	}
	return sockets
}
