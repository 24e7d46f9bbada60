package provider

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// testProviderFactories serve the provider in the test process, so that the
// real terraform CLI talks to the code under test: both of its paths, each
// call checked against the framework's (providerForTests).
var testProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"k8s": providerForTests,
}

func TestMain(m *testing.M) {
	if err := setUpTerraform(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stopCluster, err := startLocalControlPlane()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if !reportPathDifferences() && code == 0 {
		code = 1
	}
	stopCluster()
	if builtProvider != "" {
		_ = os.RemoveAll(filepath.Dir(builtProvider))
	}
	os.Exit(code)
}

// setUpTerraform gives the CLI a configuration file of the project's own, and
// pins the binary on PATH so that terraform-plugin-testing never downloads one.
func setUpTerraform() error {
	rc, err := filepath.Abs(filepath.Join("testdata", "terraformrc"))
	if err != nil {
		return err
	}
	if err := os.Setenv("TF_CLI_CONFIG_FILE", rc); err != nil {
		return err
	}
	cli := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if cli == "" {
		if cli, err = exec.LookPath("terraform"); err != nil {
			return fmt.Errorf("the provider tests run the terraform CLI: put it on PATH or set TF_ACC_TERRAFORM_PATH (%w)", err)
		}
		if err := os.Setenv("TF_ACC_TERRAFORM_PATH", cli); err != nil {
			return err
		}
	}
	if os.Getenv("TF_ACC_PROVIDER_HOST") != "" {
		return nil
	}
	host, err := defaultProviderHost(cli)
	if err != nil {
		return err
	}
	return os.Setenv("TF_ACC_PROVIDER_HOST", host)
}

// defaultProviderHost asks the CLI which registry host it gives a provider
// named without one. terraform-plugin-testing must serve the provider under
// that address: it differs between Terraform and OpenTofu.
func defaultProviderHost(cli string) (string, error) {
	dir, err := os.MkdirTemp("", "provider-host")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(`provider "k8s" {}`), 0o600); err != nil {
		return "", err
	}
	cmd := exec.Command(cli, "providers")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s providers: %w\n%s", cli, err, out)
	}
	m := regexp.MustCompile(`provider\[([^/\]]+)/hashicorp/k8s\]`).FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s providers did not name hashicorp/k8s:\n%s", cli, out)
	}
	return string(m[1]), nil
}

// phrase matches text as Terraform prints it, where any space may have become
// a line break.
func phrase(parts ...string) *regexp.Regexp {
	quoted := make([]string, len(parts))
	for i, p := range parts {
		quoted[i] = strings.Join(strings.Fields(regexp.QuoteMeta(p)), `\s+`)
	}
	return regexp.MustCompile(strings.Join(quoted, `[\s\S]*`))
}

// isolateFromMachine hides the kubeconfig, the KUBE_* variables and the
// service account of the machine running the tests, returning the home
// directory the provider will see.
func isolateFromMachine(t *testing.T) string {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	for _, name := range kube.EnvVariables {
		t.Setenv(name, "")
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	return home
}

const readWeb = `
data "k8s_ready_endpoints" "web" {
  service = "web"
}
`

func TestProviderConfigureErrors(t *testing.T) {
	tests := []struct {
		name   string
		config func(t *testing.T, home string) string
		want   *regexp.Regexp
	}{
		{
			name: "a kubeconfig path that does not exist is named in the error",
			config: func(t *testing.T, home string) string {
				return `provider "k8s" { kubeconfig = "~/clusters/missing.yaml" }` + readWeb
			},
			want: phrase("Unable to Load Kubeconfig", "clusters/missing.yaml: no such file or directory"),
		},
		{
			name: "a context the kubeconfig does not define is named with the ones it does",
			config: func(t *testing.T, home string) string {
				path := writeKubeconfig(t, home, "config.yaml", map[string]string{"blue": "https://127.0.0.1:1"})
				return fmt.Sprintf(`provider "k8s" {
  kubeconfig = %q
  context    = "purple"
}`, path) + readWeb
			},
			want: phrase("Unable to Load Kubeconfig", `context "purple" not found`, "contexts in the kubeconfig: blue"),
		},
		{
			name: "no kubeconfig anywhere and no service account names every place looked at",
			config: func(t *testing.T, home string) string {
				return readWeb
			},
			want: phrase("Unable to Load Kubeconfig", ".kube/config: no such file or directory", "in-cluster service account: unable to load", "never falls back to localhost", "not running in a pod"),
		},
		{
			name: "$KUBECONFIG naming a missing file is an error even when ~/.kube/config exists",
			config: func(t *testing.T, home string) string {
				writeKubeconfig(t, home, ".kube/config", map[string]string{"home": "https://127.0.0.1:1"})
				t.Setenv("KUBECONFIG", filepath.Join(home, "gone.yaml"))
				return readWeb
			},
			want: phrase("Unable to Load Kubeconfig", "$KUBECONFIG", "gone.yaml"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := isolateFromMachine(t)
			resource.UnitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: testProviderFactories,
				Steps:                    []resource.TestStep{{Config: tt.config(t, home), ExpectError: tt.want}},
			})
		})
	}
}

// writeKubeconfig writes a kubeconfig with one context per cluster, each
// named as its cluster, the first (by name) current.
func writeKubeconfig(t testing.TB, dir, name string, servers map[string]string) string {
	t.Helper()
	var clusters, contexts strings.Builder
	current := ""
	for cluster, server := range servers {
		if current == "" || cluster < current {
			current = cluster
		}
		fmt.Fprintf(&clusters, "- name: %s\n  cluster:\n    server: %s\n", cluster, server)
		fmt.Fprintf(&contexts, "- name: %s\n  context:\n    cluster: %s\n    user: tester\n", cluster, cluster)
	}
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: %s
clusters:
%susers:
- name: tester
  user:
    token: not-a-real-token
contexts:
%s`, current, clusters.String(), contexts.String())
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestClientOptionsRateLimit(t *testing.T) {
	tests := []struct {
		name       string
		qps, burst types.Int64
		wantQPS    float32
		wantBurst  int
	}{
		{"defaults", types.Int64Null(), types.Int64Null(), 500, 1000},
		{"a lower qps keeps the default burst", types.Int64Value(5), types.Int64Null(), 5, 1000},
		{"both set", types.Int64Value(20), types.Int64Value(40), 20, 40},
		{"a burst below qps is raised to qps", types.Int64Value(800), types.Int64Value(10), 800, 800},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := providerModel{QPS: tt.qps, Burst: tt.burst, RequestTimeout: types.StringNull()}.clientOptions("test")
			if got.QPS != tt.wantQPS || got.Burst != tt.wantBurst {
				t.Errorf("qps, burst = %v, %d; want %v, %d", got.QPS, got.Burst, tt.wantQPS, tt.wantBurst)
			}
			if got.UserAgent != "terraform-provider-k8s/test" {
				t.Errorf("user agent = %q", got.UserAgent)
			}
		})
	}
}

func TestClientOptionsRequestTimeout(t *testing.T) {
	if got := (providerModel{RequestTimeout: types.StringNull()}).clientOptions("test").RequestTimeout; got != 15*time.Second {
		t.Errorf("default request timeout = %s, want 15s", got)
	}
	if got := (providerModel{RequestTimeout: types.StringValue("2s")}).clientOptions("test").RequestTimeout; got != 2*time.Second {
		t.Errorf("request timeout = %s, want 2s", got)
	}
}
