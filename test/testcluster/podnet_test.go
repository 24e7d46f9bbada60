package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests need root and iproute2, and skip elsewhere with the reason.
// They send requests only to the pods' addresses, inside the namespaces
// they create.

func startNetwork(t *testing.T) *Network {
	t.Helper()
	if reason := NetworkUnavailable(); reason != "" {
		t.Skip(reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := StartNetwork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

func addPod(t *testing.T, n *Network, name string, ips []string, health string) *NetPod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := n.AddPod(ctx, name, ips, []int32{8080, 9090}, health)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// podClient never reuses a connection, so each request proves the path anew.
var podClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// httpGet returns the status, X-Pod header and body of a GET.
func httpGet(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := podClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, resp.Header.Get("X-Pod"), string(body)
}

func podURL(ip string, port int, path string) string {
	return "http://" + net.JoinHostPort(ip, fmt.Sprint(port)) + path
}

func TestNetworkPodsAnswerWithTheirNameOnBothFamilies(t *testing.T) {
	n := startNetwork(t)
	a := addPod(t, n, "web-a", n.PodIPs(1), HealthReady)
	b := addPod(t, n, "web-b", n.PodIPs(2), HealthNotReady)
	for _, p := range []*NetPod{a, b} {
		for _, ip := range p.IPs {
			for _, port := range []int{8080, 9090} {
				status, pod, body := httpGet(t, podURL(ip, port, "/"))
				want := fmt.Sprintf("%s at %s\n", p.Name, net.JoinHostPort(ip, fmt.Sprint(port)))
				if status != 200 || pod != p.Name || body != want {
					t.Errorf("GET %s = %d, X-Pod %q, %q; want 200, %q, %q", podURL(ip, port, "/"), status, pod, body, p.Name, want)
				}
			}
		}
	}
	health := func(p *NetPod) int {
		status, _, _ := httpGet(t, podURL(p.IPs[1], 8080, "/healthz"))
		return status
	}
	if got := health(a); got != 200 {
		t.Errorf("/healthz of a ready pod = %d, want 200", got)
	}
	if got := health(b); got != 503 {
		t.Errorf("/healthz of a pod not ready = %d, want 503", got)
	}
	// Readiness flipped at runtime.
	for _, step := range []struct {
		pod    *NetPod
		health string
		want   int
	}{{a, HealthTerminating, 503}, {b, HealthReady, 200}, {a, HealthReady, 200}} {
		if err := step.pod.SetHealth(step.health); err != nil {
			t.Fatal(err)
		}
		if got := health(step.pod); got != step.want {
			t.Errorf("/healthz of %s after %s = %d, want %d", step.pod.Name, step.health, got, step.want)
		}
	}
}

func TestNetworkRefusesWhatIsNotAPodNetwork(t *testing.T) {
	n := startNetwork(t)
	ctx := context.Background()
	addPod(t, n, "web-a", n.PodIPs(1), HealthReady)
	for name, tc := range map[string]struct {
		pod  string
		ips  []string
		want string
	}{
		"no address":                {"p", nil, "needs an IP and a port"},
		"the gateway":               {"p", []string{GatewayIPv4}, "not a pod IP"},
		"not an address":            {"p", []string{"10.244.1"}, "not a pod IP"},
		"two of one family":         {"p", []string{"10.244.9.1", "10.244.9.2"}, "two addresses of one family"},
		"a name taken":              {"web-a", n.PodIPs(3), "already has a network"},
		"an address already routed": {"p", n.PodIPs(1)[:1], "already routed on this machine"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := n.AddPod(ctx, tc.pod, tc.ips, []int32{8080}, HealthReady)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("AddPod = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// A refused pod leaves nothing: only the bridge and web-a's namespace
	// and link are there.
	a := n.Pod("web-a")
	want := map[string]bool{n.Bridge(): true, a.Netns: true, a.HostLink: true}
	left := leftovers(n.owner)
	for _, l := range left {
		if !want[l] {
			t.Errorf("left behind by a refused pod: %s", l)
		}
	}
	if len(left) != len(want) {
		t.Errorf("namespaces and links of the network: %v, want %v", left, want)
	}
}

func TestNetworkRemovesAPodAndLeavesNothing(t *testing.T) {
	n := startNetwork(t)
	a := addPod(t, n, "web-a", n.PodIPs(1), HealthReady)
	b := addPod(t, n, "web-b", n.PodIPs(2), HealthReady)
	pid := a.ServerPID()
	n.RemovePod("web-a")
	if alive(pid) {
		t.Errorf("server of web-a (pid %d) still runs", pid)
	}
	for _, name := range []string{a.Netns, a.HostLink} {
		if exists(name) {
			t.Errorf("%s is still there after RemovePod", name)
		}
	}
	if routes := routesTo(t, a.IPs); routes != "" {
		t.Errorf("routes to web-a are still there:\n%s", routes)
	}
	if status, pod, _ := httpGet(t, podURL(b.IPs[0], 8080, "/")); status != 200 || pod != "web-b" {
		t.Errorf("web-b after web-a left: %d %q", status, pod)
	}
	bPID := b.ServerPID()
	n.Close()
	if left := leftovers(n.owner); len(left) > 0 {
		t.Errorf("left after Close: %v", left)
	}
	if alive(bPID) {
		t.Errorf("server of web-b (pid %d) still runs after Close", bPID)
	}
}

// TestNetworkLeavesNothingWhenTheTestProcessDies runs a network with two pods
// in a child process, kills the child with SIGKILL (no clean-up of its own
// can run) and expects every namespace, link, route and server gone: the
// keeper removes them and the servers die with their parent.
func TestNetworkLeavesNothingWhenTheTestProcessDies(t *testing.T) {
	if reason := NetworkUnavailable(); reason != "" {
		t.Skip(reason)
	}
	cmd, line, err := ChildTestLine(t.Cleanup, 3*time.Minute, "TestNetworkChildProcess", "NETWORK ", "K8STC_NETWORK_CHILD=1")
	if err != nil {
		t.Fatal(err)
	}
	var child childNetwork
	if line != "" {
		if err := json.Unmarshal([]byte(line), &child); err != nil {
			t.Fatal(err)
		}
	}
	if child.Bridge == "" {
		t.Fatal("the child process never reported its network")
	}
	names := append([]string{child.Bridge}, child.Names...)
	if _, err := os.Stat(child.Dir); err != nil {
		t.Fatalf("the child's health files: %v", err)
	}
	for _, name := range names {
		if !exists(name) {
			t.Fatalf("%s of the child's network does not exist before the kill", name)
		}
	}
	if status, pod, _ := httpGet(t, podURL(child.IPs[0], 8080, "/")); status != 200 || pod != "child-a" {
		t.Fatalf("child-a before the kill: %d %q", status, pod)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	var left []string
	for range 150 { // the keeper's work is asynchronous: up to 15 s
		left = nil
		for _, name := range names {
			if exists(name) {
				left = append(left, name)
			}
		}
		for _, pid := range child.Servers {
			if alive(pid) {
				left = append(left, fmt.Sprintf("server pid %d", pid))
			}
		}
		if routes := routesTo(t, child.IPs); routes != "" {
			left = append(left, "routes "+routes)
		}
		if _, err := os.Stat(child.Dir); err == nil {
			left = append(left, "directory "+child.Dir)
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("left behind by a killed test process: %v", left)
}

type childNetwork struct {
	Bridge  string
	Dir     string   // of the health files
	Names   []string // namespaces and host links
	IPs     []string
	Servers []int
}

// TestNetworkChildProcess is the child of
// TestNetworkLeavesNothingWhenTheTestProcessDies: it starts a network with two
// pods, says what it made, and waits to be killed.
func TestNetworkChildProcess(t *testing.T) {
	if os.Getenv("K8STC_NETWORK_CHILD") != "1" {
		t.Skip("the child of TestNetworkLeavesNothingWhenTheTestProcessDies")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := StartNetwork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	report := childNetwork{Bridge: n.Bridge(), Dir: n.dir}
	for i, name := range []string{"child-a", "child-b"} {
		p, err := n.AddPod(ctx, name, n.PodIPs(i+1), []int32{8080}, HealthReady)
		if err != nil {
			t.Fatal(err)
		}
		report.Names = append(report.Names, p.Netns, p.HostLink)
		report.IPs = append(report.IPs, p.IPs...)
		report.Servers = append(report.Servers, p.ServerPID())
	}
	data, _ := json.Marshal(report)
	fmt.Printf("NETWORK %s\n", data)
	time.Sleep(2 * time.Minute) // killed long before
}

func TestSweepRemovesWhatADeadProcessLeft(t *testing.T) {
	if reason := NetworkUnavailable(); reason != "" {
		t.Skip(reason)
	}
	// A pid that certainly belongs to no process now.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pid := dead.Process.Pid
	netns, bridge, veth := fmt.Sprintf("k8stc-%d-0-1", pid), fmt.Sprintf("k8stc%db0", pid), fmt.Sprintf("kv%dx1", pid)
	for _, args := range [][]string{
		{"netns", "add", netns},
		{"link", "add", bridge, "type", "bridge"},
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "delete", netns).Run()
		_ = exec.Command("ip", "link", "delete", bridge).Run()
		_ = exec.Command("ip", "link", "delete", veth).Run()
	})
	startNetwork(t)
	for _, name := range []string{netns, bridge, veth} {
		if exists(name) {
			t.Errorf("%s of dead pid %d survived the sweep of StartNetwork", name, pid)
		}
	}
}

// exists reports whether a network namespace or a host link of that name
// exists.
func exists(name string) bool {
	if _, err := os.Stat("/run/netns/" + name); err == nil {
		return true
	}
	_, err := os.Stat("/sys/class/net/" + name)
	return err == nil
}

// leftovers are the namespaces and links named after process owner.
func leftovers(owner int) []string {
	var left []string
	for _, dir := range []string{"/run/netns", "/sys/class/net"} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			for _, prefix := range []string{fmt.Sprintf("k8stc-%d-", owner), fmt.Sprintf("k8stc%db", owner), fmt.Sprintf("kv%dx", owner)} {
				if strings.HasPrefix(e.Name(), prefix) {
					left = append(left, e.Name())
				}
			}
		}
	}
	return left
}

// routesTo lists the host's routes to any of ips.
func routesTo(t *testing.T, ips []string) string {
	t.Helper()
	var found []string
	for _, family := range []string{"-4", "-6"} {
		out, err := exec.Command("ip", family, "route", "show").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			for _, ip := range ips {
				if strings.HasPrefix(line, ip+" ") {
					found = append(found, line)
				}
			}
		}
	}
	return strings.Join(found, "\n")
}

// Networks made at the same time, in one test process or several, never
// share a block of pod addresses, although none of them has a pod (and so a
// route) yet; a block is free again once its network is closed.
func TestNetworksMadeAtOnceNeverShareABlockOfPodAddresses(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2: no ip command on PATH")
	}
	ctx := context.Background()
	// 30 of the 150 blocks: drawn at random without the reservation, two
	// would be the same 19 times in 20.
	var nets []*Network
	defer func() {
		for _, n := range nets {
			_ = n.blockLock.Close()
		}
	}()
	seen := map[int]bool{}
	for range 30 {
		n := &Network{}
		if err := n.reserveBlock(ctx); err != nil {
			t.Fatal(err)
		}
		nets = append(nets, n)
		if seen[n.block] {
			t.Fatalf("block %d given to two networks", n.block)
		}
		seen[n.block] = true
	}
	// A closed network's block can be held again.
	closed := nets[0]
	_ = closed.blockLock.Close()
	nets = nets[1:]
	f, err := os.OpenFile(closed.blockLock.Name(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("block %d of a closed network is still held: %v", closed.block, err)
	}
	if err := syscall.Flock(int(nets[0].blockLock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the holder cannot lock its own block: %v", err)
	}
	g, err := os.OpenFile(nets[0].blockLock.Name(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := syscall.Flock(int(g.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Errorf("block %d of a live network could be held by another", nets[0].block)
	}
}
