package provider

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Whose slices count, against the real control plane, through the CLI and
// the provider binary, whose output shows the warnings: for Service web,
// which has a selector, the EndpointSlice controller's slice counts, and a
// hand-written slice labelled for web (of another manager, or of none) is
// left out and named, unless the provider or the data source trusts its
// manager; for the selectorless Service api, a hand-written slice counts.
func TestAccWhoseSlicesCount(t *testing.T) {
	c := accCluster(t)
	t.Parallel()
	ns := c.namespace(t)
	c.createService(t, webServiceSpec(ns, httpPort))
	c.runPods(t, ns, webPod("web-1", true, "10.0.7.1"))
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 1, 1))
	api := selectorlessWebService(ns, 8080)
	api.Name = "api"
	c.createService(t, api)
	hand := func(name, service, manager, addr string) {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
		}
		if manager != "" {
			s.Labels[discoveryv1.LabelManagedBy] = manager
		}
		if _, err := c.client.DiscoveryV1().EndpointSlices(ns).Create(c.ctx(t), s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create slice %s: %v", name, err)
		}
	}
	hand("web-mesh", "web", "mesh.example.com", "10.0.7.2")
	hand("web-bare", "web", "", "10.0.7.3")
	hand("api-hand", "api", "tf-acc-tests", "10.0.8.1")

	config := func(provider, dataSource string) string {
		return fmt.Sprintf(`
terraform {
  required_providers {
    k8s = { source = "vigie/k8s" }
  }
}
provider "k8s" {
  kubeconfig = %[1]q
  %[2]s
}
data "k8s_ready_endpoints" "web" {
  namespace = %[3]q
  service   = "web"
  %[4]s
}
data "k8s_ready_endpoints" "api" {
  namespace = %[3]q
  service   = "api"
}
data "k8s_services" "all" {
  namespaces = [%[3]q]
}
output "pools" {
  value = {
    web   = data.k8s_ready_endpoints.web.endpoints[*].address
    api   = data.k8s_ready_endpoints.api.endpoints[*].address
    fleet = { for s in data.k8s_services.all.services : s.name => s.endpoints[*].address }
  }
}
`, c.kubeconfig, provider, ns, dataSource)
	}
	for _, tt := range []struct {
		name, provider, dataSource string
		web, fleetWeb              []string
		warned, notWarned          []string
	}{
		{name: "by default", web: []string{"10.0.7.1"}, fleetWeb: []string{"10.0.7.1"},
			warned:    []string{ns + `/web-mesh of Service ` + ns + `/web (managed by "mesh.example.com")`, ns + "/web-bare of Service " + ns + "/web (no managed-by label)"},
			notWarned: []string{"api-hand"}},
		{name: "trusted by the provider", provider: `trusted_slice_managers = ["mesh.example.com"]`,
			web: []string{"10.0.7.1", "10.0.7.2"}, fleetWeb: []string{"10.0.7.1", "10.0.7.2"},
			warned: []string{"web-bare"}, notWarned: []string{"web-mesh"}},
		{name: "trusted by the provider, not by the data source", provider: `trusted_slice_managers = ["mesh.example.com"]`,
			dataSource: `trusted_slice_managers = []`, web: []string{"10.0.7.1"}, fleetWeb: []string{"10.0.7.1", "10.0.7.2"},
			warned: []string{"web-mesh", "web-bare"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			run := terraformWithBuiltProvider(t, t.TempDir(), config(tt.provider, tt.dataSource))
			var out struct {
				Pools struct {
					Value struct {
						Web, API []string
						Fleet    map[string][]string
					} `json:"value"`
				} `json:"pools"`
			}
			if err := json.Unmarshal(run.outputs, &out); err != nil {
				t.Fatalf("terraform output: %v\n%s", err, run.outputs)
			}
			pools := out.Pools.Value
			if !slices.Equal(pools.Web, tt.web) || !slices.Equal(pools.Fleet["web"], tt.fleetWeb) {
				t.Errorf("web: k8s_ready_endpoints %v, k8s_services %v; want %v and %v", pools.Web, pools.Fleet["web"], tt.web, tt.fleetWeb)
			}
			if !slices.Equal(pools.API, []string{"10.0.8.1"}) || !slices.Equal(pools.Fleet["api"], []string{"10.0.8.1"}) {
				t.Errorf("the selectorless api: %v and %v, want its hand-written slice's 10.0.8.1", pools.API, pools.Fleet["api"])
			}
			// The words of the output, without the frame of diagnostics
			// and wherever the CLI wrapped its lines.
			words := slices.DeleteFunc(strings.Fields(string(run.apply)), func(w string) bool { return w == "│" })
			apply := strings.Join(words, " ")
			if !strings.Contains(apply, "EndpointSlices Left Out") {
				t.Fatalf("the apply shows no warning of slices left out:\n%s", run.apply)
			}
			for _, w := range tt.warned {
				if !strings.Contains(apply, w) {
					t.Errorf("the warning lacks %q:\n%s", w, run.apply)
				}
			}
			for _, w := range tt.notWarned {
				if strings.Contains(apply, w) {
					t.Errorf("the warning names %q:\n%s", w, run.apply)
				}
			}
		})
	}
}
