package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
)

// fleetRole is the Role the k8s_services documentation gives for one namespace.
var fleetRole = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"list"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list"}},
}

// fleetService is a Service whose pods are labelled app=name, with the
// given labels and ports (port http, 80 to 8080, when none).
func fleetService(ns, name string, labels map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{httpPort}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: ports},
	}
}

// serviceWithPods creates a Service and its pods, ready ones first, and waits
// until the EndpointSlice controller has written every one of them.
func (c *testCluster) serviceWithPods(t *testing.T, svc *corev1.Service, ips []string, ready int) {
	t.Helper()
	c.createService(t, svc)
	for i, ip := range ips {
		c.runPod(t, svc.Namespace, podSpec{name: fmt.Sprintf("%s-%d", svc.Name, i+1), labels: svc.Spec.Selector, ips: []string{ip}, ready: i < ready})
	}
	c.waitForServiceSlices(t, svc.Namespace, svc.Name, len(ips))
}

// waitForServiceSlices waits until the slices of the Service hold n endpoints.
func (c *testCluster) waitForServiceSlices(t *testing.T, ns, service string, n int) {
	t.Helper()
	c.waitForServiceEndpoints(t, ns, service, fmt.Sprintf("%d endpoints", n), func(eps []discoveryv1.Endpoint) bool { return len(eps) == n })
}

// waitForServiceEndpoints waits until the endpoints of the Service's slices
// (there is at least one slice) satisfy done.
func (c *testCluster) waitForServiceEndpoints(t *testing.T, ns, service, want string, done func([]discoveryv1.Endpoint) bool) {
	t.Helper()
	var eps []discoveryv1.Endpoint
	var lastErr error
	err := wait.PollUntilContextTimeout(c.ctx(t), 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		// An error (the API server restarting) is kept and polled again.
		list, err := c.client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		eps, lastErr = nil, err
		var found []discoveryv1.EndpointSlice
		if list != nil {
			found = list.Items
		}
		for _, s := range found {
			eps = append(eps, s.Endpoints...)
		}
		return err == nil && len(found) > 0 && done(eps), nil
	})
	if err != nil {
		t.Fatalf("EndpointSlices of %s/%s: still waiting for %s (%d endpoints, %v)", ns, service, want, len(eps), lastErr)
	}
}

func (p *faultProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.counts)
}

func (p *faultProxy) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, v := range p.counts {
		n += v
	}
	return n
}

func (p *faultProxy) snapshot() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}

func fleetKeys(keys ...string) knownvalue.Check {
	checks := map[string]knownvalue.Check{}
	for _, k := range keys {
		checks[k] = knownvalue.NotNull()
	}
	return knownvalue.MapExact(checks)
}

