package provider

import (
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// The connection variables of the hashicorp/kubernetes provider, through the
// real CLI; the rule itself is internal/kube's (env_test.go), and each
// variable is tested against the real API server in
// provider_env_acc_test.go.

func TestABadConnectionVariableFailsAtConfigureNamingIt(t *testing.T) {
	tests := []struct {
		name   string
		env    func(t *testing.T, home string) map[string]string
		config string
		want   *regexp.Regexp
	}{
		{
			name: "a KUBE_HOST that is not a URL",
			env: func(*testing.T, string) map[string]string {
				return map[string]string{"KUBE_HOST": "203.0.113.10:6443"}
			},
			want: phrase("Invalid Environment Variable", "KUBE_HOST cannot be used", "Fix or unset KUBE_HOST",
				`KUBE_HOST: host "203.0.113.10:6443" is not a URL`),
		},
		{
			name: "a KUBE_CLUSTER_CA_CERT_DATA that is not PEM",
			env: func(*testing.T, string) map[string]string {
				return map[string]string{"KUBE_HOST": "https://203.0.113.10:6443", "KUBE_CLUSTER_CA_CERT_DATA": "LS0tLS1CRUdJTiBDRVJU"}
			},
			want: phrase("Invalid Environment Variable", "KUBE_CLUSTER_CA_CERT_DATA: not PEM"),
		},
		{
			name: "a KUBE_CLUSTER_CA_CERT_DATA that is not PEM beside a host given",
			env: func(*testing.T, string) map[string]string {
				return map[string]string{"KUBE_CLUSTER_CA_CERT_DATA": "not PEM"}
			},
			config: `provider "k8s" {
  host  = "https://203.0.113.10:6443"
  token = "abc"
}`,
			want: phrase("Invalid Environment Variable", "KUBE_CLUSTER_CA_CERT_DATA: not PEM"),
		},
		{
			name: "a KUBE_INSECURE that is not a boolean",
			env: func(*testing.T, string) map[string]string {
				return map[string]string{"KUBE_HOST": "https://203.0.113.10:6443", "KUBE_INSECURE": "yes"}
			},
			want: phrase("Invalid Environment Variable", `KUBE_INSECURE: "yes" is not a boolean`),
		},
		{
			name: "a KUBE_CTX missing from the kubeconfig of KUBE_CONFIG_PATH",
			env: func(t *testing.T, home string) map[string]string {
				path := writeKubeconfig(t, home, "clusters.yaml", map[string]string{"blue": "https://127.0.0.1:1", "green": "https://127.0.0.1:2"})
				return map[string]string{"KUBE_CONFIG_PATH": path, "KUBE_CTX": "purple"}
			},
			want: phrase("Unable to Load Kubeconfig", "KUBE_CONFIG_PATH", "clusters.yaml", `for context "purple" (from KUBE_CTX)`,
				`context "purple" not found (contexts in the kubeconfig: blue, green)`),
		},
		{
			name: "a KUBE_CONFIG_PATH that does not exist, even with ~/.kube/config",
			env: func(t *testing.T, home string) map[string]string {
				writeKubeconfig(t, home, ".kube/config", map[string]string{"home": "https://127.0.0.1:1"})
				return map[string]string{"KUBE_CONFIG_PATH": filepath.Join(home, "gone.yaml")}
			},
			want: phrase("Unable to Load Kubeconfig", "KUBE_CONFIG_PATH", "gone.yaml: no such file or directory"),
		},
		{
			name: "a KUBE_TOKEN with nothing to send it to is no reason to fall back to localhost",
			env: func(*testing.T, string) map[string]string {
				return map[string]string{"KUBE_TOKEN": "abc"}
			},
			want: phrase("Unable to Load Kubeconfig", "set but were not read", "KUBE_TOKEN.", "never falls back to localhost", "not running in a pod"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := isolateFromMachine(t)
			for k, v := range tt.env(t, home) {
				t.Setenv(k, v)
			}
			config := tt.config
			if config == "" {
				config = `provider "k8s" {}`
			}
			resource.UnitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: testProviderFactories,
				Steps:                    []resource.TestStep{{Config: config + readWeb, ExpectError: tt.want}},
			})
		})
	}
}

func TestKubeHostAndKubeTokenReadWithoutAnyKubeconfig(t *testing.T) {
	home := isolateFromMachine(t)
	api := standInWithOneEndpoint(t, "10.5.0.1")
	writeKubeconfig(t, home, ".kube/config", map[string]string{"home": "https://127.0.0.1:1"})
	t.Setenv("KUBE_HOST", api.URL)
	t.Setenv("KUBE_TOKEN", "variable-token")
	unitSteps(t, resource.TestStep{
		Config: `provider "k8s" {}` + readWeb,
		ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("data.k8s_ready_endpoints.web",
			tfjsonpath.New("endpoints").AtSliceIndex(0).AtMapKey("address"), knownvalue.StringExact("10.5.0.1"))},
	})
	if got := api.lastAuthorization(); got != "Bearer variable-token" {
		t.Errorf("Authorization = %q, want KUBE_TOKEN's", got)
	}
}

func TestAnUnknownProviderConfigurationContactsNothingWhateverTheVariables(t *testing.T) {
	home := isolateFromMachine(t)
	api := standInWithOneEndpoint(t, "10.6.0.1")
	t.Setenv("KUBE_HOST", api.URL)
	t.Setenv("KUBE_TOKEN", "variable-token")
	t.Setenv("KUBE_CONFIG_PATH", writeKubeconfig(t, home, "config.yaml", map[string]string{"blue": api.URL}))
	unitSteps(t, resource.TestStep{
		Config: fmt.Sprintf(`
resource "terraform_data" "cluster" {
  input = "blue"
}
provider "k8s" {
  context = terraform_data.cluster.output
}
%s`, readWeb),
		ExpectError: phrase("Provider Configuration Not Known"),
	})
	if n := api.requests(); n != 0 {
		t.Errorf("the stand-in API server got %d requests while the provider configuration was unknown", n)
	}
}
