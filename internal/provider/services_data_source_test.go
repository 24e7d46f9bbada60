package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

func TestServicesArgumentsAreValidatedBeforeAnyClusterIsContacted(t *testing.T) {
	tests := []refusedConfig{
		{"a selector that does not parse", `label_selector = "app in (web"`, phrase("Attribute label_selector must be a Kubernetes label selector")},
		{"a selector with a bad operator", `label_selector = "app=>web"`, phrase("Attribute label_selector must be a Kubernetes label selector")},
		{"an empty name", `names = [""]`, phrase("names", "must be a DNS-1123 label", "it is empty")},
		{"no names at all", `names = []`, phrase("Attribute names set must contain at least 1 elements")},
		{"namespaces with all_namespaces", `
  namespaces     = ["shop"]
  all_namespaces = true`, phrase("Invalid Attribute Combination", "namespaces", "all_namespaces")},
		{"namespace with namespaces", `
  namespace  = "shop"
  namespaces = ["blog"]`, phrase("Invalid Attribute Combination", "namespace", "namespaces")},
		{"a namespace in the list that is not a name", `namespaces = ["Shop"]`, phrase("namespaces", "must be a DNS-1123 label", `"Shop"`)},
		{"a default port out of range", `default_port = 70000`, phrase("Attribute default_port value must be between 1 and 65535, got: 70000")},
		{"a negative min_services", `min_services = -1`, phrase("Attribute min_services value must be at least 0, got: -1")},
		{"an unknown terminating policy", `terminating_endpoints = "drain"`, phrase("Attribute terminating_endpoints value must be one of")},
	}
	expectRefused(t, tests, func(args string) string {
		return unconfiguredProvider + "data \"k8s_services\" \"all\" {\n  " + args + "\n}\n"
	})
}

// The fleet gives each Service the list k8s_ready_endpoints gives for it,
// whatever the pool arguments.
func TestServicesGiveEachServiceWhatReadyEndpointsGives(t *testing.T) {
	api := fleetFixture(t)
	p := newProtocolProviderOf(t, newBothPaths(t), writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
	for _, args := range []map[string]tftypes.Value{
		{"port_name": tftypes.NewValue(tftypes.String, "http")},
		{"terminating_endpoints": tftypes.NewValue(tftypes.String, "include"), "default_port": tftypes.NewValue(tftypes.Number, 81)},
		{"address_type": tftypes.NewValue(tftypes.String, "IPv6"), "zones": stringSet("zone-a")},
	} {
		fleetArgs := map[string]tftypes.Value{"namespaces": stringSet("shop", "blog")}
		for k, v := range args {
			fleetArgs[k] = v
		}
		fleet, diags := p.read(t, "k8s_services", fleetArgs)
		failOnDiagnostics(t, "read k8s_services", diags)
		var attrs, services map[string]tftypes.Value
		if err := fleet.As(&attrs); err != nil {
			t.Fatal(err)
		}
		if err := attrs["services"].As(&services); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"shop/web", "shop/api", "blog/web"} {
			svc, ok := services[key]
			if !ok {
				t.Fatalf("%v: no service %s in %s", args, key, attrs["services"])
			}
			var svcAttrs map[string]tftypes.Value
			if err := svc.As(&svcAttrs); err != nil {
				t.Fatal(err)
			}
			ns, name, _ := cut(key)
			single := map[string]tftypes.Value{"namespace": tftypes.NewValue(tftypes.String, ns), "service": tftypes.NewValue(tftypes.String, name)}
			for k, v := range args {
				single[k] = v
			}
			one, diags := p.read(t, "k8s_ready_endpoints", single)
			failOnDiagnostics(t, "read k8s_ready_endpoints", diags)
			var oneAttrs map[string]tftypes.Value
			if err := one.As(&oneAttrs); err != nil {
				t.Fatal(err)
			}
			if got, want := stateJSON(t, svcAttrs["endpoints"]), stateJSON(t, oneAttrs["endpoints"]); string(got) != string(want) {
				t.Errorf("%v: endpoints of %s in k8s_services\n%s\ndiffer from k8s_ready_endpoints'\n%s", args, key, got, want)
			}
		}
	}
}

func cut(key string) (string, string, bool) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return key, "", false
}

