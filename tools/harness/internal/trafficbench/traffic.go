// Package trafficbench is the traffic latency of make bench (`bench -only
// traffic`): from a pod's Ready condition written to the first request it
// serves through a load balancer, the pool kept current by the sync
// companion (its plan and apply of the load balancer's
// example, whose terraform_data writes the rendered file, checks it and
// reloads the load balancer): HAProxy (examples/pools/haproxy), then nginx
// (examples/pools/nginx), one after the other on the same Service. Each
// sample adds one ready pod beside a base one, measures, then deletes it and
// waits until the companion has taken it out, so that the next sample starts
// from a settled pool. The requests go only to loopback and the pods' own
// network namespaces.
package trafficbench

import (
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
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vigie/terraform-provider-k8s/test/syncproc"
	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/test/traffic"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/stats"
)

const (
	// Samples is the number of pods per load balancer of make bench
	// (-traffic-samples).
	Samples            = 20
	trafficNamespace   = "bench-traffic"
	trafficSettleQuiet = "500ms"
	trafficSettleMax   = "2s"
	// trafficPoll is the interval of the requests that look for the new pod;
	// with 2 pods of 2 families in a round-robin pool, it is found within
	// 4 requests of being served.
	trafficPoll = 5 * time.Millisecond
)

// haproxyVars are the delivery variables of examples/pools/haproxy for the
// HAProxy that traffic.StartHAProxy runs in dir/haproxy: the example's own
// terraform_data and apply-pool.sh write backend.cfg, check it with
// haproxy -c, save the servers' state and send SIGUSR2 to the master. The
// first apply, before HAProxy runs, only writes the file.
func haproxyVars(string, string) string {
	return `pool_file          = "backend.cfg"
check_command      = "test ! -s haproxy/haproxy.pid || haproxy -c -q -f haproxy/haproxy.cfg -f backend.cfg"
save_state_command = "test ! -s haproxy/haproxy.pid || echo 'show servers state' | socat stdio unix-connect:haproxy/admin.sock > haproxy/server-state"
reload_command     = "test ! -s haproxy/haproxy.pid || kill -USR2 \"$(cat haproxy/haproxy.pid)\""
`
}

// nginxVars are those of examples/pools/nginx for the nginx that
// traffic.StartNginx runs in dir/nginx: nginx -t, then nginx -s reload.
func nginxVars(bin, dir string) string {
	check, signal := traffic.NginxCommands(bin, filepath.Join(dir, "nginx"))
	return fmt.Sprintf(`pool_file      = "upstream.conf"
check_command  = %q
reload_command = %q
`, "test ! -s nginx/nginx.pid || "+check, "test ! -s nginx/nginx.pid || "+signal)
}

// trafficLB is a load balancer the traffic latency is measured through.
type trafficLB struct {
	name    string // as the report names it
	example string // examples/pools/<example>, copied with its files
	// rendered is the file the provisioner writes, in the directory.
	rendered string
	// reload is how the provisioner reloads it, for the report.
	reload string
	// path finds the binary, or says what is missing.
	path func() (string, error)
	// vars are the example's delivery variables for the directory dir,
	// bin the binary.
	vars func(bin, dir string) string
	// start runs it on the rendered file.
	start func(ctx context.Context, dir string) (*runningLB, error)
}

// runningLB is a load balancer started by the bench.
type runningLB struct {
	// url is its address on 127.0.0.1.
	url string
	// workers are the pids of the workers that take new connections: a
	// reload replaces them all.
	workers func(ctx context.Context) ([]int, error)
	stop    func()
}