func TestAccServicesFleet(t *testing.T) {
	c := accCluster(t)
	shop, blog := c.namespace(t), c.namespace(t)
	lb := map[string]string{"lb": "yes"}
	c.serviceWithPods(t, fleetService(shop, "web", lb), []string{"10.244.20.2", "10.244.20.1", "10.244.20.3"}, 2)
	c.serviceWithPods(t, fleetService(shop, "api", lb), []string{"10.244.21.1"}, 1)
	c.serviceWithPods(t, fleetService(shop, "exporter", lb, corev1.ServicePort{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090)}), []string{"10.244.22.1"}, 1)
	c.serviceWithPods(t, fleetService(shop, "other", nil), []string{"10.244.23.1"}, 1)
	c.serviceWithPods(t, fleetService(blog, "web", lb), []string{"10.244.24.1"}, 1)

	fleet := func(args string) string {
		return c.providerConfig() + fmt.Sprintf("data \"k8s_services\" \"f\" {\n  port_name = \"http\"\n  %s\n}\n", args)
	}
	both := fmt.Sprintf("namespaces = [%q, %q]", shop, blog)
	key := func(ns, name string) string { return ns + "/" + name }
	services := tfjsonpath.New("services")
	parallelSteps(t,
		resource.TestStep{
			Config: fleet(both + "\n  label_selector = \"lb=yes\""),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.k8s_services.f", services, fleetKeys(key(shop, "web"), key(shop, "api"), key(blog, "web"))),
				statecheck.ExpectKnownValue("data.k8s_services.f", services.AtMapKey(key(shop, "web")).AtMapKey("endpoints"), knownvalue.ListExact([]knownvalue.Check{
					podEndpoint("10.244.20.1", 8080, "IPv4", "web-2"),
					podEndpoint("10.244.20.2", 8080, "IPv4", "web-1"),
				})),
				statecheck.ExpectKnownValue("data.k8s_services.f", services.AtMapKey(key(blog, "web")).AtMapKey("ports").AtSliceIndex(0), knownvalue.ObjectExact(map[string]knownvalue.Check{
					"name": knownvalue.StringExact("http"), "port": knownvalue.Int64Exact(80), "target_port": knownvalue.StringExact("8080"),
					"node_port": knownvalue.Null(), "protocol": knownvalue.StringExact("TCP"),
				})),
				statecheck.ExpectKnownValue("data.k8s_services.f", services.AtMapKey(key(blog, "web")).AtMapKey("type"), knownvalue.StringExact("ClusterIP")),
				statecheck.ExpectKnownValue("data.k8s_services.f", services.AtMapKey(key(blog, "web")).AtMapKey("cluster_ips"), knownvalue.ListSizeExact(1)),
				statecheck.ExpectKnownValue("data.k8s_services.f", tfjsonpath.New("skipped"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectExact(map[string]knownvalue.Check{
						"namespace": knownvalue.StringExact(shop), "name": knownvalue.StringExact("exporter"),
						"reason": knownvalue.StringExact(fmt.Sprintf("port http not found in service %s/exporter", shop)),
					}),
				})),
			},
		},
		resource.TestStep{
			// A selector that matches nothing is an empty map, not an error.
			Config: fleet(both + "\n  label_selector = \"lb=nope\""),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.k8s_services.f", services, knownvalue.MapExact(map[string]knownvalue.Check{})),
			},
		},
		resource.TestStep{
			// No selector: every Service of the namespace.
			Config: fleet(fmt.Sprintf("namespace = %q", shop)),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.k8s_services.f", services, fleetKeys(key(shop, "web"), key(shop, "api"), key(shop, "other"))),
			},
		},
		resource.TestStep{
			// A Service labelled between two plans is one new key.
			PreConfig: func() {
				c.serviceWithPods(t, fleetService(shop, "new", lb), []string{"10.244.25.1"}, 1)
			},
			Config: fleet(both + "\n  label_selector = \"lb=yes\""),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.k8s_services.f", services, fleetKeys(key(shop, "web"), key(shop, "api"), key(shop, "new"), key(blog, "web"))),
			},
		},
		resource.TestStep{
			Config:      fleet(both + "\n  label_selector = \"lb=yes\"\n  min_services = 5"),
			ExpectError: phrase("Too Few Services", "4 Service(s) with a pool, fewer than min_services = 5"),
		},
		resource.TestStep{
			Config: fleet(both + "\n  label_selector = \"lb=yes\"\n  min_ready = 2"),
			ExpectError: phrase("Too Few Ready Endpoints", "3 Service(s) have fewer than min_ready = 2",
				strings.Join(slices.Sorted(slices.Values([]string{key(blog, "web") + " (1)", key(shop, "api") + " (1)", key(shop, "new") + " (1)"})), ", ")),
		},
		resource.TestStep{
			// A namespace that does not exist lists nothing.
			Config: fleet("namespace = \"acc-no-such-namespace\""),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.k8s_services.f", services, knownvalue.MapExact(map[string]knownvalue.Check{})),
			},
		},
	)
}

// Over the same cluster state, with the same pool arguments, every Service
// of the fleet has exactly the endpoints k8s_ready_endpoints reads for it.
func TestAccServicesGiveWhatReadyEndpointsGives(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	c.serviceWithPods(t, fleetService(ns, "web", nil), []string{"10.244.26.3", "10.244.26.1", "10.244.26.2"}, 2)
	c.serviceWithPods(t, fleetService(ns, "api", nil), []string{"10.244.27.1", "10.244.27.2"}, 2)
	c.serviceWithPods(t, fleetService(ns, "idle", nil), nil, 0)
	c.deletePod(t, ns, "web-1", 300) // draining
	c.waitForServiceEndpoints(t, ns, "web", "a terminating endpoint", func(eps []discoveryv1.Endpoint) bool {
		for _, e := range eps {
			if e.Conditions.Terminating != nil && *e.Conditions.Terminating {
				return true
			}
		}
		return false
	})
	for _, policy := range []string{"exclude", "include"} {
		t.Run(policy, func(t *testing.T) {
			args := fmt.Sprintf("port_name = \"http\"\n  terminating_endpoints = %q", policy)
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testProviderFactories,
				Steps: []resource.TestStep{{
					Config: c.providerConfig() + fmt.Sprintf(`
data "k8s_services" "f" {
  namespace = %[1]q
  %[2]s
}
locals {
  keys = sort(keys(data.k8s_services.f.services))
}
data "k8s_ready_endpoints" "each" {
  count     = length(local.keys)
  namespace = data.k8s_services.f.services[local.keys[count.index]].namespace
  service   = data.k8s_services.f.services[local.keys[count.index]].name
  %[2]s
}
output "differing" {
  value = [for i, k in local.keys : k if jsonencode(data.k8s_services.f.services[k].endpoints) != jsonencode(data.k8s_ready_endpoints.each[i].endpoints)]
}
output "endpoints" {
  value = sum([for s in data.k8s_services.f.services : length(s.endpoints)])
}
`, ns, args),
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue("data.k8s_services.f", tfjsonpath.New("services"), knownvalue.MapSizeExact(3)),
						statecheck.ExpectKnownOutputValue("differing", knownvalue.ListExact([]knownvalue.Check{})),
						statecheck.ExpectKnownOutputValue("endpoints", knownvalue.Int64Exact(map[string]int64{"exclude": 3, "include": 4}[policy])),
					},
				}},
			})
		})
	}
}

