package companion

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// webWithPods makes Service web with ready pods web-1..n at 10.244.0.1..n.
func webWithPods(t *testing.T, ns string, n int) {
	t.Helper()
	createService(t, ns, "web", corev1.ServiceTypeClusterIP)
	for i := 1; i <= n; i++ {
		runPod(t, ns, "web", fmt.Sprintf("web-%d", i), fmt.Sprintf("10.244.0.%d", i), true)
	}
	waitForReady(t, ns, "web", n, n)
}

func members(ips ...int) []string {
	out := []string{}
	for _, i := range ips {
		out = append(out, fmt.Sprintf("10.244.0.%d:8080", i))
	}
	return out
}

// webPool is a new namespace with web and its pods ready, and a working
// directory of poolConfig applied on them.
func webPool(t *testing.T, pods int) (string, *workdir) {
	t.Helper()
	needCluster(t)
	ns := namespace(t)
	webWithPods(t, ns, pods)
	return ns, newWorkdir(t, poolConfig(ns, ""))
}

// wantCheck runs check on w and fails (by fail, t.Fatalf or t.Errorf)
// unless it exits 0 (every pool matches); when says at which point of the
// test.
func wantCheck(t *testing.T, w *workdir, when string, fail func(string, ...any)) {
	t.Helper()
	if got, out := check(t, w); got != 0 {
		fail("check %s exited %d, want 0:\n%s", when, got, out)
	}
}

// wantRuns fails the test unless the companion ran n times; what says
// what else is wanted.
func wantRuns(t *testing.T, c *companion, n int, what string) {
	t.Helper()
	if got := c.runs(); got != n {
		t.Errorf("%d runs%s:\n%s", got, what, c.log())
	}
}

func wantMembers(t *testing.T, w *workdir, want []string) {
	t.Helper()
	if got := w.members(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("state has members %v, want %v", got, want)
	}
}

func TestAccSyncAPodThatBecomesReadyIsOneRun(t *testing.T) {
	t.Parallel()
	ns, w := webPool(t, 2)
	wantCheck(t, w, "after apply", t.Fatalf)
	c := startSync(t, w)

	runPod(t, ns, "web", "web-3", "10.244.0.3", false)
	waitForReady(t, ns, "web", 2, 3)
	wantCheck(t, w, "with a pod not ready yet", t.Fatalf)
	setReady(t, ns, "web-3", true)
	waitForReady(t, ns, "web", 3, 3)
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3))
	c.quiet(t, 4*time.Second)
	wantRuns(t, c, 1, ", want exactly 1")
	wantCheck(t, w, "after the run", t.Errorf)
}

