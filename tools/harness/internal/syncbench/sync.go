// Package syncbench is the sync companion's part of the bench (issue 19,
// item 8; `make bench-sync`, `bench -only sync`): how soon a run starts
// after a pod's Ready condition is written, with the state in each backend
// and over two clusters, what the companion costs while it watches a large
// fleet and does nothing, `check` against `terraform plan` of the same
// configuration, its scale curve, and each beside the baseline's companion.
// See bench/README.md.
package syncbench

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vigie/terraform-provider-k8s/test/soak"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/companionproc"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/procstat"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/stats"
)

const (
	// syncLatencyNamespace holds the Service whose pool changes.
	syncLatencyNamespace = "bench-sync"
	syncLatencyService   = "lat"
	// syncFleetNamespace holds syncFleetServices selector-less Services with
	// syncFleetEndpoints hand-written endpoints each.
	syncFleetNamespace = "bench-sync-fleet"
	syncFleetServices  = 5000
	syncFleetEndpoints = 10
)

// Options are the flags of the companion's part.
type Options struct {
	changes int
	quiet   time.Duration
	idle    time.Duration
	rounds  int
	// backendRounds are the rounds of backends.go.
	backendRounds int
	// clusterRounds are the rounds of clusters.go.
	clusterRounds int
	// scale are the sizes of the scale curve, scaleChanges the changes
	// timed at each, scaleWait the bound of each companion's start
	// (scale.go).
	scale        sizeList
	scaleChanges int
	scaleWait    time.Duration
	// scaleProfile, when set, is where each scale run's log (with the
	// collector's trace) and a heap profile after its first comparison go,
	// and a CPU profile of the last check of each check-against-plan.
	scaleProfile string
	// churnSizes are the numbers of single data sources under churn,
	// churnFleet the Services of the fleet under churn (0: none),
	// churnDuration the churn of each round, churnRounds the rounds,
	// churnRate the pool changes a minute and churnBurst those of the
	// burst in each round, churnWait the longest wait for every change to
	// reach state after a round's churn (churn.go).
	churnSizes               sizeList
	churnFleet               int
	churnDuration, churnWait time.Duration
	churnRounds              int
	churnRate, churnBurst    int
	// workspaces are the flags of many workspaces (workspaces.go).
	workspaces workspacesOptions
	// parts are the parts run (syncParts).
	parts map[string]bool
}

func (o *Options) Register(flags *flag.FlagSet) {
	flags.IntVar(&o.changes, "sync-changes", 50, "companion: pool changes timed for the detection latency")
	flags.DurationVar(&o.quiet, "sync-quiet", 200*time.Millisecond, "companion: the settle window's quiet time during the latency measurement")
	flags.DurationVar(&o.idle, "sync-idle", 60*time.Second, "companion: the idle window over which its CPU is measured")
	flags.IntVar(&o.rounds, "sync-rounds", 5, "companion: rounds of check and plan, alternating")
	flags.IntVar(&o.backendRounds, "sync-backend-rounds", 10, "companion: rounds of the latency with the state in each backend (local, kubernetes, pg)")
	flags.IntVar(&o.clusterRounds, "sync-cluster-rounds", 10, "companion: rounds of the latency of one pool over two clusters (0: not measured)")
	o.scale = sizeList{5000, 20000, 50000}
	flags.Var(&o.scale, "sync-scale", "companion: the sizes of the scale curve, Services x 10 endpoints in one state, ascending (\"\": none)")
	flags.IntVar(&o.scaleChanges, "sync-scale-changes", 20, "companion: changes timed at each size of the scale curve")
	flags.DurationVar(&o.scaleWait, "sync-scale-wait", 10*time.Minute, "companion: at each size of the scale curve, the longest wait for `watching`, for the first comparison, and for quiet after a run")
	flags.StringVar(&o.scaleProfile, "sync-profile", "", "companion: a directory for each scale run's log (with GODEBUG=gctrace=1) and heap profile (pprof) after its first comparison, and a CPU profile of the last check of each check against plan (\"\": none)")
	o.churnSizes = sizeList{churnTargetSize, churnLargeSize}
	flags.Var(&o.churnSizes, "churn-sizes", "companion under churn: the numbers of k8s_ready_endpoints, each with its terraform_data, ascending, at most 500 (\"\": none)")
	flags.IntVar(&o.churnFleet, "churn-fleet", fixture.FleetServices, "companion under churn: the Services of the k8s_services fleet, a terraform_data each (0: none; at most 500)")
	flags.DurationVar(&o.churnDuration, "churn-duration", 3*time.Minute, "companion under churn: the churn of each round, of each build")
	flags.IntVar(&o.churnRounds, "churn-rounds", 2, "companion under churn: rounds of each configuration, each build in turn")
	soakChurn := soak.Long(0)
	flags.IntVar(&o.churnRate, "churn-rate", soakChurn.ChangesPerMinute, "companion under churn: pool changes a minute (the soak's)")
	flags.IntVar(&o.churnBurst, "churn-burst", soakChurn.Burst, "companion under churn: changes of the burst in the middle of each round (the soak's; 0: none)")
	flags.DurationVar(&o.churnWait, "churn-wait", 5*time.Minute, "companion under churn: the longest wait, after a round's churn, for every change to reach state")
	o.workspaces.register(flags)
	o.parts = map[string]bool{}
	for _, name := range syncParts {
		o.parts[name] = true
	}
	flags.Func("sync-parts", "companion: the parts run, of "+strings.Join(syncParts, ","), func(text string) error {
		parts, err := parseParts(text)
		if err == nil {
			o.parts = parts
		}
		return err
	})
}

