package provider

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// The examples that render a load balancer configuration, applied unchanged
// with the provider binary against the stand-in API server, and what they
// render given to the real program: `haproxy -c`, `nginx -t`. Each is fed a
// full dual-stack pool (a pod name with dots, a draining pod beside the
// ready ones), a pool of draining pods only, and an empty pool; each must
// render a configuration the program loads, or stop at its guard.

// examplePool is the state of Service shop/web (and shop/api) a run sees.
type examplePool string

const (
	fullPool     examplePool = "full"
	drainingPool examplePool = "draining only"
	emptyPool    examplePool = "empty"
)

// examplePods are the pods of each pool, by family: ready and draining.
var examplePods = map[examplePool][]examplePod{
	fullPool: {
		{name: "web-7d9f.canary-0", v4: "10.244.1.7", v6: "fd00:10:244:1::7", node: "node-a", ready: true, probe: readyProbe},
		{name: "web-2", v4: "10.244.2.9", v6: "fd00:10:244:2::9", node: "node-b", ready: true, probe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9090)}}}},
		{name: "web-old", v4: "10.244.1.8", v6: "fd00:10:244:1::8", node: "node-a", probe: readyProbe},
	},
	drainingPool: {
		{name: "web-old.a", v4: "10.244.1.8", v6: "fd00:10:244:1::8", node: "node-a"},
		{name: "web-old.b", v4: "10.244.2.8", v6: "fd00:10:244:2::8", node: "node-b"},
	},
	emptyPool: nil,
}

type examplePod struct {
	name, v4, v6, node string
	// ready, else draining: terminating and still serving.
	ready bool
	// probe is the pod's readinessProbe, for pod_health_checks.
	probe *corev1.Probe
}

// readyProbe asks /ready of the pod's port named http.
var readyProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}}

func (p examplePod) endpoint(addr string) discoveryv1.Endpoint {
	e := readyPod(addr, p.name, p.node, "zone-a")
	if !p.ready {
		e.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	}
	return e
}

// exampleCluster serves Services shop/web and shop/api (both labelled
// lb=haproxy, port http 80 to 8080, NodePort 30080/30081 with
// externalTrafficPolicy Local) with the pods of pool, and two Ready nodes,
// node-a dual-stack. It returns a kubeconfig for it.
func exampleCluster(t *testing.T, pool examplePool) string {
	t.Helper()
	api := newStandInAPIServer(t)
	for i, name := range []string{"web", "api"} {
		svc := corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"lb": "haproxy"}},
			Spec: corev1.ServiceSpec{
				Selector:              map[string]string{"app": name},
				Type:                  corev1.ServiceTypeNodePort,
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
				Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: int32(30080 + i)}},
			},
		}
		api.addService(svc)
		for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
			slice := discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: name + "-" + strings.ToLower(string(family)), Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: endpoints.EndpointSliceController}},
				AddressType: family,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
			}
			for _, p := range examplePods[pool] {
				addr := p.v4
				if family == discoveryv1.AddressTypeIPv6 {
					addr = p.v6
				}
				slice.Endpoints = append(slice.Endpoints, p.endpoint(addr))
			}
			api.addSlices(slice)
		}
	}
	// The pods of web, for pod_health_checks (api's have no Pod objects).
	for _, p := range examplePods[pool] {
		api.addPods(corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: p.name, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", ReadinessProbe: p.probe,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		})
	}
	nodeA := standInNode("node-a", "zone-a", "192.168.0.1", "", nil)
	nodeA.Status.Addresses = append(nodeA.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00:192:168::1"})
	api.addNodes(nodeA, standInNode("node-b", "zone-a", "192.168.0.2", "", nil))
	return writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL})
}

// exampleResult is what one example gives for one pool: a configuration
// the program loads, with these servers, or the guard's error.
type exampleResult struct {
	servers []string // the address:port of each server line, in order
	// lines must each be a line of the configuration, spaces trimmed.
	lines []string
	guard *regexp.Regexp
}

