package provider

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// cts_services fed, unchanged, to the shapes of the F5, A10, PAN-OS and
// FortiOS CTS modules (testdata/cts-modules): a pool of pods and a pool of
// nodes, each module configuring the address traffic should go to, whether
// it reads address (A10, PAN-OS, FortiOS) or node_address (F5).

// ctsMember is one endpoint of a pool, as a module should configure it.
type ctsMember struct {
	address string
	port    int64
}

// ctsModuleShapes calls every module shape with cts_services of pods and of
// nodes (expressions of a k8s_ready_endpoints data source or its literal),
// F5's with the meta its module asks of each instance.
func ctsModuleShapes(t *testing.T, pods, nodes string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "cts-modules"))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`
locals {
  instances = merge(provider::k8s::cts_services(%[2]s), provider::k8s::cts_services(%[3]s))
  # F5's module keeps the instances whose meta names the virtual server.
  with_virtual_server = {
    for key, s in local.instances : key => merge(s, { meta = merge(s.meta, { VSIP = "192.0.2.10", VSPORT = "443" }) })
  }
}
module "f5" {
  source   = "%[1]s/f5"
  services = local.with_virtual_server
}
module "a10" {
  source   = "%[1]s/a10"
  services = local.instances
}
module "panos" {
  source   = "%[1]s/panos"
  services = local.instances
}
module "fortios" {
  source   = "%[1]s/fortios"
  services = local.instances
}
output "f5" {
  value = module.f5.pools
}
output "a10" {
  value = module.a10.service_groups
}
output "panos" {
  value = module.panos.tag_to_ips
}
output "fortios" {
  value = module.fortios.address_groups
}
`, dir, pods, nodes)
}

// ctsModuleShapeChecks are what each module configures for Services
// pods and nodes of namespace ns: every member at its own address.
func ctsModuleShapeChecks(ns string, pools map[string][]ctsMember) []statecheck.StateCheck {
	f5, a10, panos, fortios := map[string]knownvalue.Check{}, map[string]knownvalue.Check{}, map[string]knownvalue.Check{}, map[string]knownvalue.Check{}
	for name, members := range pools {
		// The modules go through var.services in the order of its keys.
		byKey := map[string]ctsMember{}
		for _, m := range members {
			byKey[ns+"/"+name+"/"+hostPortMember(m.address, m.port)] = m
		}
		keys := slices.Sorted(maps.Keys(byKey))
		var addresses, groupMembers, ips []knownvalue.Check
		subnets := map[string]knownvalue.Check{}
		for _, k := range keys {
			m := byKey[k]
			addresses = append(addresses, knownvalue.StringExact(m.address))
			groupMembers = append(groupMembers, knownvalue.ObjectExact(map[string]knownvalue.Check{
				"name": knownvalue.StringExact(m.address), "host": knownvalue.StringExact(m.address), "port": knownvalue.Int64Exact(m.port),
			}))
			ips = append(ips, knownvalue.StringExact(m.address))
			subnets[k] = knownvalue.StringExact(m.address + " 255.255.255.255")
		}
		f5[name+"-pool"] = knownvalue.ObjectExact(map[string]knownvalue.Check{
			"addresses": knownvalue.ListExact(addresses), "port": knownvalue.Int64Exact(byKey[keys[0]].port),
		})
		a10[name] = knownvalue.ListExact(groupMembers)
		panos[name] = knownvalue.ListExact(ips)
		fortios[name] = knownvalue.MapExact(subnets)
	}
	return []statecheck.StateCheck{
		statecheck.ExpectKnownOutputValue("f5", knownvalue.MapExact(f5)),
		statecheck.ExpectKnownOutputValue("a10", knownvalue.MapExact(a10)),
		statecheck.ExpectKnownOutputValue("panos", knownvalue.MapExact(panos)),
		statecheck.ExpectKnownOutputValue("fortios", knownvalue.MapExact(fortios)),
	}
}

