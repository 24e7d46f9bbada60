package imagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// node is the Node the test's pods are bound to.
const node = "image-node"

// The manifest as users apply it, and the configuration's ConfigMap it mounts.
const (
	manifestPath   = "examples/sync/kubernetes/companion.yaml"
	configMapName  = "k8s-sync-configuration"
	workloadNS     = "shop"
	syncContainer  = "sync"
	initContainer  = "init"
	settleForTests = "-settle-quiet=500ms"
)

// TestAccImageRunsAsThePodOfTheManifest is issue 26's item 2: the manifest's
// ServiceAccount, RBAC and Deployment applied to the API server, its pod run
// by podman with what the kubelet would give it; check says 0, then 2 after a
// pod becomes Ready; sync applies that change; every rule of the RBAC is
// needed (without it the companion exits 1 at start, naming it).
func TestAccImageRunsAsThePodOfTheManifest(t *testing.T) {
	needImage(t)
	manifest, err := os.ReadFile(filepath.Join(env.root, manifestPath))
	if err != nil {
		t.Fatal(err)
	}
	s := deploy(t, manifest, "web-manifest")
	s.checkSyncCheck(t)
	t.Run("each rule of the RBAC is needed", func(t *testing.T) { s.eachRuleNeeded(t) })
	t.Run("bad input at start", func(t *testing.T) { s.badInput(t) })
}

// scenario is one deployment of the companion: its objects applied, its
// configuration's state made by a first apply, its pod ready to run.
type scenario struct {
	objects   []*unstructured.Unstructured
	namespace string
	service   string
	pod       *pod
	// ready is the pod that becomes Ready during the test.
	pods []testcluster.Pod
}

