// Package bench is make bench: the provider against its targets, by
// measurement and not by timed asserts in tests (a timing bound in a test
// fails on a busy CI machine and proves nothing on a fast one): the plans
// of 1 to 1000 reads, the fleet, the big read, validation, their requests
// at the API server, the binary's size, the Go benchmarks of the rules and
// the before/after with a baseline (bench.go, report.go), the provider's
// profiles and instruction counts (profile.go), and the parts of
// internal/syncbench, imagebench and trafficbench in the same run. See
// bench/README.md for what each number means.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/imagebench"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/syncbench"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/trafficbench"
)

// Options are what the bench's flags say (main.go parses them).
type Options struct {
	// Runs are the timed rounds of each command, Sizes the numbers of data
	// sources planned (100 among them), Out the report's file.
	Runs  int
	Sizes []int
	Out   string
	// Profile adds the provider's profiles and instruction counts
	// (profile.go); GoBench the Go benchmarks of the rules; Incumbent is a
	// built terraform-provider-kubernetes measured too ("": none).
	Profile   bool
	GoBench   bool
	Incumbent string
	// Baseline is a git revision whose provider is measured too, in the
	// same rounds (before/after).
	Baseline string
	// Only "sync" runs the companion's part alone, "traffic" the traffic
	// latency, "image" the image's part, "profile" the profiles; WithSync
	// adds the companion's part to the whole bench (internal/syncbench).
	Only     string
	WithSync bool
	Sync     syncbench.Options
	// WithImage adds the image's part (internal/imagebench).
	WithImage bool
	Image     imagebench.Options
	// TrafficSamples is the number of pods per load balancer of the
	// traffic latency (internal/trafficbench).
	TrafficSamples int
	// InstructionBaselines are the revisions whose instructions per read
	// are counted beside the current build's, InstructionRounds how many
	// times (profile.go; 0: not counted).
	InstructionBaselines []string
	InstructionRounds    int
	// ProfilePlans is how many plans of each read are profiled.
	ProfilePlans int
}

