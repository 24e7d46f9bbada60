package testcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// These tests start real control planes (and build one on first use), so
// they run with the acceptance tests: TF_ACC=1 (make testacc).
func start(t *testing.T) *Cluster {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("starts a real control plane: set TF_ACC=1 (make testacc does)")
	}
	c, err := Start(context.Background(), Options{Version: os.Getenv("K8S_TF_K8S_VERSION")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func clientOf(t *testing.T, c *Cluster) kubernetes.Interface {
	t.Helper()
	return c.Client()
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestStartServesTheAPIRestartKeepsTheDataAndStopLeavesNothing(t *testing.T) {
	c := start(t)
	client := clientOf(t, c)
	ctx := context.Background()

	pinned, err := PinnedVersion(c.opts.Root)
	if err != nil {
		t.Fatal(err)
	}
	if want := firstNonEmpty(os.Getenv("K8S_TF_K8S_VERSION"), pinned); c.Version != want {
		t.Errorf("version %s, want %s", c.Version, want)
	}
	for _, f := range []string{KubeconfigFile, CAFile, CertUserCert, CertUserKey} {
		if _, err := os.Stat(c.path(f)); err != nil {
			t.Errorf("state file: %v", err)
		}
	}

	// The fake kubelet: a pod on a Node without a kubelet becomes a ready
	// endpoint, written by the cluster's own EndpointSlice controller.
	if err := EnsureNode(ctx, client, "n1", "zone-a"); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, ready := range []bool{true, false} {
		pod := Pod{Name: "web-" + itoa(i), Labels: map[string]string{"app": "web"}, IPs: []string{"10.244.0." + itoa(i+1)}, Ready: ready, Node: "n1"}
		if err := RunPod(ctx, client, "default", pod); err != nil {
			t.Fatal(err)
		}
	}
	if err := WaitForSlices(ctx, client, "default", "web", 30*time.Second, EndpointCount(discoveryv1.AddressTypeIPv4, 1, 2)); err != nil {
		t.Fatal(err)
	}

	before := c.PIDs()
	if len(before) != 3 {
		t.Fatalf("running daemons %v, want etcd, kube-apiserver and kube-controller-manager", before)
	}
	if err := c.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	after := c.PIDs()
	if after["kube-apiserver"] == before["kube-apiserver"] || alive(before["kube-apiserver"]) {
		t.Errorf("kube-apiserver pid %d before the restart, %d after; the old one alive: %v", before["kube-apiserver"], after["kube-apiserver"], alive(before["kube-apiserver"]))
	}
	if after["etcd"] != before["etcd"] {
		t.Errorf("etcd was restarted too (pid %d, then %d)", before["etcd"], after["etcd"])
	}
	if _, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("after the restart: %v", err)
	}

	c.Stop()
	for name, pid := range after {
		if alive(pid) {
			t.Errorf("%s (pid %d) is still running after Stop", name, pid)
		}
	}
	if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary state directory %s is still there: %v", c.Dir, err)
	}
	c.Stop() // twice is harmless
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestStopAPIServerClosesItsPortUntilStartAPIServer(t *testing.T) {
	c := start(t)
	address := strings.TrimPrefix(c.Server, "https://")
	stopping := time.Now()
	c.StopAPIServer()
	t.Logf("kube-apiserver stopped in %s", time.Since(stopping).Round(time.Millisecond))
	if conn, err := net.DialTimeout("tcp", address, time.Second); err == nil {
		_ = conn.Close()
		t.Fatalf("%s still accepts connections after StopAPIServer", address)
	}
	if err := c.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := clientOf(t, c).CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("after StartAPIServer: %v", err)
	}
	if err := c.StartAPIServer(context.Background()); err == nil {
		t.Error("StartAPIServer on a running API server: no error")
	}
}

// TestALostPortRaceIsRetried hands the harness, first, a port that another
// process holds, as when the port is taken between the kernel choosing it and
// the daemon binding it: the start must go through with other ports.
func TestALostPortRaceIsRetried(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, portText, _ := net.SplitHostPort(taken.Addr().String())
	takenPort, _ := strconv.Atoi(portText)
	kernelChosen := freePort
	calls := 0
	freePort = func() (int, error) {
		calls++
		if calls == 1 {
			return takenPort, nil
		}
		return kernelChosen()
	}
	defer func() { freePort = kernelChosen }()

	c := start(t)
	if calls < 8 {
		t.Errorf("%d ports asked for, want a second set of 4 after the lost race", calls)
	}
	if _, err := clientOf(t, c).CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
}

// TestDaemonsDieWithTheHarness kills a process that started a control plane,
// outright (SIGKILL: no cleanup runs): its daemons must not outlive it.
func TestDaemonsDieWithTheHarness(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("starts a real control plane: set TF_ACC=1 (make testacc does)")
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperStartsAndWaits$", "-test.timeout=10m")
	helper.Env = append(os.Environ(), "TESTCLUSTER_HELPER=1")
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = helper.Process.Kill(); _ = helper.Wait() }()
	var pids map[string]int
	var dir string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		var msg struct {
			PIDs map[string]int
			Dir  string
		}
		if json.Unmarshal(lines.Bytes(), &msg) == nil && msg.PIDs != nil {
			pids, dir = msg.PIDs, msg.Dir
			break
		}
	}
	if len(pids) != 3 {
		t.Fatalf("the helper did not report its daemons (%v)", pids)
	}
	defer os.RemoveAll(dir) // its cleanup never runs
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for name, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("%s (pid %d) outlived the process that started it", name, pid)
		}
	}
}

// TestHelperStartsAndWaits is the process that TestDaemonsDieWithTheHarness
// kills; it does nothing in a normal run.
func TestHelperStartsAndWaits(t *testing.T) {
	if os.Getenv("TESTCLUSTER_HELPER") == "" {
		t.Skip("helper process of TestDaemonsDieWithTheHarness")
	}
	c := start(t)
	msg, _ := json.Marshal(map[string]any{"PIDs": c.PIDs(), "Dir": c.Dir})
	os.Stdout.Write(append(msg, '\n'))
	time.Sleep(10 * time.Minute)
}
