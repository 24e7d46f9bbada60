package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// podsRule is the rule the documentation adds for pod_health_checks.
var podsRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}

// Pods whose readinessProbes the API server stored (httpGet on a named port,
// tcpSocket, none) give their endpoints' health checks, read with one more
// request, a LIST of the Service's Pods; without pod_health_checks there are
// none and no Pod is read; without list on pods the read is refused with the
// documented error; k8s_services gives the same checks.
func TestAccPodHealthChecks(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	svc := fleetService(ns, "web", nil, corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("http")})
	c.createService(t, svc)
	ports := map[string]int32{"http": 8080}
	httpGet := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}}
	tcp := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	c.runPod(t, ns, podSpec{name: "web-1", labels: svc.Spec.Selector, ips: []string{"10.244.60.1"}, ready: true, ports: ports, readiness: httpGet})
	c.runPod(t, ns, podSpec{name: "web-2", labels: svc.Spec.Selector, ips: []string{"10.244.60.2"}, ready: true, ports: ports, readiness: tcp})
	c.runPod(t, ns, podSpec{name: "web-3", labels: svc.Spec.Selector, ips: []string{"10.244.60.3"}, ready: true, ports: ports})
	// A pod of another Service, which the pool's LIST must not bring.
	c.runPod(t, ns, podSpec{name: "other-1", labels: map[string]string{"app": "other"}, ips: []string{"10.244.60.9"}, ready: true, ports: ports})
	c.waitForServiceSlices(t, ns, "web", 3)

	withoutPods := c.identityToken(t, ns, "no-pods", documentedRole)
	withPods := c.identityToken(t, ns, "with-pods", append([]rbacv1.PolicyRule{podsRule}, documentedRole...))
	proxy := c.startFaultProxy(t, nil)
	config := func(token, args string) string {
		return proxy.providerVia(token, "15s") + fmt.Sprintf(`
data "k8s_ready_endpoints" "web" {
  namespace = %q
  service   = "web"
  %s
}
`, ns, args)
	}
	checks := func() []knownvalue.Check {
		return []knownvalue.Check{
			knownvalue.ObjectExact(map[string]knownvalue.Check{
				"type": knownvalue.StringExact("http"), "port": knownvalue.Int64Exact(8080),
				"path": knownvalue.StringExact("/ready"), "source": knownvalue.StringExact("readinessProbe"),
			}),
			knownvalue.ObjectExact(map[string]knownvalue.Check{
				"type": knownvalue.StringExact("tcp"), "port": knownvalue.Int64Exact(8080),
				"path": knownvalue.Null(), "source": knownvalue.StringExact("readinessProbe"),
			}),
			knownvalue.Null(),
		}
	}
	expectChecks := func(address string, at tfjsonpath.Path) []statecheck.StateCheck {
		var out []statecheck.StateCheck
		for i, want := range checks() {
			out = append(out, statecheck.ExpectKnownValue(address, at.AtSliceIndex(i).AtMapKey("health_check"), want))
		}
		return out
	}
	endpoints := tfjsonpath.New("endpoints")
	parallelSteps(t,
		resource.TestStep{
			Config:            config(withoutPods, ""),
			ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("data.k8s_ready_endpoints.web", endpoints.AtSliceIndex(0).AtMapKey("health_check"), knownvalue.Null())},
		},
		resource.TestStep{
			PreConfig: func() {
				if n := proxy.count("LIST pods"); n != 0 {
					t.Errorf("%d LISTs of pods without pod_health_checks, want none", n)
				}
			},
			Config: config(withoutPods, "pod_health_checks = true"),
			ExpectError: phrase("Permission Denied Listing Pods", "`list` on `pods`", "pod_health_checks",
				"list pods in namespace", "forbidden"),
		},
		resource.TestStep{
			PreConfig:         func() { proxy.reset() },
			Config:            config(withPods, "pod_health_checks = true"),
			ConfigStateChecks: expectChecks("data.k8s_ready_endpoints.web", endpoints),
		},
		resource.TestStep{
			// The plan and apply of the step above each read once.
			PreConfig: func() {
				reads := proxy.count("GET services")
				if reads == 0 || proxy.count("LIST endpointslices") != reads || proxy.count("LIST pods") != reads || proxy.total() != 3*reads {
					t.Errorf("requests %v: want one GET of the Service, one LIST of endpointslices and one of pods per read, nothing else", proxy.snapshot())
				}
			},
			Config:   config(withPods, "pod_health_checks = true"),
			PlanOnly: true,
		},
		resource.TestStep{
			Config: config(withPods, `
  target            = "nodes"
  pod_health_checks = true`),
			ExpectError: phrase("Pod Argument With Node Target", "pod_health_checks", `set target = "pods"`),
		},
		resource.TestStep{
			Config: c.providerConfig() + fmt.Sprintf(`
data "k8s_services" "f" {
  namespace         = %q
  pod_health_checks = true
}
`, ns),
			ConfigStateChecks: expectChecks("data.k8s_services.f", tfjsonpath.New("services").AtMapKey(ns+"/web").AtMapKey("endpoints")),
		},
	)
}
