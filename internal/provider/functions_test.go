package provider

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	goversion "github.com/hashicorp/go-version"
	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

// Provider functions came with Terraform 1.8 and OpenTofu 1.7.
var (
	terraformWithFunctions = goversion.Must(goversion.NewVersion("1.8.0"))
	openTofuWithFunctions  = goversion.Must(goversion.NewVersion("1.7.0"))
)

// cliIsOpenTofu tells whether the CLI of the tests is OpenTofu, whose version
// numbers are not Terraform's.
var cliIsOpenTofu = sync.OnceValues(func() (bool, error) {
	out, err := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), "version").Output()
	if err != nil {
		return false, fmt.Errorf("%s version: %w", os.Getenv("TF_ACC_TERRAFORM_PATH"), err)
	}
	return strings.HasPrefix(string(out), "OpenTofu"), nil
})

// skipWithoutFunctions skips a test on a CLI that has no provider functions.
type skipWithoutFunctions struct{}

var _ tfversion.TerraformVersionCheck = skipWithoutFunctions{}

func (skipWithoutFunctions) CheckTerraformVersion(_ context.Context, req tfversion.CheckTerraformVersionRequest, resp *tfversion.CheckTerraformVersionResponse) {
	tofu, err := cliIsOpenTofu()
	if err != nil {
		resp.Error = err
		return
	}
	name, least := "Terraform", terraformWithFunctions
	if tofu {
		name, least = "OpenTofu", openTofuWithFunctions
	}
	if req.TerraformVersion.Core().LessThan(least) {
		resp.Skip = fmt.Sprintf("provider functions need %s %s or later; this is %s", name, least, req.TerraformVersion)
	}
}

// functionsConfig declares the provider, which Terraform requires of a
// module that calls its functions.
const functionsConfig = `
terraform {
  required_providers {
    k8s = { source = "hashicorp/k8s" }
  }
}
`

// functionTest runs config (with functionsConfig) and checks its outputs,
// on a CLI that has provider functions.
func functionTest(t *testing.T, config string, checks ...statecheck.StateCheck) {
	t.Helper()
	resource.UnitTest(t, resource.TestCase{
		TerraformVersionChecks: []tfversion.TerraformVersionCheck{skipWithoutFunctions{}},
		Steps:                  []resource.TestStep{functionStep(t, config, checks, nil)},
	})
}

// functionError runs config and expects it to fail with an error matching want.
func functionError(t *testing.T, config string, want *regexp.Regexp) {
	t.Helper()
	resource.UnitTest(t, resource.TestCase{
		TerraformVersionChecks: []tfversion.TerraformVersionCheck{skipWithoutFunctions{}},
		Steps:                  []resource.TestStep{functionStep(t, config, nil, want)},
	})
}

// functionStep gives the configuration as a directory: for a Config string
// the harness runs terraform init on the provider block alone, which
// installs no module; for a directory, init sees the whole configuration.
func functionStep(t *testing.T, cfg string, checks []statecheck.StateCheck, wantErr *regexp.Regexp) resource.TestStep {
	t.Helper()
	dir := t.TempDir()
	writeText(t, filepath.Join(dir, "main.tf"), functionsConfig+cfg)
	return resource.TestStep{
		ProtoV6ProviderFactories: testProviderFactories,
		ConfigDirectory:          config.StaticDirectory(dir),
		ConfigStateChecks:        checks,
		ExpectError:              wantErr,
	}
}

func TestMembersFunction(t *testing.T) {
	// The endpoints as k8s_ready_endpoints gives them, with attributes that
	// members does not read, in an order that is not sorted.
	functionTest(t, `
output "members" {
  value = provider::k8s::members([
    { address = "10.0.0.7", port = 8080, address_type = "IPv4", pod = "web-1", node_name = null },
    { address = "fd00::7", port = 8080, address_type = "IPv6", pod = "web-1", node_name = "n1" },
    { address = "10.0.0.10", port = 80, address_type = "IPv4", pod = null, node_name = null },
    { address = "::ffff:10.0.0.8", port = 443, address_type = "IPv6", pod = null, node_name = null },
  ])
}
output "none" {
  value = provider::k8s::members([])
}
`,
		statecheck.ExpectKnownOutputValue("members", knownvalue.ListExact([]knownvalue.Check{
			knownvalue.StringExact("10.0.0.7:8080"),
			knownvalue.StringExact("[fd00::7]:8080"),
			knownvalue.StringExact("10.0.0.10:80"),
			knownvalue.StringExact("[::ffff:10.0.0.8]:443"),
		})),
		statecheck.ExpectKnownOutputValue("none", knownvalue.ListSizeExact(0)),
	)
}

