// Package readme walks README.md as a new user: the provider installed by
// `make mirror` into a fresh HOME, the quick start's configuration as it is
// written, `init` and `plan` with the real CLI against a Service made as the
// quick start's kubectl commands make it. `make testacc-readme` runs it on
// each CLI of ACC_CLIS; it needs TF_ACC=1 and TF_ACC_TERRAFORM_PATH (else
// the terraform on PATH).
package readme

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// block is a fenced code block of the README.
type block struct {
	lang string
	line int
	code string
}

// section is the fenced code blocks of the README's section titled title
// (a "## " heading), in order.
func section(markdown, title string) ([]block, error) {
	var (
		blocks  []block
		current *block
		inside  bool
		found   bool
	)
	for i, line := range strings.Split(markdown, "\n") {
		switch {
		case current != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *current)
			current = nil
		case current != nil:
			current.code += line + "\n"
		case strings.HasPrefix(line, "## "):
			inside = line == "## "+title
			found = found || inside
		case inside && strings.HasPrefix(strings.TrimSpace(line), "```"):
			current = &block{lang: strings.TrimPrefix(strings.TrimSpace(line), "```"), line: i + 1}
		}
	}
	if !found {
		return nil, fmt.Errorf("no section %q", "## "+title)
	}
	return blocks, nil
}

// quickStart is what the test takes from the README's quick start.
type quickStart struct {
	// mainTF is its one hcl block, the configuration a user copies.
	mainTF string
	// namespace and service are those of its k8s_ready_endpoints.
	namespace, service string
	// The Service its kubectl commands make: `kubectl [-n ns] expose
	// deployment <app> --port=<port> --target-port=<targetPort>`.
	exposed             exposed
	commands            string
	hclLine, exposeLine int
}

type exposed struct {
	namespace, app   string
	port, targetPort int
}

var exposeCommand = regexp.MustCompile(`^kubectl\s+(?:(?:-n|--namespace)[ =](\S+)\s+)?expose\s+deployment\s+(\S+)\s+--port=(\d+)\s+--target-port=(\d+)\s*(?:#.*)?$`)

func parseQuickStart(markdown string) (quickStart, error) {
	var q quickStart
	blocks, err := section(markdown, "Quick start")
	if err != nil {
		return q, err
	}
	var hclBlocks []block
	for _, b := range blocks {
		switch b.lang {
		case "hcl":
			hclBlocks = append(hclBlocks, b)
		case "sh":
			q.commands += b.code
			for i, line := range strings.Split(b.code, "\n") {
				m := exposeCommand.FindStringSubmatch(strings.TrimSpace(line))
				if m == nil {
					continue
				}
				if q.exposeLine != 0 {
					return q, fmt.Errorf("README.md:%d: a second kubectl expose", b.line+1+i)
				}
				q.exposeLine = b.line + 1 + i
				q.exposed.namespace, q.exposed.app = m[1], m[2]
				if q.exposed.namespace == "" {
					q.exposed.namespace = "default"
				}
				q.exposed.port, _ = strconv.Atoi(m[3])
				q.exposed.targetPort, _ = strconv.Atoi(m[4])
			}
		}
	}
	if len(hclBlocks) != 1 {
		return q, fmt.Errorf("the quick start has %d hcl blocks, want one: the main.tf a user copies", len(hclBlocks))
	}
	if q.exposeLine == 0 {
		return q, fmt.Errorf("the quick start has no `kubectl -n <namespace> expose deployment <name> --port=<port> --target-port=<port>` in a sh block")
	}
	q.mainTF, q.hclLine = hclBlocks[0].code, hclBlocks[0].line
	file, diags := hclsyntax.ParseConfig([]byte(q.mainTF), "main.tf", hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return q, fmt.Errorf("README.md:%d: the quick start's main.tf: %s", q.hclLine, diags.Error())
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		return q, fmt.Errorf("README.md:%d: the quick start's main.tf is not native HCL syntax", q.hclLine)
	}
	for _, b := range body.Blocks {
		if b.Type != "data" || len(b.Labels) != 2 || b.Labels[0] != "k8s_ready_endpoints" {
			continue
		}
		if q.service != "" {
			return q, fmt.Errorf("README.md:%d: the quick start reads more than one k8s_ready_endpoints", q.hclLine)
		}
		q.namespace = "default"
		for name, target := range map[string]*string{"namespace": &q.namespace, "service": &q.service} {
			attr, ok := b.Body.Attributes[name]
			if !ok {
				continue
			}
			v, diags := attr.Expr.Value(nil)
			if diags.HasErrors() || !v.Type().Equals(cty.String) || !v.IsKnown() || v.IsNull() {
				return q, fmt.Errorf("README.md:%d: %s of data.k8s_ready_endpoints.%s is not a literal string", q.hclLine, name, b.Labels[1])
			}
			*target = v.AsString()
		}
	}
	if q.service == "" {
		return q, fmt.Errorf("README.md:%d: the quick start's main.tf reads no k8s_ready_endpoints with a service", q.hclLine)
	}
	return q, nil
}