func TestAccSyncCheckNamesWhatDiffers(t *testing.T) {
	t.Parallel()
	ns, w := webPool(t, 2)
	deletePod(t, ns, "web-2")
	runPod(t, ns, "web", "web-4", "10.244.0.4", true)
	waitForReady(t, ns, "web", 2, 2)
	code, out := check(t, w)
	if code != 2 {
		t.Fatalf("check exited %d, want 2:\n%s", code, out)
	}
	for _, want := range []string{"data.k8s_ready_endpoints.web: differs", "added [10.244.0.4:8080]", "removed [10.244.0.2:8080]"} {
		if !strings.Contains(out, want) {
			t.Errorf("check's output lacks %q:\n%s", want, out)
		}
	}
	// A state whose Service is gone: a plan would fail, check says so.
	if err := acc.client.CoreV1().Services(ns).Delete(testCtx(t), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, out := check(t, w); code != 1 || !strings.Contains(out, "service "+ns+"/web not found") {
		t.Errorf("check of a deleted Service exited %d, want 1 naming it:\n%s", code, out)
	}
}

func TestAccSyncFiftyUpdatesInASecondAreOneRun(t *testing.T) {
	t.Parallel()
	ns, w := webPool(t, 5)
	c := startSync(t, w, "-settle-quiet", "2s", "-settle-max", "10s")
	start := time.Now()
	for i := range 50 {
		// Pods 4 and 5 flap; the last write leaves 5 not ready.
		name := fmt.Sprintf("web-%d", 4+i%2)
		setReady(t, ns, name, (i/2)%2 == 0 && i != 49)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Logf("the 50 updates took %s", d)
	}
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	c.quiet(t, 5*time.Second)
	wantRuns(t, c, 1, " for 50 updates in a burst, want 1")
	waitForReady(t, ns, "web", 4, 5)
	wantMembers(t, w, members(1, 2, 3, 4))
}

func TestAccSyncUnrelatedChangesStartNothing(t *testing.T) {
	t.Parallel()
	ns, w := webPool(t, 2)
	c := startSync(t, w)
	// Another Service with a ready pod, and a pod of web that is not ready.
	createService(t, ns, "other", corev1.ServiceTypeClusterIP)
	runPod(t, ns, "other", "other-1", "10.244.1.1", true)
	runPod(t, ns, "web", "web-3", "10.244.0.3", false)
	waitForReady(t, ns, "web", 2, 3)
	waitForReady(t, ns, "other", 1, 1)
	c.quiet(t, 5*time.Second)
	if n := c.count("pool differs from state", nil); n != 0 {
		t.Errorf("%d pool changes seen, want none:\n%s", n, c.log())
	}
}

// A plan of the whole configuration (-target-changed=false, or the full
// plan of -full-plan-interval) that also changes something else is refused.
func TestAccSyncRefusesAPlanThatChangesMoreThanPools(t *testing.T) {
	t.Parallel()
	ns, w := webPool(t, 2)
	c := startSync(t, w, "-target-changed=false")
	// Someone adds an unrelated resource to the configuration, not applied.
	w.write(t, poolConfig(ns, "resource \"terraform_data\" \"unrelated\" {\n  input = \"x\"\n}\n"))
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 60*time.Second, "run ended", nil)
	c.waitFor(t, 5*time.Second, "run refused: the plan changes more than pools; fix or apply it by hand", map[string]string{"blocked": "terraform_data.unrelated"})
	wantMembers(t, w, members(1, 2))
	c.quiet(t, 3*time.Second)
}

// A run that plans what the changed pool needs leaves an unrelated change
// of the configuration alone: the pool is applied, the other change waits
// for whoever made it.
func TestAccSyncATargetedRunLeavesAnUnrelatedChangeAlone(t *testing.T) {
	t.Parallel()
	ns, w := webPool(t, 2)
	c := startSync(t, w)
	w.write(t, poolConfig(ns, "resource \"terraform_data\" \"unrelated\" {\n  input = \"x\"\n}\n"))
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3))
	if out := w.terraform(t, "state", "list"); strings.Contains(out, "terraform_data.unrelated") {
		t.Errorf("the run created terraform_data.unrelated:\n%s", out)
	}
	c.quiet(t, 3*time.Second)
	wantRuns(t, c, 1, ", want 1")
}

func TestAccSyncAChangeDuringARunIsExactlyOneMoreRun(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	webWithPods(t, ns, 2)
	c, w := applyingSlowly(t, ns, 3)
	// The saved plan is applied: this change cannot be in it.
	runPod(t, ns, "web", "web-4", "10.244.0.4", true)
	c.waitForCount(t, 90*time.Second, "run ended", 2, map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3, 4))
	c.quiet(t, 4*time.Second)
	wantRuns(t, c, 2, ", want exactly 2")
}

func TestAccSyncRetriesAFailingCommandWithBackoff(t *testing.T) {
	t.Parallel()
	ns, w := webPool(t, 2)
	// A terraform that fails its first three plans, then works.
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "terraform")
	counter := filepath.Join(dir, "plans")
	script := fmt.Sprintf(`#!/bin/sh
if [ "$1" = plan ]; then
  n=$(cat %[1]q 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]q
  if [ $n -le 3 ]; then printf 'Error: the backend is down (attempt %%s)\n\n  with terraform_data.other,\n  on main.tf line 1:\n' $n >&2; exit 1; fi
fi
exec %[2]q "$@"
`, counter, acc.terraform)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := startSync(t, w, "-terraform", wrapper)
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 90*time.Second, "run ended", map[string]string{"result": "applied"})
	if n := c.count("run failed: retrying with backoff", map[string]string{"error": "the backend is down", "failing": "terraform_data.other"}); n != 3 {
		t.Errorf("%d failed runs naming the failing address, want 3", n)
	}
	wantRuns(t, c, 4, ", want 4: one plan per backoff step")
	// The waits doubled: 500ms, 1s, 2s.
	var waits []string
	for _, e := range c.Events("run failed: retrying with backoff", nil) {
		waits = append(waits, e.Str("retry_in"))
	}
	var durations []time.Duration
	for _, s := range waits {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		durations = append(durations, d)
	}
	for i := 1; i < len(durations); i++ {
		if durations[i] < durations[i-1]*3/2 {
			t.Errorf("retry waits %v do not grow exponentially", durations)
		}
	}
	wantMembers(t, w, members(1, 2, 3))
}