// Run is make bench: the provider against its targets, the parts of
// opts, the report written to opts.Out, relative to root (the repository).
func Run(ctx context.Context, root string, opts Options) error {
	b := &benchRun{Run: &benchrun.Run{Root: root, Out: opts.Out, LoadStart: benchrun.LoadAverage()}, opts: opts}
	work, err := os.MkdirTemp("", "k8s-tf-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b.Work = work
	return b.run(ctx)
}

// benchRun is the read bench's side of the run: the measurements of each
// round, the rusage wrapper (this executable, harness) and the CLI
// configuration (rc) that gives the wrapped providers, the trivial
// provider's build.
type benchRun struct {
	*benchrun.Run
	opts    Options
	harness string
	rc      string
	ms      []*measurement
	trivial string
}

// measurement is one command, run once per round.
type measurement struct {
	title string
	dir   string
	args  []string
	// want is a line the output must contain (an output that counts what was
	// read), or "" when only success is checked.
	want string
	// reads is the number of k8s_ready_endpoints reads per run, fleetReads
	// of k8s_services reads, podLists the LISTs of Pods that pod_health_checks
	// makes (audit log).
	reads, fleetReads, podLists int
	// perRead divides the provider CPU by this many reads in the tables.
	perRead int
	// rusage is the log of the wrapped provider measured.
	rusage string
	// rc, when set, is the CLI configuration of this command instead of the
	// bench's; baselineOf is the current build's measurement that this one
	// repeats with the baseline's provider.
	rc         string
	baselineOf *measurement

	wall, cpu, rss []float64
	starts         []int
	// server is the CPU the control plane (kube-apiserver, etcd and the
	// controller manager) spent during each run, s.
	server []float64
}

func (b *benchRun) run(ctx context.Context) error {
	var err error
	if b.harness, err = os.Executable(); err != nil {
		return err
	}
	if _, err := exec.LookPath("terraform"); err != nil {
		return fmt.Errorf("the bench runs the terraform CLI: %w", err)
	}
	if b.opts.Only == "traffic" {
		b.Say("building the provider release-style (CGO_ENABLED=0 -trimpath -ldflags '-s -w')")
	} else {
		b.Say("building the provider release-style (CGO_ENABLED=0 -trimpath -ldflags '-s -w') and the trivial provider")
	}
	b.Provider = filepath.Join(b.Work, "bin", "terraform-provider-k8s")
	b.trivial = filepath.Join(b.Work, "bin", "terraform-provider-trivial")
	builds := [][]string{
		{b.Root, "-ldflags", "-s -w", "-o", b.Provider, "."},
		{b.Root, "-o", filepath.Join(b.Work, "unstripped"), "."},
		{filepath.Join(b.Root, "tools", "harness"), "-ldflags", "-s -w", "-o", b.trivial, "./trivialprovider"},
	}
	if b.opts.Only == "traffic" {
		builds = builds[:1] // the provider alone: no plan is timed
	}
	if b.opts.Profile {
		builds = append(builds, []string{filepath.Join(b.Root, "tools", "harness"), "-o", filepath.Join(b.Work, "profile", "terraform-provider-k8s"), "./profiledprovider"})
	}
	if b.opts.Only == "profile" {
		builds = slices.Delete(builds, 2, 3) // no trivial provider
	}
	for _, build := range builds {
		if err := benchrun.GoBuild(ctx, build[0], build[1:]...); err != nil {
			return err
		}
	}
	if b.opts.Baseline != "" {
		b.Say("building the provider at %s (the baseline) the same way", b.opts.Baseline)
		if err := b.buildBaseline(ctx); err != nil {
			return err
		}
	}

	b.Say("starting the local control plane with an audit log")
	b.Cluster, err = testcluster.Start(ctx, testcluster.Options{Dir: filepath.Join(b.Work, "cluster"), Version: os.Getenv("K8S_TF_K8S_VERSION"), Audit: true, Log: benchrun.Log})
	if err != nil {
		return err
	}
	defer b.Cluster.Stop()
	cfg, err := b.Cluster.RESTConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if b.opts.Only == "traffic" {
		// Its own Service in its own namespace: no fixture.
		b.Env = benchrun.CLIEnv("", b.Cluster.Kubeconfig())
		return runPart(ctx, b, client, b.trafficLatency, trafficbench.Section, "bench -only traffic", "`bin/harness bench -only traffic` (tools/harness)")
	}
	b.Say("fixture: %d Services x 10 ready pods, and a Service with %d endpoints", fixture.FleetServices, fixture.BigEndpoints)
	if err := fixture.Create(ctx, client, fixture.FleetServices, 10, benchrun.Log); err != nil {
		return err
	}
	if err := b.prepare(ctx, client); err != nil {
		return err
	}
	switch b.opts.Only {
	case "sync":
		return runPart(ctx, b, client, b.benchSync, syncbench.Section, "make bench-sync", "`make bench-sync` (tools/harness bench -only sync)")
	case "image":
		return runPart(ctx, b, client, b.benchImage, imagebench.Section, "make bench-image", "`make bench-image` (tools/harness bench -only image)")
	case "profile":
		return runPart(ctx, b, client, func(ctx context.Context, _ kubernetes.Interface) (*profileResults, error) { return b.profileReads(ctx) },
			profileSection, "bench -only profile", "`bin/harness bench -only profile` (tools/harness)")
	}

	b.Say("warm-up: one untimed run of each command")
	for _, m := range b.ms {
		if _, err := b.runOnce(ctx, m, false); err != nil {
			return err
		}
	}
	b.Say("%d rounds of every command, interleaved so that a busy moment hits them alike", b.opts.Runs)
	auditFrom := fileSize(filepath.Join(b.Cluster.Dir, testcluster.AuditLog))
	for r := 1; r <= b.opts.Runs; r++ {
		var line []string
		for _, m := range b.ms {
			wall, err := b.runOnce(ctx, m, true)
			if err != nil {
				return err
			}
			line = append(line, fmt.Sprintf("%.2fs", wall))
		}
		fmt.Fprintf(benchrun.Log, "  round %d: %s\n", r, strings.Join(line, " "))
	}
	// The audit backend writes each event when its request completes; give
	// the last ones a moment.
	time.Sleep(time.Second)
	requests, err := readAudit(filepath.Join(b.Cluster.Dir, testcluster.AuditLog), auditFrom)
	if err != nil {
		return err
	}

	trafficRes, err := b.trafficLatency(ctx, client)
	if err != nil {
		return err
	}

	var profiles *profileResults
	if b.opts.Profile {
		if profiles, err = b.profileReads(ctx); err != nil {
			return err
		}
	}
	var syncRes *syncbench.Results
	if b.opts.WithSync {
		if syncRes, err = b.benchSync(ctx, client); err != nil {
			return err
		}
	}
	var imageRes *imagebench.Results
	if b.opts.WithImage {
		if imageRes, err = b.benchImage(ctx, client); err != nil {
			return err
		}
	}
	b.Cluster.Stop()

	b.Say("binary size")
	sizesTable, err := b.sizes()
	if err != nil {
		return err
	}
	var gobench []goBenchmark
	if b.opts.GoBench {
		b.Say("Go benchmarks of the rules (internal/endpoints), -count=5")
		if gobench, err = runGoBenchmarks(ctx, b.Root); err != nil {
			return err
		}
	}
	report := b.report(requests, sizesTable, gobench, currentReportEnv()) + profileSection(profiles) + syncbench.Section(syncRes) + "\n" + imagebench.Section(imageRes) + "\n" + trafficbench.Section(trafficRes)
	return b.WriteReport(report)
}

// benchSync is the companion's part (internal/syncbench).
func (b *benchRun) benchSync(ctx context.Context, client kubernetes.Interface) (*syncbench.Results, error) {
	return syncbench.Measure(ctx, b.Run, client, b.opts.Sync)
}

// benchImage is the image's part (internal/imagebench).
func (b *benchRun) benchImage(ctx context.Context, client kubernetes.Interface) (*imagebench.Results, error) {
	return imagebench.Measure(ctx, b.Run, client, b.opts.Image)
}

// trafficLatency is the traffic's part (internal/trafficbench).
func (b *benchRun) trafficLatency(ctx context.Context, client kubernetes.Interface) (*trafficbench.Results, error) {
	return trafficbench.Measure(ctx, b.Run, client, b.opts.TrafficSamples)
}

// buildBaseline builds the provider at opts.Baseline as run builds the
// current one.
func (b *benchRun) buildBaseline(ctx context.Context) error {
	b.BaselineProvider = filepath.Join(b.Work, "bin", "baseline", "terraform-provider-k8s")
	var err error
	b.BaselineCommit, err = b.BuildAt(ctx, b.opts.Baseline, b.BaselineProvider, true)
	return err
}

// prepare writes the configurations, the wrappers and the CLI configuration,
// and lists the measurements in the order of each round.
func (b *benchRun) prepare(ctx context.Context, client kubernetes.Interface) error {
	kubeconfig := b.Cluster.Kubeconfig()
	// A provider that reports what the kernel accounted to it: Terraform
	// starts whatever it finds under the provider's name in the override
	// directory, here a script that execs the wrapper, which runs the real one.
	// The wrapper of the provider of type kind is wrap/name/terraform-provider-kind.
	wrap := func(name, kind, program string) (string, error) {
		dir := filepath.Join(b.Work, "wrap", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		log := filepath.Join(b.Work, "rusage-"+name+".log")
		script := fmt.Sprintf("#!/bin/sh\nexec %q rusage-wrap %q %q\n", b.harness, log, program)
		return log, os.WriteFile(filepath.Join(dir, "terraform-provider-"+kind), []byte(script), 0o755)
	}
	k8sLog, err := wrap("k8s", "k8s", b.Provider)
	if err != nil {
		return err
	}
	trivialLog, err := wrap("trivial", "trivial", b.trivial)
	if err != nil {
		return err
	}
	overrides := map[string]string{"vigie/k8s": "k8s", "vigie/trivial": "trivial"}
	var incumbentLog string
	if b.opts.Incumbent != "" {
		if incumbentLog, err = wrap("kubernetes", "kubernetes", b.opts.Incumbent); err != nil {
			return err
		}
		overrides["hashicorp/kubernetes"] = "kubernetes"
	}
	b.rc = filepath.Join(b.Work, "terraformrc")
	if err := benchrun.WriteRC(b.rc, filepath.Join(b.Work, "wrap"), overrides); err != nil {
		return err
	}
	b.Env = benchrun.CLIEnv(b.rc, kubeconfig)

	plan := []string{"plan", "-input=false", "-lock=false", "-parallelism=10", "-no-color"}
	for _, n := range b.opts.Sizes {
		dir, err := b.Config(fmt.Sprintf("k8s-%d", n), k8sConfig(fixture.Namespace, n, nil))
		if err != nil {
			return err
		}
		b.ms = append(b.ms, &measurement{title: fmt.Sprintf("`terraform plan`, %d `k8s_ready_endpoints`", n), dir: dir, args: plan,
			want: fmt.Sprintf("ready_endpoints = %d", n*10), reads: n, perRead: n, rusage: k8sLog})
	}
	// The same 100 reads with pod_health_checks: one more LIST each, of the
	// Service's Pods (which declare a readinessProbe); the output counts the
	// endpoints that got a check.
	dir, err := b.Config("k8s-100-checks", k8sCheckedConfig(fixture.Namespace, 100))
	if err != nil {
		return err
	}
	b.ms = append(b.ms, &measurement{title: "`terraform plan`, 100 `k8s_ready_endpoints` with `pod_health_checks`", dir: dir, args: plan,
		want: fmt.Sprintf("checked_endpoints = %d", 100*10), reads: 100, podLists: 100, perRead: 100, rusage: k8sLog})
	if dir, err = b.Config("trivial-100", trivialConfig(100)); err != nil {
		return err
	}
	b.ms = append(b.ms, &measurement{title: "`terraform plan`, 100 `trivial_constant` (Terraform's floor)", dir: dir, args: plan,
		want: "constants = 100", perRead: 100, rusage: trivialLog})
	fleet := make([]string, fixture.FleetServices)
	for i := range fleet {
		fleet[i] = fixture.ServiceName(i)
	}
	if dir, err = b.Config(fmt.Sprintf("k8s-each-%d", fixture.FleetServices), k8sConfig(fixture.Namespace, fixture.FleetServices, fleet)); err != nil {
		return err
	}
	b.ms = append(b.ms, &measurement{title: fmt.Sprintf("`terraform plan`, %d `k8s_ready_endpoints`, one per Service", fixture.FleetServices), dir: dir, args: plan,
		want: fmt.Sprintf("ready_endpoints = %d", fixture.FleetServices*10), reads: fixture.FleetServices, perRead: fixture.FleetServices, rusage: k8sLog})
	if dir, err = b.Config("fleet", fleetConfig()); err != nil {
		return err
	}
	b.ms = append(b.ms, &measurement{title: fmt.Sprintf("`terraform plan`, 1 `k8s_services` of the same %d Services", fixture.FleetServices), dir: dir, args: plan,
		want: fmt.Sprintf("fleet_endpoints = %d", fixture.FleetServices*10), fleetReads: 1, perRead: 1, rusage: k8sLog})
	if dir, err = b.Config("fleet-checks", fleetCheckedConfig()); err != nil {
		return err
	}
	b.ms = append(b.ms, &measurement{title: fmt.Sprintf("`terraform plan`, 1 `k8s_services` of the same %d Services with `pod_health_checks`", fixture.FleetServices), dir: dir, args: plan,
		want: fmt.Sprintf("checked_endpoints = %d", fixture.FleetServices*10), fleetReads: 1, podLists: fleetPodPages(), perRead: 1, rusage: k8sLog})
	dir, err = b.Config("big", k8sConfig(fixture.BigNamespace, 1, []string{fixture.BigService}))
	if err != nil {
		return err
	}
	b.ms = append(b.ms, &measurement{title: fmt.Sprintf("`terraform plan`, 1 `k8s_ready_endpoints` of a Service with %d endpoints", fixture.BigEndpoints), dir: dir, args: plan,
		want: fmt.Sprintf("ready_endpoints = %d", fixture.BigEndpoints), reads: 1, perRead: 1, rusage: k8sLog})
	if b.opts.Incumbent != "" {
		sliceNames, err := firstSlices(ctx, client, 100)
		if err != nil {
			return err
		}
		for _, kind := range []string{"kubernetes_endpoints_v1", "kubernetes_endpoint_slice_v1"} {
			dir, err := b.Config(kind, incumbentConfig(kind, kubeconfig, sliceNames))
			if err != nil {
				return err
			}
			b.ms = append(b.ms, &measurement{title: fmt.Sprintf("`terraform plan`, 100 `%s` (incumbent)", kind), dir: dir, args: plan,
				perRead: 100, rusage: incumbentLog})
		}
	}
	validate := []string{"validate", "-no-color"}
	b.ms = append(b.ms, &measurement{title: "`terraform validate`, 100 `k8s_ready_endpoints`", dir: b.DirOf("k8s-100"), args: validate, rusage: k8sLog})
	dir, err = b.Config("empty", "terraform {}\n")
	if err != nil {
		return err
	}
	b.ms = append(b.ms, &measurement{title: "`terraform validate`, empty configuration (the bare CLI)", dir: dir, args: validate})
	if b.opts.Baseline != "" {
		return b.addBaseline(wrap)
	}
	return nil
}

// baselineCompared are the measurements repeated with the baseline's
// provider (prefixes of their titles): the plan of 100 reads, the fleet read
// and the read of fixture.BigEndpoints endpoints.
var baselineCompared = []string{
	"`terraform plan`, 100 `k8s_ready_endpoints`",
	"`terraform plan`, 1 `k8s_services`",
	"`terraform plan`, 1 `k8s_services` of the same 500 Services with `pod_health_checks`",
	"`terraform plan`, 1 `k8s_ready_endpoints` of a Service",
}

// addBaseline puts after each measurement of baselineCompared the same
// command, in the same directory, with a CLI configuration of its own whose
// dev_overrides give the wrapped baseline provider.
func (b *benchRun) addBaseline(wrap func(name, kind, program string) (string, error)) error {
	log, err := wrap("k8s-baseline", "k8s", b.BaselineProvider)
	if err != nil {
		return err
	}
	rc := filepath.Join(b.Work, "terraformrc-baseline")
	if err := os.WriteFile(rc, []byte(testcluster.DevOverrides(filepath.Join(b.Work, "wrap", "k8s-baseline"))), 0o600); err != nil {
		return err
	}
	var ms []*measurement
	for _, m := range b.ms {
		ms = append(ms, m)
		for _, prefix := range baselineCompared {
			if m == b.find(prefix) {
				base := *m
				base.title += " (baseline)"
				base.rusage, base.rc, base.baselineOf = log, rc, m
				ms = append(ms, &base)
			}
		}
	}
	b.ms = ms
	return nil
}

// k8sConfig is n data sources, the i-th on Service svc-(i mod 100) (or on
// the given services), and an output that sums the endpoints read, so that
// every run also checks what was read.
func k8sConfig(namespace string, n int, services []string) string {
	var c strings.Builder
	c.WriteString("terraform {\n  required_providers {\n    k8s = { source = \"vigie/k8s\" }\n  }\n}\n\nprovider \"k8s\" {}\n")
	var sum []string
	for i := range n {
		svc := fixture.ServiceName(i % 100)
		if services != nil {
			svc = services[i%len(services)]
		}
		fmt.Fprintf(&c, "\ndata \"k8s_ready_endpoints\" \"r_%04d\" {\n  namespace = %q\n  service   = %q\n  port_name = \"http\"\n}\n", i, namespace, svc)
		sum = append(sum, fmt.Sprintf("    length(data.k8s_ready_endpoints.r_%04d.endpoints),\n", i))
	}
	fmt.Fprintf(&c, "\noutput \"ready_endpoints\" {\n  value = sum([\n%s  ])\n}\n", strings.Join(sum, ""))
	return c.String()
}

// k8sCheckedConfig is n data sources with pod_health_checks, the i-th on
// Service svc-(i mod 100), and an output that counts the endpoints that have
// a health check.
func k8sCheckedConfig(namespace string, n int) string {
	var c strings.Builder
	c.WriteString("terraform {\n  required_providers {\n    k8s = { source = \"vigie/k8s\" }\n  }\n}\n\nprovider \"k8s\" {}\n")
	var sum []string
	for i := range n {
		fmt.Fprintf(&c, "\ndata \"k8s_ready_endpoints\" \"r_%04d\" {\n  namespace         = %q\n  service           = %q\n  port_name         = \"http\"\n  pod_health_checks = true\n}\n",
			i, namespace, fixture.ServiceName(i%100))
		sum = append(sum, fmt.Sprintf("    length([for e in data.k8s_ready_endpoints.r_%04d.endpoints : e if e.health_check != null]),\n", i))
	}
	fmt.Fprintf(&c, "\noutput \"checked_endpoints\" {\n  value = sum([\n%s  ])\n}\n", strings.Join(sum, ""))
	return c.String()
}

// fleetConfig is one k8s_services read of the namespace's Services, and an
// output that sums the endpoints read.
func fleetConfig() string {
	return "terraform {\n  required_providers {\n    k8s = { source = \"vigie/k8s\" }\n  }\n}\n\nprovider \"k8s\" {}\n" +
		fmt.Sprintf("\ndata \"k8s_services\" \"fleet\" {\n  namespace = %q\n  port_name = \"http\"\n}\n", fixture.Namespace) +
		"\noutput \"fleet_endpoints\" {\n  value = sum([for s in data.k8s_services.fleet.services : length(s.endpoints)])\n}\n"
}

// fleetPodPages is how many pages a LIST of the fleet's Pods takes.
func fleetPodPages() int {
	size := int(kube.DefaultOptions().PageSize)
	return (fixture.FleetServices*10 + size - 1) / size
}

// fleetCheckedConfig is fleetConfig with pod_health_checks, its output
// counting the endpoints that have a health check.
func fleetCheckedConfig() string {
	return "terraform {\n  required_providers {\n    k8s = { source = \"vigie/k8s\" }\n  }\n}\n\nprovider \"k8s\" {}\n" +
		fmt.Sprintf("\ndata \"k8s_services\" \"fleet\" {\n  namespace         = %q\n  port_name         = \"http\"\n  pod_health_checks = true\n}\n", fixture.Namespace) +
		"\noutput \"checked_endpoints\" {\n  value = sum([for s in data.k8s_services.fleet.services : length([for e in s.endpoints : e if e.health_check != null])])\n}\n"
}

func trivialConfig(n int) string {
	var c strings.Builder
	c.WriteString("terraform {\n  required_providers {\n    trivial = { source = \"vigie/trivial\" }\n  }\n}\n")
	var all []string
	for i := range n {
		fmt.Fprintf(&c, "\ndata \"trivial_constant\" \"c_%04d\" {\n  name = %q\n}\n", i, fixture.ServiceName(i%100))
		all = append(all, fmt.Sprintf("data.trivial_constant.c_%04d.value", i))
	}
	fmt.Fprintf(&c, "\noutput \"constants\" {\n  value = length([%s])\n}\n", strings.Join(all, ", "))
	return c.String()
}

// incumbentConfig reads the 100 Services with the incumbent's data sources:
// the Endpoints object of each, or its first EndpointSlice (that data source
// reads one slice by name).
func incumbentConfig(kind, kubeconfig string, sliceNames []string) string {
	var c strings.Builder
	fmt.Fprintf(&c, "terraform {\n  required_providers {\n    kubernetes = { source = \"hashicorp/kubernetes\" }\n  }\n}\n\nprovider \"kubernetes\" {\n  config_path = %q\n}\n", kubeconfig)
	for i := range 100 {
		name := fixture.ServiceName(i)
		if kind == "kubernetes_endpoint_slice_v1" {
			name = sliceNames[i]
		}
		fmt.Fprintf(&c, "\ndata %q \"r_%04d\" {\n  metadata {\n    name      = %q\n    namespace = %q\n  }\n}\n", kind, i, name, fixture.Namespace)
	}
	return c.String()
}

func firstSlices(ctx context.Context, client kubernetes.Interface, services int) ([]string, error) {
	names := make([]string, services)
	for i := range services {
		list, err := client.DiscoveryV1().EndpointSlices(fixture.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + fixture.ServiceName(i)})
		if err != nil {
			return nil, err
		}
		if len(list.Items) == 0 {
			return nil, fmt.Errorf("service %s has no EndpointSlice", fixture.ServiceName(i))
		}
		names[i] = list.Items[0].Name
	}
	return names, nil
}

// runOnce runs m's command; when record is set, it records its wall time
// and what the kernel accounted to its provider processes.
func (b *benchRun) runOnce(ctx context.Context, m *measurement, record bool) (float64, error) {
	for _, mm := range b.ms {
		if mm.rusage != "" {
			_ = os.Remove(mm.rusage)
		}
	}
	cmd := exec.CommandContext(ctx, "terraform", append([]string{"-chdir=" + m.dir}, m.args...)...)
	cmd.Env = b.Env
	if m.rc != "" {
		cmd.Env = append(slices.Clone(b.Env), "TF_CLI_CONFIG_FILE="+m.rc)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	pids := b.Cluster.PIDs()
	serverBefore := processesCPU(pids)
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start).Seconds()
	server := processesCPU(pids) - serverBefore
	if err != nil {
		return 0, fmt.Errorf("%s in %s: %w\n%s", strings.Join(m.args, " "), m.dir, err, out.Bytes())
	}
	if m.want != "" && !containsLine(out.String(), m.want) {
		return 0, fmt.Errorf("%s in %s: the output has no line %q:\n%s", strings.Join(m.args, " "), m.dir, m.want, out.Bytes())
	}
	if !record {
		return wall, nil
	}
	m.wall = append(m.wall, wall)
	m.server = append(m.server, server)
	if m.rusage != "" {
		cpu, rss, starts, err := readRusage(m.rusage)
		if err != nil {
			return 0, err
		}
		m.cpu, m.rss, m.starts = append(m.cpu, cpu), append(m.rss, rss), append(m.starts, starts)
	}
	return wall, nil
}

// containsLine: a line of out ends with want, after a space or alone (a plan
// prints "+ name = value").
func containsLine(out, want string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimSpace(line)
		if line == want || strings.HasSuffix(line, " "+want) {
			return true
		}
	}
	return false
}

