package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vigie/terraform-provider-k8s/internal/testcluster"
	"github.com/vigie/terraform-provider-k8s/internal/traffic"
)

// The traffic latency of make bench: from a pod's Ready condition written
// to the first request it serves through HAProxy, the pool kept current by
// the sync companion (its plan and apply of examples/pools/haproxy, whose
// terraform_data provisioner writes the backend and reloads HAProxy). Each
// sample adds one ready pod beside a base one, measures, then deletes it and
// waits until the companion has taken it out, so that the next sample starts
// from a settled pool. The requests go only to loopback and the pods' own
// network namespaces.

const (
	trafficSamples     = 20
	trafficNamespace   = "bench-traffic"
	trafficSettleQuiet = "500ms"
	trafficSettleMax   = "2s"
	// trafficPoll is the interval of the requests that look for the new pod;
	// with 2 pods of 2 families in a round-robin backend, it is found within
	// 4 requests of being served.
	trafficPoll = 5 * time.Millisecond
)

// trafficReload is the terraform_data beside the example that keeps HAProxy
// current, as in make demo and the rolling-update test.
const trafficReload = `
resource "terraform_data" "haproxy_backend" {
  input = templatefile("${path.module}/backend.cfg.tftpl", {
    name      = "${var.namespace}_${var.service}"
    endpoints = data.k8s_ready_endpoints.web.endpoints
  })
  triggers_replace = data.k8s_ready_endpoints.web.endpoints

  provisioner "local-exec" {
    command     = <<-EOT
      printf '%s' "$BACKEND" > backend.cfg.tmp && mv backend.cfg.tmp backend.cfg
      if [ -s haproxy/haproxy.pid ]; then
        haproxy -c -q -f haproxy/haproxy.cfg -f backend.cfg && kill -USR2 "$(cat haproxy/haproxy.pid)"
      fi
    EOT
    environment = { BACKEND = self.input }
  }
}
`

