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

// applyHAProxyExample applies examples/pools/haproxy with the provider's
// binary, as a user does, and returns the backend it rendered.
func applyHAProxyExample(t *testing.T, c *testCluster, dir, namespace string) string {
	t.Helper()
	prepareHAProxyExample(t, dir)
	backend, err := reapplyHAProxyExample(dir, c.kubeconfig, namespace)
	if err != nil {
		t.Fatal(err)
	}
	return backend
}

// prepareHAProxyExample copies examples/pools/haproxy into dir, with a CLI
// configuration that overrides vigie/k8s with the provider's binary.
func prepareHAProxyExample(t *testing.T, dir string) {
	t.Helper()
	example := filepath.Join("..", "..", "examples", "pools", "haproxy")
	for _, name := range []string{"main.tf", "backend.cfg.tftpl"} {
		data, err := os.ReadFile(filepath.Join(example, name))
		if err != nil {
			t.Fatal(err)
		}
		writeText(t, filepath.Join(dir, name), string(data))
	}
	writeText(t, filepath.Join(dir, "dev.tfrc"), testcluster.DevOverrides(filepath.Dir(providerBinary(t))))
}

// reapplyHAProxyExample applies the example prepared in dir and returns the
// backend it rendered; it may run outside the test's goroutine.
func reapplyHAProxyExample(dir, kubeconfig, namespace string) (string, error) {
	run := func(args ...string) (string, error) {
		cmd := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+filepath.Join(dir, "dev.tfrc"), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "KUBECONFIG="+kubeconfig)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("terraform %v: %w\n%s%s", args, err, stdout.String(), stderr.String())
		}
		return stdout.String(), nil
	}
	if _, err := run("apply", "-auto-approve", "-input=false", "-no-color", "-var", "namespace="+namespace, "-var", "service=web", "-var", "port_name=http"); err != nil {
		return "", err
	}
	return run("output", "-raw", "haproxy_backend")
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

	dir := t.TempDir()
	backend := applyHAProxyExample(t, c, dir, ns)
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
		t.Fatalf("rendered backend servers %v, want %v; backend:\n%s", got, want, backend)
	}
	backendFile := filepath.Join(dir, "backend.cfg")
	writeText(t, backendFile, backend)
	h, err := traffic.StartHAProxy(ctx, traffic.HAProxyOptions{Dir: t.TempDir(), Backend: backendFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)

	for _, ipv6 := range []bool{false, true} {
		// Round robin over the 6 servers: 30 requests give each pod 10.
		r := loadForASecond(t, h.URL(ipv6), 30)
		if r.Failed != 0 || r.Total != 30 || r.ByPod["web-1"] != 10 || r.ByPod["web-2"] != 10 || r.ByPod["web-3"] != 10 || len(r.ByPod) != 3 {
			t.Errorf("through HAProxy on %s: %v, want 10 answers from each of web-1, web-2, web-3", h.URL(ipv6), r)
		}
	}

	// web-4 becomes ready: the next apply renders it, and a reload under
	// load brings it in without a failed request.
	if err := testcluster.SetPodReady(ctx, c.client, ns, "web-4", true); err != nil {
		t.Fatal(err)
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		c.waitForSlices(t, ns, endpointCount(family, 4, 4))
	}
	backend = applyHAProxyExample(t, c, dir, ns)
	if got, want := backendServers(backend), wantServers("web-1", "web-2", "web-3", "web-4"); !slices.Equal(got, want) {
		t.Fatalf("backend after web-4 became ready: %v, want %v", got, want)
	}
	during := make(chan traffic.Result, 1)
	go func() {
		r, _ := traffic.Run(context.Background(), traffic.Load{URL: h.URL(true), Rate: 50, Duration: 3 * time.Second})
		during <- r
	}()
	time.Sleep(time.Second)
	writeText(t, backendFile, backend)
	if err := h.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-during; r.Failed != 0 || r.Total != 150 || r.ByPod["web-4"] == 0 {
		t.Errorf("during the reload that adds web-4: %v, want 150 answers, none failed, web-4 among them", r)
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