// TestQuickStartOfTheReadme holds what the acceptance test relies on, without
// a cluster: one main.tf, a Service made by kubectl expose that is the one
// the configuration reads, and the commands a new user runs.
func TestQuickStartOfTheReadme(t *testing.T) {
	q := readQuickStart(t)
	if q.exposed.namespace != q.namespace || q.exposed.app != q.service {
		t.Errorf("README.md:%d exposes %s/%s, but the main.tf of README.md:%d reads %s/%s",
			q.exposeLine, q.exposed.namespace, q.exposed.app, q.hclLine, q.namespace, q.service)
	}
	for _, c := range []string{"terraform init", "terraform plan"} {
		if !strings.Contains(q.commands, c) {
			t.Errorf("the quick start's commands do not run %q", c)
		}
	}
	if strings.Contains(q.mainTF, "dev_overrides") {
		t.Error("the quick start's configuration names dev_overrides: users install with init")
	}
}

func TestParseQuickStart(t *testing.T) {
	const tf = "```hcl\ndata \"k8s_ready_endpoints\" \"w\" {\n  service = \"web\"\n}\n```\n"
	tests := []struct {
		name, markdown string
		want           quickStart
		err            string
	}{
		{
			name:     "a Service in the default namespace",
			markdown: "# R\n\n## Quick start\n\n```sh\nkubectl expose deployment web --port=80 --target-port=8080\n```\n\n" + tf + "\n## Next\n```hcl\nx\n```\n",
			want:     quickStart{namespace: "default", service: "web", exposed: exposed{"default", "web", 80, 8080}, hclLine: 9, exposeLine: 6},
		},
		{
			name:     "a namespace given with -n and a comment after the command",
			markdown: "## Quick start\n```sh\nkubectl -n shop expose deployment web --port=80 --target-port=8080  # one port\n```\n" + strings.Replace(tf, "service", "namespace = \"shop\"\n  service", 1),
			want:     quickStart{namespace: "shop", service: "web", exposed: exposed{"shop", "web", 80, 8080}, hclLine: 5, exposeLine: 3},
		},
		{
			name:     "no quick start",
			markdown: "## Install\n" + tf,
			err:      `no section "## Quick start"`,
		},
		{
			name:     "two configurations",
			markdown: "## Quick start\n```sh\nkubectl expose deployment web --port=80 --target-port=8080\n```\n" + tf + tf,
			err:      "2 hcl blocks",
		},
		{
			name:     "no kubectl expose",
			markdown: "## Quick start\n" + tf,
			err:      "no `kubectl",
		},
		{
			name:     "no data source",
			markdown: "## Quick start\n```sh\nkubectl expose deployment web --port=80 --target-port=8080\n```\n```hcl\nprovider \"k8s\" {}\n```\n",
			err:      "reads no k8s_ready_endpoints",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseQuickStart(tt.markdown)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.mainTF, got.commands = "", ""
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func readQuickStart(t *testing.T) quickStart {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	markdown, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := parseQuickStart(string(markdown))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	return q
}

// mirrorLine is what scripts/mirror.sh prints for each directory it writes.
var mirrorLine = regexp.MustCompile(`(?m)^mirror: (\S+) \((\S+)/vigie/k8s (\S+)\)$`)

// TestAccReadmeQuickStart is the README's quick start as a new user runs it:
// a HOME of their own with nothing in it, `make mirror`, the quick start's
// main.tf unchanged in an empty directory, the kubeconfig in ~/.kube/config,
// then `init` (a lock file) and `plan`, which prints the pool.
func TestAccReadmeQuickStart(t *testing.T) {
	if env.cluster == nil {
		t.Skip("acceptance test: set TF_ACC=1 (make testacc-readme does), and TF_ACC_TERRAFORM_PATH for a CLI other than the terraform on PATH")
	}
	q := readQuickStart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	home := t.TempDir()
	userEnv := newUserEnv(t, home)

	// make mirror, as the README's Install says, for this CLI.
	start := time.Now()
	mirror := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", env.root, "mirror", "MIRROR_CLIS="+env.cli)
	mirror.Env = append(slices.Clone(userEnv), goEnv(t)...)
	out, err := mirror.CombinedOutput()
	if err != nil {
		t.Fatalf("make mirror: %v\n%s", err, out)
	}
	laidOut := mirrorLine.FindAllStringSubmatch(string(out), -1)
	if len(laidOut) != 1 {
		t.Fatalf("make mirror laid out %d directories for %s, want one:\n%s", len(laidOut), env.cli, out)
	}
	binary, host, version := laidOut[0][1], laidOut[0][2], laidOut[0][3]
	implied := filepath.Join(home, ".terraform.d", "plugins")
	if !strings.HasPrefix(binary, implied+string(filepath.Separator)) {
		t.Fatalf("make mirror wrote %s, outside the implied mirror directory %s", binary, implied)
	}
	t.Logf("make mirror took %s: %s", time.Since(start).Round(100*time.Millisecond), binary)

	// The Service of the quick start's kubectl commands: `create deployment`
	// labels its pods app=<name>, `expose` makes one unnamed port.
	client := env.cluster.Client()
	ns := q.namespace
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = testcluster.DeleteNamespace(ctx, client, ns)
	})
	if err := testcluster.WaitForServiceAccount(ctx, client, ns, time.Minute); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": q.exposed.app}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: q.service, Labels: labels},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
			Protocol: corev1.ProtocolTCP, Port: int32(q.exposed.port), TargetPort: intstr.FromInt32(int32(q.exposed.targetPort)),
		}}},
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service %s/%s: %v", ns, q.service, err)
	}
	pods := []testcluster.Pod{
		{Name: q.exposed.app + "-1", IPs: []string{"10.244.7.11"}, Ready: true},
		{Name: q.exposed.app + "-2", IPs: []string{"10.244.7.12"}, Ready: true},
		{Name: q.exposed.app + "-3", IPs: []string{"10.244.7.13"}, Ready: false},
	}
	for _, p := range pods {
		p.Labels, p.Node = labels, node
		p.Ports = map[string]int32{"": int32(q.exposed.targetPort)}
		if err := testcluster.RunPod(ctx, client, ns, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := testcluster.WaitForSlices(ctx, client, ns, q.service, time.Minute, testcluster.EndpointCount(discoveryv1.AddressTypeIPv4, 2, 3)); err != nil {
		t.Fatal(err)
	}

	// The user's kubeconfig, where kubectl has it.
	kubeconfig, err := os.ReadFile(env.cluster.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(q.mainTF), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, env.cli, args...)
		cmd.Dir, cmd.Env = work, userEnv
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s of the quick start's main.tf (README.md:%d): %v\n%s", filepath.Base(env.cli), args[0], q.hclLine, err, out.String())
		}
		t.Logf("%s %s took %s", filepath.Base(env.cli), args[0], time.Since(start).Round(100*time.Millisecond))
		return out.String()
	}

	out = []byte(run("init", "-input=false", "-no-color"))
	if want := "Installed vigie/k8s v" + version; !bytes.Contains(out, []byte(want)) {
		t.Errorf("init does not say %q:\n%s", want, out)
	}
	lock, err := os.ReadFile(filepath.Join(work, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatalf("init wrote no lock file: %v", err)
	}
	if !strings.Contains(string(lock), `provider "`+host+`/vigie/k8s"`) || !regexp.MustCompile(`version\s*=\s*"`+regexp.QuoteMeta(version)+`"`).Match(lock) {
		t.Errorf("the lock file does not select %s/vigie/k8s %s:\n%s", host, version, lock)
	}

	plan := run("plan", "-input=false", "-no-color")
	for _, p := range pods {
		member := fmt.Sprintf("%q", p.IPs[0]+":"+strconv.Itoa(q.exposed.targetPort))
		if got := strings.Contains(plan, member); got != p.Ready {
			t.Errorf("the plan shows %s: %v, want %v (ready: %v):\n%s", member, got, p.Ready, p.Ready, plan)
		}
	}
	if !strings.Contains(plan, "pool") {
		t.Errorf("the plan does not show the output pool:\n%s", plan)
	}
}

// newUserEnv is the environment of a new user whose HOME is home: this
// process's, without the variables of Terraform, OpenTofu, Kubernetes
// clients, XDG directories and make (so that the CLI configuration, the
// plugin directories and the kubeconfig are those of home alone).
func newUserEnv(t *testing.T, home string) []string {
	t.Helper()
	var vars []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "HOME", name == "KUBECONFIG", name == "MAKEFLAGS", name == "MFLAGS", name == "MAKELEVEL",
			strings.HasPrefix(name, "TF_"), strings.HasPrefix(name, "TOFU_"), strings.HasPrefix(name, "KUBE_"),
			strings.HasPrefix(name, "XDG_"), strings.HasPrefix(name, "K8S_TF_"):
			continue
		}
		vars = append(vars, kv)
	}
	return append(vars, "HOME="+home, "CHECKPOINT_DISABLE=1")
}

// goEnv keeps the Go caches and settings of this machine for make mirror's
// build, which a fresh HOME would otherwise start from nothing.
func goEnv(t *testing.T) []string {
	t.Helper()
	var vars []string
	for _, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"} {
		v, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		vars = append(vars, name+"="+strings.TrimSpace(string(v)))
	}
	return vars
}