type lbExample struct {
	// dir is the example's directory under examples/.
	dir string
	// root, when set, is the configuration applied instead of the example's
	// own main.tf, with the example copied beside it as ./module.
	root string
	// edits shorten what a test should not wait for: each old string must
	// be in main.tf once.
	edits map[string]string
	// tree copies the example's subdirectories too, and run is the one of
	// them to apply ("" for the example itself); vars are -var arguments.
	tree bool
	run  string
	vars []string
	// output is the output that holds the rendered configuration.
	output  string
	program string // "haproxy" or "nginx"
	// delivers: the example writes the configuration to pool_file, checks
	// it with check_command and reloads with reload_command (apply-pool.sh);
	// the test points them at its directory (deliveryVars).
	delivers bool
	want     map[examplePool]exampleResult
}

var (
	fullV4 = []string{"10.244.1.7:8080", "10.244.2.9:8080"}
	fullV6 = []string{"[fd00:10:244:1::7]:8080", "[fd00:10:244:2::9]:8080"}
	// fullReadyAndDraining is the full pool with its draining pod, in the
	// data source's order.
	fullReadyAndDraining = []string{"10.244.1.7:8080", "10.244.1.8:8080", "10.244.2.9:8080",
		"[fd00:10:244:1::7]:8080", "[fd00:10:244:1::8]:8080", "[fd00:10:244:2::9]:8080"}
	nginxPlaceholder = []string{"127.0.0.1:1"}
)

func lbExamples() []lbExample {
	shortWait := func(from string) map[string]string { return map[string]string{`read = "` + from + `"`: `read = "2s"`} }
	return []lbExample{
		{
			dir: "pools/haproxy", output: "haproxy_backend", program: "haproxy", delivers: true,
			want: map[examplePool]exampleResult{
				// Checked as the kubelet checks each pod: /ready on 8080, a
				// TCP check on 9090.
				fullPool: {servers: append(append([]string{}, fullV4...), fullV6...), lines: []string{
					"option httpchk GET /ready",
					"server web-7d9f.canary-0-10-244-1-7-8080 10.244.1.7:8080 check port 8080",
					"server web-2-10-244-2-9-8080 10.244.2.9:8080 check port 9090",
					"server web-2-fd00-10-244-2--9-8080 [fd00:10:244:2::9]:8080 check port 9090",
				}},
				drainingPool: {servers: []string{}},
				emptyPool:    {servers: []string{}},
			},
		},
		{
			dir: "pools/haproxy-drain", output: "haproxy_backend", program: "haproxy", edits: shortWait("5m"),
			want: map[examplePool]exampleResult{
				// The draining pod keeps its check (and weight 0).
				fullPool: {servers: fullReadyAndDraining, lines: []string{
					"option httpchk GET /ready",
					"server web-old-10-244-1-8-8080 10.244.1.8:8080 check port 8080 weight 0",
				}},
				drainingPool: {guard: phrase("Too Few Ready Endpoints", "found 0, asked for 2 (min_ready)", "The pool also has 4 draining endpoint(s)")},
				emptyPool:    {guard: phrase("Too Few Ready Endpoints", "found 0, asked for 2 (min_ready)", "waited 2s")},
			},
		},
		{
			dir: "pools/haproxy-nodes", output: "haproxy_backend", program: "haproxy",
			want: map[examplePool]exampleResult{
				// Local: node-a runs a ready pod of each family, node-b one IPv4 and one IPv6.
				// A Local NodePort Service has no healthCheckNodePort: kube-proxy's health port.
				fullPool: {servers: []string{"192.168.0.1:30080", "192.168.0.2:30080", "[fd00:192:168::1]:30080"}, lines: []string{
					"option httpchk GET /healthz",
					"server node-a-ipv4 192.168.0.1:30080 weight 1 check port 10256",
				}},
				drainingPool: {guard: phrase("Too Few Ready Endpoints", "found 0, asked for 1 (min_ready)")},
				emptyPool:    {guard: phrase("Too Few Ready Endpoints", "found 0, asked for 1 (min_ready)")},
			},
		},
		{
			dir: "pools/fleet-haproxy", output: "haproxy_backends", program: "haproxy", edits: shortWait("2m"),
			want: map[examplePool]exampleResult{
				// web's pods have probes; api selects no Pod: TCP checks.
				fullPool: {servers: append(append(append(append([]string{}, fullV4...), fullV6...), fullV4...), fullV6...), lines: []string{
					"backend shop_web",
					"option httpchk GET /ready",
					"server web-2-10-244-2-9-8080 10.244.2.9:8080 check port 9090",
					"server web-2-10-244-2-9-8080 10.244.2.9:8080 check",
				}},
				drainingPool: {guard: phrase("Too Few Ready Endpoints", "2 Service(s) have fewer than min_ready = 1 ready endpoint(s): shop/api (0), shop/web (0)")},
				emptyPool:    {guard: phrase("Too Few Ready Endpoints", "2 Service(s) have fewer than min_ready = 1", "waited 2s")},
			},
		},
		{
			dir: "pools/nginx", output: "nginx_upstream", program: "nginx", delivers: true,
			want: map[examplePool]exampleResult{
				fullPool:     {servers: append(append([]string{}, fullV4...), fullV6...)},
				drainingPool: {servers: nginxPlaceholder},
				emptyPool:    {servers: nginxPlaceholder},
			},
		},
		{
			// The CTS module under terminating_endpoints = "fallback": when no
			// pod is ready, the draining ones are the backend, with weight.
			dir: "cts/haproxy-backend", output: "backend", program: "haproxy",
			root: `
data "k8s_ready_endpoints" "web" {
  namespace             = "shop"
  service               = "web"
  port_name             = "http"
  terminating_endpoints = "fallback"
}
module "backend" {
  source       = "./module"
  backend_name = "shop_web"
  services     = provider::k8s::cts_services(data.k8s_ready_endpoints.web)
}
output "backend" {
  value = module.backend.backend
}
`,
			want: map[examplePool]exampleResult{
				// The module sorts by instance key, as strings.
				fullPool:     {servers: []string{"10.244.1.7:8080", "10.244.2.9:8080", "[fd00:10:244:1::7]:8080", "[fd00:10:244:2::9]:8080"}},
				drainingPool: {servers: []string{"10.244.1.8:8080", "10.244.2.8:8080", "[fd00:10:244:1::8]:8080", "[fd00:10:244:2::8]:8080"}},
				emptyPool:    {servers: []string{}},
			},
		},
	}
}