func TestAccServicesCostTwoRequests(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	for i := range 50 {
		c.createService(t, fleetService(ns, fmt.Sprintf("svc-%02d", i), nil))
	}
	c.serviceWithPods(t, fleetService(ns, "web", nil), []string{"10.244.28.1"}, 1)
	proxy := c.startFaultProxy(t, nil)
	via := proxy.providerVia(c.identityToken(t, ns, "fleet", fleetRole), "15s")
	parallelSteps(t,
		resource.TestStep{
			PreConfig: func() { proxy.reset() },
			Config:    via + fmt.Sprintf("data \"k8s_services\" \"f\" {\n  namespace = %q\n}\n", ns),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.k8s_services.f", tfjsonpath.New("services"), knownvalue.MapSizeExact(51)),
				statecheck.ExpectKnownValue("data.k8s_services.f", tfjsonpath.New("services").AtMapKey(ns+"/web").AtMapKey("endpoints"),
					knownvalue.ListExact([]knownvalue.Check{podEndpoint("10.244.28.1", 8080, "IPv4", "web-1")})),
			},
		},
		resource.TestStep{
			// The plan and apply of the step above each read once: two
			// LISTs a read, nothing per Service.
			PreConfig: func() {
				reads := proxy.count("LIST services")
				if reads == 0 || proxy.count("LIST endpointslices") != reads || proxy.total() != 2*reads {
					t.Errorf("requests %v: want one LIST of services and one of endpointslices per read, nothing else", proxy.snapshot())
				}
			},
			Config:   via + fmt.Sprintf("data \"k8s_services\" \"f\" {\n  namespace = %q\n}\n", ns),
			PlanOnly: true,
		},
	)
}

func TestAccServicesRBAC(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	c.serviceWithPods(t, fleetService(ns, "web", nil), []string{"10.244.29.1"}, 1)
	as := func(rules []rbacv1.PolicyRule, name string) string {
		return kubeconfigProvider(c.identity(t, ns, name, rules)) + fmt.Sprintf("data \"k8s_services\" \"f\" {\n  namespace = %q\n}\n", ns)
	}
	parallelSteps(t,
		resource.TestStep{
			Config: as(fleetRole, "fleet-role"),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.k8s_services.f", tfjsonpath.New("services").AtMapKey(ns+"/web").AtMapKey("endpoints"),
					knownvalue.ListExact([]knownvalue.Check{podEndpoint("10.244.29.1", 8080, "IPv4", "web-1")})),
			},
		},
		resource.TestStep{
			// The single-Service Role is not enough: it gets, it does not list.
			Config: as(documentedRole, "single-role"),
			ExpectError: phrase("Permission Denied Listing Services", "`list` on `services` is missing",
				fmt.Sprintf("list services in namespace %s:", ns), "forbidden"),
		},
		resource.TestStep{
			Config: as(fleetRole[:1], "no-slices"),
			ExpectError: phrase("Permission Denied Listing EndpointSlices", "`list` on `endpointslices`",
				fmt.Sprintf("list endpointslices in namespace %s:", ns), "forbidden"),
		},
		resource.TestStep{
			Config: kubeconfigProvider(c.identity(t, ns, "namespaced", fleetRole)) + "data \"k8s_services\" \"f\" {\n  all_namespaces = true\n}\n",
			ExpectError: phrase("Permission Denied Listing Services", "ClusterRole",
				"list services in all namespaces:", "forbidden"),
		},
	)
}

func TestAccServicesWaitForTheirGuardsWithAWatch(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	c.serviceWithPods(t, fleetService(ns, "web", nil), []string{"10.244.30.1"}, 1)
	watchRole := slices.Clone(fleetRole)
	watchRole[1].Verbs = []string{"list", "watch"}
	proxy := c.startFaultProxy(t, nil)
	via := proxy.providerVia(c.identityToken(t, ns, "watcher", watchRole), "15s")
	fleet := func(guards string) string {
		return via + fmt.Sprintf("data \"k8s_services\" \"f\" {\n  namespace = %q\n  %s\n  timeouts {\n    read = \"2m\"\n  }\n}\n", ns, guards)
	}
	parallelSteps(t,
		resource.TestStep{
			// The second pod becomes ready while the read waits.
			PreConfig: func() {
				proxy.changeOnceWatching(t, func() {
					c.runPod(t, ns, podSpec{name: "web-2", labels: map[string]string{"app": "web"}, ips: []string{"10.244.30.2"}, ready: true})
				})
			},
			Config: fleet("min_ready = 2"),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.k8s_services.f", tfjsonpath.New("services").AtMapKey(ns+"/web").AtMapKey("endpoints"), knownvalue.ListSizeExact(2)),
			},
		},
		resource.TestStep{
			// A second Service appears while the read waits for it.
			PreConfig: func() {
				if got := proxy.count("WATCH endpointslices"); got != 1 {
					t.Errorf("%d WATCH requests while waiting, want 1", got)
				}
				proxy.changeOnceWatching(t, func() {
					c.createService(t, fleetService(ns, "api", nil))
				})
			},
			Config: fleet("min_services = 2"),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.k8s_services.f", tfjsonpath.New("services"), fleetKeys(ns+"/web", ns+"/api")),
			},
		},
	)
}
