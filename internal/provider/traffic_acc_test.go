package provider

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/test/traffic"
)

// Real traffic: pods with a network of their own (testcluster.NetKubelet),
// the pool that examples/pools/haproxy renders from them, a real HAProxy on
// that backend, and requests through it. The requests go only to loopback
// and to the pods' addresses, in namespaces the test creates.

// trafficSetUp skips the test where pods cannot have a network or HAProxy
// is missing, naming the missing piece, and starts the network and its
// fake kubelet.
func trafficSetUp(t *testing.T, c *testCluster) *testcluster.NetKubelet {
	t.Helper()
	if reason := testcluster.NetworkUnavailable(); reason != "" {
		t.Skip(reason)
	}
	if _, err := traffic.HAProxyPath(); err != nil {
		t.Skip(err)
	}
	if localControlPlane == nil {
		t.Skip("pods with a real network need the local control plane: the pod network of the cluster of " + envKubeconfig + " may use their addresses")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := testcluster.StartNetwork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	k, err := testcluster.StartNetKubelet(ctx, c.client, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	return k
}

// haproxyExample is examples/pools/haproxy in a working directory of the
// test, delivering to a real HAProxy (test/traffic) through its own
// terraform_data and apply-pool.sh: each apply that changes the pool
// writes the backend file, checks it with haproxy -c, saves the servers'
// state and reloads HAProxy (SIGUSR2 to the master), appending the time of
// the reload to DIR/reloads.
type haproxyExample struct {
	dir, kubeconfig string
	// rc is the CLI configuration (dev_overrides to the provider's binary).
	rc string
	h  *traffic.HAProxy
}

// startHAProxyExample copies every file of examples/pools/haproxy into dir
// with a CLI configuration for the provider's binary, starts HAProxy on a
// backend of the example's name without a server (what HAProxy serves until
// the first apply), and writes terraform.tfvars (which the companion's runs
// read too): Service web of namespace, port http, terminating_endpoints, and
// pool_file, check_command, save_state_command and reload_command for that
// HAProxy. HAProxy stops at the end of the test.
func startHAProxyExample(t *testing.T, ctx context.Context, c *testCluster, dir, namespace, terminating string) *haproxyExample {
	t.Helper()
	copyExample(t, filepath.Join("..", "..", "examples", "pools", "haproxy"), dir, nil, false)
	e := &haproxyExample{dir: dir, kubeconfig: c.kubeconfig, rc: filepath.Join(dir, "dev.tfrc")}
	writeText(t, e.rc, testcluster.DevOverrides(filepath.Dir(providerBinary(t))))
	backend := filepath.Join(dir, "backend.cfg")
	writeText(t, backend, "backend "+namespace+"_web\n")
	h, err := traffic.StartHAProxy(ctx, traffic.HAProxyOptions{Dir: filepath.Join(dir, "haproxy"), Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	e.h = h
	writeText(t, filepath.Join(dir, "terraform.tfvars"), fmt.Sprintf(`namespace             = %q
service               = "web"
port_name             = "http"
terminating_endpoints = %q
pool_file             = %q
check_command         = %q
save_state_command    = %q
reload_command        = %q
`, namespace, terminating, backend, h.CheckCommand(), h.SaveStateCommand(), h.SignalCommand()+" && date +%s.%N >> reloads"))
	return e
}

// terraform runs the CLI under test in the example's directory; it may run
// outside the test's goroutine.
func (e *haproxyExample) terraform(args ...string) (string, error) {
	cmd := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+e.rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "KUBECONFIG="+e.kubeconfig)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("terraform %v: %w\n%s%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// apply applies the example and, when it reloaded HAProxy, waits until the
// new workers serve; it returns the backend file. It may run outside the
// test's goroutine.
func (e *haproxyExample) apply(ctx context.Context) (string, error) {
	before, err := e.h.Workers(ctx)
	if err != nil {
		return "", err
	}
	reloads := e.reloads()
	if _, err := e.terraform("apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		return "", err
	}
	if e.reloads() > reloads {
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			now, err := e.h.Workers(ctx)
			return err == nil && len(now) > 0 && !slices.ContainsFunc(now, func(pid int) bool { return slices.Contains(before, pid) }), nil
		}); err != nil {
			return "", fmt.Errorf("HAProxy's workers after the example's reload: %w\n%s", err, e.h.LogTail())
		}
	}
	backend, err := os.ReadFile(filepath.Join(e.dir, "backend.cfg"))
	return string(backend), err
}

// reloads is how many times the example reloaded HAProxy.
func (e *haproxyExample) reloads() int {
	data, _ := os.ReadFile(filepath.Join(e.dir, "reloads"))
	return strings.Count(string(data), "\n")
}

var serverLine = regexp.MustCompile(`(?m)^\s+server (\S+) (\S+) check\b`)

// backendServers are the "name address" pairs of a rendered backend, sorted.
func backendServers(backend string) []string {
	var servers []string
	for _, m := range serverLine.FindAllStringSubmatch(backend, -1) {
		servers = append(servers, m[1]+" "+m[2])
	}
	sort.Strings(servers)
	return servers
}

// loadForASecond sends rate requests to url in a second.
func loadForASecond(t *testing.T, url string, rate int) traffic.Result {
	t.Helper()
	r, err := traffic.Run(context.Background(), traffic.Load{URL: url, Rate: rate, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAccTrafficReachesEachReadyPodThroughHAProxy: the pool Terraform
// renders is served. Requests through HAProxy, over IPv4 and IPv6, reach
// each ready pod and no other; a pod made ready joins after the next apply
// and a reload that drops no request; a pod that stops being ready is taken
// out by HAProxy's health check (its /healthz follows the pod's Ready
// condition) before any apply.
func TestAccTrafficReachesEachReadyPodThroughHAProxy(t *testing.T) {
	c := accCluster(t)
	k := trafficSetUp(t, c)
	n := k.Network()
	ctx := c.ctx(t)
	ns := c.namespace(t)
	c.createService(t, dualStackWebServiceSpec(ns, corev1.IPv4Protocol, corev1.IPv6Protocol))
	ips := map[string][]string{}
	for i, name := range []string{"web-1", "web-2", "web-3", "web-4"} {
		ips[name] = n.PodIPs(i + 1)
		pod := testcluster.Pod{Name: name, Labels: webLabels, IPs: ips[name], Ready: name != "web-4", Node: accNode, Ports: map[string]int32{"http": 8080}}
		if err := k.RunPod(ctx, ns, pod); err != nil {
			t.Fatal(err)
		}
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		c.waitForSlices(t, ns, endpointCount(family, 3, 4))
	}

	ex := startHAProxyExample(t, ctx, c, t.TempDir(), ns, "exclude")
	h := ex.h
	backend, err := ex.apply(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantServers := func(pods ...string) []string {
		var want []string
		for _, pod := range pods {
			v4, v6 := ips[pod][0], ips[pod][1]
			want = append(want,
				pod+"-"+strings.ReplaceAll(v4, ".", "-")+"-8080 "+v4+":8080",
				pod+"-"+strings.ReplaceAll(v6, ":", "-")+"-8080 ["+v6+"]:8080")
		}
		sort.Strings(want)
		return want
	}
	if got, want := backendServers(backend), wantServers("web-1", "web-2", "web-3"); !slices.Equal(got, want) {
		t.Fatalf("delivered backend servers %v, want %v; backend:\n%s", got, want, backend)
	}

	for _, ipv6 := range []bool{false, true} {
		// Round robin over the 6 servers: 30 requests give each pod 10.
		r := loadForASecond(t, h.URL(ipv6), 30)
		if r.Failed != 0 || r.Total != 30 || r.ByPod["web-1"] != 10 || r.ByPod["web-2"] != 10 || r.ByPod["web-3"] != 10 || len(r.ByPod) != 3 {
			t.Errorf("through HAProxy on %s: %v, want 10 answers from each of web-1, web-2, web-3", h.URL(ipv6), r)
		}
	}

	// web-4 becomes ready: the next apply delivers it, and its reload,
	// under load, brings it in without a failed request.
	if err := testcluster.SetPodReady(ctx, c.client, ns, "web-4", true); err != nil {
		t.Fatal(err)
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		c.waitForSlices(t, ns, endpointCount(family, 4, 4))
	}
	type applied struct {
		backend string
		err     error
	}
	done := make(chan applied, 1)
	go func() {
		b, err := ex.apply(ctx)
		done <- applied{b, err}
	}()
	// Load, a second at a time, until the second in which the apply (and
	// HAProxy's reload) ended.
	var during []traffic.Result
	var got *applied
	for i := 0; got == nil && i < 120; i++ {
		during = append(during, loadForASecond(t, h.URL(true), 50))
		select {
		case a := <-done:
			got = &a
		default:
		}
	}
	if got == nil {
		t.Fatal("the apply that adds web-4 did not end within 2 minutes")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got, want := backendServers(got.backend), wantServers("web-1", "web-2", "web-3", "web-4"); !slices.Equal(got, want) {
		t.Fatalf("backend after web-4 became ready: %v, want %v", got, want)
	}
	if ex.reloads() != 2 {
		t.Errorf("HAProxy reloaded %d times by the two applies, want 2", ex.reloads())
	}
	for _, r := range during {
		if r.Failed != 0 || r.Total != 50 {
			t.Errorf("during the apply and the reload that add web-4: %v, want 50 answers a second, none failed", r)
		}
	}
	if r := loadForASecond(t, h.URL(true), 50); r.Failed != 0 || r.ByPod["web-4"] == 0 {
		t.Errorf("after the reload that adds web-4: %v, want no failure and web-4 among the answers", r)
	}

	// web-2 stops being ready: its /healthz fails, and HAProxy's check
	// takes it out with no apply (the pool between two plans).
	if err := testcluster.SetPodReady(ctx, c.client, ns, "web-2", false); err != nil {
		t.Fatal(err)
	}
	var r traffic.Result
	for range 30 { // checks every 2 s, 3 failures: about 6 s
		if r = loadForASecond(t, h.URL(false), 40); r.ByPod["web-2"] == 0 {
			break
		}
	}
	if want := []string{"web-1", "web-3", "web-4"}; r.Failed != 0 || !slices.Equal(r.Pods(), want) {
		t.Errorf("after web-2 stopped being ready: %v, want answers from %v only", r, want)
	}
}