func TestAccSyncRecoversFromAnAPIServerRestart(t *testing.T) {
	ns, w := webPool(t, 2)
	c := startSync(t, w)
	if err := acc.cluster.RestartAPIServer(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// Made before the companion's informers are back.
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 120*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3))
}

func TestAccSyncShrinkGuardRefusesAPoolHalvedAtOnce(t *testing.T) {
	t.Parallel()
	ns, w := webPool(t, 4)
	// A quiet time that takes the three deletions into one run.
	c := startSync(t, w, "-settle-quiet", "3s", "-settle-max", "10s")
	for _, p := range []string{"web-1", "web-2", "web-3"} {
		deletePod(t, ns, p)
	}
	waitForReady(t, ns, "web", 1, 1)
	c.waitFor(t, 60*time.Second, "run refused by the shrink guard", map[string]string{"reason": "would lose 3 of its 4 members"})
	c.quiet(t, 3*time.Second)
	wantRuns(t, c, 0, ", want none")
	wantMembers(t, w, members(1, 2, 3, 4))
}

func TestAccSyncSIGTERMDuringARunEndsItCleanly(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	webWithPods(t, ns, 2)
	c, w := applyingSlowly(t, ns, 30)
	// SIGTERM once the run's provisioner runs (the first line is the first
	// apply's): Terraform's interrupt stops the operations under way, and
	// one that starts after it may still run.
	waitForLines(t, filepath.Join(w.dir, "provisioning"), 2)
	c.stopDuringTheSleep(t)
	// The state is not locked: a plan that does not wait for locks works.
	w.terraform(t, "plan", "-input=false", "-no-color", "-lock-timeout=0s")
}

func TestAccSyncNodePoolRunsWhenANodeIsTaintedForDeletion(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	nodes := []string{"sync-pool-a-" + ns, "sync-pool-b-" + ns}
	for i, name := range nodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": ns}},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.0.2.%d", i+1)}},
			},
		}
		created, err := acc.client.CoreV1().Nodes().Create(testCtx(t), node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = node.Status
		if _, err := acc.client.CoreV1().Nodes().UpdateStatus(testCtx(t), created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = acc.client.CoreV1().Nodes().Delete(testCtx(t), name, metav1.DeleteOptions{}) })
	}
	createService(t, ns, "web", corev1.ServiceTypeNodePort)
	runPod(t, ns, "web", "web-1", "10.244.0.1", true)
	waitForReady(t, ns, "web", 1, 1)
	config := providerHeader() + fmt.Sprintf(`
data "k8s_ready_endpoints" "web" {
  namespace     = %q
  service       = "web"
  port_name     = "http"
  target        = "nodes"
  node_selector = "pool=%s"
}
resource "terraform_data" "pool" {
  input = [for e in data.k8s_ready_endpoints.web.endpoints : e.address]
}
output "members" {
  value = terraform_data.pool.output
}
`, ns, ns)
	w := newWorkdir(t, config)
	if got := w.members(t); len(got) != 2 {
		t.Fatalf("node pool %v, want both nodes", got)
	}
	c := startSync(t, w, "-max-shrink", "1")
	node, err := acc.client.CoreV1().Nodes().Get(testCtx(t), nodes[1], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Value: "1", Effect: corev1.TaintEffectNoSchedule})
	if _, err := acc.client.CoreV1().Nodes().Update(testCtx(t), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	if got := w.members(t); !reflect.DeepEqual(got, []string{"192.0.2.1"}) {
		t.Errorf("node pool after the taint %v, want [192.0.2.1]", got)
	}
}

