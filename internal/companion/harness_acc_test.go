package companion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vigie/terraform-provider-k8s/test/syncproc"
	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// The companion's acceptance tests run the provider binary twice over, as
// users do: as the plugin the real terraform (or tofu) CLI starts, through
// a dev_overrides CLI configuration, and as `sync` / `check`, against the
// local control plane of test/testcluster. The pools are kept by
// terraform_data resources (built into the CLI), so nothing is downloaded.

var acc struct {
	cluster    *testcluster.Cluster
	client     kubernetes.Interface
	binary     string // the provider binary
	terraform  string // the CLI
	cliConfig  string // its CLI configuration, with dev_overrides
	kubeconfig string
}

const (
	accNode = "sync-acc-node"
	accZone = "sync-acc-zone"
)

func TestMain(m *testing.M) {
	code, err := accMain(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func accMain(m *testing.M) (int, error) {
	if os.Getenv("TF_ACC") == "" {
		return m.Run(), nil
	}
	dir, err := os.MkdirTemp("", "k8s-sync-acc-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	acc.binary = filepath.Join(dir, "terraform-provider-k8s")
	args := []string{"build", "-o", acc.binary}
	if os.Getenv("K8S_TF_ACC_RACE") != "" {
		// The companion built with the race detector: a race it meets is
		// a failure of the test that ran it (startSync).
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/vigie/terraform-provider-k8s")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("build the provider: %w", err)
	}
	acc.terraform = os.Getenv("TF_ACC_TERRAFORM_PATH")
	if acc.terraform == "" {
		if acc.terraform, err = exec.LookPath("terraform"); err != nil {
			return 0, fmt.Errorf("the companion tests run terraform: put it on PATH or set TF_ACC_TERRAFORM_PATH: %w", err)
		}
	}
	acc.cliConfig = filepath.Join(dir, "terraformrc")
	if err := os.WriteFile(acc.cliConfig, []byte(testcluster.DevOverrides(dir)), 0o644); err != nil {
		return 0, err
	}
	// Every terraform these tests start, and the companion's, read it.
	for k, v := range map[string]string{"TF_CLI_CONFIG_FILE": acc.cliConfig, "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1"} {
		if err := os.Setenv(k, v); err != nil {
			return 0, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	acc.cluster, err = testcluster.Start(ctx, testcluster.Options{Version: os.Getenv("K8S_TF_K8S_VERSION"), Log: os.Stderr})
	if err != nil {
		return 0, err
	}
	defer acc.cluster.Stop()
	defer stopGreen()
	acc.kubeconfig = acc.cluster.Kubeconfig()
	cfg, err := acc.cluster.RESTConfig()
	if err != nil {
		return 0, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	if acc.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return 0, err
	}
	if err := testcluster.EnsureNode(ctx, acc.client, accNode, accZone); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

func needCluster(t *testing.T) {
	t.Helper()
	if acc.cluster == nil {
		t.Skip("acceptance test: set TF_ACC=1 (make testacc does)")
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// namespace is a namespace of the test's own, deleted afterwards.
func namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("sync-%06x", rand.IntN(1<<24))
	ctx := testCtx(t)
	if _, err := acc.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testcluster.WaitForServiceAccount(ctx, acc.client, name, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = testcluster.DeleteNamespace(ctx, acc.client, name)
	})
	return name
}

func createService(t *testing.T, ns, name string, typ corev1.ServiceType) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
		}},
	}
	if _, err := acc.client.CoreV1().Services(ns).Create(testCtx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func runPod(t *testing.T, ns, service, name, ip string, ready bool) {
	t.Helper()
	p := testcluster.Pod{Name: name, Labels: map[string]string{"app": service}, IPs: []string{ip}, Ready: ready, Node: accNode}
	if err := testcluster.RunPod(testCtx(t), acc.client, ns, p); err != nil {
		t.Fatal(err)
	}
}

// setReady writes the pod's Ready condition, as a kubelet would.
func setReady(t *testing.T, ns, name string, ready bool) {
	t.Helper()
	ctx := testCtx(t)
	pod, err := acc.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if _, err := acc.client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deletePod(t *testing.T, ns, name string) {
	t.Helper()
	zero := int64(0)
	if err := acc.client.CoreV1().Pods(ns).Delete(testCtx(t), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
}

// waitForReady waits until the slices of service have n ready IPv4 endpoints of all.
func waitForReady(t *testing.T, ns, service string, ready, all int) {
	t.Helper()
	if err := testcluster.WaitForSlices(testCtx(t), acc.client, ns, service, 90*time.Second, testcluster.EndpointCount("IPv4", ready, all)); err != nil {
		t.Fatal(err)
	}
}

// workdir is a configuration of the test's own, applied once.
type workdir struct {
	dir string
}

// poolConfig is a configuration with one pool of Service web in ns, kept by
// terraform_data.pool; extra is added to it.
func poolConfig(ns, extra string) string {
	return providerHeader() + fmt.Sprintf(`
data "k8s_ready_endpoints" "web" {
  namespace = %q
  service   = "web"
  port_name = "http"
}
locals {
  members = [for e in data.k8s_ready_endpoints.web.endpoints : "${e.address}:${e.port}"]
}
resource "terraform_data" "pool" {
  input = local.members
}
output "members" {
  value = terraform_data.pool.output
}
%s`, ns, extra)
}

// providerHeader requires the provider and points it at the test cluster.
func providerHeader() string {
	return fmt.Sprintf(`
terraform {
  required_providers {
    k8s = { source = "vigie/k8s" }
  }
}
provider "k8s" {
  kubeconfig = %q
}
`, acc.kubeconfig)
}

func newWorkdir(t *testing.T, config string) *workdir {
	t.Helper()
	w := &workdir{dir: t.TempDir()}
	w.write(t, config)
	w.terraform(t, "apply", "-auto-approve", "-input=false", "-no-color")
	return w
}

func (w *workdir) write(t *testing.T, config string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (w *workdir) terraform(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(acc.terraform, args...)
	cmd.Dir = w.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// members is the pool that state holds: terraform_data.pool's output.
func (w *workdir) members(t *testing.T) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(w.terraform(t, "output", "-json", "members")), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// startCompanion starts `sync` with the tests' settings and args, stopped
// when the test ends (its log shown when the test failed).
func startCompanion(t *testing.T, args []string) *companion {
	t.Helper()
	base := []string{"sync", "-terraform", acc.terraform, "-kubeconfig", acc.kubeconfig,
		"-listen", "", "-settle-quiet", "500ms", "-settle-max", "3s", "-retry-initial", "500ms", "-retry-max", "4s", "-stop-timeout", "30s"}
	p, err := syncproc.Start(acc.binary, append(base, args...), syncproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &companion{p}
	t.Cleanup(func() {
		c.Stop(45 * time.Second)
		if strings.Contains(c.log(), "WARNING: DATA RACE") {
			t.Error("the companion has a data race")
		}
	})
	return c
}

// companion is a running `sync`, followed by its JSON log (syncproc).
type companion struct {
	*syncproc.Process
}

func startSync(t *testing.T, w *workdir, args ...string) *companion {
	t.Helper()
	c := startCompanion(t, append([]string{"-chdir", w.dir}, args...))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("companion log:\n%s", c.log())
		}
	})
	if slices.Contains(args, "-leader-elect") {
		c.waitFor(t, 60*time.Second, "waiting for the Lease")
	} else {
		c.waitFor(t, 60*time.Second, "watching")
	}
	return c
}

func (c *companion) log() string { return c.Log() }

// count is how many lines have message msg and, for each key of fields, that value.
func (c *companion) count(msg string, fields map[string]string) int { return c.Count(msg, fields) }

// waitFor waits for a line of message msg (with fields, as count).
func (c *companion) waitFor(t *testing.T, timeout time.Duration, msg string, fields ...map[string]string) {
	t.Helper()
	c.waitForCount(t, timeout, msg, 1, fields...)
}

func (c *companion) waitForCount(t *testing.T, timeout time.Duration, msg string, n int, fields ...map[string]string) {
	t.Helper()
	var f map[string]string
	if len(fields) > 0 {
		f = fields[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := c.Wait(ctx, msg, n, f); err != nil {
		t.Fatalf("%v:\n%s", err, c.log())
	}
}

// runs is how many runs started.
func (c *companion) runs() int { return c.count("run started", nil) }

// quiet checks that no run starts during d.
func (c *companion) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	before := c.runs()
	// That nothing starts during d is the scenario: there is no condition
	// to poll for.
	time.Sleep(d)
	if after := c.runs(); after != before {
		t.Fatalf("%d run(s) started, want none:\n%s", after-before, c.log())
	}
}

// check runs `check` and gives its exit code and output.
func check(t *testing.T, w *workdir) (int, string) {
	t.Helper()
	cmd := exec.Command(acc.binary, "check", "-chdir", w.dir, "-terraform", acc.terraform, "-kubeconfig", acc.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), string(out)
		}
		t.Fatal(err)
	}
	return 0, string(out)
}

func execCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(acc.binary, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// removeFlag is args without flag and its value.
func removeFlag(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// firstTime is the time of the first line with message msg.
func (c *companion) firstTime(msg string) time.Time {
	if e := c.Events(msg, nil); len(e) > 0 {
		return e[0].Time
	}
	return time.Time{}
}

// field is the value of key in the first line with message msg.
func (c *companion) field(msg, key string) string {
	if e := c.Events(msg, nil); len(e) > 0 {
		return e[0].Str(key)
	}
	return ""
}
