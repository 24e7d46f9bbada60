package companion

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// The companion's decisions, each tried from outside as issue 24 found
// them: the CLI's invocations counted through a wrapper, the state, the
// metrics and the log.

// countingCLI is a wrapper of the CLI that records each invocation's
// arguments, one line each.
type countingCLI struct {
	path, calls string
}

func newCountingCLI(t *testing.T) countingCLI {
	t.Helper()
	dir := t.TempDir()
	c := countingCLI{path: filepath.Join(dir, "terraform"), calls: filepath.Join(dir, "calls")}
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %q\nexec %q \"$@\"\n", c.calls, acc.terraform)
	if err := os.WriteFile(c.path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return c
}

// count is how many times the CLI ran subcommand.
func (c countingCLI) count(subcommand string) int { return len(c.invocations(subcommand)) }

// invocations are the arguments of each run of subcommand.
func (c countingCLI) invocations(subcommand string) [][]string {
	data, _ := os.ReadFile(c.calls)
	var out [][]string
	for _, line := range strings.Split(string(data), "\n") {
		if args := strings.Fields(line); len(args) > 0 && args[0] == subcommand {
			out = append(out, args)
		}
	}
	return out
}

// metrics is the companion's /metrics (it was started with -listen 127.0.0.1:0).
func (c *companion) metrics(t *testing.T) string {
	t.Helper()
	return c.get(t, "/metrics")
}

func (c *companion) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + c.field("serving /healthz and /metrics", "address") + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// waitHealthz waits until /healthz has want, for at most within: the loop
// writes what /healthz says after it has taken the event in, a moment
// after the line that logs the event.
func (c *companion) waitHealthz(t *testing.T, within time.Duration, want string) {
	t.Helper()
	var h string
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, within, true, func(context.Context) (bool, error) {
		h = c.get(t, "/healthz")
		return strings.Contains(h, want), nil
	}); err != nil {
		t.Errorf("/healthz lacks %q after %s:\n%s", want, within, h)
	}
}