func TestExamplesRenderWhatTheLoadBalancerLoads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the provider binary")
	}
	for _, ex := range lbExamples() {
		t.Run(ex.dir, func(t *testing.T) {
			program := lbProgram(t, ex.program)
			for _, pool := range []examplePool{fullPool, drainingPool, emptyPool} {
				t.Run(string(pool), func(t *testing.T) {
					want := ex.want[pool]
					outputs, applied, err := applyExample(t, ex, exampleCluster(t, pool))
					if want.guard != nil {
						if err == nil {
							t.Fatalf("apply succeeded, want the guard's error %s; it rendered:\n%s", want.guard, outputs[ex.output])
						}
						if !want.guard.MatchString(applied) {
							t.Fatalf("apply failed, not with %s:\n%s", want.guard, applied)
						}
						return
					}
					if err != nil {
						t.Fatalf("apply: %v\n%s", err, applied)
					}
					rendered, ok := outputs[ex.output]
					if !ok {
						t.Fatalf("no output %q in %v", ex.output, outputs)
					}
					checkServers(t, ex.program, rendered, want.servers)
					checkLines(t, rendered, want.lines)
					if ex.delivers {
						checkDelivered(t, outputs, applied, rendered)
					}
					if out, err := loadIn(t, ex.program, program, rendered); err != nil {
						t.Fatalf("%s refuses what the example renders: %v\n%s\nconfiguration:\n%s", ex.program, err, out, rendered)
					}
				})
			}
		})
	}
}