func TestMembersFunctionRefusesWhatIsNotAnEndpoint(t *testing.T) {
	for name, tc := range map[string]struct {
		endpoints string
		want      *regexp.Regexp
	}{
		"a host name":      {`[{ address = "web.shop.svc", port = 80 }]`, phrase(`address "web.shop.svc" is not an IP address`)},
		"port 0":           {`[{ address = "10.0.0.7", port = 0 }]`, phrase("port 0 of 10.0.0.7 is outside 1-65535")},
		"port over 65535":  {`[{ address = "10.0.0.7", port = 65536 }]`, phrase("outside 1-65535")},
		"no port":          {`[{ address = "10.0.0.7" }]`, regexp.MustCompile(`port`)},
		"a null endpoint":  {`[null]`, phrase("endpoint 0 has no address or no port")},
		"a null port":      {`[{ address = "10.0.0.7", port = null }]`, phrase("endpoint 0 has no address or no port")},
		"a list of string": {`["10.0.0.7:80"]`, regexp.MustCompile(`object required|Invalid function argument`)},
	} {
		t.Run(name, func(t *testing.T) {
			functionError(t, fmt.Sprintf("output \"m\" {\n  value = provider::k8s::members(%s)\n}\n", tc.endpoints), tc.want)
		})
	}
}

// ctsInstanceChecks is one element of the cts_services result, every
// attribute checked.
type ctsExpect struct {
	id, name, namespace, address string
	port                         int64
	status, node                 string
	meta, nodeMeta               map[string]string
}

func (e ctsExpect) check() knownvalue.Check {
	strMap := func(m map[string]string) knownvalue.Check {
		checks := map[string]knownvalue.Check{}
		for k, v := range m {
			checks[k] = knownvalue.StringExact(v)
		}
		return knownvalue.MapExact(checks)
	}
	return knownvalue.ObjectExact(map[string]knownvalue.Check{
		"id":                    knownvalue.StringExact(e.id),
		"name":                  knownvalue.StringExact(e.name),
		"kind":                  knownvalue.StringExact(""),
		"address":               knownvalue.StringExact(e.address),
		"port":                  knownvalue.Int64Exact(e.port),
		"meta":                  strMap(e.meta),
		"tags":                  knownvalue.ListSizeExact(0),
		"namespace":             knownvalue.StringExact(e.namespace),
		"status":                knownvalue.StringExact(e.status),
		"node":                  knownvalue.StringExact(e.node),
		"node_id":               knownvalue.StringExact(""),
		"node_address":          knownvalue.StringExact(e.address),
		"node_datacenter":       knownvalue.StringExact(""),
		"node_tagged_addresses": knownvalue.MapSizeExact(0),
		"node_meta":             strMap(e.nodeMeta),
		"cts_user_defined_meta": knownvalue.MapSizeExact(0),
	})
}

func expectCTS(output string, instances ...ctsExpect) statecheck.StateCheck {
	checks := map[string]knownvalue.Check{}
	for _, in := range instances {
		checks[in.id] = in.check()
	}
	return statecheck.ExpectKnownOutputValue(output, knownvalue.MapExact(checks))
}

// readyEndpointsLiteral is a k8s_ready_endpoints data source's attributes
// as a literal: a ready pod, a draining one, and a ready IPv6 endpoint
// without pod, node or zone.
const readyEndpointsLiteral = `{
    id                    = "shop/web"
    namespace             = "shop"
    service               = "web"
    port_name             = "http"
    terminating_endpoints = "include"
    endpoints = [
      { address = "10.0.0.7", port = 8080, address_type = "IPv4", pod = "web-1", node_name = "node-a", zone = "zone-a", hostname = null, ready = true, serving = true, terminating = false },
      { address = "10.0.0.8", port = 8080, address_type = "IPv4", pod = "web-2", node_name = "node-b", zone = "zone-b", hostname = null, ready = false, serving = true, terminating = true },
      { address = "10.0.0.9", port = 8080, address_type = "IPv4", pod = "web-3", node_name = "node-b", zone = "zone-b", hostname = null, ready = false, serving = false, terminating = true },
      { address = "fd00::7", port = 8080, address_type = "IPv6", pod = null, node_name = null, zone = null, hostname = null, ready = true, serving = true, terminating = false },
    ]
  }`