// processesCPU is the user and system CPU the running processes have
// used so far, s, from /proc/PID/stat (in clock ticks of 1/100 s, the
// USER_HZ of Linux on the machines this runs on). The daemons of the control
// plane live through the whole bench, so the difference around a run is
// what they spent serving it (and anything else they did meanwhile: the
// controller manager's own loops).
func processesCPU(pids map[string]int) float64 {
	var ticks int64
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// After the command name in parentheses: state, then fields 4 on;
		// utime and stime are fields 14 and 15.
		fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(fields) < 13 {
			continue
		}
		var utime, stime int64
		_, _ = fmt.Sscan(fields[11], &utime)
		_, _ = fmt.Sscan(fields[12], &stime)
		ticks += utime + stime
	}
	return float64(ticks) / 100
}

// readRusage sums the CPU (user + system, s) of the provider processes of
// one run, and gives the largest peak RSS (MiB) and how many there were.
func readRusage(path string) (cpu, rss float64, starts int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("no provider process reported its usage: %w", err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		var maxrss, user, sys, wall int64
		if _, err := fmt.Sscan(line, &maxrss, &user, &sys, &wall); err != nil {
			return 0, 0, 0, fmt.Errorf("%s: %q: %w", path, line, err)
		}
		cpu += float64(user+sys) / 1e6
		rss = max(rss, float64(maxrss)/1024)
		starts++
	}
	return cpu, rss, starts, nil
}

