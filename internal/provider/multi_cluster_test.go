package provider

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	goversion "github.com/hashicorp/go-version"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// examples/pools/multi-cluster: one pool over two clusters, blue and green
// (each a stand-in API server, a context of one kubeconfig), read through
// provider aliases (every CLI) or OpenTofu's provider for_each (1.9+).

// twoClusters serves shop/web in blue and green, with the ready pods given
// by address (none: an empty cluster), and returns a kubeconfig whose
// contexts are blue and green.
func twoClusters(t *testing.T, blue, green []string) string {
	t.Helper()
	servers := map[string]string{}
	for name, addrs := range map[string][]string{"blue": blue, "green": green} {
		api := newStandInAPIServer(t)
		api.addService(webService("shop", httpPort))
		var eps []discoveryv1.Endpoint
		for i, a := range addrs {
			eps = append(eps, readyPod(a, fmt.Sprintf("web-%d", i+1), "node-a", "zone-a"))
		}
		slice := webSlice("web-a", eps...)
		slice.Namespace = "shop"
		api.addSlices(slice)
		servers[name] = api.URL
	}
	return writeKubeconfig(t, t.TempDir(), "kubeconfig", servers)
}

// multiClusterCases are the pools of the two clusters and what the backend
// must hold.
var multiClusterCases = []struct {
	name        string
	blue, green []string
	servers     []string
	refused     bool
}{
	{name: "both serve", blue: []string{"10.1.0.1", "10.1.0.2"}, green: []string{"10.2.0.1"},
		servers: []string{"10.1.0.1:8080", "10.1.0.2:8080", "10.2.0.1:8080"}},
	{name: "one cluster empty", green: []string{"10.2.0.1"}, servers: []string{"10.2.0.1:8080"}},
	{name: "no cluster serves", refused: true},
}

func testMultiCluster(t *testing.T, ex func(kubeconfig string) lbExample) {
	haproxy := lbProgram(t, "haproxy")
	for _, tc := range multiClusterCases {
		t.Run(tc.name, func(t *testing.T) {
			kubeconfig := twoClusters(t, tc.blue, tc.green)
			e := ex(kubeconfig)
			outputs, applied, err := applyExample(t, e, kubeconfig)
			if tc.refused {
				if err == nil || !strings.Contains(strings.Join(strings.Fields(applied), " "), "No cluster has a ready pod of shop/web") {
					t.Fatalf("want the precondition's error, got %v:\n%s", err, applied)
				}
				return
			}
			if err != nil {
				t.Fatalf("apply: %v\n%s", err, applied)
			}
			rendered := outputs["haproxy_backend"]
			checkServers(t, "haproxy", rendered, tc.servers)
			if out, err := loadIn(t, "haproxy", haproxy, rendered); err != nil {
				t.Fatalf("haproxy refuses the backend: %v\n%s\n%s", err, out, rendered)
			}
		})
	}
}

func TestMultiClusterExampleWithProviderAliases(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the provider binary")
	}
	testMultiCluster(t, func(kubeconfig string) lbExample {
		return lbExample{dir: "pools/multi-cluster", vars: []string{"-var", "kubeconfig=" + kubeconfig}}
	})
}

// Run by make testacc on each CLI; only OpenTofu 1.9 and later have
// for_each on provider blocks.
func TestAccMultiClusterExampleWithProviderForEach(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: make testacc runs it on each CLI, and it runs on OpenTofu 1.9+")
	}
	if reason := withoutProviderForEach(t); reason != "" {
		t.Skip(reason)
	}
	testMultiCluster(t, func(kubeconfig string) lbExample {
		clusters := fmt.Sprintf(`clusters={ blue = { kubeconfig = %q, context = "blue" }, green = { kubeconfig = %[1]q, context = "green" } }`, kubeconfig)
		return lbExample{dir: "pools/multi-cluster", tree: true, run: "opentofu-for-each", vars: []string{"-var", clusters}}
	})
}

// withoutProviderForEach says why the CLI of the tests cannot run provider
// for_each, or "" when it can.
func withoutProviderForEach(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), "version", "-json").Output()
	if err != nil {
		t.Fatalf("%s version -json: %v", os.Getenv("TF_ACC_TERRAFORM_PATH"), err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("version -json: %v\n%s", err, out)
	}
	tofu, err := cliIsOpenTofu()
	if err != nil {
		t.Fatal(err)
	}
	version, err := goversion.NewVersion(v.Version)
	if err != nil {
		t.Fatal(err)
	}
	if !tofu || version.LessThan(goversion.Must(goversion.NewVersion("1.9.0"))) {
		return fmt.Sprintf("provider for_each needs OpenTofu 1.9 or later; the CLI is %s %s", map[bool]string{true: "OpenTofu", false: "Terraform"}[tofu], v.Version)
	}
	return ""
}
