package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
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

var (
	builtProvider    string
	builtProviderErr error
	buildProvider    sync.Once
)

// providerBinary builds the provider once per test run.
func providerBinary(t *testing.T) string {
	t.Helper()
	buildProvider.Do(func() {
		// Shared by every test of the run, so not t.TempDir; TestMain removes it.
		dir, err := os.MkdirTemp("", "built-provider") //nolint:usetesting // see above
		if err != nil {
			builtProviderErr = err
			return
		}
		builtProvider = filepath.Join(dir, "terraform-provider-k8s")
		if out, err := exec.Command("go", "build", "-o", builtProvider, "../..").CombinedOutput(); err != nil {
			builtProviderErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if builtProviderErr != nil {
		t.Fatal(builtProviderErr)
	}
	return builtProvider
}

// terraformWithBuiltProvider applies config in dir with the provider binary,
// through a CLI configuration that overrides vigie/k8s with it, the apply's
// environment extended by env, and returns what terraform printed.
func terraformWithBuiltProvider(t *testing.T, dir, config string, env ...string) builtProviderRun {
	t.Helper()
	rc := filepath.Join(dir, "dev.tfrc")
	writeText(t, rc, testcluster.DevOverrides(filepath.Dir(providerBinary(t))))
	writeText(t, filepath.Join(dir, "main.tf"), config)
	run := func(env []string, args ...string) []byte {
		cmd := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), args...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1"), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("terraform %v: %v\n%s", args, err, out)
		}
		return out
	}
	apply := run(env, "apply", "-auto-approve", "-input=false", "-no-color")
	// Warnings about the override go to stdout too; keep only the JSON.
	outputs := run(nil, "output", "-json")
	if i := bytes.IndexByte(outputs, '{'); i > 0 {
		outputs = outputs[i:]
	}
	return builtProviderRun{apply: apply, outputs: outputs}
}

func writeText(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