// auditCount is the provider's requests, by verb, resource and code.
type auditCount struct {
	byKind    map[string]int
	discovery int
	total     int
}

func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// readAudit reads the audit log from offset: the requests of the provider
// (user agent terraform-provider-k8s...).
func readAudit(path string, offset int64) (auditCount, error) {
	c := auditCount{byKind: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return c, err
	}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var e struct {
			UserAgent  string `json:"userAgent"`
			Verb       string `json:"verb"`
			RequestURI string `json:"requestURI"`
			ObjectRef  *struct {
				Resource string `json:"resource"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if json.Unmarshal(scanner.Bytes(), &e) != nil || !strings.HasPrefix(e.UserAgent, "terraform-provider-k8s") {
			continue
		}
		resource, code := "-", 0
		if e.ObjectRef != nil {
			resource = e.ObjectRef.Resource
		}
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		c.byKind[fmt.Sprintf("%s\t%s\t%d", e.Verb, resource, code)]++
		c.total++
		path, _, _ := strings.Cut(e.RequestURI, "?")
		if isDiscovery(path) {
			c.discovery++
		}
	}
	return c, scanner.Err()
}

// isDiscovery: /api, /apis, their group and version documents, /openapi and
// /version are what a full client-go clientset may fetch.
func isDiscovery(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch parts[0] {
	case "openapi", "version":
		return true
	case "api":
		return len(parts) <= 2
	case "apis":
		return len(parts) <= 3
	}
	return false
}

// runPart is `bench -only sync|traffic|image`: one part alone, its report
// written to -out by benchrun.Run.WritePart.
func runPart[R any](ctx context.Context, b *benchRun, client kubernetes.Interface, measure func(context.Context, kubernetes.Interface) (R, error), section func(R) string, title, by string) error {
	r, err := measure(ctx, client)
	if err != nil {
		return err
	}
	return b.WritePart(title, by, section(r))
}
