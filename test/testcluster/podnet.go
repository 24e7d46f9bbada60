package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/tied"
	"github.com/vigie/terraform-provider-k8s/test/toolbuild"
)

// Pods with a real network, opt-in: each pod gets a network namespace of its
// own holding its IPv4 and IPv6 addresses, joined to the host by a veth pair
// on a bridge of the test process, and running tools/podserver, an HTTP
// server that answers with the pod's name and serves /healthz as the pod's
// readiness says. The host reaches every pod IP through the bridge (one
// route per address), so HAProxy or a test on the host sends real requests to
// real sockets.
//
// Nothing outlives the test process: the servers get SIGKILL when it dies
// (tied.Start) and leave when their input closes; a keeper process removes
// the namespaces, links and bridge when the test process ends however it
// ends; and StartNetwork first sweeps what a process that no longer exists
// left behind (a keeper killed with it). Names carry the owner's pid, which
// is how the sweep tells stale from live; tools/podserver/main.go lists them.
//
// It needs root and iproute2 (ip netns, veth, bridge); NetworkUnavailable
// says which is missing.

// The host's addresses on every bridge: the source of the host's packets to
// the pods, and the pods' next hop back. Pods must not use them.
const (
	GatewayIPv4 = "10.244.255.254"
	GatewayIPv6 = "fd00:10:244:ffff::1"
)

// NetworkUnavailable says why pods cannot have a real network on this
// machine, naming the missing piece, or "" when they can.
func NetworkUnavailable() string {
	if runtime.GOOS != "linux" {
		return "pods with a real network need Linux network namespaces (this is " + runtime.GOOS + ")"
	}
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Sprintf("pods with a real network need root (ip netns add, veth pairs, a bridge): running as uid %d", uid)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "pods with a real network need iproute2: no ip command on PATH (apt-get install iproute2)"
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return "pods with a real network need network namespaces: /proc/self/ns/net is missing"
	}
	return ""
}

// Network is the bridge of one test process to which the pods with a real
// network are attached. Make it with StartNetwork and Close it; a test
// process may hold several.
type Network struct {
	owner, number int
	bridge        string
	server        string   // the podserver binary
	dir           string   // the pods' health files
	block         int      // 10.244.<block>.0/24 and fd00:10:244::<block>:0/112, for PodIPs
	blockLock     *os.File // held (flock) while the network holds block
	keeper        *exec.Cmd
	keeperIn      io.WriteCloser

	mu     sync.Mutex
	pods   map[string]*NetPod
	closed bool
}

// NetPod is the network and the server of one pod.
type NetPod struct {
	Name string
	// Netns is the network namespace (ip netns exec Netns ... runs in it);
	// HostLink is the host's end of its veth pair.
	Netns, HostLink string
	IPs             []string
	Ports           []int32

	net    *Network
	health string
	server *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
}

// The health words of tools/podserver.
const (
	HealthReady       = "ready"
	HealthNotReady    = "not-ready"
	HealthTerminating = "terminating"
)

var (
	networksMu   sync.Mutex
	networkCount int
	podCount     int
)

// StartNetwork creates a bridge for pods with a real network, after removing
// what dead test processes left. It fails with the reason of
// NetworkUnavailable when the machine cannot do it.
func StartNetwork(ctx context.Context) (*Network, error) {
	if reason := NetworkUnavailable(); reason != "" {
		return nil, errors.New(reason)
	}
	server, err := podserverBinary(ctx)
	if err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, server, "sweep").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("remove the networks of dead test processes: %w\n%s", err, out)
	}
	dir, err := os.MkdirTemp("", "k8stc-pods-")
	if err != nil {
		return nil, err
	}
	networksMu.Lock()
	number := networkCount
	networkCount++
	networksMu.Unlock()
	n := &Network{owner: os.Getpid(), number: number, server: server, dir: dir, pods: map[string]*NetPod{}}
	n.bridge = fmt.Sprintf("k8stc%db%d", n.owner, n.number)
	if len(n.bridge) > 15 {
		return nil, fmt.Errorf("bridge name %s is longer than the 15 bytes of a Linux interface name", n.bridge)
	}
	if err := n.startKeeper(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := ipBatch(ctx, "", []string{
		"link add " + n.bridge + " type bridge",
		"addr add " + GatewayIPv4 + "/32 dev " + n.bridge,
		"addr add " + GatewayIPv6 + "/128 dev " + n.bridge + " nodad",
		"link set " + n.bridge + " up",
	}); err != nil {
		n.Close()
		return nil, err
	}
	if err := n.reserveBlock(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// startKeeper starts the process that removes this network if the test
// process dies before Close. Not tied: it must outlive the test process.
func (n *Network) startKeeper() error {
	cmd := exec.Command(n.server, "keep", "-owner", strconv.Itoa(n.owner), "-network", strconv.Itoa(n.number), "-dir", n.dir)
	// Its own process group: a Ctrl-C of the test run does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, out, err := pipes(cmd)
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the network keeper: %w", err)
	}
	if err := expectLine(out, "keeping", 10*time.Second); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("network keeper: %w", err)
	}
	n.keeper, n.keeperIn = cmd, in
	return nil
}

