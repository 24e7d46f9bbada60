package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// The functions fed by a real read: a dual-stack Service with two ready pods
// and a draining one, read with terminating_endpoints = "include".
func TestAccFunctionsOnARealRead(t *testing.T) {
	c := accCluster(t)
	ns := c.webNamespace(t, dualStackWebServiceSpec("", corev1.IPv4Protocol, corev1.IPv6Protocol),
		webPod("web-a", true, "10.244.7.2", "fd00:10:244:7::2"), webPod("web-b", true, "10.244.7.10", "fd00:10:244:7::10"),
		webPod("web-c", true, "10.244.7.3", "fd00:10:244:7::3"))
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 3, 3), endpointCount(discoveryv1.AddressTypeIPv6, 3, 3))
	// Deleted with a grace period and no kubelet to confirm: web-c drains.
	c.deletePod(t, ns, "web-c", 300)
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 2, 3), endpointCount(discoveryv1.AddressTypeIPv6, 2, 3))

	config := c.providerConfig() + dataSource(ns, `terminating_endpoints = "include"`) + fmt.Sprintf(`
output "members" {
  value = provider::k8s::members(data.k8s_ready_endpoints.web.endpoints)
}
output "cts" {
  value = provider::k8s::cts_services(data.k8s_ready_endpoints.web)
}
module "backend" {
  source       = %q
  backend_name = "web"
  services     = provider::k8s::cts_services(data.k8s_ready_endpoints.web)
}
output "backend" {
  value = module.backend.backend
}
`, ctsModule(t))

	zone := map[string]string{"topology.kubernetes.io/zone": accZone}
	instance := func(address, member, status string) ctsExpect {
		return ctsExpect{id: ns + "/web/" + member, name: "web", namespace: ns, address: address, port: 8080,
			status: status, node: accNode, meta: map[string]string{}, nodeMeta: zone}
	}
	// HAProxy server names: the id with "/", "[" and "]" made "_".
	server := func(name, member, weight string) string {
		return fmt.Sprintf("    server %s_web_%s %s check weight %s\n", ns, name, member, weight)
	}
	resource.Test(t, resource.TestCase{
		TerraformVersionChecks: []tfversion.TerraformVersionCheck{skipWithoutFunctions{}},
		Steps: []resource.TestStep{functionStep(t, config, []statecheck.StateCheck{
			// The data source's order: IPv4 before IPv6, numerically.
			statecheck.ExpectKnownOutputValue("members", knownvalue.ListExact([]knownvalue.Check{
				knownvalue.StringExact("10.244.7.2:8080"),
				knownvalue.StringExact("10.244.7.3:8080"),
				knownvalue.StringExact("10.244.7.10:8080"),
				knownvalue.StringExact("[fd00:10:244:7::2]:8080"),
				knownvalue.StringExact("[fd00:10:244:7::3]:8080"),
				knownvalue.StringExact("[fd00:10:244:7::10]:8080"),
			})),
			expectCTS("cts",
				instance("10.244.7.2", "10.244.7.2:8080", "passing"),
				instance("10.244.7.3", "10.244.7.3:8080", "warning"),
				instance("10.244.7.10", "10.244.7.10:8080", "passing"),
				instance("fd00:10:244:7::2", "[fd00:10:244:7::2]:8080", "passing"),
				instance("fd00:10:244:7::3", "[fd00:10:244:7::3]:8080", "warning"),
				instance("fd00:10:244:7::10", "[fd00:10:244:7::10]:8080", "passing"),
			),
			// The module sorts by key: namespace/web/<member>, as strings.
			statecheck.ExpectKnownOutputValue("backend", knownvalue.StringExact("backend web\n    balance roundrobin\n"+
				server("10.244.7.10:8080", "10.244.7.10:8080", "100")+
				server("10.244.7.2:8080", "10.244.7.2:8080", "100")+
				server("10.244.7.3:8080", "10.244.7.3:8080", "0")+
				server("_fd00:10:244:7::10_:8080", "[fd00:10:244:7::10]:8080", "100")+
				server("_fd00:10:244:7::2_:8080", "[fd00:10:244:7::2]:8080", "100")+
				server("_fd00:10:244:7::3_:8080", "[fd00:10:244:7::3]:8080", "0"))),
		}, nil)},
	})
}

// cts_services takes the services map of a real k8s_services read: one
// instance per endpoint of every Service, keyed by Service and member.
func TestAccFunctionsOnAFleet(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	c.serviceWithPods(t, fleetService(ns, "web", nil), []string{"10.244.31.2", "10.244.31.1"}, 2)
	c.serviceWithPods(t, fleetService(ns, "api", nil), []string{"10.244.32.1"}, 1)
	config := c.providerConfig() + fmt.Sprintf(`
data "k8s_services" "f" {
  namespace = %q
}
output "instances" {
  value = sort(keys(provider::k8s::cts_services(data.k8s_services.f.services)))
}
output "web_members" {
  value = provider::k8s::members(data.k8s_services.f.services["%s/web"].endpoints)
}
`, ns, ns)
	resource.Test(t, resource.TestCase{
		TerraformVersionChecks: []tfversion.TerraformVersionCheck{skipWithoutFunctions{}},
		Steps: []resource.TestStep{functionStep(t, config, []statecheck.StateCheck{
			statecheck.ExpectKnownOutputValue("instances", knownvalue.ListExact([]knownvalue.Check{
				knownvalue.StringExact(ns + "/api/10.244.32.1:8080"),
				knownvalue.StringExact(ns + "/web/10.244.31.1:8080"),
				knownvalue.StringExact(ns + "/web/10.244.31.2:8080"),
			})),
			statecheck.ExpectKnownOutputValue("web_members", knownvalue.ListExact([]knownvalue.Check{
				knownvalue.StringExact("10.244.31.1:8080"), knownvalue.StringExact("10.244.31.2:8080"),
			})),
		}, nil)},
	})
}