func TestServicesReadThroughTheCLI(t *testing.T) {
	isolateFromMachine(t)
	api := fleetFixture(t)
	// A read of both namespaces with one guard more, which it fails.
	guarded := func(guard string, want *regexp.Regexp) resource.TestStep {
		return resource.TestStep{Config: api.config(t, `
data "k8s_services" "guarded" {
  namespaces = ["shop", "blog"]
  port_name  = "http"
  `+guard+`
}`), ExpectError: want}
	}
	unitSteps(t,
		resource.TestStep{
			Config: api.config(t, `
data "k8s_services" "shop" {
  namespace = "shop"
  port_name = "http"
}
output "pools" {
  value = { for k, s in data.k8s_services.shop.services : k => [for e in s.endpoints : "${e.address}:${e.port}"] }
}`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownOutputValue("pools", knownvalue.MapExact(map[string]knownvalue.Check{
					"shop/web": knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("10.0.0.1:8080"), knownvalue.StringExact("10.0.0.2:8080")}),
					"shop/api": knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("10.0.1.1:8080")}),
				})),
				statecheck.ExpectKnownValue("data.k8s_services.shop", tfjsonpath.New("skipped"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectExact(map[string]knownvalue.Check{
						"namespace": knownvalue.StringExact("shop"),
						"name":      knownvalue.StringExact("exporter"),
						"reason":    knownvalue.StringExact("port http not found in service shop/exporter"),
					}),
				})),
				statecheck.ExpectKnownValue("data.k8s_services.shop", tfjsonpath.New("namespace"), knownvalue.StringExact("shop")),
				statecheck.ExpectKnownValue("data.k8s_services.shop", tfjsonpath.New("id"), knownvalue.StringExact("shop")),
				statecheck.ExpectKnownValue("data.k8s_services.shop", tfjsonpath.New("services").AtMapKey("shop/web"), knownvalue.ObjectPartial(map[string]knownvalue.Check{
					"namespace":   knownvalue.StringExact("shop"),
					"name":        knownvalue.StringExact("web"),
					"type":        knownvalue.StringExact("ClusterIP"),
					"labels":      knownvalue.MapExact(map[string]knownvalue.Check{"tier": knownvalue.StringExact("front")}),
					"annotations": knownvalue.MapExact(map[string]knownvalue.Check{"team": knownvalue.StringExact("payments")}),
					"cluster_ips": knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("10.96.0.10")}),
					"ports": knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectExact(map[string]knownvalue.Check{
						"name": knownvalue.StringExact("http"), "port": knownvalue.Int64Exact(80), "target_port": knownvalue.StringExact("8080"),
						"node_port": knownvalue.Null(), "protocol": knownvalue.Null(),
					})}),
					"external_traffic_policy":  knownvalue.Null(),
					"load_balancer_ingress":    knownvalue.ListExact([]knownvalue.Check{}),
					"last_change_trigger_time": knownvalue.Null(),
				})),
			},
		},
		resource.TestStep{
			Config: api.config(t, `
data "k8s_services" "front" {
  all_namespaces = true
  label_selector = "tier=front"
  names          = ["web"]
}`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.k8s_services.front", tfjsonpath.New("id"), knownvalue.StringExact("*")),
				statecheck.ExpectKnownValue("data.k8s_services.front", tfjsonpath.New("namespace"), knownvalue.Null()),
				statecheck.ExpectKnownValue("data.k8s_services.front", tfjsonpath.New("services"), knownvalue.MapSizeExact(1)),
				statecheck.ExpectKnownValue("data.k8s_services.front", tfjsonpath.New("services").AtMapKey("shop/web").AtMapKey("endpoints"), knownvalue.ListSizeExact(2)),
			},
		},
		resource.TestStep{
			Config: api.config(t, `
data "k8s_services" "none" {
  namespace      = "nowhere"
}`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.k8s_services.none", tfjsonpath.New("services"), knownvalue.MapExact(map[string]knownvalue.Check{})),
				statecheck.ExpectKnownValue("data.k8s_services.none", tfjsonpath.New("skipped"), knownvalue.ListExact([]knownvalue.Check{})),
			},
		},
		guarded("min_services = 4", phrase("Too Few Services", "3 Service(s) with a pool, fewer than min_services = 4", "does not wait")),
		guarded("min_ready = 2", phrase("Too Few Ready Endpoints", "2 Service(s) have fewer than min_ready = 2", "blog/web (1), shop/api (1)")),
	)
}

func TestServicesReadErrors(t *testing.T) {
	tests := []struct {
		name      string
		forbidden string
		want      *regexp.Regexp
	}{
		{"a forbidden list of Services names the missing rule", "services", phrase("Permission Denied Listing Services", "`list` on `services` is missing", "ClusterRole", "list services in namespace shop")},
		{"a forbidden list of EndpointSlices names the missing rule", "endpointslices", phrase("Permission Denied Listing EndpointSlices", "`list` on `endpointslices`", "list endpointslices in namespace shop")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateFromMachine(t)
			api := fleetFixture(t)
			api.forbidden = tt.forbidden
			unitSteps(t, resource.TestStep{
				Config:      api.config(t, "data \"k8s_services\" \"shop\" {\n  namespace = \"shop\"\n}\n"),
				ExpectError: tt.want,
			})
		})
	}
}