// wantMetric checks that /metrics has the line.
func (c *companion) wantMetric(t *testing.T, line string) {
	t.Helper()
	if m := c.metrics(t); !strings.Contains(m, line+"\n") {
		t.Errorf("/metrics lacks %q:\n%s", line, grepLines(m, "k8s_sync_"))
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// handSlice writes EndpointSlice name of service in ns with one endpoint
// per address (ready, on no node), as a controller of one's own would.
func handSlice(t *testing.T, ns, service, name string, mutate func(*discoveryv1.EndpointSlice), addresses ...string) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "sync-acc"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}},
	}
	for _, a := range addresses {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	if mutate != nil {
		mutate(slice)
	}
	slices := acc.client.DiscoveryV1().EndpointSlices(ns)
	existing, err := slices.Get(testCtx(t), name, metav1.GetOptions{})
	if err == nil {
		slice.ResourceVersion = existing.ResourceVersion
		_, err = slices.Update(testCtx(t), slice, metav1.UpdateOptions{})
	} else {
		_, err = slices.Create(testCtx(t), slice, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// selectorless makes Service name in ns without a selector: its slices are
// the test's own.
func selectorless(t *testing.T, ns, name string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := acc.client.CoreV1().Services(ns).Create(testCtx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Issue 24, 1: the pool resource's provisioner fails once, after Terraform
// wrote the data source's new result into state (the resource tainted).
// The run is retried although state's pool equals the cluster's, and the
// retry's plan replaces the tainted resource.
func TestAccSyncRetriesAFailedApplyThatWroteThePoolIntoState(t *testing.T) {
	t.Parallel()
	ns, w := webPool(t, 2)
	marker := filepath.Join(w.dir, "fail-once")
	w.write(t, strings.Replace(poolConfig(ns, ""), `resource "terraform_data" "pool" {
  input = local.members
}`, fmt.Sprintf(`resource "terraform_data" "pool" {
  input            = local.members
  triggers_replace = local.members
  provisioner "local-exec" {
    command = "if [ -e %[1]s ]; then rm %[1]s; echo the load balancer refused >&2; exit 1; fi"
  }
}`, marker), 1))
	w.terraform(t, "apply", "-auto-approve", "-input=false", "-no-color")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cli := newCountingCLI(t)
	c := startSync(t, w, "-terraform", cli.path, "-listen", "127.0.0.1:0")
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "failed"})
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3))
	c.quiet(t, 3*time.Second)
	c.wantMetric(t, `k8s_sync_runs_total{result="failed"} 1`)
	c.wantMetric(t, `k8s_sync_runs_total{result="applied"} 1`)
	if n := cli.count("apply"); n != 2 {
		t.Errorf("%d applies, want 2 (the failed one, its retry)", n)
	}
	if out := w.terraform(t, "state", "show", "terraform_data.pool"); strings.Contains(out, "tainted") {
		t.Errorf("the pool resource is still tainted:\n%s", out)
	}
}

// Issue 24, 2: an endpoint's zone and hostname change; the pool resource
// reads only address:port. One run brings the state's data source current,
// then nothing: no plan per settle window, and check says the pool matches.
func TestAccSyncAChangeNoResourceUsesIsOneRunThatBringsStateCurrent(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	selectorless(t, ns, "web")
	handSlice(t, ns, "web", "web-a", nil, "10.244.0.1", "10.244.0.2")
	w := newWorkdir(t, poolConfig(ns, ""))
	cli := newCountingCLI(t)
	c := startSync(t, w, "-terraform", cli.path, "-listen", "127.0.0.1:0")
	handSlice(t, ns, "web", "web-a", func(s *discoveryv1.EndpointSlice) {
		s.Endpoints[0].Zone, s.Endpoints[0].Hostname = ptr.To("zone-b"), ptr.To("web-1")
	}, "10.244.0.1", "10.244.0.2")
	c.waitFor(t, 60*time.Second, "run ended")
	c.quiet(t, 6*time.Second)
	c.wantMetric(t, `k8s_sync_runs_total{result="state_updated"} 1`)
	if n := cli.count("plan"); n != 1 {
		t.Errorf("%d plans for one change no resource uses, want 1", n)
	}
	if n := cli.count("apply"); n != 1 {
		t.Errorf("%d applies, want 1: the saved plan, which writes the data source's result", n)
	}
	c.wantMetric(t, `k8s_sync_runs_total{result="no_changes"} 0`)
	wantCheck(t, w, "after the run", t.Errorf)
	wantMembers(t, w, members(1, 2))
}

// Issue 24, 3: a -command that succeeds but applies nothing (a webhook to a
// pipeline that applies later) runs once per distinct change, not once
// per settle window.
func TestAccSyncCommandRunsOncePerDistinctChange(t *testing.T) {
	t.Parallel()
	ns, w := webPool(t, 2)
	calls := filepath.Join(t.TempDir(), "calls")
	c := startSync(t, w, "-listen", "127.0.0.1:0", "-command", shCommand(fmt.Sprintf(`echo "$K8S_SYNC_CHANGES" >> %q`, calls)))
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	waitForLines(t, calls, 1)
	c.quiet(t, 8*time.Second)
	runPod(t, ns, "web", "web-4", "10.244.0.4", true)
	waitForLines(t, calls, 2)
	c.quiet(t, 4*time.Second)
	lines := waitForLines(t, calls, 2)
	if len(lines) != 2 {
		t.Fatalf("the command ran %d times, want 2 (one per change):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[1], "10.244.0.4:8080") {
		t.Errorf("the second run's changes lack the new pod: %s", lines[1])
	}
	c.wantMetric(t, `k8s_sync_runs_total{result="delivered"} 2`)
}

// waitForLines waits until path has at least n lines, and gives them.
func waitForLines(t *testing.T, path string, n int) []string {
	t.Helper()
	var lines []string
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		data, _ := os.ReadFile(path)
		lines = strings.Split(strings.TrimSpace(string(data)), "\n")
		return len(data) > 0 && len(lines) >= n, nil
	}); err != nil {
		t.Fatalf("%s has %d line(s) after 60 s, want %d", path, len(lines), n)
	}
	return lines
}