// lbProgram is the path of haproxy or nginx. `make test-unit` installs both
// from the distribution's packages first (make lb-programs); where that is
// impossible, the test is skipped and says so.
func lbProgram(t *testing.T, name string) string {
	t.Helper()
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	// Debian installs both in /usr/sbin, which is not on every user's PATH.
	if path := filepath.Join("/usr/sbin", name); isExecutable(path) {
		return path
	}
	t.Skipf("%s is not installed, so the configuration the example renders is not checked: make lb-programs installs it "+
		"(apt-get install haproxy nginx)", name)
	return ""
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// applyExample copies the example into a directory of its own (with the
// edits), applies it with the provider binary reading the cluster of
// kubeconfig through $KUBECONFIG, as a user's shell would, and returns its
// string outputs, what terraform printed, and the apply's error.
func applyExample(t *testing.T, ex lbExample, kubeconfig string) (map[string]string, string, error) {
	t.Helper()
	work := t.TempDir()
	moduleDir := work
	if ex.root != "" {
		moduleDir = filepath.Join(work, "module")
		writeText(t, filepath.Join(work, "main.tf"), functionsConfigFor("vigie/k8s")+ex.root)
	}
	copyExample(t, filepath.Join("..", "..", "examples", ex.dir), moduleDir, ex.edits, ex.tree)
	work = filepath.Join(work, ex.run)
	rc := filepath.Join(t.TempDir(), "dev.tfrc")
	writeText(t, rc, testcluster.DevOverrides(filepath.Dir(providerBinary(t))))
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
			"KUBECONFIG="+kubeconfig, "HOME="+t.TempDir())
		return cmd.CombinedOutput()
	}
	if ex.root != "" {
		// terraform get installs the module (init would look the overridden
		// provider up in its registry).
		if out, err := run("get", "-no-color"); err != nil {
			t.Fatalf("terraform get: %v\n%s", err, out)
		}
	}
	vars := ex.vars
	if ex.delivers {
		vars = append(slices.Clone(vars), deliveryVars(t, ex, work)...)
	}
	applied, err := run(append([]string{"apply", "-auto-approve", "-input=false", "-no-color"}, vars...)...)
	if err != nil {
		return nil, string(applied), err
	}
	if ex.delivers {
		// The same pool again: nothing to replace, so nothing delivered.
		again, err := run(append([]string{"apply", "-auto-approve", "-input=false", "-no-color"}, vars...)...)
		if err != nil {
			return nil, string(again), err
		}
		applied = append(append(applied, "\n--- the same pool applied again ---\n"...), again...)
	}
	out, err := run("output", "-json", "-no-color")
	if err != nil {
		t.Fatalf("terraform output: %v\n%s", err, out)
	}
	// Warnings about the override come first; keep only the JSON.
	if i := strings.IndexByte(string(out), '{'); i > 0 {
		out = out[i:]
	}
	var raw map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("terraform output: %v\n%s", err, out)
	}
	outputs := map[string]string{}
	for name, o := range raw {
		if s, ok := o.Value.(string); ok {
			outputs[name] = s
		}
	}
	if ex.delivers {
		for key, name := range map[string]string{deliveredPool: "pool.conf", deliveredReloads: "reloads"} {
			data, err := os.ReadFile(filepath.Join(work, name))
			if err != nil {
				t.Fatalf("after the apply: %v", err)
			}
			outputs[key] = string(data)
		}
	}
	return outputs, string(applied), nil
}

// deliveryVars point an example that delivers its configuration at the
// test's directory: pool_file there, check_command the real program on a
// whole configuration around it (haproxy: the example's own haproxy.cfg,
// then the pool file; nginx: an nginx.conf that includes the pool file and
// the example's site.conf), no state to save, and a reload_command that
// counts its runs in the file "reloads".
func deliveryVars(t *testing.T, ex lbExample, work string) []string {
	t.Helper()
	program := lbProgram(t, ex.program)
	pool := filepath.Join(work, "pool.conf")
	var check string
	if ex.program == "nginx" {
		conf := filepath.Join(work, "nginx.conf")
		writeText(t, conf, fmt.Sprintf(`pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events {}
http {
  access_log off;
  client_body_temp_path %[1]s/client_body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  include %[1]s/pool.conf;
  include %[1]s/site.conf;
}
`, work))
		check = fmt.Sprintf("%s -t -q -p %s/ -e %s/error.log -c %s", program, work, work, conf)
	} else {
		check = fmt.Sprintf("%s -c -q -f %s/haproxy.cfg -f %s", program, work, pool)
	}
	return []string{"-var", "pool_file=" + pool, "-var", "check_command=" + check,
		"-var", "reload_command=echo reloaded >> " + filepath.Join(work, "reloads")}
}