// trafficLatency measures and returns its section of the report; where pods
// cannot have a network or HAProxy is missing, the section says so.
func (b *benchRun) trafficLatency(ctx context.Context, client kubernetes.Interface) (string, error) {
	title := "## Traffic: a pod's Ready to its first request through HAProxy\n\n"
	if reason := testcluster.NetworkUnavailable(); reason != "" {
		return title + "Not measured: " + reason + ".\n", nil
	}
	if _, err := traffic.HAProxyPath(); err != nil {
		return title + "Not measured: " + err.Error() + ".\n", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	n, err := testcluster.StartNetwork(ctx)
	if err != nil {
		return "", err
	}
	defer n.Close()
	k, err := testcluster.StartNetKubelet(ctx, client, n)
	if err != nil {
		return "", err
	}
	defer k.Stop()
	const node = "bench-traffic-node"
	if err := testcluster.EnsureNode(ctx, client, node, "bench-zone-a"); err != nil {
		return "", err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trafficNamespace}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if err := testcluster.WaitForServiceAccount(ctx, client, trafficNamespace, time.Minute); err != nil {
		return "", err
	}
	dual := corev1.IPFamilyPolicyPreferDualStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: trafficNamespace, Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector:       map[string]string{"app": "web"},
			IPFamilyPolicy: &dual,
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports:          []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := client.CoreV1().Services(trafficNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	pod := func(i int) testcluster.Pod {
		return testcluster.Pod{Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web"}, IPs: n.PodIPs(i), Ready: true, Node: node, Ports: map[string]int32{"http": 8080}}
	}
	if err := k.RunPod(ctx, trafficNamespace, pod(1)); err != nil {
		return "", err
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		if err := testcluster.WaitForSlices(ctx, client, trafficNamespace, "web", time.Minute, testcluster.EndpointCount(family, 1, 1)); err != nil {
			return "", err
		}
	}

	dir := filepath.Join(b.work, "traffic")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, name := range []string{"main.tf", "backend.cfg.tftpl"} {
		data, err := os.ReadFile(filepath.Join(b.root, "examples", "pools", "haproxy", name))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", err
		}
	}
	rc := filepath.Join(dir, "terraformrc")
	files := map[string]string{
		"reload.tf":        trafficReload,
		"terraform.tfvars": fmt.Sprintf("namespace = %q\nservice = \"web\"\nport_name = \"http\"\n", trafficNamespace),
		// The provider itself, not the bench's measuring wrapper.
		rc: testcluster.DevOverrides(filepath.Dir(b.provider)),
	}
	for name, text := range files {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	// The last value of a variable wins.
	env := append(slices.Clone(b.env), "TF_CLI_CONFIG_FILE="+rc)
	apply := exec.CommandContext(ctx, "terraform", "apply", "-auto-approve", "-input=false", "-no-color")
	apply.Dir, apply.Env = dir, env
	if out, err := apply.CombinedOutput(); err != nil {
		return "", fmt.Errorf("terraform apply: %w\n%s", err, out)
	}
	h, err := traffic.StartHAProxy(ctx, traffic.HAProxyOptions{Dir: filepath.Join(dir, "haproxy"), Backend: filepath.Join(dir, "backend.cfg")})
	if err != nil {
		return "", err
	}
	defer h.Stop()

	companion, err := startBenchCompanion(ctx, b.provider, dir, b.cluster.Kubeconfig(), env)
	if err != nil {
		return "", err
	}
	defer func() { _ = companion.stop() }()

	httpClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	servedBy := func() string {
		resp, err := httpClient.Get(h.URL(false))
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		name, _, _ := strings.Cut(string(body), " ")
		return name
	}
	var latencies []float64
	for i := 2; i < 2+trafficSamples; i++ {
		p := pod(i)
		// RunPod returns once the pod's status (Ready) is written.
		if err := k.RunPod(ctx, trafficNamespace, p); err != nil {
			return "", err
		}
		ready := time.Now()
		for servedBy() != p.Name {
			if time.Since(ready) > time.Minute {
				return "", fmt.Errorf("traffic: %s not served through HAProxy a minute after it was ready; companion log:\n%s", p.Name, companion.text())
			}
			time.Sleep(trafficPoll)
		}
		latencies = append(latencies, time.Since(ready).Seconds())
		fmt.Fprintf(logw, "  %s: first request through HAProxy %.0f ms after Ready\n", p.Name, latencies[len(latencies)-1]*1000)
		zero := int64(0)
		if err := client.CoreV1().Pods(trafficNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			return "", err
		}
		if err := companion.waitRemoved(ctx, filepath.Join(dir, "backend.cfg"), p.Name); err != nil {
			return "", err
		}
	}
	runs := strings.Count(companion.text(), `msg="run started"`)
	if err := companion.stop(); err != nil {
		return "", err
	}

	var r strings.Builder
	r.WriteString(title)
	fmt.Fprintf(&r, "%d pods, each made ready beside one other, then deleted: from its Ready condition written to the first request it served through HAProxy (polled every %s, round robin over 2 pods of 2 families). "+
		"On the way: the sync companion (`-settle-quiet %s -settle-max %s`, so at least %s of the figure is its settle window), `terraform plan` and `apply` of the saved plan (examples/pools/haproxy and a `terraform_data` whose provisioner writes the backend and reloads HAProxy with SIGUSR2). %d companion runs in all.\n\n",
		trafficSamples, trafficPoll, trafficSettleQuiet, trafficSettleMax, trafficSettleQuiet, runs)
	r.WriteString("| pods | median | p99 | min–max |\n|---|---|---|---|\n")
	fmt.Fprintf(&r, "| %d | %.2f s | %.2f s | %s s |\n", len(latencies), median(latencies), percentile(latencies, 99), minMax(latencies, "%.2f"))
	return r.String(), nil
}

// benchCompanion is `terraform-provider-k8s sync` on the bench's working
// directory, its text log kept.
type benchCompanion struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

func startBenchCompanion(ctx context.Context, provider, dir, kubeconfig string, env []string) (*benchCompanion, error) {
	log, err := os.Create(filepath.Join(dir, "sync.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(provider, "sync", "-chdir", dir, "-terraform", "terraform", "-kubeconfig", kubeconfig,
		"-listen", "", "-settle-quiet", trafficSettleQuiet, "-settle-max", trafficSettleMax)
	cmd.Env, cmd.Stderr = env, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	c := &benchCompanion{cmd: cmd, log: log, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(c.text(), "msg=watching") {
		select {
		case <-c.done:
			return nil, fmt.Errorf("the companion exited before watching:\n%s", c.text())
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = c.stop()
			return nil, fmt.Errorf("the companion is not watching after a minute:\n%s", c.text())
		}
	}
	return c, nil
}

func (c *benchCompanion) text() string {
	data, _ := os.ReadFile(c.log.Name())
	return string(data)
}

// waitRemoved waits until the backend has no server of pod and the
// companion has no run going on.
func (c *benchCompanion) waitRemoved(ctx context.Context, backend, pod string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		data, err := os.ReadFile(backend)
		if err != nil {
			return err
		}
		log := c.text()
		if !strings.Contains(string(data), "server "+pod+"-") && strings.Count(log, `msg="run started"`) == strings.Count(log, `msg="run ended"`) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("traffic: %s still in the backend 2 minutes after its deletion; companion log:\n%s", pod, log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for the exit (0), within a bound; once the
// companion has exited, it does nothing.
func (c *benchCompanion) stop() error {
	select {
	case <-c.done:
		return nil
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	defer c.log.Close()
	select {
	case <-c.done:
		if code := c.cmd.ProcessState.ExitCode(); code != 0 {
			return fmt.Errorf("the companion exited %d on SIGTERM:\n%s", code, c.text())
		}
		return nil
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		return fmt.Errorf("the companion did not stop within a minute of SIGTERM")
	}
}
