package companion

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The companion finds its cluster as the provider does, the variables of the
// hashicorp/kubernetes provider included (internal/kube's loader, for both).

// deadContextKubeconfig writes the test cluster's kubeconfig with one more
// context, dead, current, whose server nothing listens on: only a context
// asked for reaches the cluster. With only, the file has the dead context
// alone.
func deadContextKubeconfig(t *testing.T, only bool) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(acc.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if only {
		cfg = clientcmdapi.NewConfig()
	}
	cfg.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["nobody"] = &clientcmdapi.AuthInfo{Token: "not-a-token"}
	cfg.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: "nobody"}
	cfg.CurrentContext = "dead"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkWithoutFlags runs `check` with neither -kubeconfig nor -context: the
// environment says where the cluster is.
func checkWithoutFlags(t *testing.T, w *workdir) (int, string) {
	t.Helper()
	out, err := execCommand("check", "-chdir", w.dir, "-terraform", acc.terraform).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func TestAccCheckConnectsWithKubeConfigPathAndKubeCtx(t *testing.T) {
	needCluster(t)
	ns := namespace(t)
	webWithPods(t, ns, 2)
	path := deadContextKubeconfig(t, false)
	// $KUBECONFIG has no context admin: read instead of KUBE_CONFIG_PATH,
	// it would fail.
	t.Setenv("KUBECONFIG", deadContextKubeconfig(t, true))
	t.Setenv("KUBE_CONFIG_PATH", path)
	t.Setenv("KUBE_CTX", "admin")
	// The provider block names no kubeconfig: terraform's provider reads the
	// variables too.
	given := fmt.Sprintf("  kubeconfig = %q\n", acc.kubeconfig)
	config := poolConfig(ns, "")
	if !strings.Contains(config, given) {
		t.Fatalf("the harness's configuration no longer names the kubeconfig as %q:\n%s", given, config)
	}
	w := newWorkdir(t, strings.Replace(config, given, "", 1))
	wantMembers(t, w, members(1, 2))

	code, out := checkWithoutFlags(t, w)
	if code != 0 || !strings.Contains(out, "data.k8s_ready_endpoints.web: matches the cluster") {
		t.Fatalf("check exited %d, want 0 with the pool matching:\n%s", code, out)
	}
	if !strings.Contains(out, "KUBE_CONFIG_PATH "+path+", context admin (KUBE_CTX)") {
		t.Errorf("check does not log the cluster's source as KUBE_CONFIG_PATH and KUBE_CTX:\n%s", out)
	}
	deletePod(t, ns, "web-2")
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	waitForReady(t, ns, "web", 2, 2)
	code, out = checkWithoutFlags(t, w)
	if code != 2 {
		t.Fatalf("check exited %d, want 2:\n%s", code, out)
	}
	for _, want := range []string{"data.k8s_ready_endpoints.web: differs", "added [10.244.0.3:8080]", "removed [10.244.0.2:8080]"} {
		if !strings.Contains(out, want) {
			t.Errorf("check's output lacks %q:\n%s", want, out)
		}
	}

	t.Setenv("KUBE_CTX", "purple")
	code, out = checkWithoutFlags(t, w)
	if code != 1 {
		t.Fatalf("check with a KUBE_CTX missing from the kubeconfig exited %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{`context \"purple\" (KUBE_CTX)`, "KUBE_CONFIG_PATH " + path, "admin, cert-user, dead"} {
		if !strings.Contains(out, want) {
			t.Errorf("check's error lacks %q:\n%s", want, out)
		}
	}
}
