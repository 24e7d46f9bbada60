package provider

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// selfSignedPEM returns a throwaway CA certificate and its key, in PEM.
func selfSignedPEM(t *testing.T, name string) (certPEM, keyPEM string) {
	t.Helper()
	certPEM, keyPEM, err := testcluster.SelfSigned(name)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

func TestProviderArgumentsAreValidatedBeforeAnyClusterIsContacted(t *testing.T) {
	ca, key := selfSignedPEM(t, "test-ca")
	tests := []refusedConfig{
		{"host and kubeconfig together", `
  host       = "https://203.0.113.10:6443"
  kubeconfig = "~/.kube/config"`, phrase("These attributes cannot be configured together: [host,kubeconfig]")},
		{"host and context together", `
  host    = "https://203.0.113.10:6443"
  context = "prod"`, phrase("These attributes cannot be configured together: [host,context]")},
		{"a token without host", `
  token = "abc"`, phrase(`Attribute "host" must be specified when "token" is specified`)},
		{"a CA without host", fmt.Sprintf(`
  cluster_ca_certificate = %q`, ca), phrase(`Attribute "host" must be specified when "cluster_ca_certificate" is`)},
		{"insecure without host", `
  insecure = true`, phrase(`Attribute "host" must be specified when "insecure" is specified`)},
		{"an exec block without host", `
  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = "get-token"
  }`, phrase(`Attribute "host" must be specified when "exec" is specified`)},
		{"insecure with a CA", fmt.Sprintf(`
  host                   = "https://203.0.113.10:6443"
  insecure               = true
  cluster_ca_certificate = %q`, ca), phrase("These attributes cannot be configured together: [insecure,cluster_ca_certificate]")},
		{"a token and an exec plugin", `
  host  = "https://203.0.113.10:6443"
  token = "abc"
  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = "get-token"
  }`, phrase("These attributes cannot be configured together: [token,exec]")},
		{"a token and a client certificate", fmt.Sprintf(`
  host               = "https://203.0.113.10:6443"
  token              = "abc"
  client_certificate = %q
  client_key         = %q`, ca, key), phrase("These attributes cannot be configured together: [token,client_certificate]")},
		{"a client certificate without its key", fmt.Sprintf(`
  host               = "https://203.0.113.10:6443"
  client_certificate = %q`, ca), phrase("These attributes must be configured together: [client_certificate,client_key]")},
		{"a CA that is not PEM", `
  host                   = "https://203.0.113.10:6443"
  cluster_ca_certificate = "LS0tLS1CRUdJTiBDRVJU"`, phrase("Attribute cluster_ca_certificate must be a PEM certificate", "base64decode()")},
		{"a host that is not a URL", `
  host = "203.0.113.10:6443"`, phrase("Attribute host must be the URL of the API server", `"203.0.113.10:6443"`)},
		{"an exec block without a command", `
  host = "https://203.0.113.10:6443"
  exec {
    api_version = "client.authentication.k8s.io/v1"
  }`, phrase(`Attribute "exec.command" must be specified when "exec" is specified`)},
		{"a request timeout that is not a duration", `
  request_timeout = "fast"`, phrase(`Attribute request_timeout must be a duration such as "15s" between 1s and 10m0s, got: "fast"`)},
		{"a request timeout under a second", `
  request_timeout = "10ms"`, phrase(`Attribute request_timeout must be a duration`, `"10ms"`)},
		{"a qps of 0", `
  qps = 0`, phrase("Attribute qps value must be between 1 and 10000, got: 0")},
		{"an exec API version client-go does not speak", `
  host = "https://203.0.113.10:6443"
  exec {
    api_version = "client.authentication.k8s.io/v1alpha1"
    command     = "get-token"
  }`, phrase("Attribute exec.api_version value must be one of", "client.authentication.k8s.io/v1alpha1")},
	}
	expectRefused(t, tests, func(provider string) string {
		return "provider \"k8s\" {" + provider + "\n}\n" + readWeb
	})
}

func TestInlineHostAndTokenReadWithoutAnyKubeconfig(t *testing.T) {
	isolateFromMachine(t)
	api := standInWithOneEndpoint(t, "10.3.0.1")
	unitSteps(t, resource.TestStep{
		Config: fmt.Sprintf(`
provider "k8s" {
  host  = %q
  token = "stand-in-token"
}`, api.URL) + readWeb,
		ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("data.k8s_ready_endpoints.web",
			tfjsonpath.New("endpoints").AtSliceIndex(0).AtMapKey("address"), knownvalue.StringExact("10.3.0.1"))},
	})
	if got := api.lastAuthorization(); got != "Bearer stand-in-token" {
		t.Errorf("Authorization = %q, want the token of the provider block", got)
	}
}

// hostFromResource is a configuration whose provider host comes from a
// resource, so that it is unknown until that resource is created.
func hostFromResource(server, dataSourceExtra string) string {
	return fmt.Sprintf(`
resource "terraform_data" "cluster" {
  input = %q
}
provider "k8s" {
  host  = terraform_data.cluster.output
  token = "stand-in-token"
}
data "k8s_ready_endpoints" "web" {
  service = "web"
  %s
}
`, server, dataSourceExtra)
}

func TestAProviderConfigurationNotKnownAtPlanContactsNothing(t *testing.T) {
	isolateFromMachine(t)
	api := standInWithOneEndpoint(t, "10.4.0.1")
	unitSteps(t, resource.TestStep{
		// Read while planning, the data source cannot know its cluster.
		Config:      hostFromResource(api.URL, ""),
		ExpectError: phrase("Provider Configuration Not Known", "depends_on", "terraform apply -target="),
	})
	if n := api.requests(); n != 0 {
		t.Errorf("the stand-in API server got %d requests while the host was unknown", n)
	}
}

func TestAProviderConfigurationNotKnownAtPlanIsReadDuringApplyWithDependsOn(t *testing.T) {
	isolateFromMachine(t)
	api := standInWithOneEndpoint(t, "10.4.0.1")
	unitSteps(t, resource.TestStep{
		Config: hostFromResource(api.URL, "depends_on = [terraform_data.cluster]"),
		ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
			plancheck.ExpectUnknownValue("data.k8s_ready_endpoints.web", tfjsonpath.New("endpoints")),
		}},
		ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("data.k8s_ready_endpoints.web",
			tfjsonpath.New("endpoints").AtSliceIndex(0).AtMapKey("address"), knownvalue.StringExact("10.4.0.1"))},
	})
}

func TestInsecureAloneIsAWarning(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the provider binary")
	}
	api := newStandInAPIServer(t)
	api.addService(webService("default", httpPort))
	dir := t.TempDir()
	out := terraformWithBuiltProvider(t, dir, fmt.Sprintf(`
terraform {
  required_providers {
    k8s = { source = "vigie/k8s" }
  }
}
provider "k8s" {
  host     = %q
  token    = "stand-in-token"
  insecure = true
}
data "k8s_ready_endpoints" "web" {
  service = "web"
}
output "pool" {
  value = data.k8s_ready_endpoints.web.endpoints
}
`, api.URL))
	if !strings.Contains(string(out.apply), "API Server Certificate Not Verified") {
		t.Errorf("apply output has no warning about insecure:\n%s", out.apply)
	}
}