// Results is what the companion's part measured.
type Results struct {
	quiet time.Duration
	// latency is, per change, the run's start (its log line) minus the write
	// of the Ready condition minus the quiet time, s; detection is the
	// opening of the settle window (run start minus its "settled") minus the
	// write, s.
	latency, detection []float64
	// extraRuns are runs that no change of the bench explains.
	extraRuns int

	// The companion watching syncFleetServices Services: the wall time from
	// its start to its "watching" line, its CPU then (own, and of the
	// commands it ran and waited for: terraform state pull), its CPU over
	// idle seconds after that, and its peak RSS (VmHWM) at the end, MiB.
	watching, syncWall, syncCPU, syncChildCPU float64
	idle, idleCPU                             float64
	// idleSlices is the CPU of each sixth of the idle window, s; idleGC
	// the garbage collections during it (GODEBUG=gctrace=1), idleForcedGC
	// those the runtime forces every 2 minutes.
	idleSlices           []float64
	idleGC, idleForcedGC int
	peakRSS              float64
	idleRuns             int

	checks []*checkVsPlan
	// backends is the latency with the state in each backend.
	backends *backendLatency
	// clusters is the latency of a pool over two clusters.
	clusters *clusterLatency
	// baseline is the companion at -baseline, measured beside this one.
	baseline *baselineSync
	// scale is the scale curve (scale.go).
	scale *scaleResults
	// churn is the companion under churn (churn.go).
	churn *churnResults
	// workspaces is many workspaces over one cluster (workspaces.go).
	workspaces *workspacesResults
}

// checkVsPlan is `check`, `terraform plan` and the CLI's `terraform state
// pull` alone (what `check` runs to read state) of one configuration, run
// in turn; wall s and CPU s (user + system of the finished process tree).
type checkVsPlan struct {
	title string
	// target is the largest check / plan wall ratio that passes (issue 29:
	// 0.1x for the data sources, 0.5x for the fleet, whose plan is cheap).
	target                                 float64
	checkWall, checkCPU, planWall, planCPU []float64
	pullWall, pullCPU                      []float64
}

// newSyncBench drives the companion and the terraform on PATH with a CLI
// configuration of their own (terraformrc-NAME): the release build
// directly, without the rusage wrapper of the plans.
func (b *part) newSyncBench(client kubernetes.Interface, name string) (*syncBench, error) {
	cli, err := b.NewCLI(name)
	if err != nil {
		return nil, err
	}
	return &syncBench{CLI: cli, b: b, client: client}, nil
}

// part is the companion's part of one bench run.
type part struct {
	*benchrun.Run
	opts Options
	// baselineRC is the CLI configuration of the baseline's companion
	// (baseline.go).
	baselineRC string
}