// shopWeb is readyEndpointsLiteral as cts_services gives it, with labels as meta.
func shopWeb(labels map[string]string) []ctsExpect {
	return []ctsExpect{
		{id: "shop/web/10.0.0.7:8080", name: "web", namespace: "shop", address: "10.0.0.7", port: 8080, status: "passing",
			node: "node-a", meta: labels, nodeMeta: map[string]string{"topology.kubernetes.io/zone": "zone-a"}},
		{id: "shop/web/10.0.0.8:8080", name: "web", namespace: "shop", address: "10.0.0.8", port: 8080, status: "warning",
			node: "node-b", meta: labels, nodeMeta: map[string]string{"topology.kubernetes.io/zone": "zone-b"}},
		{id: "shop/web/10.0.0.9:8080", name: "web", namespace: "shop", address: "10.0.0.9", port: 8080, status: "critical",
			node: "node-b", meta: labels, nodeMeta: map[string]string{"topology.kubernetes.io/zone": "zone-b"}},
		{id: "shop/web/[fd00::7]:8080", name: "web", namespace: "shop", address: "fd00::7", port: 8080, status: "passing",
			meta: labels, nodeMeta: map[string]string{}},
	}
}

func TestCTSServicesFunctionFromOneService(t *testing.T) {
	functionTest(t, `
locals {
  web = `+readyEndpointsLiteral+`
}
output "from_data_source" {
  value = provider::k8s::cts_services(local.web)
}
output "from_object" {
  value = provider::k8s::cts_services({
    name      = "web"
    namespace = "shop"
    labels    = { app = "web", tier = "front" }
    endpoints = local.web.endpoints
  })
}
output "default_namespace" {
  value = provider::k8s::cts_services({
    name      = "api"
    endpoints = [{ address = "10.0.1.1", port = 80 }]
  })
}
output "no_endpoints" {
  value = provider::k8s::cts_services({ name = "web", namespace = "shop", endpoints = [] })
}
`,
		expectCTS("from_data_source", shopWeb(map[string]string{})...),
		expectCTS("from_object", shopWeb(map[string]string{"app": "web", "tier": "front"})...),
		// Absent conditions take the discovery/v1 defaults: ready.
		expectCTS("default_namespace", ctsExpect{id: "default/api/10.0.1.1:80", name: "api", namespace: "default",
			address: "10.0.1.1", port: 80, status: "passing", meta: map[string]string{}, nodeMeta: map[string]string{}}),
		statecheck.ExpectKnownOutputValue("no_endpoints", knownvalue.MapSizeExact(0)),
	)
}

// servicesFleetLiteral is the services map of k8s_services, in its shape:
// keyed "<namespace>/<name>", each Service's facts and endpoints.
const servicesFleetLiteral = `{
    "shop/web" = {
      namespace   = "shop"
      name        = "web"
      labels      = { app = "web" }
      annotations = { "example.com/owner" = "team-a" }
      type        = "ClusterIP"
      cluster_ips = ["10.96.0.10"]
      ports       = [{ name = "http", port = 80, target_port = "8080", protocol = "TCP", node_port = null }]
      endpoints = [
        { address = "10.0.0.7", port = 8080, address_type = "IPv4", pod = "web-1", node_name = "node-a", zone = "zone-a", hostname = null, ready = true, serving = true, terminating = false },
      ]
    }
    "pay/api" = {
      namespace   = "pay"
      name        = "api"
      labels      = {}
      annotations = {}
      type        = "ClusterIP"
      cluster_ips = ["10.96.0.11"]
      ports       = [{ name = "http", port = 80, target_port = "9090", protocol = "TCP", node_port = null }]
      endpoints = [
        { address = "10.0.2.1", port = 9090, address_type = "IPv4", pod = "api-1", node_name = "node-a", zone = "zone-a", hostname = null, ready = true, serving = true, terminating = false },
        { address = "10.0.2.2", port = 9090, address_type = "IPv4", pod = "api-2", node_name = "node-b", zone = null, hostname = null, ready = false, serving = true, terminating = true },
      ]
    }
    "pay/idle" = {
      namespace   = "pay"
      name        = "idle"
      labels      = {}
      annotations = {}
      type        = "ClusterIP"
      cluster_ips = ["10.96.0.12"]
      ports       = []
      endpoints   = []
    }
  }`