// pipes are the standard input and output of a command not started yet.
func pipes(cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	return in, out, err
}

// reserveBlock reserves a /24 of 10.244.100-249.0 for PodIPs: one that no
// other live network holds (a lock file of the block, under flock until
// Close or the death of the test process, so concurrent test processes
// never pick the same) and that no route of the host uses (a dead process's
// pods, until its keeper removes them).
func (n *Network) reserveBlock(ctx context.Context) error {
	dir := filepath.Join(os.TempDir(), "k8stc-pod-blocks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	routes, err := exec.CommandContext(ctx, "ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return fmt.Errorf("ip route show: %w", err)
	}
	first := rand.IntN(150)
	for i := range 150 {
		block := 100 + (first+i)%150
		if bytes.Contains(routes, fmt.Appendf(nil, "10.244.%d.", block)) {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(block)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			continue
		}
		n.block, n.blockLock = block, f
		return nil
	}
	return errors.New("no block of 10.244.100-249.0/24 is free for the pods: 150 networks of live test processes hold them")
}

// PodIPs gives pod number i (1-253) of this network an IPv4 and an IPv6
// address of the network's own block: 10.244.<block>.<i> and
// fd00:10:244::<block>:<i>.
func (n *Network) PodIPs(i int) []string {
	return []string{fmt.Sprintf("10.244.%d.%d", n.block, i), fmt.Sprintf("fd00:10:244::%d:%d", n.block, i)}
}

// Bridge is the name of the host bridge.
func (n *Network) Bridge() string { return n.bridge }

// AddPod gives a pod a network namespace with ips (one or two, at most one
// per family), and starts its server on ports with /healthz answering as
// health says. It returns once the server is listening.
func (n *Network) AddPod(ctx context.Context, name string, ips []string, ports []int32, health string) (*NetPod, error) {
	if len(ips) == 0 || len(ports) == 0 {
		return nil, fmt.Errorf("pod %s: a pod with a network needs an IP and a port", name)
	}
	families := map[bool]bool{}
	for _, ip := range ips {
		addr := net.ParseIP(ip)
		if addr == nil || ip == GatewayIPv4 || ip == GatewayIPv6 {
			return nil, fmt.Errorf("pod %s: %q is not a pod IP of a network (the gateway addresses are the host's)", name, ip)
		}
		if families[addr.To4() != nil] {
			return nil, fmt.Errorf("pod %s: %v has two addresses of one family", name, ips)
		}
		families[addr.To4() != nil] = true
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errors.New("the network is closed")
	}
	if _, ok := n.pods[name]; ok {
		n.mu.Unlock()
		return nil, fmt.Errorf("pod %s already has a network", name)
	}
	networksMu.Lock()
	podCount++
	number := podCount
	networksMu.Unlock()
	p := &NetPod{
		Name: name, IPs: ips, Ports: ports, net: n,
		Netns:    fmt.Sprintf("k8stc-%d-%d-%d", n.owner, n.number, number),
		HostLink: fmt.Sprintf("kv%dx%d", n.owner, number),
		health:   filepath.Join(n.dir, strconv.Itoa(number)+".health"),
	}
	n.pods[name] = p
	n.mu.Unlock()
	if err := p.setUp(ctx, health); err != nil {
		n.RemovePod(name)
		return nil, fmt.Errorf("network of pod %s: %w", name, err)
	}
	return p, nil
}

func (p *NetPod) setUp(ctx context.Context, health string) error {
	if len(p.HostLink) > 15 {
		return fmt.Errorf("link name %s is longer than 15 bytes", p.HostLink)
	}
	if err := p.SetHealth(health); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", p.Netns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add %s: %w: %s", p.Netns, err, bytes.TrimSpace(out))
	}
	if out, err := exec.CommandContext(ctx, "ip", "link", "add", p.HostLink, "type", "veth", "peer", "name", "eth0", "netns", p.Netns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link add %s: %w: %s", p.HostLink, err, bytes.TrimSpace(out))
	}
	inside := []string{"link set lo up", "link set eth0 up"}
	host := []string{"link set " + p.HostLink + " master " + p.net.bridge + " up"}
	for _, ip := range p.IPs {
		if strings.Contains(ip, ":") {
			inside = append(inside, "addr add "+ip+"/128 dev eth0 nodad", "route add ::/0 dev eth0")
			host = append(host, "route add "+ip+"/128 dev "+p.net.bridge+" src "+GatewayIPv6)
		} else {
			inside = append(inside, "addr add "+ip+"/32 dev eth0", "route add 0.0.0.0/0 dev eth0")
			host = append(host, "route add "+ip+"/32 dev "+p.net.bridge+" src "+GatewayIPv4)
		}
	}
	if err := ipBatch(ctx, p.Netns, inside); err != nil {
		return err
	}
	if err := ipBatch(ctx, "", host); err != nil {
		if strings.Contains(err.Error(), "File exists") {
			return fmt.Errorf("%v is already routed on this machine (a pod of another network?): %w", p.IPs, err)
		}
		return err
	}
	return p.startServer()
}