// deploy applies rendered (the manifest or the chart's output) with kubectl
// as a user would, writes the configuration's ConfigMap after the first
// apply (init and apply from the image, as admin, as a user does from a
// laptop), and runs the pod's init container.
func deploy(t *testing.T, rendered []byte, service string) *scenario {
	t.Helper()
	ctx := testCtx(t, 5*time.Minute)
	s := &scenario{objects: decode(t, rendered), service: service}
	deployment := s.deployment(t)
	s.namespace = deployment.Namespace
	ensureNamespaces(ctx, t, s.namespace, workloadNS)
	kubectlApply(t, rendered)
	s.pods = []testcluster.Pod{
		{Name: service + "-1", IPs: []string{"10.244.7.1"}, Ready: true},
		{Name: service + "-2", IPs: []string{"10.244.7.2"}, Ready: false},
	}
	if service == "web-chart" {
		s.pods[0].IPs, s.pods[1].IPs = []string{"10.244.8.1"}, []string{"10.244.8.2"}
	}
	s.runService(ctx, t)

	config := t.TempDir()
	writeConfiguration(t, config, s.namespace, service)
	asAdmin(t, config, "init", "-input=false")
	asAdmin(t, config, "apply", "-auto-approve", "-input=false", "-no-color")
	kubectl(t, "-n", s.namespace, "create", "configmap", configMapName,
		"--from-file="+filepath.Join(config, "main.tf"), "--from-file="+filepath.Join(config, ".terraform.lock.hcl"))
	t.Cleanup(func() { kubectl(t, "-n", s.namespace, "delete", "configmap", configMapName) })

	s.pod = env.podman.newPod(ctx, t, s.namespace, deployment.Name+"-0", deployment.Spec.Template.Spec)
	if r := s.pod.exec(ctx, t, initContainer, nil); r.code != 0 {
		t.Fatalf("the init container exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	return s
}

func ensureNamespaces(ctx context.Context, t *testing.T, names ...string) {
	t.Helper()
	for _, ns := range names {
		_, err := env.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

func (s *scenario) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	for _, o := range s.objects {
		if o.GetKind() == "Deployment" {
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatal(err)
			}
			return &d
		}
	}
	t.Fatal("no Deployment in the rendered objects")
	return nil
}

// runService makes the Service and its pods: one Ready, one not yet.
func (s *scenario) runService(ctx context.Context, t *testing.T) {
	t.Helper()
	labels := map[string]string{"app": s.service}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.service, Namespace: workloadNS},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
		}},
	}
	if _, err := env.client.CoreV1().Services(workloadNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range s.pods {
		p.Labels, p.Node, p.Ports = labels, node, map[string]int32{"http": 8080}
		if err := testcluster.RunPod(ctx, env.client, workloadNS, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := testcluster.WaitForSlices(ctx, env.client, workloadNS, s.service, time.Minute, testcluster.EndpointCount("IPv4", 1, 2)); err != nil {
		t.Fatal(err)
	}
}

// checkSyncCheck: check 0; a pod Ready; check 2 naming it; sync applies it
// (its metrics say so) and stops cleanly on SIGTERM; check 0 again.
func (s *scenario) checkSyncCheck(t *testing.T) {
	t.Helper()
	ctx := testCtx(t, 5*time.Minute)
	check := []string{"check", "-chdir=/config", "-log-format=json"}
	if r := s.pod.exec(ctx, t, syncContainer, check); r.code != 0 {
		t.Fatalf("check before any change exited %d, want 0:\n%s%s", r.code, r.stdout, r.stderr)
	}
	s.setReady(ctx, t, s.pods[1].Name)
	added := s.pods[1].IPs[0] + ":8080"
	r := s.pod.exec(ctx, t, syncContainer, check)
	if r.code != 2 || !strings.Contains(r.stdout, "added ["+added+"]") {
		t.Fatalf("check after %s became Ready exited %d, want 2 naming %s:\n%s%s", s.pods[1].Name, r.code, added, r.stdout, r.stderr)
	}
	t.Logf("check exit 2: %s", strings.TrimSpace(r.stdout))

	port := freePort(t)
	args := append(slices.Clone(s.pod.container(t, syncContainer).Args), settleForTests, "-settle-max=2s", "-listen=127.0.0.1:"+strconv.Itoa(port))
	stop, log := s.pod.start(ctx, t, args)
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return metric(port, `k8s_sync_runs_total{result="applied"}`) >= 1, nil
	})
	if err != nil {
		t.Fatalf("sync applied nothing within 2 minutes:\n%s", log.String())
	}
	if failed := metric(port, `k8s_sync_runs_total{result="failed"}`); failed > 0 {
		t.Errorf("sync failed %v runs:\n%s", failed, log.String())
	}
	t.Logf("sync applied the change:\n%s", grepLines(log.String(), `"msg":"run `))
	end := stop()
	if end.code != 0 || !strings.Contains(end.stderr, `"msg":"stopped"`) {
		t.Fatalf("sync on SIGTERM exited %d, want 0 and \"stopped\":\n%s", end.code, end.stderr)
	}
	if r := s.pod.exec(ctx, t, syncContainer, check); r.code != 0 {
		t.Fatalf("check after sync's apply exited %d, want 0:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func (s *scenario) setReady(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	p, err := env.client.CoreV1().Pods(workloadNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].Status = corev1.ConditionTrue
			p.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	if _, err := env.client.CoreV1().Pods(workloadNS).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testcluster.WaitForSlices(ctx, env.client, workloadNS, s.service, time.Minute, testcluster.EndpointCount("IPv4", 2, 2)); err != nil {
		t.Fatal(err)
	}
}

// eachRuleNeeded removes each rule of the Roles and ClusterRoles (and the
// watch verb alone), starts sync as the pod would, and expects exit 1 at
// start with an error that names the rule's resource.
func (s *scenario) eachRuleNeeded(t *testing.T) {
	ctx := testCtx(t, 10*time.Minute)
	type cut struct {
		kind, namespace, name string
		rule                  int
		verb                  string // empty: the whole rule
		want                  string
	}
	var cuts []cut
	for _, o := range s.objects {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
			t.Fatal(err)
		}
		for i, rule := range role.Rules {
			resource := rule.Resources[0]
			cuts = append(cuts, cut{o.GetKind(), o.GetNamespace(), o.GetName(), i, "", resource})
			if slices.Contains(rule.Verbs, "watch") {
				cuts = append(cuts, cut{o.GetKind(), o.GetNamespace(), o.GetName(), i, "watch", "watch " + resource})
			}
		}
	}
	if len(cuts) < 4 {
		t.Fatalf("the RBAC has %d rules to cut, want at least 4 (read Services, EndpointSlices, the Lease, the state Secret)", len(cuts))
	}
	args := append(slices.Clone(s.pod.container(t, syncContainer).Args), "-listen=")
	for _, c := range cuts {
		name := fmt.Sprintf("%s %s rule %d", c.kind, c.name, c.rule)
		if c.verb != "" {
			name += " without " + c.verb
		}
		t.Run(name, func(t *testing.T) {
			restore := cutRule(ctx, t, c.kind, c.namespace, c.name, c.rule, c.verb)
			defer restore()
			start := time.Now()
			stop, log := s.pod.start(ctx, t, args)
			var ended result
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
				return strings.Contains(log.String(), `"msg":"stopped"`) || strings.Contains(log.String(), `"msg":"not started"`), nil
			})
			ended = stop()
			if err != nil {
				t.Fatalf("sync did not stop within 90 s with %s cut:\n%s", name, ended.stderr)
			}
			if ended.code != 1 || !strings.Contains(ended.stderr, c.want) || !strings.Contains(ended.stderr, "forbidden") {
				t.Fatalf("sync with %s cut exited %d after %s, want 1 and an error naming %q:\n%s", name, ended.code, time.Since(start).Round(time.Millisecond), c.want, ended.stderr)
			}
			if !strings.Contains(ended.stderr, "add the RBAC rule") {
				t.Errorf("the error does not say which rule to add:\n%s", ended.stderr)
			}
			t.Logf("exit 1 after %s: %s", time.Since(start).Round(time.Millisecond), lastLine(ended.stderr))
		})
	}
}