func TestAccSyncTwoReplicasOneLeaderRuns(t *testing.T) {
	t.Parallel()
	ns, w := webPool(t, 2)
	lease := []string{"-leader-elect", "-lease-namespace", ns, "-lease-name", "sync"}
	a := startSync(t, w, append(lease, "-identity", "a")...)
	b := startSync(t, w, append(lease, "-identity", "b")...)
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return a.count("run ended", nil)+b.count("run ended", nil) > 0, nil
	}); err != nil {
		t.Fatalf("no run ended within 60 s:\na:\n%s\nb:\n%s", a.log(), b.log())
	}
	// Four seconds more for a second leader or run to show: that none does
	// during them is the scenario, not a condition to poll for.
	time.Sleep(4 * time.Second)
	if la, lb := a.count("leading", nil), b.count("leading", nil); la+lb != 1 {
		t.Errorf("replicas leading: a %d, b %d; want exactly one", la, lb)
	}
	if ra, rb := a.runs(), b.runs(); ra+rb != 1 {
		t.Errorf("runs: a %d, b %d; want exactly one in all", ra, rb)
	}
	wantMembers(t, w, members(1, 2, 3))
}

func TestAccSyncRefusesToStartOnBadInput(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	webWithPods(t, ns, 1)
	applied := newWorkdir(t, poolConfig(ns, ""))
	empty := &workdir{dir: t.TempDir()}
	empty.write(t, poolConfig(ns, ""))
	noPools := &workdir{dir: t.TempDir()}
	noPools.write(t, "resource \"terraform_data\" \"x\" {\n  input = 1\n}\n")
	noPools.terraform(t, "apply", "-auto-approve", "-input=false", "-no-color")
	for _, tt := range []struct {
		name string
		w    *workdir
		args []string
		want string
	}{
		{"a directory without state", empty, nil, "has no state: apply the configuration once"},
		{"a state without a k8s data source", noPools, nil, "has no k8s_ready_endpoints or k8s_services"},
		{"a kubeconfig that cannot be loaded", applied, []string{"-kubeconfig", "/nonexistent/kubeconfig"}, "unable to load the kubeconfig"},
		{"a CLI that is not found", applied, []string{"-terraform", "no-such-terraform"}, "the CLI was not found"},
		{"another provider alias", applied, []string{"-provider-alias", "east"}, "of provider configuration k8s.east that this version reads: nothing to watch"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, command := range []string{"sync", "check"} {
				args := append([]string{command, "-chdir", tt.w.dir, "-terraform", acc.terraform, "-kubeconfig", acc.kubeconfig, "-listen", ""}, tt.args...)
				if command == "check" {
					args = removeFlag(args, "-listen")
				}
				cmd := execCommand(args...)
				out, err := cmd.CombinedOutput()
				code := 0
				if err != nil {
					code = cmd.ProcessState.ExitCode()
				}
				if code != 1 || !strings.Contains(string(out), tt.want) {
					t.Errorf("%s exited %d, want 1 with %q:\n%s", command, code, tt.want, out)
				}
			}
		})
	}
}