// checkDelivered: the pool file holds what the example rendered, checked by
// the program (the apply ran check_command), and the pool was reloaded
// once: the second apply of the same pool replaced nothing.
func checkDelivered(t *testing.T, outputs map[string]string, applied, rendered string) {
	t.Helper()
	if got := outputs[deliveredPool]; got != rendered {
		t.Errorf("pool_file holds\n%s\nwant what the example rendered:\n%s", got, rendered)
	}
	if got := outputs[deliveredReloads]; got != "reloaded\n" {
		t.Errorf("reload_command ran %d times over two applies of the same pool, want once:\n%s", strings.Count(got, "reloaded"), applied)
	}
	if !strings.Contains(applied, "apply-pool: ") || !strings.Contains(applied, "written, checked and reloaded") {
		t.Errorf("the apply did not say the pool was written, checked and reloaded:\n%s", applied)
	}
}

// The keys of applyExample's outputs that say what an example that
// delivers wrote: its pool file, and the reload_command's runs.
const (
	deliveredPool    = " pool_file"
	deliveredReloads = " reloads"
)

// functionsConfigFor is the required_providers block of a root module that
// calls the provider's functions, for the provider at source.
func functionsConfigFor(source string) string {
	return fmt.Sprintf("terraform {\n  required_providers {\n    k8s = { source = %q }\n  }\n}\n", source)
}

// copyExample copies the files of an example directory (and, with tree, its
// subdirectories) into dst, applying edits to its main.tf.
func copyExample(t *testing.T, src, dst string, edits map[string]string, tree bool) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			if tree {
				copyExample(t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), nil, true)
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if e.Name() == "main.tf" {
			for from, to := range edits {
				if strings.Count(text, from) != 1 {
					t.Fatalf("%s: %q is not in main.tf exactly once: the test's edit is out of date", src, from)
				}
				text = strings.Replace(text, from, to, 1)
			}
		}
		writeText(t, filepath.Join(dst, e.Name()), text)
	}
}

var (
	haproxyServer = regexp.MustCompile(`(?m)^\s*server\s+(\S+)\s+(\S+)(.*)$`)
	nginxServer   = regexp.MustCompile(`(?m)^\s*server\s+([^\s;]+)[^;]*;`)
	haproxyWeight = regexp.MustCompile(`\bweight\s+(\d+)`)
)

// checkServers compares the servers of the rendered configuration with
// want, and for HAProxy refuses a backend whose every server has weight 0:
// it would answer 503 to every request.
func checkServers(t *testing.T, program, rendered string, want []string) {
	t.Helper()
	got := []string{}
	if program == "nginx" {
		for _, m := range nginxServer.FindAllStringSubmatch(rendered, -1) {
			got = append(got, m[1])
		}
	} else {
		for _, backend := range strings.Split(rendered, "backend ")[1:] {
			servers := haproxyServer.FindAllStringSubmatch(backend, -1)
			weighted := false
			for _, m := range servers {
				got = append(got, m[2])
				if w := haproxyWeight.FindStringSubmatch(m[3]); w == nil || w[1] != "0" {
					weighted = true
				}
			}
			if len(servers) > 0 && !weighted {
				t.Errorf("every server of the backend has weight 0, so HAProxy answers 503:\nbackend %s", backend)
			}
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("servers = %v, want %v; configuration:\n%s", got, want, rendered)
	}
}

// checkLines fails the test for each of want that is not a line of rendered.
func checkLines(t *testing.T, rendered string, want []string) {
	t.Helper()
	lines := map[string]bool{}
	for _, l := range strings.Split(rendered, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("no line %q in the configuration:\n%s", w, rendered)
		}
	}
}