// Issue 24, 4: an EndpointSlice relabelled from Service x (in state) to a
// Service no pool reads is a change of x; relabelled to another watched
// Service, of both, named in the log and $K8S_SYNC_CHANGES.
func TestAccSyncARelabelledSliceChangesItsOldService(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	for _, name := range []string{"web", "other", "api"} {
		selectorless(t, ns, name)
	}
	handSlice(t, ns, "web", "web-a", nil, "10.244.0.1")
	handSlice(t, ns, "web", "web-b", nil, "10.244.0.2")
	w := newWorkdir(t, poolConfig(ns, ""))
	c := startSync(t, w, "-max-shrink", "1")
	handSlice(t, ns, "other", "web-b", nil, "10.244.0.2")
	c.waitFor(t, 60*time.Second, "pool differs from state", map[string]string{"data_source": "data.k8s_ready_endpoints.web", "removed": "10.244.0.2:8080"})
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1))

	// Two watched Services: web and api, each with its pool.
	both := newWorkdir(t, poolConfig(ns, apiPool(ns)))
	calls := filepath.Join(t.TempDir(), "calls")
	c2 := startSync(t, both, "-max-shrink", "1", "-allow-empty", "-command", shCommand(fmt.Sprintf(`echo "$K8S_SYNC_CHANGES" >> %q`, calls)))
	handSlice(t, ns, "api", "web-a", nil, "10.244.0.1")
	c2.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "delivered"})
	started := c2.field("run started", "data_sources")
	if !strings.Contains(started, "data.k8s_ready_endpoints.web") || !strings.Contains(started, "data.k8s_ready_endpoints.api") {
		t.Errorf("the run is for %q, want both web and api", started)
	}
	data, _ := os.ReadFile(calls)
	var changes map[string][]struct{ Added, Removed []string }
	if err := json.Unmarshal(data, &changes); err != nil {
		t.Fatalf("K8S_SYNC_CHANGES %s: %v", data, err)
	}
	if got := changes["data.k8s_ready_endpoints.web"]; len(got) != 1 || !reflect.DeepEqual(got[0].Removed, []string{"10.244.0.1:8080"}) {
		t.Errorf("K8S_SYNC_CHANGES for web %+v, want 10.244.0.1:8080 removed", got)
	}
	if got := changes["data.k8s_ready_endpoints.api"]; len(got) != 1 || !reflect.DeepEqual(got[0].Added, []string{"10.244.0.1:8080"}) {
		t.Errorf("K8S_SYNC_CHANGES for api %+v, want 10.244.0.1:8080 added", got)
	}
}

// apiPool is a pool of Service api in ns, kept by terraform_data.api_pool.
func apiPool(ns string) string {
	return fmt.Sprintf(`
data "k8s_ready_endpoints" "api" {
  namespace = %q
  service   = "api"
  port_name = "http"
}
resource "terraform_data" "api_pool" {
  input = [for e in data.k8s_ready_endpoints.api.endpoints : "${e.address}:${e.port}"]
}
`, ns)
}

// webAndAPI is a new namespace with Services web (2 pods) and api (1), and
// a working directory of their pools applied.
func webAndAPI(t *testing.T) (string, *workdir) {
	t.Helper()
	needCluster(t)
	ns := namespace(t)
	webWithPods(t, ns, 2)
	createService(t, ns, "api", corev1.ServiceTypeClusterIP)
	runPod(t, ns, "api", "api-1", "10.244.1.1", true)
	waitForReady(t, ns, "api", 1, 1)
	return ns, newWorkdir(t, poolConfig(ns, apiPool(ns)))
}

// Issue 24, 5: Service x is deleted, so a plan's read of its pool would
// fail; then Service web changes. The run plans web's dependents only
// (-target), without a stream of failing plans, and says so in its log,
// its metrics and /healthz.
func TestAccSyncAnUnreadablePoolDoesNotBlockTheOthers(t *testing.T) {
	t.Parallel()
	ns, w := webAndAPI(t)
	cli := newCountingCLI(t)
	c := startSync(t, w, "-terraform", cli.path, "-listen", "127.0.0.1:0")
	if err := acc.client.CoreV1().Services(ns).Delete(testCtx(t), "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The deletion seen: the pool's read would fail.
	c.waitFor(t, 60*time.Second, "pool not recomputed: its dependents are left out of runs until it reads again",
		map[string]string{"data_source": "data.k8s_ready_endpoints.api"})
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3))
	c.quiet(t, 5*time.Second)
	if n := cli.count("plan"); n != 1 {
		t.Errorf("%d plans, want 1 (of web's dependents)", n)
	}
	if n := c.count("planning the dependents of the readable pools only",
		map[string]string{"targets": "data.k8s_ready_endpoints.web,terraform_data.pool"}); n != 1 {
		t.Errorf("the run did not target terraform_data.pool alone:\n%s", c.log())
	}
	if n := c.count("pool not recomputed: its dependents are left out of runs until it reads again",
		map[string]string{"data_source": "data.k8s_ready_endpoints.api", "reason": "not found"}); n != 1 {
		t.Errorf("the unreadable pool was logged %d times, want once", n)
	}
	c.wantMetric(t, "k8s_sync_pools_unreadable 1")
	if h := c.get(t, "/healthz"); !strings.Contains(h, "unreadable data.k8s_ready_endpoints.api: service "+ns+"/api not found") {
		t.Errorf("/healthz does not name the unreadable pool:\n%s", h)
	}
	createService(t, ns, "api", corev1.ServiceTypeClusterIP)
	c.waitFor(t, 30*time.Second, "pool readable again", map[string]string{"data_source": "data.k8s_ready_endpoints.api"})
}