// Measure runs the companion's part on the run's cluster, with the fleet
// fixture of fixture.Create already there.
func Measure(ctx context.Context, run *benchrun.Run, client kubernetes.Interface, o Options) (*Results, error) {
	b := &part{Run: run, opts: o}
	r := &Results{quiet: o.quiet}
	if o.parts["workspaces"] {
		// Before any part runs (Options.Check, before the cluster starts,
		// checks the churn's flags).
		if err := o.workspaces.check(); err != nil {
			return nil, err
		}
	}
	s, err := b.newSyncBench(client, "sync")
	if err != nil {
		return nil, err
	}
	if err := s.prepareBaseline(r); err != nil {
		return nil, err
	}

	if o.parts["latency"] {
		b.Say("companion: detection latency over %d pool changes (settle quiet time %s)", o.changes, o.quiet)
		if err := s.latency(ctx, r); err != nil {
			return nil, fmt.Errorf("companion latency: %w", err)
		}
	}
	if o.parts["backends"] {
		b.Say("companion: pod Ready to the apply's end with the state in each backend (%s), %d rounds", strings.Join(stateBackends, ", "), o.backendRounds)
		if err := s.backendLatency(ctx, r); err != nil {
			return nil, fmt.Errorf("companion latency by backend: %w", err)
		}
	}
	if o.parts["clusters"] && o.clusterRounds > 0 {
		b.Say("companion: one pool over two clusters (a second control plane), %d rounds", o.clusterRounds)
		if err := s.clusterLatency(ctx, r); err != nil {
			return nil, fmt.Errorf("companion latency over two clusters: %w", err)
		}
	}
	if o.parts["idle"] {
		b.Say("companion: %d Services x %d endpoints watched, %s idle", syncFleetServices, syncFleetEndpoints, o.idle)
		if err := s.idle(ctx, r); err != nil {
			return nil, fmt.Errorf("companion idle: %w", err)
		}
	}
	if o.parts["check"] {
		b.Say("companion: check against terraform plan and the CLI's state pull, %d rounds", o.rounds)
		if err := s.checkVsPlan(ctx, r); err != nil {
			return nil, fmt.Errorf("companion check: %w", err)
		}
	}
	if o.parts["scale"] && len(o.scale) > 0 {
		b.Say("companion: the scale curve, %s Services x %d endpoints, %d changes each, %s idle", o.scale.String(), syncFleetEndpoints, o.scaleChanges, o.idle)
		if err := s.scaleCurve(ctx, r); err != nil {
			return nil, fmt.Errorf("companion scale curve: %w", err)
		}
	}
	if o.parts["churn"] && len(churnConfigs(o)) > 0 {
		if err := o.checkChurn(); err != nil {
			return nil, err
		}
		b.Say("companion under churn: %s, %d round(s) of %s each per build, %d changes a minute and a burst of %d", churnTitles(o), o.churnRounds, o.churnDuration, o.churnRate, o.churnBurst)
		if err := s.churn(ctx, r); err != nil {
			return nil, fmt.Errorf("companion under churn: %w", err)
		}
	}
	if o.parts["workspaces"] {
		b.Say("companion: %d workspaces, one replica against one process each (%s idle), then runs a minute with %s replica(s) under churn (%s each); this build alone", o.workspaces.count, o.workspaces.idle, o.workspaces.replicas.String(), o.workspaces.churn)
		if err := s.workspaces(ctx, r); err != nil {
			return nil, fmt.Errorf("companion with many workspaces: %w", err)
		}
	}
	return r, nil
}

type syncBench struct {
	benchrun.CLI
	b      *part
	client kubernetes.Interface
	// provider is the companion's binary: b.Provider, or the baseline's
	// (baseline.go).
	provider string
}