// waitWorkers waits until the load balancer's workers are ok, and returns
// them. An error is a master in the middle of a reload (HAProxy's master
// re-executes itself and its socket refuses meanwhile): it asks again.
func (lb *runningLB) waitWorkers(ctx context.Context, what string, ok func([]int) bool) ([]int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		now, err := lb.workers(ctx)
		if err == nil && len(now) > 0 && ok(now) {
			return now, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("traffic: no %s a minute on (workers %v): %w", what, now, errors.Join(err, errors.New("timed out")))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func trafficLBs() []trafficLB {
	return []trafficLB{
		{
			name: "HAProxy", example: "haproxy", rendered: "backend.cfg",
			reload: "`haproxy -c`, then SIGUSR2 to the master",
			path:   traffic.HAProxyPath,
			vars:   haproxyVars,
			start: func(ctx context.Context, dir string) (*runningLB, error) {
				h, err := traffic.StartHAProxy(ctx, traffic.HAProxyOptions{Dir: filepath.Join(dir, "haproxy"), Backend: filepath.Join(dir, "backend.cfg")})
				if err != nil {
					return nil, err
				}
				return &runningLB{url: h.URL(false), workers: h.Workers, stop: h.Stop}, nil
			},
		},
		{
			name: "nginx", example: "nginx", rendered: "upstream.conf",
			reload: "`nginx -t`, then `nginx -s reload` (SIGHUP to the master)",
			path:   traffic.NginxPath,
			vars:   nginxVars,
			start: func(ctx context.Context, dir string) (*runningLB, error) {
				n, err := traffic.StartNginx(ctx, traffic.NginxOptions{Dir: filepath.Join(dir, "nginx"), Upstream: filepath.Join(dir, "upstream.conf")})
				if err != nil {
					return nil, err
				}
				return &runningLB{url: n.URL(false), workers: n.Workers, stop: n.Stop}, nil
			},
		},
	}
}

// Results is what the traffic part measured.
type Results struct {
	// reason says why nothing was measured ("" when something was).
	reason  string
	samples int
	rows    []trafficRow
}

// trafficRow is one load balancer's measurement.
type trafficRow struct {
	lb, version, example, reload string
	// reason says why it was not measured.
	reason string
	// latencies from Ready written to the first answer, s; runs of the
	// companion in all.
	latencies []float64
	runs      int
}

// trafficSetup is the cluster side, shared by the load balancers: the
// network, its kubelet, and the pods.
type trafficSetup struct {
	net     *testcluster.Network
	kubelet *testcluster.NetKubelet
	client  kubernetes.Interface
}

const trafficNode = "bench-traffic-node"

func (s *trafficSetup) pod(i int) testcluster.Pod {
	return testcluster.Pod{Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web"}, IPs: s.net.PodIPs(i), Ready: true, Node: trafficNode, Ports: map[string]int32{"http": 8080}}
}

// part is the traffic's part of one bench run: samples pods per load
// balancer.
type part struct {
	*benchrun.Run
	samples int
}

// Measure measures through each load balancer; where pods cannot
// have a network, or a load balancer is missing, the results say so.
func Measure(ctx context.Context, run *benchrun.Run, client kubernetes.Interface, samples int) (*Results, error) {
	b := &part{Run: run, samples: samples}
	res := &Results{samples: samples}
	if reason := testcluster.NetworkUnavailable(); reason != "" {
		res.reason = reason
		return res, nil
	}
	lbs := trafficLBs()
	bins := make([]string, len(lbs))
	available := 0
	for i, lb := range lbs {
		res.rows = append(res.rows, trafficRow{lb: lb.name, example: "examples/pools/" + lb.example, reload: lb.reload})
		bin, err := lb.path()
		if err != nil {
			res.rows[i].reason = err.Error()
			continue
		}
		bins[i] = bin
		res.rows[i].version = lbVersion(bin)
		available++
	}
	if available == 0 {
		return res, nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(len(lbs))*15*time.Minute)
	defer cancel()
	n, err := testcluster.StartNetwork(ctx)
	if err != nil {
		return nil, err
	}
	defer n.Close()
	k, err := testcluster.StartNetKubelet(ctx, client, n)
	if err != nil {
		return nil, err
	}
	defer k.Stop()
	setup := &trafficSetup{net: n, kubelet: k, client: client}
	if err := testcluster.EnsureNode(ctx, client, trafficNode, "bench-zone-a"); err != nil {
		return nil, err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trafficNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if err := testcluster.WaitForServiceAccount(ctx, client, trafficNamespace, time.Minute); err != nil {
		return nil, err
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
		return nil, err
	}
	if err := k.RunPod(ctx, trafficNamespace, setup.pod(1)); err != nil {
		return nil, err
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		if err := testcluster.WaitForSlices(ctx, client, trafficNamespace, "web", time.Minute, testcluster.EndpointCount(family, 1, 1)); err != nil {
			return nil, err
		}
	}
	for i, lb := range lbs {
		if bins[i] == "" {
			continue
		}
		b.Say("traffic: a pod's Ready to its first request through %s, %d pods", lb.name, samples)
		// Pods of their own numbers: web-2 to web-21 for the first, and so on.
		latencies, runs, err := b.trafficThrough(ctx, setup, lb, bins[i], 2+i*samples)
		if err != nil {
			return nil, err
		}
		res.rows[i].latencies, res.rows[i].runs = latencies, runs
	}
	return res, nil
}

// trafficThrough measures through one load balancer: its example applied in
// a directory of its own, the load balancer started on what it rendered,
// the companion on that directory, then samples pods from number first on.
func (b *part) trafficThrough(ctx context.Context, s *trafficSetup, lb trafficLB, bin string, first int) ([]float64, int, error) {
	dir := filepath.Join(b.Work, "traffic-"+lb.example)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, err
	}
	example := filepath.Join(b.Root, "examples", "pools", lb.example)
	entries, err := os.ReadDir(example)
	if err != nil {
		return nil, 0, err
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(example, e.Name()))
		if err != nil {
			return nil, 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			return nil, 0, err
		}
	}
	rc := filepath.Join(dir, "terraformrc")
	files := map[string]string{
		"terraform.tfvars": fmt.Sprintf("namespace = %q\nservice = \"web\"\nport_name = \"http\"\n", trafficNamespace) + lb.vars(bin, dir),
		// The provider itself, not the bench's measuring wrapper.
		rc: testcluster.DevOverrides(filepath.Dir(b.Provider)),
	}
	for name, text := range files {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			return nil, 0, err
		}
	}
	// The last value of a variable wins.
	env := append(slices.Clone(b.Env), "TF_CLI_CONFIG_FILE="+rc)
	apply := exec.CommandContext(ctx, "terraform", "apply", "-auto-approve", "-input=false", "-no-color")
	apply.Dir, apply.Env = dir, env
	if out, err := apply.CombinedOutput(); err != nil {
		return nil, 0, fmt.Errorf("terraform apply: %w\n%s", err, out)
	}
	running, err := lb.start(ctx, dir)
	if err != nil {
		return nil, 0, err
	}
	defer running.stop()

	companion, err := startBenchCompanion(ctx, b.Provider, dir, b.Cluster.Kubeconfig(), env)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = companion.stop() }()

	httpClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	servedBy := func() string {
		resp, err := httpClient.Get(running.url)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		name, _, _ := strings.Cut(string(body), " ")
		return name
	}
	var latencies []float64
	for i := first; i < first+b.samples; i++ {
		p := s.pod(i)
		// RunPod returns once the pod's status (Ready) is written.
		if err := s.kubelet.RunPod(ctx, trafficNamespace, p); err != nil {
			return nil, 0, err
		}
		ready := time.Now()
		for servedBy() != p.Name {
			if time.Since(ready) > time.Minute {
				return nil, 0, fmt.Errorf("traffic: %s not served through %s a minute after it was ready; companion log:\n%s", p.Name, lb.name, companion.Log())
			}
			time.Sleep(trafficPoll)
		}
		latencies = append(latencies, time.Since(ready).Seconds())
		fmt.Fprintf(benchrun.Log, "  %s: first request through %s %.0f ms after Ready\n", p.Name, lb.name, latencies[len(latencies)-1]*1000)
		// The workers that serve the pod: the removal's reload replaces
		// them, after the companion's run has ended (the provisioner's
		// command returns once the master has the signal). The next sample
		// waits for that: else its first request could reach them, still
		// routing to the pod just deleted, and wait there for the 2 s of
		// the connect timeout (seen in about half the samples, through
		// HAProxy and nginx alike).
		serving, err := running.waitWorkers(ctx, "workers", func([]int) bool { return true })
		if err != nil {
			return nil, 0, err
		}
		zero := int64(0)
		if err := s.client.CoreV1().Pods(trafficNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			return nil, 0, err
		}
		if err := companion.waitRemoved(ctx, filepath.Join(dir, lb.rendered), p); err != nil {
			return nil, 0, err
		}
		replaced := func(now []int) bool {
			return !slices.ContainsFunc(now, func(pid int) bool { return slices.Contains(serving, pid) })
		}
		if _, err := running.waitWorkers(ctx, fmt.Sprintf("workers other than %v after the reload", serving), replaced); err != nil {
			return nil, 0, err
		}
	}
	runs := companion.Count("run started", nil)
	if err := companion.stop(); err != nil {
		return nil, 0, err
	}
	return latencies, runs, nil
}