// cutRule removes rule i (or its verb alone) of the Role or ClusterRole and
// gives what puts it back.
func cutRule(ctx context.Context, t *testing.T, kind, namespace, name string, i int, verb string) func() {
	t.Helper()
	rbac := env.client.RbacV1()
	if kind == "ClusterRole" {
		role, err := rbac.ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		saved := slices.Clone(role.Rules)
		role.Rules = cut(role.Rules, i, verb)
		if _, err := rbac.ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return func() {
			role, err := rbac.ClusterRoles().Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				role.Rules = saved
				_, err = rbac.ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Fatalf("restore ClusterRole %s: %v", name, err)
			}
		}
	}
	role, err := rbac.Roles(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saved := slices.Clone(role.Rules)
	role.Rules = cut(role.Rules, i, verb)
	if _, err := rbac.Roles(namespace).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return func() {
		role, err := rbac.Roles(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			role.Rules = saved
			_, err = rbac.Roles(namespace).Update(ctx, role, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("restore Role %s/%s: %v", namespace, name, err)
		}
	}
}

func cut(rules []rbacv1.PolicyRule, i int, verb string) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	for j, r := range rules {
		if j != i {
			out = append(out, r)
			continue
		}
		if verb != "" {
			r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == verb })
			out = append(out, r)
		}
	}
	return out
}

// badInput: what the pod gets wrong most often, each an exit 1 at start
// naming the thing.
func (s *scenario) badInput(t *testing.T) {
	ctx := testCtx(t, 5*time.Minute)
	deployment := s.deployment(t)
	spec := deployment.Spec.Template.Spec
	check := []string{"check", "-chdir=/config"}
	args := append(slices.Clone(s.pod.container(t, syncContainer).Args), "-listen=")

	t.Run("no token mounted", func(t *testing.T) {
		p := env.podman.newPod(ctx, t, s.namespace, "no-token", spec)
		if r := p.exec(ctx, t, initContainer, nil); r.code != 0 {
			t.Fatalf("init exited %d:\n%s", r.code, r.stderr)
		}
		if err := os.Remove(filepath.Join(p.secretsDir, "token")); err != nil {
			t.Fatal(err)
		}
		expectExit1(t, p.exec(ctx, t, syncContainer, args), "ServiceAccount token cannot be read")
	})
	t.Run("a token the user cannot read", func(t *testing.T) {
		p := env.podman.newPod(ctx, t, s.namespace, "unreadable-token", spec)
		if r := p.exec(ctx, t, initContainer, nil); r.code != 0 {
			t.Fatalf("init exited %d:\n%s", r.code, r.stderr)
		}
		token := filepath.Join(p.secretsDir, "token")
		if err := os.Chmod(token, 0o600); err != nil {
			t.Fatal(err)
		}
		expectExit1(t, p.exec(ctx, t, syncContainer, args), "permission denied")
	})
	t.Run("the configuration not initialised", func(t *testing.T) {
		p := env.podman.newPod(ctx, t, s.namespace, "no-init", spec)
		r := p.exec(ctx, t, syncContainer, check)
		expectExit1(t, r, "is not initialised: TF_DATA_DIR /data/terraform")
		if strings.Contains(r.stderr, "forbidden") || strings.Contains(r.stderr, "watching") {
			t.Errorf("check asked the cluster before saying the configuration is not initialised:\n%s", r.stderr)
		}
	})
	t.Run("no state", func(t *testing.T) {
		// The same configuration with a state of its own, never applied.
		cm, err := env.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, configMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "no-state", Namespace: s.namespace}, Data: cm.Data}
		cm.Data["main.tf"] = strings.Replace(cm.Data["main.tf"], "secret_suffix = \""+s.service+"\"", "secret_suffix = \"never-applied\"", 1)
		if _, err := env.client.CoreV1().ConfigMaps(s.namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		noState := spec.DeepCopy()
		for i := range noState.Volumes {
			if noState.Volumes[i].ConfigMap != nil {
				noState.Volumes[i].ConfigMap.Name = cm.Name
			}
		}
		p := env.podman.newPod(ctx, t, s.namespace, "no-state", *noState)
		// init would create an empty state, which the Role does not allow:
		// the first apply is the user's.
		r := p.exec(ctx, t, initContainer, nil)
		if said := plain(r.stdout + r.stderr); r.code != 1 || !strings.Contains(said, `cannot create resource "secrets"`) {
			t.Fatalf("init of a configuration without state exited %d, want 1 naming the create of its Secret:\n%s", r.code, said)
		}
		t.Logf("init exit 1: %s", plain(r.stdout+r.stderr))
		r = p.exec(ctx, t, syncContainer, check)
		expectExit1(t, r, "is not initialised")
	})
	t.Run("a read-only temporary directory", func(t *testing.T) {
		noTmp := spec.DeepCopy()
		for i := range noTmp.Containers {
			noTmp.Containers[i].VolumeMounts = slices.DeleteFunc(noTmp.Containers[i].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" })
		}
		p := env.podman.newPod(ctx, t, s.namespace, "no-tmp", *noTmp)
		if r := p.exec(ctx, t, initContainer, nil); r.code != 0 {
			t.Fatalf("init exited %d:\n%s", r.code, r.stderr)
		}
		expectExit1(t, p.exec(ctx, t, syncContainer, args), "the temporary directory /tmp is not writable")
	})
}