// latency: a Service of 4 ready pods, one of which is made not ready and
// ready again, alternately, so that each change removes or adds a member.
// The companion's command is a refresh-only apply, so that state follows
// the pool: with a command that changes nothing (true), the pool would
// still differ from state after the run (a run again and again), and every
// other change would only bring the pool back to what state has (no run).
// That command's time comes after the run's start and is not measured.
func (s *syncBench) latency(ctx context.Context, r *Results) error {
	o := s.b.opts
	client := s.client
	const pods = 4
	// One Service, configuration and companion per build: this one, and the
	// baseline's when there is one, changed in turn in the same rounds.
	type measured struct {
		s                  *syncBench
		c                  *companionproc.Proc
		service            string
		latency, detection *[]float64
		extraRuns          *int
	}
	var each []*measured
	for i, build := range s.builds(r) {
		service, dirName := syncLatencyService, "sync-latency"
		if i > 0 {
			service, dirName = syncLatencyService+"-baseline", "sync-latency-baseline"
		}
		if err := fixture.CreateLatencyService(ctx, client, syncLatencyNamespace, service, pods, fmt.Sprintf("10.250.%d.%%d", i)); err != nil {
			return err
		}
		dir, err := build.Applied(ctx, dirName, benchrun.ProviderBlock+fmt.Sprintf(
			"\ndata \"k8s_ready_endpoints\" \"lat\" {\n  namespace = %q\n  service   = %q\n  port_name = \"http\"\n}\n\noutput \"members\" {\n  value = length(data.k8s_ready_endpoints.lat.endpoints)\n}\n",
			syncLatencyNamespace, service))
		if err != nil {
			return err
		}
		c, err := build.startCompanion(ctx, dir, "-settle-quiet", o.quiet.String(), "-settle-max", (o.quiet + 2*time.Second).String(),
			"-command", commandLine(build.Terraform, "apply", "-refresh-only", "-auto-approve", "-input=false", "-no-color"))
		if err != nil {
			return err
		}
		defer c.Halt()
		m := &measured{s: build, c: c, service: service, latency: &r.latency, detection: &r.detection, extraRuns: &r.extraRuns}
		if i > 0 {
			m.latency, m.detection, m.extraRuns = &r.baseline.latency, &r.baseline.detection, &r.baseline.extraRuns
		}
		each = append(each, m)
	}
	for _, m := range each {
		if _, err := m.c.WaitNth(ctx, "watching", 1, 2*time.Minute); err != nil {
			return err
		}
	}
	// Nothing differs at the start: no run.
	time.Sleep(2 * time.Second)
	for _, m := range each {
		if n := m.c.Seen("run started"); n != 0 {
			return fmt.Errorf("%d run(s) started before any change:\n%s", n, m.c.Log())
		}
	}
	for i := range o.changes {
		ready := i%2 == 1 // the first change removes the member
		for k := range each {
			m := each[(i+k)%len(each)]
			c := m.c
			before := c.Seen("run started")
			written, err := fixture.WriteReady(ctx, client, syncLatencyNamespace, fmt.Sprintf("%s-%d", m.service, pods-1), ready)
			if err != nil {
				return err
			}
			lat, det, err := c.TimedRun(ctx, before, written, o.quiet, i)
			if err != nil {
				return err
			}
			*m.latency, *m.detection = append(*m.latency, lat), append(*m.detection, det)
			fmt.Fprintf(benchrun.Log, "  change %d (%s, %s): run started %.0f ms after the write, settle window opened after %.0f ms\n",
				i+1, map[bool]string{true: "add", false: "remove"}[ready], m.service, (lat+o.quiet.Seconds())*1000, det*1000)
			// After a run the companion reads state again (terraform state
			// pull) before it looks at changes: let it, so that the next
			// change is not timed behind that read.
			time.Sleep(time.Second)
		}
	}
	time.Sleep(2 * time.Second)
	for _, m := range each {
		*m.extraRuns = m.c.Seen("run started") - o.changes
	}
	return nil
}

// idle: one k8s_services over syncFleetServices selector-less Services,
// each with one hand-written slice of syncFleetEndpoints endpoints (not
// managed by the controller), applied; then the companion watching them.
func (s *syncBench) idle(ctx context.Context, r *Results) error {
	start := time.Now()
	if err := createSyncFleet(ctx, s.client, syncFleetNamespace, 0, syncFleetServices, 0); err != nil {
		return err
	}
	fmt.Fprintf(benchrun.Log, "  %d Services and their slices created in %.1f s\n", syncFleetServices, time.Since(start).Seconds())
	want := syncFleetServices * syncFleetEndpoints
	builds := s.builds(r)
	dirs := make([]string, len(builds))
	for i, build := range builds {
		name := "sync-fleet"
		if i > 0 {
			name += "-baseline"
		}
		dir, err := build.Applied(ctx, name, benchrun.ProviderBlock+fmt.Sprintf(
			"\ndata \"k8s_services\" \"fleet\" {\n  namespace = %q\n  port_name = \"http\"\n}\n\noutput \"fleet_endpoints\" {\n  value = sum([for s in data.k8s_services.fleet.services : length(s.endpoints)])\n}\n",
			syncFleetNamespace))
		if err != nil {
			return err
		}
		if err := build.WantOutput(ctx, dir, "fleet_endpoints", want); err != nil {
			return err
		}
		dirs[i] = dir
	}
	if len(builds) == 1 {
		return s.idleOnce(ctx, dirs[0], r)
	}
	// With the baseline: this build, the baseline, this build, the
	// baseline, each alone on the machine; the report has the first
	// round's figures and, before/after, the medians of both rounds.
	for round := range 2 {
		for i, build := range builds {
			one := &Results{}
			if err := build.idleOnce(ctx, dirs[i], one); err != nil {
				return fmt.Errorf("%s: %w", build.label(), err)
			}
			if i == 0 && round == 0 {
				*r = mergeIdle(*r, one)
			}
			side := &r.baseline.current
			if i > 0 {
				side = &r.baseline.base
			}
			side.idlePct = append(side.idlePct, one.idleCPU/one.idle*100)
			side.peakRSS = append(side.peakRSS, one.peakRSS)
			side.watching = append(side.watching, one.watching)
			side.syncCPU = append(side.syncCPU, one.syncCPU)
			side.idle = one.idle
		}
	}
	return nil
}

