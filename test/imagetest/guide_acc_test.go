package imagetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/test/toolbuild"
)

const guidePath = "templates/guides/companion-in-cluster.md.tmpl"

// notRun marks a block of the guide that the test cannot run here, with
// why: <!-- not run: needs a registry -->.
const notRun = "<!-- not run: "

// shellBlock is a ```sh block of the guide.
type shellBlock struct {
	line   int
	code   string
	reason string // why it is not run; empty for a block that is
}

// shellBlocks are the guide's ```sh blocks, in order.
func shellBlocks(markdown string) []shellBlock {
	var (
		blocks  []shellBlock
		current *shellBlock
		reason  string
	)
	for i, line := range strings.Split(markdown, "\n") {
		switch {
		case current != nil && line == "```":
			blocks = append(blocks, *current)
			current = nil
		case current != nil:
			current.code += line + "\n"
		case line == "```sh":
			current = &shellBlock{line: i + 1, reason: reason}
		case strings.HasPrefix(line, notRun):
			reason = strings.TrimSuffix(strings.TrimPrefix(line, notRun), " -->")
			continue
		}
		if strings.TrimSpace(line) != "" {
			reason = ""
		}
	}
	return blocks
}

func TestShellBlocks(t *testing.T) {
	got := shellBlocks("# T\n\n```sh\na\nb\n```\n\n<!-- not run: needs a node -->\n```sh\nc\n```\n\n<!-- not run: x -->\n\ntext\n```sh\nd\n```\n```hcl\ne\n```\n")
	want := []shellBlock{{3, "a\nb\n", ""}, {9, "c\n", "needs a node"}, {16, "d\n", ""}}
	if !slices.Equal(got, want) {
		t.Fatalf("shellBlocks = %+v, want %+v", got, want)
	}
}

// guideNamespace is the companion's namespace in the guide, the plain
// manifest's too. The guide creates it: the tests that deploy the manifest
// there run after this one (their files sort after this one's), and this
// one removes what would be in their way (its ConfigMap, its release).
const guideNamespace = "lb-sync"

// TestAccGuide: the commands of the guide, in order, in one shell, from the
// repository's root (a clone) with a HOME of its own, the local control
// plane's kubeconfig, the test's podman and helm; then the companion the
// guide installed, run as its pod would be: it watches.
func TestAccGuide(t *testing.T) {
	needImage(t)
	ctx := testCtx(t, 15*time.Minute)
	markdown, err := os.ReadFile(filepath.Join(env.root, guidePath))
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	ran := 0
	for _, b := range shellBlocks(string(markdown)) {
		if b.reason != "" {
			t.Logf("%s:%d not run here (%s):\n%s", guidePath, b.line, b.reason, b.code)
			continue
		}
		ran++
		script.WriteString("echo '== " + guidePath + ":" + strconv.Itoa(b.line) + "'\n" + b.code)
	}
	if ran < 7 {
		t.Fatalf("the guide has %d blocks to run, want its every step (at least 7)", ran)
	}

	// What the guide assumes: the Service its pool reads.
	ensureNamespaces(ctx, t, workloadNS)
	s := &scenario{service: "web", pods: []testcluster.Pod{{Name: "web-1", IPs: []string{"10.244.9.1"}, Ready: true}, {Name: "web-2", IPs: []string{"10.244.9.2"}, Ready: false}}}
	s.runService(ctx, t)

	vars := append(guideEnv(t), "KUBECONFIG="+env.cluster.Kubeconfig())
	t.Cleanup(func() {
		cleanup := exec.Command("bash", "-c", "helm uninstall lb-sync --namespace "+guideNamespace+"; kubectl -n "+guideNamespace+" delete configmap k8s-sync-configuration")
		cleanup.Env = vars
		if out, err := cleanup.CombinedOutput(); err != nil {
			t.Logf("removing the guide's release and ConfigMap: %v\n%s", err, out)
		}
	})
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = env.root
	cmd.Env = vars
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the guide's commands failed: %v\n%s", err, out)
	}
	t.Logf("the guide's %d blocks ran in %s:\n%s", ran, time.Since(start).Round(time.Second), out)

	// The Deployment the guide installed, its pod run here as the kubelet would.
	deployment, err := env.client.AppsV1().Deployments(guideNamespace).Get(ctx, "lb-sync", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the guide's helm install made no Deployment %s/lb-sync: %v", guideNamespace, err)
	}
	if *deployment.Spec.Replicas != 2 {
		t.Errorf("the guide's Deployment has %d replicas, want the chart's 2", *deployment.Spec.Replicas)
	}
	p := env.podman.newPod(ctx, t, guideNamespace, "lb-sync-0", deployment.Spec.Template.Spec)
	if r := p.exec(ctx, t, initContainer, nil); r.code != 0 {
		t.Fatalf("the init container exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	port := freePort(t)
	args := append(slices.Clone(p.container(t, syncContainer).Args), "-listen=127.0.0.1:"+strconv.Itoa(port))
	stop, log := p.start(ctx, t, args)
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return metric(port, "k8s_sync_pools_watched") == 1 && strings.Contains(log.String(), `"msg":"watching"`), nil
	})
	if err != nil {
		t.Fatalf("the guide's companion does not watch its pool:\n%s", log.String())
	}
	if end := stop(); end.code != 0 {
		t.Fatalf("the guide's companion exited %d on SIGTERM:\n%s", end.code, end.stderr)
	}
}

// guideEnv is the environment of the guide's shell: a HOME of its own (the
// guide writes ~/lb), the caches of the real one (Go's, the built tools'),
// the test's podman, helm on PATH.
func guideEnv(t *testing.T) []string {
	t.Helper()
	cacheRoot, err := toolbuild.CacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	goEnv := map[string]string{}
	for _, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		v, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatal(err)
		}
		goEnv[name] = strings.TrimSpace(string(v))
	}
	home := t.TempDir()
	vars := append(os.Environ(),
		"HOME="+home, "K8S_TF_CACHE="+cacheRoot,
		"PATH="+filepath.Dir(env.helm)+string(os.PathListSeparator)+os.Getenv("PATH"))
	vars = append(vars, env.podman.env...)
	for k, v := range goEnv {
		vars = append(vars, k+"="+v)
	}
	return vars
}

// The guide, its backend and the plain manifest name one namespace.
func TestGuideAndManifestShareTheNamespace(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile(filepath.Join(root, guidePath))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(root, manifestPath))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range decode(t, manifest) {
		if ns := o.GetNamespace(); ns != "" && ns != guideNamespace {
			t.Errorf("%s %s of the manifest is in namespace %s, the guide's is %s", o.GetKind(), o.GetName(), ns, guideNamespace)
		}
	}
	for _, want := range []string{`namespace     = "` + guideNamespace + `"`, "kubectl create namespace " + guideNamespace, "--namespace " + guideNamespace} {
		if !strings.Contains(string(guide), want) {
			t.Errorf("the guide lacks %q", want)
		}
	}
	if n := strings.Count(string(guide), "-n "+guideNamespace+" ") + strings.Count(string(guide), "--namespace "+guideNamespace); n != strings.Count(string(guide), "-n ")+strings.Count(string(guide), "--namespace ") {
		t.Errorf("the guide's kubectl -n and --namespace name another namespace than %s", guideNamespace)
	}
}
