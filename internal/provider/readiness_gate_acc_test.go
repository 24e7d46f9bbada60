package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// accGate is the readiness gate of the acceptance tests.
const accGate corev1.PodConditionType = "k8s.example/pool-web"

// gateRole is documentedRole and what readiness_gate and
// k8s_readiness_gate add: list (the data source) and get (the resource) on
// pods, patch on pods/status.
var gateRole = append([]rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}},
}, documentedRole...)

// gatedConfig is the pool of web with readiness_gate, a stand-in for the
// load balancer's resource (terraform_data) fed by it, and the gate opened
// after it.
func gatedConfig(provider, ns string) string {
	return provider + fmt.Sprintf(`
data "k8s_ready_endpoints" "web" {
  namespace      = %[1]q
  service        = "web"
  readiness_gate = %[2]q
}

resource "terraform_data" "load_balancer" {
  input = sort([for e in data.k8s_ready_endpoints.web.endpoints : "${e.address}:${e.port}"])
}

resource "k8s_readiness_gate" "web" {
  namespace      = %[1]q
  readiness_gate = %[2]q
  pods           = [for e in data.k8s_ready_endpoints.web.endpoints : e.pod if e.pod != null]
  depends_on     = [terraform_data.load_balancer]
}
`, ns, accGate)
}

// runReadyComputer runs the test kubelet's Ready computation for ns until
// the test ends.
func runReadyComputer(t *testing.T, c *testCluster, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = testcluster.ComputeReady(ctx, c.client, ns, 200*time.Millisecond)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// Pods that declare the gate, whose containers are ready and whose gate's
// condition is absent, are in the pool with gate_pending (a pod whose
// containers are not ready is not); the plan gives the load balancer
// their addresses and opens their gate after it, with no more rights than
// the documented ones; the test kubelet then computes them Ready, and the
// next plan is empty.
func TestAccReadinessGateOpensOncePoolIsApplied(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	c.createService(t, webServiceSpec(ns, httpPort))
	runReadyComputer(t, c, ns)
	c.runPod(t, ns, webPod("web-1", true, "10.244.70.1"))
	for i, containersReady := range []bool{true, true, false} {
		p := testcluster.Pod{Name: fmt.Sprintf("web-%d", i+2), Labels: webLabels, IPs: []string{fmt.Sprintf("10.244.70.%d", i+2)},
			Ready: containersReady, Node: accNode}
		if err := testcluster.RunGatedPod(c.ctx(t), c.client, ns, p, accGate); err != nil {
			t.Fatal(err)
		}
	}
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 1, 4))

	provider := kubeconfigProvider(c.identity(t, ns, "gates", gateRole))
	parallelSteps(t,
		resource.TestStep{
			// What the pool holds, as outputs of this step alone (they change
			// once the gates open).
			Config: gatedConfig(provider, ns) + `
output "pending" {
  value = [for e in data.k8s_ready_endpoints.web.endpoints : e.pod if e.gate_pending]
}

output "ready" {
  value = [for e in data.k8s_ready_endpoints.web.endpoints : e.ready]
}
`,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue("terraform_data.load_balancer", tfjsonpath.New("input"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.StringExact("10.244.70.1:8080"), knownvalue.StringExact("10.244.70.2:8080"), knownvalue.StringExact("10.244.70.3:8080"),
				})),
				plancheck.ExpectKnownOutputValue("pending", knownvalue.ListExact([]knownvalue.Check{
					knownvalue.StringExact("web-2"), knownvalue.StringExact("web-3"),
				})),
				plancheck.ExpectKnownOutputValue("ready", knownvalue.ListExact([]knownvalue.Check{
					knownvalue.Bool(true), knownvalue.Bool(false), knownvalue.Bool(false),
				})),
				plancheck.ExpectKnownValue("k8s_readiness_gate.web", tfjsonpath.New("pods"), knownvalue.SetExact([]knownvalue.Check{
					knownvalue.StringExact("web-1"), knownvalue.StringExact("web-2"), knownvalue.StringExact("web-3"),
				})),
			}},
		},
		resource.TestStep{
			// A plan opens nothing: the pods still wait.
			PreConfig: func() { c.expectGates(t, ns, map[string]bool{"web-2": false, "web-3": false, "web-4": false}) },
			Config:    gatedConfig(provider, ns),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction("k8s_readiness_gate.web", plancheck.ResourceActionCreate),
			}},
		},
		resource.TestStep{
			PreConfig: func() {
				c.expectGates(t, ns, map[string]bool{"web-2": true, "web-3": true, "web-4": false})
				c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 3, 4))
			},
			Config:   gatedConfig(provider, ns),
			PlanOnly: true,
		},
	)
}

// expectGates checks which pods of ns have accGate True.
func (c *testCluster) expectGates(t *testing.T, ns string, open map[string]bool) {
	t.Helper()
	for name, want := range open {
		pod, err := c.client.CoreV1().Pods(ns).Get(c.ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := false
		for _, cond := range pod.Status.Conditions {
			if cond.Type == accGate {
				got = cond.Status == corev1.ConditionTrue && cond.Reason == gateReason
			}
		}
		if got != want {
			t.Errorf("pod %s: gate open %v, want %v (conditions %+v)", name, got, want, pod.Status.Conditions)
		}
	}
}