// mergeIdle is r with the idle figures of one.
func mergeIdle(r Results, one *Results) Results {
	r.watching, r.syncWall, r.syncCPU, r.syncChildCPU = one.watching, one.syncWall, one.syncCPU, one.syncChildCPU
	r.idle, r.idleCPU, r.idleSlices, r.idleGC, r.idleForcedGC = one.idle, one.idleCPU, one.idleSlices, one.idleGC, one.idleForcedGC
	r.peakRSS, r.idleRuns = one.peakRSS, one.idleRuns
	return r
}

// idleOnce starts the companion on dir, an applied fleet, and measures its
// initial sync and its idle CPU into r.
func (s *syncBench) idleOnce(ctx context.Context, dir string, r *Results) error {
	started := time.Now()
	// gctrace: one line per garbage collection on its standard error, to
	// say what the idle CPU is.
	c, err := s.startCompanionEnv(ctx, dir, []string{"GODEBUG=gctrace=1"}, "-command", "true")
	if err != nil {
		return err
	}
	defer c.Halt()
	return s.measureIdle(ctx, c, started, r, 5*time.Minute, 3*time.Minute)
}

// measureIdle measures c, a companion started at started with gctrace on,
// into r: the time to its "watching" line (waited for at most watchWait),
// its initial sync (its CPU settled, waited for at most settleWait), its
// CPU over the idle window, and its peak RSS then.
func (s *syncBench) measureIdle(ctx context.Context, c *companionproc.Proc, started time.Time, r *Results, watchWait, settleWait time.Duration) error {
	o := s.b.opts
	watching, err := c.WaitNth(ctx, "watching", 1, watchWait)
	if err != nil {
		return err
	}
	r.watching = watching.Time.Sub(started).Seconds()
	// After its "watching" line the companion compares every pool with
	// state once: part of the initial sync, which ends when its CPU stops
	// growing (at most 1 tick, 10 ms, in 2 s).
	before, settled, err := settleCPU(ctx, c.Pid(), 2*time.Second, 1, settleWait)
	if err != nil {
		return err
	}
	r.syncWall = settled.Sub(started).Seconds()
	r.syncCPU, r.syncChildCPU = before.Self(), before.Children()
	fmt.Fprintf(benchrun.Log, "  watching after %.1f s, CPU quiet after %.1f s; CPU %.2f s, its commands %.2f s; now idle for %s\n", r.watching, r.syncWall, r.syncCPU, r.syncChildCPU, o.idle)
	idleStart, gcBefore, forcedBefore := time.Now(), c.CountPrefix("gc "), c.CountForcedGC()
	eventsBefore := c.Seen("run started") + c.Seen("pool differs from state")
	const parts = 6
	last := before
	for range parts {
		select {
		case <-time.After(o.idle / parts):
		case <-ctx.Done():
			return ctx.Err()
		}
		now, err := procstat.Read(c.Pid())
		if err != nil {
			return err
		}
		r.idleSlices = append(r.idleSlices, float64(now.Total()-last.Total())/procstat.ClockTicks)
		last = now
	}
	after := last
	r.idle = time.Since(idleStart).Seconds()
	r.idleGC, r.idleForcedGC = c.CountPrefix("gc ")-gcBefore, c.CountForcedGC()-forcedBefore
	r.idleCPU = float64(after.Total()-before.Total()) / procstat.ClockTicks
	if r.peakRSS, err = peakRSS(c.Pid()); err != nil {
		return err
	}
	r.idleRuns = c.Seen("run started") + c.Seen("pool differs from state") - eventsBefore
	fmt.Fprintf(benchrun.Log, "  idle CPU %.3f s over %.1f s (%.2f %% of a core), peak RSS %.1f MiB\n", r.idleCPU, r.idle, r.idleCPU/r.idle*100, r.peakRSS)
	return nil
}

// peakRSS is the process's peak resident set size so far (VmHWM), MiB.
func peakRSS(pid int) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	hwm, err := procstat.ParseVmHWM(status)
	if err != nil {
		return 0, err
	}
	return float64(hwm) / 1024, nil
}

// errNotSettled is settleCPU's timeout.
var errNotSettled = errors.New("the companion's CPU did not settle")

// settleCPU waits until the process's CPU (own and its waited-for
// children's) grows by at most ticks clock ticks over window, and gives it
// then, with the time.
func settleCPU(ctx context.Context, pid int, window time.Duration, ticks int64, timeout time.Duration) (procstat.Stat, time.Time, error) {
	return settleCPUs(ctx, []int{pid}, window, ticks, timeout)
}

func syncFleetName(i int) string { return fmt.Sprintf("fleet-%04d", i) }