var lbVersionLine = regexp.MustCompile(`(?i)version:?\s+(?:nginx/)?(\S+)`)

// lbVersion is the version a load balancer's -v prints (HAProxy on its
// standard output, nginx on its standard error), or "".
func lbVersion(bin string) string {
	out, _ := exec.Command(bin, "-v").CombinedOutput()
	return parseLBVersion(string(out))
}

func parseLBVersion(out string) string {
	if m := lbVersionLine.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	return ""
}

// Section is the traffic part's section of the report.
func Section(r *Results) string {
	if r == nil {
		return ""
	}
	b := benchrun.NewSection("Traffic: a pod's Ready to its first request through HAProxy and nginx")
	p := b.Line
	if r.reason != "" {
		p("Not measured: %s.", r.reason)
		return b.String()
	}
	p("%d pods through each load balancer, one after the other, each pod made ready beside one other, then deleted: from its Ready condition written to the first request it served through the load balancer "+
		"(polled every %s over 127.0.0.1, a connection per request, round robin over 2 pods of 2 families). "+
		"On the way: the sync companion (`-settle-quiet %s -settle-max %s`, so at least %s of each figure is its settle window), `terraform plan` and `apply` of the saved plan "+
		"(the example as shipped: its `terraform_data` writes the rendered file, checks it with the load balancer and reloads it), and the reload.",
		r.samples, trafficPoll, trafficSettleQuiet, trafficSettleMax, trafficSettleQuiet)
	p("")
	b.Para("HAProxy's backend has active health checks (`check`, `option httpchk`); nginx's upstream only passive ones (`max_fails`, counted on the requests it proxies): each figure is when the new pod answered a request through it, whatever its checks.")
	b.Table("| load balancer | reload, after the file is written | pods | median | p99 | min–max | companion runs |", "|---|---|---:|---:|---:|---:|---:|")
	for _, row := range r.rows {
		name := strings.TrimSpace(row.lb + " " + row.version)
		name += " (" + row.example + ")"
		if row.reason != "" {
			p("| %s | %s | not measured: %s | — | — | — | — |", name, row.reload, row.reason)
			continue
		}
		p("| %s | %s | %d | %.2f s | %.2f s | %s s | %d |", name, row.reload, len(row.latencies),
			stats.Median(row.latencies), stats.Percentile(row.latencies, 99), stats.MinMax(row.latencies, "%.2f"), row.runs)
	}
	return b.String()
}

