package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// drainingPod is a pod in its grace period: terminating, not ready, still serving.
func drainingPod(addr, pod string) discoveryv1.Endpoint {
	e := readyPod(addr, pod, "node-a", "zone-a")
	e.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	return e
}

// min_ready counts ready endpoints only, whatever terminating_endpoints puts
// in the pool, on both data sources: one ready pod and two draining ones
// pass min_ready = 1 and fail min_ready = 2 under every policy.
func TestMinReadyCountsReadyEndpointsUnderEveryTerminatingPolicy(t *testing.T) {
	api := newStandInAPIServer(t)
	api.addService(webService("default", httpPort))
	api.addSlices(webSlice("web-a",
		readyPod("10.0.0.1", "web-1", "node-a", "zone-a"), drainingPod("10.0.0.2", "web-2"), drainingPod("10.0.0.3", "web-3")))
	provider := clusterConfig(t, map[string]string{"stand-in": api.URL})
	for policy, inPool := range map[string]int{"exclude": 1, "fallback": 1, "include": 3} {
		readyEndpoints := func(minReady int) string {
			return provider + fmt.Sprintf(`
data "k8s_ready_endpoints" "web" {
  service               = "web"
  terminating_endpoints = %q
  min_ready             = %d
}`, policy, minReady)
		}
		services := func(minReady int) string {
			return provider + fmt.Sprintf(`
data "k8s_services" "all" {
  terminating_endpoints = %q
  min_ready             = %d
}`, policy, minReady)
		}
		draining := ""
		if inPool > 1 {
			draining = "The pool also has 2 draining endpoint(s)"
		}
		t.Run(policy, func(t *testing.T) {
			unitSteps(t,
				resource.TestStep{
					Config: readyEndpoints(1),
					ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("data.k8s_ready_endpoints.web",
						tfjsonpath.New("endpoints"), knownvalue.ListSizeExact(inPool))},
				},
				resource.TestStep{
					Config:      readyEndpoints(2),
					ExpectError: phrase("Too Few Ready Endpoints", "Service default/web has too few ready endpoints: found 1, asked for 2 (min_ready).", draining),
				},
				resource.TestStep{
					Config: services(1),
					ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("data.k8s_services.all",
						tfjsonpath.New("services").AtMapKey("default/web").AtMapKey("endpoints"), knownvalue.ListSizeExact(inPool))},
				},
				resource.TestStep{
					Config:      services(2),
					ExpectError: phrase("Too Few Ready Endpoints", "1 Service(s) have fewer than min_ready = 2 ready endpoint(s): default/web (1)."),
				},
			)
		})
	}
}

// Under fallback a pool of draining pods only is given, and min_ready = 1
// still stops the apply: what is in the pool takes no new connections.
func TestMinReadyRefusesAPoolOfDrainingPodsOnly(t *testing.T) {
	api := newStandInAPIServer(t)
	api.addService(webService("default", httpPort))
	api.addSlices(webSlice("web-a", drainingPod("10.0.0.2", "web-2"), drainingPod("10.0.0.3", "web-3")))
	provider := clusterConfig(t, map[string]string{"stand-in": api.URL})
	unitSteps(t,
		resource.TestStep{
			Config: provider + `
data "k8s_ready_endpoints" "web" {
  service               = "web"
  terminating_endpoints = "fallback"
}`,
			ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("data.k8s_ready_endpoints.web",
				tfjsonpath.New("endpoints"), knownvalue.ListSizeExact(2))},
		},
		resource.TestStep{
			Config: provider + `
data "k8s_ready_endpoints" "web" {
  service               = "web"
  terminating_endpoints = "fallback"
  min_ready             = 1
}`,
			ExpectError: phrase("found 0, asked for 1 (min_ready).", "The pool also has 2 draining endpoint(s)"),
		},
	)
}
