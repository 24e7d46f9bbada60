package companion

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// accGate is the readiness gate of the companion's acceptance tests.
const accGate corev1.PodConditionType = "k8s.example/pool-web"

// gatedPoolConfig is poolConfig's pool read with readiness_gate, and the
// gate opened after the load balancer's stand-in (terraform_data.pool),
// as the rollout guide shows it; lb is the stand-in's extra arguments and
// extra is added to the configuration.
func gatedPoolConfig(ns, lb, extra string) string {
	return providerHeader() + fmt.Sprintf(`
data "k8s_ready_endpoints" "web" {
  namespace      = %[1]q
  service        = "web"
  port_name      = "http"
  readiness_gate = %[2]q
}
locals {
  members = [for e in data.k8s_ready_endpoints.web.endpoints : "${e.address}:${e.port}"]
}
resource "terraform_data" "pool" {
  input = local.members
%[3]s
}
output "members" {
  value = terraform_data.pool.output
}
resource "k8s_readiness_gate" "web" {
  namespace      = %[1]q
  readiness_gate = %[2]q
  pods           = [for e in data.k8s_ready_endpoints.web.endpoints : e.pod if e.pod != null]
  depends_on     = [terraform_data.pool]
}
%[4]s`, ns, accGate, lb, extra)
}

// computeReady runs the test kubelet's Ready computation (ContainersReady
// and every readiness gate) for the pods of ns until the test ends.
func computeReady(t *testing.T, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = testcluster.ComputeReady(ctx, acc.client, ns, 200*time.Millisecond)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// gatedWeb is a new namespace with Service web and its ready pod web-1 at
// 10.244.0.1, whose pods' Ready the test kubelet computes.
func gatedWeb(t *testing.T) string {
	t.Helper()
	needCluster(t)
	ns := namespace(t)
	createService(t, ns, "web", corev1.ServiceTypeClusterIP)
	computeReady(t, ns)
	runPod(t, ns, "web", "web-1", "10.244.0.1", true)
	waitForReady(t, ns, "web", 1, 1)
	return ns
}

// runGatedPod runs pod name of Service web at ip, its containers ready,
// declaring accGate.
func runGatedPod(t *testing.T, ns, name, ip string) {
	t.Helper()
	p := testcluster.Pod{Name: name, Labels: map[string]string{"app": "web"}, IPs: []string{ip}, Ready: true, Node: accNode}
	if err := testcluster.RunGatedPod(testCtx(t), acc.client, ns, p, accGate); err != nil {
		t.Fatal(err)
	}
}

// gateOf is the status of accGate on pod name, and its reason ("" when
// the pod has no such condition).
func gateOf(t *testing.T, ns, name string) (corev1.ConditionStatus, string) {
	t.Helper()
	pod, err := acc.client.CoreV1().Pods(ns).Get(testCtx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == accGate {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

// waitForGate waits until pod name's gate is True, and gives its reason.
func waitForGate(t *testing.T, ns, name string, timeout time.Duration) string {
	t.Helper()
	var reason string
	err := wait.PollUntilContextTimeout(testCtx(t), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		status, why := gateOf(t, ns, name)
		reason = why
		return status == corev1.ConditionTrue, nil
	})
	if err != nil {
		t.Fatalf("the gate of pod %s did not open within %s", name, timeout)
	}
	return reason
}

// A pod that waits for its gate is a pool change: the companion's run, a
// targeted one (an unrelated change of the configuration stays pending),
// gives the load balancer the pod and then opens its gate through
// k8s_readiness_gate. The gate's opening, then the pod's Ready and its
// slice listing it ready, make no run; the metrics say that one pod waited
// and none waits now.
func TestAccSyncOpensAGateInTheRunThatAppliesItsPoolAndRunsNoMoreForIt(t *testing.T) {
	t.Parallel()
	ns := gatedWeb(t)
	w := newWorkdir(t, gatedPoolConfig(ns, "", `resource "terraform_data" "other" { input = "v1" }`))
	w.write(t, gatedPoolConfig(ns, "", `resource "terraform_data" "other" { input = "v2" }`))
	c := startSync(t, w, "-listen", "127.0.0.1:0")

	runGatedPod(t, ns, "web-2", "10.244.0.2")
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	if reason := waitForGate(t, ns, "web-2", 30*time.Second); reason == "" || reason == "OpenedAfterBound" {
		t.Errorf("gate opened with reason %q, want k8s_readiness_gate's", reason)
	}
	wantMembers(t, w, members(1, 2))
	waitForReady(t, ns, "web", 2, 2)
	c.quiet(t, 4*time.Second)
	wantRuns(t, c, 1, " for a pod waiting, then its gate opening and its slice listing it ready: want 1")
	if out := w.terraform(t, "plan", "-no-color", "-input=false"); !strings.Contains(out, "terraform_data.other") {
		t.Errorf("the unrelated change was applied (the run was not targeted):\n%s", out)
	}
	for sample, want := range map[string]float64{
		"k8s_sync_gate_waiting_pods":              0,
		"k8s_sync_gate_wait_seconds_count":        1,
		"k8s_sync_gates_opened_after_bound_total": 0,
		`k8s_sync_runs_total{result="applied"}`:   1,
	} {
		if got := c.metric(t, sample); got != want {
			t.Errorf("%s = %v, want %v", sample, got, want)
		}
	}
}

// When the pool cannot be applied (the load balancer's resource fails),
// a pod waits for its gate: with -gate-open-after, the companion opens the
// gate itself once the pod has waited that long, says so in a warning and
// a metric, and goes on retrying the pool.
func TestAccSyncOpensAGateAfterTheBoundWhenThePoolCannotBeApplied(t *testing.T) {
	t.Parallel()
	ns := gatedWeb(t)
	// The load balancer refuses any pool but the first.
	refuses := `
  lifecycle {
    precondition {
      condition     = length(local.members) < 2
      error_message = "the load balancer refuses the pool"
    }
  }`
	w := newWorkdir(t, gatedPoolConfig(ns, refuses, ""))
	c := startSync(t, w, "-listen", "127.0.0.1:0", "-gate-open-after", "12s")

	runGatedPod(t, ns, "web-2", "10.244.0.2")
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "failed"})
	if status, _ := gateOf(t, ns, "web-2"); status == corev1.ConditionTrue {
		t.Fatal("the gate opened although its pool was not applied and the bound had not passed")
	}
	if reason := waitForGate(t, ns, "web-2", 30*time.Second); reason != "OpenedAfterBound" {
		t.Errorf("gate opened with reason %q, want OpenedAfterBound", reason)
	}
	c.waitFor(t, 10*time.Second, "readiness gate opened by -gate-open-after: the pod is Ready although its pool is not applied yet",
		map[string]string{"pod": ns + "/web-2"})
	if got := c.metric(t, "k8s_sync_gates_opened_after_bound_total"); got != 1 {
		t.Errorf("k8s_sync_gates_opened_after_bound_total = %v, want 1", got)
	}
	wantMembers(t, w, members(1))
}