func (p *NetPod) startServer() error {
	args := []string{"netns", "exec", p.Netns, p.net.server, "serve", "-name", p.Name, "-health", p.health}
	for _, port := range p.Ports {
		args = append(args, "-port", strconv.Itoa(int(port)))
	}
	cmd := exec.Command("ip", args...)
	in, out, err := pipes(cmd)
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := tied.Start(cmd); err != nil {
		return fmt.Errorf("start the server of pod %s: %w", p.Name, err)
	}
	p.server, p.stdin, p.exited = cmd, in, make(chan struct{})
	ready := make(chan error, 1)
	go func() {
		ready <- expectLine(out, "listening", 10*time.Second)
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := <-ready; err != nil {
		p.stopServer()
		return fmt.Errorf("server of pod %s: %w: %s", p.Name, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// SetHealth sets what the pod's /healthz answers: HealthReady (200),
// HealthNotReady or HealthTerminating (503).
func (p *NetPod) SetHealth(state string) error {
	switch state {
	case HealthReady, HealthNotReady, HealthTerminating:
	default:
		return fmt.Errorf("health %q: want %s, %s or %s", state, HealthReady, HealthNotReady, HealthTerminating)
	}
	tmp := p.health + ".tmp"
	if err := os.WriteFile(tmp, []byte(state+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p.health)
}

// ServerPID is the pid of the pod's server.
func (p *NetPod) ServerPID() int { return p.server.Process.Pid }

// stopServer stops the server as a kubelet stops a container: SIGTERM (and
// the end of its input), then SIGKILL after a bound.
func (p *NetPod) stopServer() {
	if p.server == nil {
		return
	}
	_ = p.stdin.Close()
	tied.KillGroup(p.server, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		tied.KillGroup(p.server, syscall.SIGKILL)
		<-p.exited
	}
}

// RemovePod stops the pod's server and removes its namespace, its link and
// its routes. It does nothing for a pod without a network here.
func (n *Network) RemovePod(name string) {
	n.mu.Lock()
	p, ok := n.pods[name]
	delete(n.pods, name)
	n.mu.Unlock()
	if !ok {
		return
	}
	p.stopServer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var routes []string
	for _, ip := range p.IPs {
		bits := "/32"
		if strings.Contains(ip, ":") {
			bits = "/128"
		}
		routes = append(routes, "route del "+ip+bits+" dev "+n.bridge)
	}
	_ = ipBatch(ctx, "", routes)
	_ = exec.CommandContext(ctx, "ip", "netns", "delete", p.Netns).Run()
	// The veth goes with its namespace, but not at once: delete it now.
	_ = exec.CommandContext(ctx, "ip", "link", "delete", p.HostLink).Run()
	_ = os.Remove(p.health)
}

// Pod is the network of a pod by name, or nil.
func (n *Network) Pod(name string) *NetPod {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pods[name]
}

// Close removes every pod's network and the bridge, and releases the keeper.
func (n *Network) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	var names []string
	for name := range n.pods {
		names = append(names, name)
	}
	n.mu.Unlock()
	for _, name := range names {
		n.RemovePod(name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = exec.CommandContext(ctx, "ip", "link", "delete", n.bridge).Run()
	_ = os.RemoveAll(n.dir)
	if n.blockLock != nil {
		_ = n.blockLock.Close()
	}
	if n.keeper != nil {
		_, _ = io.WriteString(n.keeperIn, "release\n")
		_ = n.keeperIn.Close()
		done := make(chan struct{})
		go func() { _ = n.keeper.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = n.keeper.Process.Kill()
			<-done
		}
	}
}

// ipBatch runs ip -batch with commands, in namespace netns when not empty.
func ipBatch(ctx context.Context, netns string, commands []string) error {
	if len(commands) == 0 {
		return nil
	}
	args := []string{"-batch", "-"}
	if netns != "" {
		args = append([]string{"-n", netns}, args...)
	}
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdin = strings.NewReader(strings.Join(commands, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s (commands: %s)", strings.Join(args, " "), err, bytes.TrimSpace(out), strings.Join(commands, "; "))
	}
	return nil
}

// expectLine waits, up to bound, for the first line of r to be want.
func expectLine(r io.Reader, want string, bound time.Duration) error {
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case line := <-got:
		if line != want {
			return fmt.Errorf("said %q instead of %q", line, want)
		}
		return nil
	case <-time.After(bound):
		return fmt.Errorf("did not say %q within %s", want, bound)
	}
}

// podserverBinary builds tools/podserver once per version of its source,
// into the shared cache.
func podserverBinary(ctx context.Context) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	src := filepath.Join(root, "tools", "podserver")
	hash := sha256.New()
	for _, name := range []string{"go.mod", "main.go"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return "", err
		}
		hash.Write(data)
	}
	hash.Write([]byte(runtime.Version()))
	cache, err := toolbuild.CacheRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cache, "podserver-"+hex.EncodeToString(hash.Sum(nil))[:16], "podserver")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	// Written under a name of its own and renamed: concurrent builds never
	// leave a half-written binary under the final name.
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build tools/podserver: %w\n%s", err, out)
	}
	return bin, os.Rename(tmp, bin)
}