func TestAccSyncAnExpiryThatPassesIsARunWithoutAnyEvent(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := acc.client.CoreV1().Services(ns).Create(testCtx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const annotation = "example.com/expires"
	// web-2 expires in an hour while the configuration is first applied
	// (which can take more than a few seconds on a loaded machine), then in
	// 15 s, set before the companion starts: it sees no event of it.
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	for i, at := range []string{"", later.Format(time.RFC3339)} {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i+1),
				Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "sync-acc"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.244.0.%d", i+1)}}},
		}
		if at != "" {
			slice.Annotations = map[string]string{annotation: at}
		}
		if _, err := acc.client.DiscoveryV1().EndpointSlices(ns).Create(testCtx(t), slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	config := strings.Replace(poolConfig(ns, ""), `port_name = "http"`, "port_name = \"http\"\n  expiry_annotation = \""+annotation+"\"", 1)
	w := newWorkdir(t, config)
	wantMembers(t, w, members(1, 2))
	expires := time.Now().Add(15 * time.Second).UTC().Truncate(time.Second)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotation, expires.Format(time.RFC3339))
	if _, err := acc.client.DiscoveryV1().EndpointSlices(ns).Patch(testCtx(t), "web-2", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c := startSync(t, w)
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	if ran := c.count("run started", nil); ran != 1 {
		t.Errorf("%d runs, want 1", ran)
	}
	started := c.firstTime("run started")
	if started.Before(expires) {
		t.Errorf("the run started at %s, before the expiry %s", started, expires)
	}
	wantMembers(t, w, members(1))
}

// The daemon-free pattern of examples/sync/check-block: a refresh-only plan
// warns once the pool is stale, and not before.
func TestAccCheckBlockExampleWarnsWhenThePoolIsStale(t *testing.T) {
	needCluster(t)
	ns := namespace(t)
	webWithPods(t, ns, 2)
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "sync", "check-block", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", acc.kubeconfig)
	w := &workdir{dir: t.TempDir()}
	w.write(t, string(example))
	vars := []string{"-var", "namespace=" + ns, "-var", "service=web"}
	w.terraform(t, append([]string{"apply", "-auto-approve", "-input=false", "-no-color"}, vars...)...)
	const warning = "is stale: run terraform apply"
	if out := w.terraform(t, append([]string{"plan", "-refresh-only", "-input=false", "-no-color"}, vars...)...); strings.Contains(out, warning) {
		t.Fatalf("a current pool warned:\n%s", out)
	}
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	waitForReady(t, ns, "web", 3, 3)
	out := w.terraform(t, append([]string{"plan", "-refresh-only", "-input=false", "-no-color"}, vars...)...)
	if !strings.Contains(out, warning) || !strings.Contains(out, "pool_is_current") {
		t.Errorf("a stale pool did not warn:\n%s", out)
	}
}

func TestAccSyncWaitsForAStateLockAndServesMetrics(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	webWithPods(t, ns, 2)
	slow := `
resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "echo holding >> ${path.module}/holding; sleep 8"
  }
}
`
	w := newWorkdir(t, poolConfig(ns, slow))
	c := startSync(t, w, "-listen", "127.0.0.1:0", "-allow", "terraform_data.pool")
	// Someone else's apply holds the state lock for 8 s.
	holder := exec.Command(acc.terraform, "apply", "-auto-approve", "-input=false", "-no-color", "-replace=terraform_data.slow")
	holder.Dir = w.dir
	holder.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+acc.cliConfig)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	// The pod comes once the holder is applying (its second line: the
	// first is newWorkdir's apply): its plan read the pool before the
	// pod, so the change is the companion's to apply, after the lock.
	waitForLines(t, filepath.Join(w.dir, "holding"), 2)
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 30*time.Second, "run started")
	if err := holder.Wait(); err != nil {
		t.Fatalf("the lock holder's apply: %v", err)
	}
	c.waitFor(t, 90*time.Second, "run ended", map[string]string{"result": "applied"})
	if n := c.count("run failed: retrying with backoff", nil); n != 0 {
		t.Errorf("%d failed runs while the lock was held, want none: the lock is waited for", n)
	}
	wantMembers(t, w, members(1, 2, 3))

	address := c.field("serving /healthz and /metrics", "address")
	for path, want := range map[string]string{
		"/healthz": "ok",
		"/metrics": `k8s_sync_runs_total{result="applied"} 1`,
	} {
		resp, err := http.Get("http://" + address + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %s, want 200 with %q:\n%s", path, resp.Status, want, body)
		}
	}
	for _, want := range []string{"k8s_sync_pools_watched 1", "k8s_sync_drift_detected_total 1", "k8s_sync_settle_delay_seconds_count 1"} {
		resp, err := http.Get("http://" + address + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// applyingSlowly applies a pool of web in ns whose apply takes seconds
// (a provisioner of a resource replaced with the pool), starts the
// companion, makes a pool change, and returns once the saved plan is being
// applied.
func applyingSlowly(t *testing.T, ns string, seconds int) (*companion, *workdir) {
	t.Helper()
	w := newWorkdir(t, poolConfig(ns, fmt.Sprintf(`
resource "terraform_data" "slow" {
  triggers_replace = local.members
  provisioner "local-exec" {
    command = "echo started >> ${path.module}/provisioning; sleep %d"
  }
}
`, seconds)))
	c := startSync(t, w)
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 60*time.Second, "applying the saved plan")
	return c, w
}

func TestAccSyncAFleetRunsForTheServiceThatChanged(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	for i, name := range []string{"web", "api"} {
		createService(t, ns, name, corev1.ServiceTypeClusterIP)
		runPod(t, ns, name, name+"-1", fmt.Sprintf("10.244.%d.1", i), true)
		waitForReady(t, ns, name, 1, 1)
	}
	w := newWorkdir(t, providerHeader()+fmt.Sprintf(`
data "k8s_services" "fleet" {
  namespace = %q
  port_name = "http"
}
resource "terraform_data" "pool" {
  for_each = data.k8s_services.fleet.services
  input    = [for e in each.value.endpoints : "${e.address}:${e.port}"]
}
output "members" {
  value = terraform_data.pool["%s/api"].output
}
`, ns, ns))
	wantMembers(t, w, []string{"10.244.1.1:8080"})
	cli := newCountingCLI(t)
	c := startSync(t, w, "-terraform", cli.path)
	runPod(t, ns, "api", "api-2", "10.244.1.2", true)
	c.waitFor(t, 60*time.Second, "pool differs from state", map[string]string{"pool": ns + "/api", "added": "10.244.1.2:8080"})
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, []string{"10.244.1.1:8080", "10.244.1.2:8080"})
	// The run planned api's instance of the resource, not web's.
	if plans := cli.invocations("plan"); len(plans) != 1 || !slices.Contains(plans[0], fmt.Sprintf(`-target=terraform_data.pool["%s/api"]`, ns)) ||
		slices.Contains(plans[0], "-target=terraform_data.pool") {
		t.Errorf("plans %q: want one that targets api's instance of terraform_data.pool", plans)
	}
	c.quiet(t, 3*time.Second)
	if n := c.count("pool differs from state", map[string]string{"pool": ns + "/web"}); n != 0 {
		t.Errorf("web, unchanged, was seen as changed %d times", n)
	}
}