// benchCompanion is `terraform-provider-k8s sync` on the bench's working
// directory, followed by its JSON log (syncproc), which it also writes to
// DIR/sync.log.
type benchCompanion struct {
	*syncproc.Process
	log *os.File
}

func startBenchCompanion(ctx context.Context, provider, dir, kubeconfig string, env []string) (*benchCompanion, error) {
	log, err := os.Create(filepath.Join(dir, "sync.log"))
	if err != nil {
		return nil, err
	}
	p, err := syncproc.Start(provider, []string{"sync", "-chdir", dir, "-terraform", "terraform", "-kubeconfig", kubeconfig,
		"-listen", "", "-settle-quiet", trafficSettleQuiet, "-settle-max", trafficSettleMax}, syncproc.Options{Env: env, Output: log})
	if err != nil {
		_ = log.Close()
		return nil, err
	}
	c := &benchCompanion{Process: p, log: log}
	watching, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := p.Wait(watching, "watching", 1, nil); err != nil {
		_ = c.stop()
		return nil, fmt.Errorf("the companion is not watching: %w:\n%s", err, p.Log())
	}
	return c, nil
}

// waitRemoved waits until the rendered file (HAProxy's backend, nginx's
// upstream) has no address of pod and the companion has no run going on.
func (c *benchCompanion) waitRemoved(ctx context.Context, rendered string, pod testcluster.Pod) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		data, err := os.ReadFile(rendered)
		if err != nil {
			return err
		}
		if !hasAddress(string(data), pod) && c.Count("run started", nil) == c.Count("run ended", nil) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("traffic: %s still in %s 2 minutes after its deletion; companion log:\n%s", pod.Name, filepath.Base(rendered), c.Log())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// hasAddress: a server line of the rendered file has one of the pod's
// addresses, as both examples write it after a space: 10.244.1.2:8080,
// [fd00:10:244::1:2]:8080.
func hasAddress(rendered string, pod testcluster.Pod) bool {
	for _, ip := range pod.IPs {
		for _, port := range pod.Ports {
			if strings.Contains(rendered, " "+net.JoinHostPort(ip, strconv.Itoa(int(port)))) {
				return true
			}
		}
	}
	return false
}

// stop sends SIGTERM and waits for the exit (0), a minute at most; once
// the companion has exited, it does nothing.
func (c *benchCompanion) stop() error {
	select {
	case <-c.Done():
		return nil
	default:
	}
	code := c.Stop(time.Minute)
	_ = c.log.Close()
	if code != 0 {
		return fmt.Errorf("the companion exited %d on SIGTERM:\n%s", code, c.Log())
	}
	return nil
}