// serviceAccountKubeconfig is a kubeconfig for a ServiceAccount of ns that
// may list and watch Services and EndpointSlices there, and nowhere else.
func serviceAccountKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	ctx := testCtx(t)
	const name = "sync-reader"
	sa, err := acc.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}}
	if _, err := acc.client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}}
	if _, err := acc.client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	token, err := acc.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.LoadFromFile(acc.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = cluster
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Issue 24, item 3: when state names a new namespace whose informers
// cannot start (no Role there), the cache of the old scope goes on and the
// pools it covers stay current; the new pool is unreadable, not frozen in.
func TestAccSyncANewNamespaceItMayNotWatchLeavesTheOthersWatched(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns, other := namespace(t), namespace(t)
	webWithPods(t, ns, 2)
	createService(t, other, "api", corev1.ServiceTypeClusterIP)
	w := newWorkdir(t, poolConfig(ns, ""))
	c := startSync(t, w, "-kubeconfig", serviceAccountKubeconfig(t, ns), "-state-interval", "1s")
	// Someone adds a pool in another namespace, and applies it.
	w.write(t, poolConfig(ns, apiPool(other)))
	w.terraform(t, "apply", "-auto-approve", "-input=false", "-no-color")
	// State read again (every second) with the new namespace in it, whose
	// informers do not start.
	c.waitFor(t, 60*time.Second, "the informers of the new scope did not start: the pools outside the old one are not recomputed")
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3))
	if n := c.count("the informers of the new scope did not start: the pools outside the old one are not recomputed",
		map[string]string{"error": "forbidden"}); n == 0 {
		t.Errorf("the informers' failure in the new namespace was not said:\n%s", c.log())
	}
}

// Issue 24, item 3: a leader cut off from the API server while its
// -command runs stops that command before another replica can take the
// Lease and start its own: the command is serialised by nothing else.
func TestAccSyncALeaderThatLosesItsLeaseStopsItsCommandFirst(t *testing.T) {
	t.Parallel()
	ns, w := webPool(t, 2)
	proxy, err := testcluster.StartProxy(strings.TrimPrefix(acc.cluster.Server, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	viaProxy := kubeconfigVia(t, proxy.Addr)
	dir := t.TempDir()
	events := filepath.Join(dir, "events")
	// Each run checks that no process of another run is alive, records its
	// process group, and sleeps in place of a pipeline that finishes what
	// it started when interrupted (it ignores SIGINT).
	command := func(id string) string {
		return shCommand(fmt.Sprintf(`trap '' INT; for f in %[1]s/pgid-*; do [ -e "$f" ] && kill -0 -- -"$(cat "$f")" 2>/dev/null && echo "overlap with $f" >> %[2]q; done; `+
			`echo $$ > %[1]s/pgid-%[3]s; echo "start %[3]s" >> %[2]q; sleep 60`, dir, events, id))
	}
	lease := []string{"-leader-elect", "-lease-namespace", ns, "-lease-name", "sync"}
	a := startSync(t, w, append(lease, "-identity", "a", "-kubeconfig", viaProxy, "-command", command("a"))...)
	a.waitFor(t, 30*time.Second, "leading")
	b := startSync(t, w, append(lease, "-identity", "b", "-command", command("b"))...)
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	a.waitFor(t, 60*time.Second, "run started")
	waitForFile(t, events, "start a")
	proxy.Blackhole()
	a.waitFor(t, 40*time.Second, "lost the Lease: stopping")
	b.waitFor(t, 60*time.Second, "leading")
	waitForFile(t, events, "start b")
	data, _ := os.ReadFile(events)
	if strings.Contains(string(data), "overlap") {
		t.Errorf("the new leader's command started while the old one's ran:\n%s\n%s", data, a.log())
	}
}

// kubeconfigVia is the admin kubeconfig with its server at addr.
func kubeconfigVia(t *testing.T, addr string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(acc.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func waitForFile(t *testing.T, path, line string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		data, _ := os.ReadFile(path)
		return strings.Contains(string(data), line), nil
	}); err == nil {
		return
	}
	data, _ := os.ReadFile(path)
	t.Fatalf("no %q in %s within 60 s:\n%s", line, path, data)
}