func TestCTSServicesFeedsTheModuleShapesOfF5A10PANOSAndFortiOS(t *testing.T) {
	// The endpoints as k8s_ready_endpoints gives them: pods (dual-stack) and
	// the nodes of a node pool on their nodePort.
	pods := `{
    name      = "web"
    namespace = "shop"
    endpoints = [
      { address = "10.0.0.7", port = 8080, address_type = "IPv4", pod = "web-1", node_name = "node-a", zone = "zone-a", hostname = null, ready = true, serving = true, terminating = false },
      { address = "10.0.0.8", port = 8080, address_type = "IPv4", pod = "web-2", node_name = "node-b", zone = "zone-b", hostname = null, ready = true, serving = true, terminating = false },
      { address = "fd00::7", port = 8080, address_type = "IPv6", pod = "web-1", node_name = "node-a", zone = "zone-a", hostname = null, ready = true, serving = true, terminating = false },
    ]
  }`
	nodes := `{
    name      = "web-nodes"
    namespace = "shop"
    endpoints = [
      { address = "192.168.0.1", port = 30080, address_type = "IPv4", pod = null, node_name = "node-a", zone = "zone-a", hostname = null, ready = true, serving = true, terminating = false, local_endpoints = 1 },
      { address = "192.168.0.2", port = 30080, address_type = "IPv4", pod = null, node_name = "node-b", zone = "zone-b", hostname = null, ready = true, serving = true, terminating = false, local_endpoints = 1 },
    ]
  }`
	functionTest(t, ctsModuleShapes(t, pods, nodes), ctsModuleShapeChecks("shop", map[string][]ctsMember{
		"web":       {{"10.0.0.7", 8080}, {"10.0.0.8", 8080}, {"fd00::7", 8080}},
		"web-nodes": {{"192.168.0.1", 30080}, {"192.168.0.2", 30080}},
	})...)
}

// The same, from real reads: a dual-stack Service's pods, and the nodes of a
// NodePort Service.
func TestAccCTSServicesFeedsTheModuleShapesOfF5A10PANOSAndFortiOS(t *testing.T) {
	c := accCluster(t)
	ns := c.webNamespace(t, dualStackWebServiceSpec("", corev1.IPv4Protocol, corev1.IPv6Protocol),
		webPod("web-a", true, "10.244.9.2", "fd00:10:244:9::2"), webPod("web-b", true, "10.244.9.3", "fd00:10:244:9::3"))
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 2, 2), endpointCount(discoveryv1.AddressTypeIPv6, 2, 2))
	r := c.nodeRun()
	r.node(t, nodeSpec{suffix: "a", zone: "tf-acc-z1", internalIP: "172.31.9.1"})
	r.node(t, nodeSpec{suffix: "b", zone: "tf-acc-z2", internalIP: "172.31.9.2"})
	nodePort := c.nodePortService(t, ns, "web-nodes", corev1.ServiceExternalTrafficPolicyCluster)

	config := c.providerConfig() + fmt.Sprintf(`
data "k8s_ready_endpoints" "pods" {
  namespace = %[1]q
  service   = "web"
}
data "k8s_ready_endpoints" "nodes" {
  namespace     = %[1]q
  service       = "web-nodes"
  target        = "nodes"
  node_selector = %[2]q
}
`, ns, r.selector()) + ctsModuleShapes(t, "data.k8s_ready_endpoints.pods", "data.k8s_ready_endpoints.nodes")
	resource.Test(t, resource.TestCase{
		TerraformVersionChecks: []tfversion.TerraformVersionCheck{skipWithoutFunctions{}},
		Steps: []resource.TestStep{functionStep(t, config, ctsModuleShapeChecks(ns, map[string][]ctsMember{
			"web":       {{"10.244.9.2", 8080}, {"10.244.9.3", 8080}, {"fd00:10:244:9::2", 8080}, {"fd00:10:244:9::3", 8080}},
			"web-nodes": {{"172.31.9.1", nodePort}, {"172.31.9.2", nodePort}},
		}), nil)},
	})
}