// createSyncFleet makes the selector-less Services fleet-from ... fleet-(to-1)
// of namespace (created if it is not there) and one slice of each, as a
// controller other than Kubernetes' would. The endpoints' addresses are
// numbered from first (Service i's from first + i*syncFleetEndpoints), so
// that fleets given distinct ranges have distinct addresses.
func createSyncFleet(ctx context.Context, client kubernetes.Interface, namespace string, from, to, first int) error {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ready, node, zone, port, name := true, fixture.Node, fixture.Zone, int32(8080), "http"
	return fixture.Parallel(ctx, to-from, func(ctx context.Context, n int) error {
		i := from + n
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: syncFleetName(i)},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		if _, err := client.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: syncFleetName(i) + "-1", Labels: map[string]string{
				discoveryv1.LabelServiceName: syncFleetName(i), discoveryv1.LabelManagedBy: "harness-bench",
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		}
		for e := range syncFleetEndpoints {
			k := first + i*syncFleetEndpoints + e
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 20+k/62500, k/250%250, k%250+1)},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				NodeName:   &node, Zone: &zone,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: fmt.Sprintf("%s-%d", syncFleetName(i), e)},
			})
		}
		_, err := client.DiscoveryV1().EndpointSlices(namespace).Create(ctx, slice, metav1.CreateOptions{})
		return err
	})
}

// checkVsPlan: the fleet of fixture.Create read as fixture.FleetServices
// k8s_ready_endpoints (for_each) and as one k8s_services, with an output that
// sums the endpoints, applied; then, alternately, `check` and `terraform
// plan` of each. No resource keeps the pools: with a terraform_data per
// pool, for_each over the 500 data sources, the first apply had not ended
// after 5.5 minutes (2.3 min of Terraform's CPU, on a loaded machine).
func (s *syncBench) checkVsPlan(ctx context.Context, r *Results) error {
	configs := []struct {
		name, title, main string
		target            float64
	}{
		{"sync-each", fmt.Sprintf("%d `k8s_ready_endpoints` (`for_each`)", fixture.FleetServices), benchrun.ReadyEndpointsEach(fixture.FleetServices), 0.1},
		{"sync-fleet-500", fmt.Sprintf("1 `k8s_services` of %d Services", fixture.FleetServices), benchrun.ProviderBlock + fmt.Sprintf(
			"\ndata \"k8s_services\" \"fleet\" {\n  namespace = %q\n  port_name = \"http\"\n}\n\noutput \"members\" {\n  value = sum([for s in data.k8s_services.fleet.services : length(s.endpoints)])\n}\n",
			fixture.Namespace), 0.5},
	}
	for _, cfg := range configs {
		dir, err := s.Applied(ctx, cfg.name, cfg.main)
		if err != nil {
			return err
		}
		if err := s.WantOutput(ctx, dir, "members", fixture.FleetServices*10); err != nil {
			return err
		}
		m := &checkVsPlan{title: cfg.title, target: cfg.target}
		r.checks = append(r.checks, m)
		check := []string{s.b.Provider, "check", "-chdir", dir, "-terraform", s.Terraform, "-kubeconfig", s.b.Cluster.Kubeconfig()}
		plan := []string{s.Terraform, "-chdir=" + dir, "plan", "-input=false", "-lock=false", "-parallelism=10", "-no-color", "-detailed-exitcode"}
		pull := []string{s.Terraform, "-chdir=" + dir, "state", "pull"}
		// One untimed run of each, then the rounds.
		for round := 0; round <= s.b.opts.rounds; round++ {
			argv := check
			if dir := s.b.opts.scaleProfile; dir != "" && round == s.b.opts.rounds {
				// The last round's check is profiled (the CPU profile's
				// own cost is in its figures).
				argv = append(slices.Clone(check), "-cpuprofile", filepath.Join(dir, "check-"+cfg.name+".pprof"))
			}
			cw, cc, err := s.timed(ctx, argv, "matches the cluster")
			if err != nil {
				return err
			}
			pw, pc, err := s.timed(ctx, plan, "No changes.")
			if err != nil {
				return err
			}
			sw, sc, err := s.timed(ctx, pull, `"lineage"`)
			if err != nil {
				return err
			}
			if round == 0 {
				continue
			}
			m.checkWall, m.checkCPU = append(m.checkWall, cw), append(m.checkCPU, cc)
			m.planWall, m.planCPU = append(m.planWall, pw), append(m.planCPU, pc)
			m.pullWall, m.pullCPU = append(m.pullWall, sw), append(m.pullCPU, sc)
			fmt.Fprintf(benchrun.Log, "  %s, round %d: check %.2fs (CPU %.2fs), plan %.2fs (CPU %.2fs), state pull %.2fs (CPU %.2fs)\n", cfg.title, round, cw, cc, pw, pc, sw, sc)
		}
	}
	return nil
}

