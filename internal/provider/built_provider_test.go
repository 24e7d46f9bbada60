package provider

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestBuiltProviderReadsTwoClustersThroughAliases runs the provider binary as
// users do, one process per provider configuration: the in-process test server
// of terraform-plugin-testing serves every alias from one instance, so it
// cannot show that two aliases read two clusters.
func TestBuiltProviderReadsTwoClustersThroughAliases(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the provider binary")
	}
	blue, green := newStandInAPIServer(t), newStandInAPIServer(t)
	for api, addr := range map[*standInAPIServer]string{blue: "10.1.0.1", green: "10.2.0.1"} {
		api.addService(webService("default", httpPort))
		api.addSlices(webSlice("web-a", discoveryv1.Endpoint{Addresses: []string{addr}}))
	}
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, dir, "kubeconfig", map[string]string{"blue": blue.URL, "green": green.URL})

	run := terraformWithBuiltProvider(t, dir, fmt.Sprintf(`
terraform {
  required_providers {
    k8s = { source = "vigie/k8s" }
  }
}
provider "k8s" {
  alias      = "blue"
  kubeconfig = %[1]q
  context    = "blue"
}
provider "k8s" {
  alias      = "green"
  kubeconfig = %[1]q
  context    = "green"
}
data "k8s_ready_endpoints" "blue" {
  provider = k8s.blue
  service  = "web"
}
data "k8s_ready_endpoints" "green" {
  provider = k8s.green
  service  = "web"
}
output "pools" {
  value = {
    blue  = data.k8s_ready_endpoints.blue.endpoints[*].address
    green = data.k8s_ready_endpoints.green.endpoints[*].address
  }
}
`, kubeconfig))
	var outputs struct {
		Pools struct {
			Value map[string][]string `json:"value"`
		} `json:"pools"`
	}
	if err := json.Unmarshal(run.outputs, &outputs); err != nil {
		t.Fatalf("terraform output: %v\n%s", err, run.outputs)
	}
	got := outputs.Pools.Value
	if len(got["blue"]) != 1 || got["blue"][0] != "10.1.0.1" || len(got["green"]) != 1 || got["green"][0] != "10.2.0.1" {
		t.Errorf("pools = %v, want blue [10.1.0.1] and green [10.2.0.1]", got)
	}
}

// builtProviderRun is what terraform printed: the apply, and `output -json`.
type builtProviderRun struct {
	apply, outputs []byte
}

// terraformWithBuiltProvider builds the provider, applies config in dir with a
// CLI configuration that overrides vigie/k8s with that build, and returns
// what terraform printed.
func terraformWithBuiltProvider(t *testing.T, dir, config string) builtProviderRun {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "terraform-provider-k8s")
	build := exec.Command("go", "build", "-o", bin, "../..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rc := filepath.Join(dir, "dev.tfrc")
	writeText(t, rc, fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"vigie/k8s\" = %q\n  }\n  direct {}\n}\n", filepath.Dir(bin)))
	writeText(t, filepath.Join(dir, "main.tf"), config)
	run := func(args ...string) []byte {
		cmd := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("terraform %v: %v\n%s", args, err, out)
		}
		return out
	}
	apply := run("apply", "-auto-approve", "-input=false", "-no-color")
	cmdOut := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), "output", "-json")
	cmdOut.Dir = dir
	cmdOut.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1")
	outputs, err := cmdOut.Output()
	if err != nil {
		t.Fatalf("terraform output: %v", err)
	}
	return builtProviderRun{apply: apply, outputs: outputs}
}

func writeText(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