var fleetExpected = []ctsExpect{
	{id: "shop/web/10.0.0.7:8080", name: "web", namespace: "shop", address: "10.0.0.7", port: 8080, status: "passing",
		node: "node-a", meta: map[string]string{"app": "web"}, nodeMeta: map[string]string{"topology.kubernetes.io/zone": "zone-a"}},
	{id: "pay/api/10.0.2.1:9090", name: "api", namespace: "pay", address: "10.0.2.1", port: 9090, status: "passing",
		node: "node-a", meta: map[string]string{}, nodeMeta: map[string]string{"topology.kubernetes.io/zone": "zone-a"}},
	{id: "pay/api/10.0.2.2:9090", name: "api", namespace: "pay", address: "10.0.2.2", port: 9090, status: "warning",
		node: "node-b", meta: map[string]string{}, nodeMeta: map[string]string{}},
}

func TestCTSServicesFunctionFromAFleet(t *testing.T) {
	// As the data source gives it (a map) and as a literal (an object).
	functionTest(t, `
locals {
  fleet = `+servicesFleetLiteral+`
}
output "map" {
  value = provider::k8s::cts_services(tomap(local.fleet))
}
output "object" {
  value = provider::k8s::cts_services(local.fleet)
}
output "empty" {
  value = provider::k8s::cts_services({})
}
`,
		expectCTS("map", fleetExpected...),
		expectCTS("object", fleetExpected...),
		statecheck.ExpectKnownOutputValue("empty", knownvalue.MapSizeExact(0)),
	)
}

// ctsModule is the path of the example module that declares CTS's services
// variable verbatim.
func ctsModule(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "cts", "haproxy-backend"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCTSServicesFunctionFeedsACTSModule(t *testing.T) {
	// The module's variable has CTS's type: Terraform refuses any value that
	// does not convert to it. The fleet goes in unchanged.
	functionTest(t, fmt.Sprintf(`
module "backend" {
  source       = %q
  backend_name = "fleet"
  services     = provider::k8s::cts_services(`+servicesFleetLiteral+`)
}
output "backend" {
  value = module.backend.backend
}
`, ctsModule(t)),
		statecheck.ExpectKnownOutputValue("backend", knownvalue.StringExact(`backend fleet
    balance roundrobin
    server pay_api_10.0.2.1:9090 10.0.2.1:9090 check weight 100
    server pay_api_10.0.2.2:9090 10.0.2.2:9090 check weight 0
    server shop_web_10.0.0.7:8080 10.0.0.7:8080 check weight 100
`)),
	)
}

func TestCTSServicesFunctionRefusesWhatIsNotAService(t *testing.T) {
	for name, tc := range map[string]struct {
		arg  string
		want *regexp.Regexp
	}{
		"a list of endpoints": {`[{ address = "10.0.0.7", port = 80 }]`, phrase("expected a k8s_ready_endpoints data source")},
		"a string":            {`"shop/web"`, phrase("expected a k8s_ready_endpoints data source")},
		"no name":             {`{ namespace = "shop", endpoints = [] }`, phrase("the service has no name")},
		"a bad port":          {`{ name = "web", endpoints = [{ address = "10.0.0.7", port = 80.5 }] }`, phrase("endpoint 0: port must be a whole number")},
		"a bad address":       {`{ name = "web", endpoints = [{ address = "web", port = 80 }] }`, phrase(`endpoint 0: address "web" is not an IP address`)},
		"a fleet entry without endpoints": {
			`{ "shop/web" = { name = "web", namespace = "shop" } }`, phrase(`services["shop/web"] has no endpoints`),
		},
		"an endpoint twice": {
			`{ a = { name = "web", namespace = "shop", endpoints = [{ address = "10.0.0.7", port = 80 }] }, b = { name = "web", namespace = "shop", endpoints = [{ address = "10.0.0.7", port = 80 }] } }`,
			phrase("endpoint shop/web/10.0.0.7:80 is given twice"),
		},
		"null": {`null`, regexp.MustCompile(`null`)},
	} {
		t.Run(name, func(t *testing.T) {
			functionError(t, fmt.Sprintf("output \"s\" {\n  value = provider::k8s::cts_services(%s)\n}\n", tc.arg), tc.want)
		})
	}
}