// timed runs argv, which must exit 0 with want in its output, and gives its
// wall time and the CPU the kernel accounted to it and to the descendants
// it waited for (the rusage of wait4: user + system), s.
func (s *syncBench) timed(ctx context.Context, argv []string, want string) (wall, cpu float64, err error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = s.Env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	wall = time.Since(start).Seconds()
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out.Bytes())
	}
	if !strings.Contains(out.String(), want) {
		return 0, 0, fmt.Errorf("%s: no %q in its output:\n%s", strings.Join(argv, " "), want, out.Bytes())
	}
	usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, 0, errors.New("no rusage")
	}
	return wall, rusageCPU(usage), nil
}

func rusageCPU(u *syscall.Rusage) float64 {
	return float64(u.Utime.Nano()+u.Stime.Nano()) / 1e9
}

func (s *syncBench) startCompanion(ctx context.Context, dir string, args ...string) (*companionproc.Proc, error) {
	return s.startCompanionEnv(ctx, dir, nil, args...)
}

// startCompanionEnv starts `sync` on dir with extra variables in its
// environment.
func (s *syncBench) startCompanionEnv(ctx context.Context, dir string, extraEnv []string, args ...string) (*companionproc.Proc, error) {
	argv := []string{s.companion(), "sync", "-chdir", dir, "-terraform", s.Terraform, "-kubeconfig", s.b.Cluster.Kubeconfig(),
		"-log-format", "json", "-listen", "127.0.0.1:0", "-settle-quiet", "200ms", "-settle-max", "2s"}
	return companionproc.Start(ctx, append(argv, args...), append(slices.Clone(s.Env), extraEnv...))
}

// syncTargetRows are the companion's rows of the targets table.
func syncTargetRows(r *Results) []string {
	var rows []string
	row := func(format string, args ...any) { rows = append(rows, fmt.Sprintf(format, args...)) }
	if len(r.latency) > 0 {
		med, p99 := stats.Median(r.latency), stats.Percentile(r.latency, 99)
		row("| companion detection latency: pod Ready written → run started, minus the %s quiet time, median of %d changes | %.3f s | ≤ 1 s | %s |",
			r.quiet, len(r.latency), med, stats.Verdict(med, 1, " s"))
		row("| that latency, p99 (nearest rank: of %d, the %s) | %.3f s | ≤ 1 s | %s |", len(r.latency), nearestRank(len(r.latency), 99), p99, stats.Verdict(p99, 1, " s"))
	}
	rows = append(rows, backendLatencyRows(r.backends)...)
	rows = append(rows, clusterLatencyRows(r.clusters)...)
	rows = append(rows, baselineSyncRows(r)...)
	rows = append(rows, scaleTargetRows(r.scale)...)
	rows = append(rows, churnTargetRows(r.churn)...)
	rows = append(rows, workspacesTargetRows(r.workspaces)...)
	if r.idle > 0 {
		pct := r.idleCPU / r.idle * 100
		idleVerdict := stats.Verdict(pct, 1, " %")
		if pct >= 1 {
			// The target is strict (< 1 %).
			idleVerdict = fmt.Sprintf("**miss** by %.2f %% of a core", pct-1)
		}
		row("| companion idle CPU watching %d Services x %d endpoints (over %.0f s, no change) | %.2f %% of a core | < 1 %% | %s |",
			syncFleetServices, syncFleetEndpoints, r.idle, pct, idleVerdict)
		row("| companion peak RSS (VmHWM), same | %.1f MiB | ≤ 150 MiB | %s |", r.peakRSS, stats.Verdict(r.peakRSS, 150, " MiB"))
		row("| companion initial sync of those Services (start → CPU quiet): wall; CPU (own + `terraform state pull`) | %.1f s; %.2f s + %.2f s | — | |", r.syncWall, r.syncCPU, r.syncChildCPU)
	}
	for _, c := range r.checks {
		if len(c.planWall) == 0 {
			continue
		}
		ratio := stats.Median(c.checkWall) / stats.Median(c.planWall)
		row("| `check` / `terraform plan`, %s, wall (medians, same rounds) | %.3f× | ≤ %.1f× | %s |", c.title, ratio, c.target, stats.Verdict(ratio, c.target, "×"))
		row("| the same, CPU of the process trees | %.3f× | — | |", stats.Median(c.checkCPU)/stats.Median(c.planCPU))
		if len(c.pullWall) > 0 {
			pull, check := stats.Median(c.pullWall), stats.Median(c.checkWall)
			row("| of that `check`, the CLI's `terraform state pull` alone (same rounds): wall; the rest, ours | %.3f s (%.0f %% of check, %.3f× plan); %.3f s (%.3f× plan) | — | |",
				pull, pull/check*100, pull/stats.Median(c.planWall), check-pull, (check-pull)/stats.Median(c.planWall))
		}
	}
	return rows
}