func expectExit1(t *testing.T, r result, want string) {
	t.Helper()
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("exited %d, want 1 with %q:\n%s%s", r.code, want, r.stdout, r.stderr)
	}
	t.Logf("exit 1: %s", lastLine(r.stderr))
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// plain is the CLI's output as one line: without its colours and boxes.
func plain(s string) string {
	s = regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(s, "")
	s = strings.NewReplacer("│", " ", "╷", " ", "╵", " ").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// writeConfiguration writes the configuration users keep in git: a pool of
// a Service's ready endpoints, the state in the kubernetes backend of the
// companion's namespace. Nothing in it says how to connect: the provider
// and the backend take the kubeconfig on a laptop, the ServiceAccount in the
// pod (KUBE_IN_CLUSTER_CONFIG, which the chart sets).
func writeConfiguration(t *testing.T, dir, backendNS, service string) {
	t.Helper()
	config := fmt.Sprintf(`terraform {
  required_providers {
    k8s = {
      source  = "vigie/k8s"
      version = "0.1.0"
    }
  }
  backend "kubernetes" {
    secret_suffix = %[3]q
    namespace     = %[1]q
  }
}

provider "k8s" {}

data "k8s_ready_endpoints" "web" {
  namespace = %[2]q
  service   = %[3]q
  port_name = "http"
}

resource "terraform_data" "pool" {
  input = [for e in data.k8s_ready_endpoints.web.endpoints : "${e.address}:${e.port}"]
}
`, backendNS, workloadNS, service)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
}

// asAdmin runs the image's CLI in dir as a user does from a laptop: root,
// the directory writable (init writes .terraform.lock.hcl there), the
// admin kubeconfig for the provider and the backend.
func asAdmin(t *testing.T, dir string, args ...string) {
	t.Helper()
	ctx := testCtx(t, 3*time.Minute)
	run := []string{"run", "--rm", "--network=host", "--pull=never", "--user=0",
		"-v", dir + ":/work", "-w", "/work",
		"-v", env.cluster.Kubeconfig() + ":/kube/config:ro", "-e", "KUBECONFIG=/kube/config", "-e", "KUBE_CONFIG_PATH=/kube/config",
		"--entrypoint", "tofu", env.image}
	if out, err := env.podman.run(ctx, append(run, args...)...); err != nil {
		t.Fatalf("tofu %s as admin: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func decode(t *testing.T, rendered []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	for {
		var o unstructured.Unstructured
		if err := d.Decode(&o.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatal(err)
		}
		if len(o.Object) > 0 {
			objs = append(objs, &o)
		}
	}
}

func kubectl(t *testing.T, args ...string) {
	t.Helper()
	kubectlIn(t, nil, args...)
}

func kubectlApply(t *testing.T, rendered []byte) {
	t.Helper()
	kubectlIn(t, rendered, "apply", "--server-side", "--field-manager=imagetest", "-f", "-")
}

func kubectlIn(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", env.cluster.Kubeconfig()}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("not a TCP address: %v", l.Addr())
	}
	return addr.Port
}

// metric is the value of a sample of the companion's /metrics, or -1.
func metric(port int, sample string) float64 {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return -1
	}
	return v
}