// loadIn writes the rendered piece into a whole configuration of the
// program, listening on loopback only, and has the program check it.
func loadIn(t *testing.T, name, program, rendered string) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	if name == "nginx" {
		upstream := regexp.MustCompile(`(?m)^upstream\s+(\S+)`).FindStringSubmatch(rendered)
		if upstream == nil {
			t.Fatalf("no upstream in:\n%s", rendered)
		}
		writeText(t, filepath.Join(dir, "upstream.conf"), rendered)
		conf := filepath.Join(dir, "nginx.conf")
		writeText(t, conf, fmt.Sprintf(`pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events {}
http {
  access_log off;
  client_body_temp_path %[1]s/client_body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  include %[1]s/upstream.conf;
  server {
    listen 127.0.0.1:18080;
    location / {
      proxy_pass http://%[2]s;
    }
  }
}
`, dir, upstream[1]))
		return exec.Command(program, "-t", "-q", "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", conf).CombinedOutput()
	}
	backend := regexp.MustCompile(`(?m)^backend\s+(\S+)`).FindStringSubmatch(rendered)
	if backend == nil {
		t.Fatalf("no backend in:\n%s", rendered)
	}
	conf := filepath.Join(dir, "haproxy.cfg")
	writeText(t, conf, fmt.Sprintf(`defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s

frontend pool
    bind 127.0.0.1:18081
    default_backend %s

%s`, backend[1], rendered))
	return exec.Command(program, "-c", "-q", "-f", conf).CombinedOutput()
}

// The target group names of examples/pools/fleet-aws-target-groups, its
// expression evaluated by terraform for keys that collide when cut at 32
// characters, or whose cut ends in hyphens: unique, at most 32 letters,
// digits and hyphens, never starting or ending with a hyphen, as AWS asks.
func TestFleetTargetGroupNamesAreWhatAWSTakes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "pools", "fleet-aws-target-groups", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)resource "aws_lb_target_group" "pool" \{(.*?)\n\}`).FindSubmatch(b)
	if block == nil {
		t.Fatal(`no resource "aws_lb_target_group" "pool" in the example`)
	}
	name := regexp.MustCompile(`(?m)^\s*name\s*=\s*(.+)$`).FindSubmatch(block[1])
	if name == nil {
		t.Fatal("no name in the example's aws_lb_target_group.pool")
	}
	keys := []string{
		"team-a-production-eu/web-frontend-a", // the two cut at 32 are the same
		"team-a-production-eu/web-frontend-b",
		"team-a-production-europe-west-1/web", // cut at 32, ends in "-"
		"team-a-production-euro/web",          // cut at 23, ends in "-"
		"shop/web--------------------x",
		"a/b-c", "a-b/c", // one "<namespace>-<name>" for two keys
		"n123456789012345678901234567890123456789012345678901234567890123/s123456789012345678901234567890123456789012345678901234567890123",
		"shop/web",
	}
	dir := t.TempDir()
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = fmt.Sprintf("%q", k)
	}
	writeText(t, filepath.Join(dir, "main.tf"), fmt.Sprintf(`
resource "terraform_data" "name" {
  for_each = toset([%s])
  input    = %s
}
output "names" {
  value = { for k, r in terraform_data.name : k => r.output }
}
`, strings.Join(quoted, ", "), name[1]))
	run := func(args ...string) []byte {
		cmd := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("terraform %v: %v\n%s", args, err, out)
		}
		return out
	}
	run("apply", "-auto-approve", "-input=false", "-no-color")
	var names map[string]string
	if err := json.Unmarshal(run("output", "-json", "names"), &names); err != nil {
		t.Fatal(err)
	}
	valid := regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`)
	seen := map[string]string{}
	for _, k := range keys {
		n, ok := names[k]
		switch {
		case !ok:
			t.Errorf("no name for %s", k)
		case len(n) > 32 || !valid.MatchString(n):
			t.Errorf("%s: name %q (%d characters) is not a target group name", k, n, len(n))
		case seen[n] != "":
			t.Errorf("%s and %s both get %q", seen[n], k, n)
		}
		seen[n] = k
	}
	if t.Failed() {
		t.Logf("expression: %s", name[1])
	}
}