// Section is the companion's section of the report.
func Section(r *Results) string {
	if r == nil {
		return ""
	}
	b := benchrun.NewSection("Companion (`sync`, `check`)")
	b.Table("| measurement | measured | target | verdict |", "|---|---:|---:|---|")
	for _, row := range syncTargetRows(r) {
		b.Line("%s", row)
	}
	b.Line("")
	p := b.Line
	if len(r.latency) > 0 {
		p("Detection latency over %d changes, each removing or adding a member (alternately), each after the previous run ended: run started minus the write minus the quiet time %s: median %.3f s, p90 %.3f s, p99 %.3f s, min–max %s s. The settle window opened (run started minus its `settled`) after median %.3f s, p99 %.3f s. Runs no change explains: %d.",
			len(r.latency), r.quiet, stats.Median(r.latency), stats.Percentile(r.latency, 90), stats.Percentile(r.latency, 99), stats.MinMax(r.latency, "%.3f"),
			stats.Median(r.detection), stats.Percentile(r.detection, 99), r.extraRuns)
		p("")
	}
	b.WriteString(backendLatencySection(r.backends))
	b.WriteString(clusterLatencySection(r.clusters))
	b.WriteString(baselineSyncSection(r))
	b.WriteString(scaleSection(r.scale))
	b.WriteString(churnSection(r.churn))
	b.WriteString(workspacesSection(r.workspaces))
	if r.idle > 0 {
		var each []string
		for _, v := range r.idleSlices {
			each = append(each, fmt.Sprintf("%.2f", v))
		}
		p("Watching %d Services x %d endpoints (one `k8s_services` in state): its line `watching` %.1f s after its start; the initial sync (state read, informers listed, every pool compared with state) ended, by its CPU going quiet (≤ 10 ms in 2 s), %.1f s after its start, having used %.2f s of CPU (and %.2f s in the commands it ran and waited for: `terraform state pull`). Then %.3f s of CPU over %.1f s idle (by sixths: %s s), with %d garbage collections (%d forced by the runtime's 2-minute rule); peak RSS %.1f MiB. Runs or pool differences while idle: %d.",
			syncFleetServices, syncFleetEndpoints, r.watching, r.syncWall, r.syncCPU, r.syncChildCPU, r.idleCPU, r.idle, strings.Join(each, ", "), r.idleGC, r.idleForcedGC, r.peakRSS, r.idleRuns)
		p("")
	}
	if len(r.checks) > 0 {
		b.Para("`check`, `terraform plan` and the CLI's `terraform state pull` alone (the read of state that `check` starts) of the same applied configuration (the data sources and an output that sums their endpoints; no resource), in turn; CPU is user + system of the finished process and the descendants it waited for (wait4's rusage: for plan, Terraform and its provider processes; for check, its `terraform state pull` included). Medians of %d rounds after one untimed. \"ours\" is check minus the state pull: the informers or LISTs and the comparison.", len(r.checks[0].planWall))
		b.Table("| configuration | check wall, s | check CPU, s | plan wall, s | plan CPU, s | wall ratio | CPU ratio | state pull wall, s | state pull CPU, s | ours (check − pull): wall, CPU, s |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, c := range r.checks {
			p("| %s | %.3f (%s) | %.3f | %.3f (%s) | %.3f | %.3f× | %.3f× | %.3f (%s) | %.3f | %.3f, %.3f |", c.title, stats.Median(c.checkWall), stats.MinMax(c.checkWall, "%.2f"), stats.Median(c.checkCPU),
				stats.Median(c.planWall), stats.MinMax(c.planWall, "%.2f"), stats.Median(c.planCPU), stats.Median(c.checkWall)/stats.Median(c.planWall), stats.Median(c.checkCPU)/stats.Median(c.planCPU),
				stats.Median(c.pullWall), stats.MinMax(c.pullWall, "%.2f"), stats.Median(c.pullCPU), stats.Median(c.checkWall)-stats.Median(c.pullWall), stats.Median(c.checkCPU)-stats.Median(c.pullCPU))
		}
		p("")
	}
	return b.String()
}

// commandLine is a -command value that runs program with args, for the
// companions of both revisions: the current one splits it into words as a
// shell does and runs it without a shell, a baseline's may give it to sh -c;
// each word is single-quoted, which both read alike.
func commandLine(program string, args ...string) string {
	words := make([]string, 0, 1+len(args))
	for _, w := range append([]string{program}, args...) {
		words = append(words, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
	}
	return strings.Join(words, " ")
}