// probedPodConfig is a pool of web with pod_health_checks, whose members
// carry the path of their health check.
func probedPodConfig(ns string) string {
	return providerHeader() + fmt.Sprintf(`
data "k8s_ready_endpoints" "web" {
  namespace         = %q
  service           = "web"
  port_name         = "http"
  pod_health_checks = true
}
resource "terraform_data" "pool" {
  input = [for e in data.k8s_ready_endpoints.web.endpoints : "${e.address}:${e.port} ${try(e.health_check.path, "none")}"]
}
output "members" {
  value = terraform_data.pool.output
}
`, ns)
}

// runProbedPod runs a pod of web whose readinessProbe asks for path.
func runProbedPod(t *testing.T, ns, name, ip, path string, ready bool) {
	t.Helper()
	p := testcluster.Pod{Name: name, Labels: map[string]string{"app": "web"}, IPs: []string{ip}, Ready: ready, Node: accNode,
		Ports: map[string]int32{"http": 8080},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString("http")}}}}
	if err := testcluster.RunPod(testCtx(t), acc.client, ns, p); err != nil {
		t.Fatal(err)
	}
}

// With pod_health_checks the companion watches the Pods too: a new ready
// pod is one run that brings its health check; a Pod's status written again
// (as kubelets do all the time) starts nothing.
func TestAccSyncPodHealthChecksFollowThePods(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	createService(t, ns, "web", corev1.ServiceTypeClusterIP)
	runProbedPod(t, ns, "web-1", "10.244.0.1", "/ready-1", true)
	waitForReady(t, ns, "web", 1, 1)
	w := newWorkdir(t, probedPodConfig(ns))
	wantMembers(t, w, []string{"10.244.0.1:8080 /ready-1"})
	c := startSync(t, w)

	for range 5 {
		setReady(t, ns, "web-1", true)
	}
	c.quiet(t, 3*time.Second)
	if n := c.count("pool differs from state", nil); n != 0 {
		t.Fatalf("%d pool changes for a Pod's status written again, want none:\n%s", n, c.log())
	}

	runProbedPod(t, ns, "web-2", "10.244.0.2", "/ready-2", true)
	waitForReady(t, ns, "web", 2, 2)
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, []string{"10.244.0.1:8080 /ready-1", "10.244.0.2:8080 /ready-2"})
	c.quiet(t, 4*time.Second)
	wantRuns(t, c, 1, ", want exactly 1")
	wantCheck(t, w, "after the run", t.Errorf)
}
