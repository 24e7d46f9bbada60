package syncbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/companionproc"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/stats"
)

// The companion's scale curve (issue 29): N Services x syncFleetEndpoints
// endpoints in one state, for each N of -sync-scale, as the companion
// meets them in a large cluster: selector-less Services in namespaces of
// syncScaleNamespaceSize (bench-scale-00, ...), one k8s_services per
// namespace and syncScaleSingles k8s_ready_endpoints (for_each) over
// Services of the first one. The objects are created incrementally (the
// first size, then what the next adds), the configuration applied again at
// each size, and at each size each companion (this build, then the
// baseline's on the same objects and state) is started with no memory
// limit and -command true, and measured: start to `watching`, start to
// the end of its first comparison (CPU settled), its CPU idle, detection
// latency of changes in a fleet's Service and in a single's, and its peak
// RSS at the end.

const (
	syncScaleNamespaceSize = 5000
	syncScaleSingles       = 100
	// syncScaleFirstAddress numbers the scale's endpoint addresses after
	// those of syncFleetNamespace.
	syncScaleFirstAddress = syncFleetServices * syncFleetEndpoints
	// The targets at the largest size (issue 29, item 1).
	syncScaleRSSBound     = 150.0 // MiB, no memory limit set
	syncScaleLatencyBound = 0.100 // s beyond the settle window, p99
	syncScaleIdleBound    = 1.0   // % of a core, strictly under
)

func syncScaleNamespace(i int) string { return fmt.Sprintf("bench-scale-%02d", i) }

// syncScaleNamespaces is how many namespaces n Services fill.
func syncScaleNamespaces(n int) int {
	return (n + syncScaleNamespaceSize - 1) / syncScaleNamespaceSize
}

// sizeList is a flag: a comma-separated list of sizes, ascending.
type sizeList []int

func (l *sizeList) String() string {
	var each []string
	for _, n := range *l {
		each = append(each, strconv.Itoa(n))
	}
	return strings.Join(each, ",")
}

func (l *sizeList) Set(text string) error {
	parsed, err := parseSizes(text)
	if err != nil {
		return err
	}
	*l = parsed
	return nil
}

// parseSizes reads "5000,20000,50000": positive and ascending; "" or
// "0" is no size.
func parseSizes(text string) (sizeList, error) {
	var sizes sizeList
	if strings.TrimSpace(text) == "" || strings.TrimSpace(text) == "0" {
		return nil, nil
	}
	for _, field := range strings.Split(text, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", field)
		}
		if len(sizes) > 0 && n <= sizes[len(sizes)-1] {
			return nil, fmt.Errorf("sizes must be ascending: %d after %d", n, sizes[len(sizes)-1])
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// scaleResults is the curve.
type scaleResults struct {
	quiet   time.Duration
	changes int
	// wait bounds each companion's wait for `watching` and for its first
	// comparison.
	wait time.Duration
	// baseline is the baseline's commit; "" when there is none.
	baseline string
	points   []*scalePoint
}

// scalePoint is one size: the objects, the state, and each build's run.
type scalePoint struct {
	services, namespaces int
	// create is the time to create the Services and slices that this size
	// adds to the previous one's, apply the time of the apply of this
	// size's configuration, s; stateMB the state's size then, MB.
	create, apply, stateMB float64
	// created is how many Services the creation added.
	created       int
	current, base *scaleRun
}

// scaleRun is one companion at one size.
type scaleRun struct {
	// timeout says what did not come within the bound; the figures after
	// it are not measured.
	timeout string
	// failed is the error of a baseline that did not run (this build's
	// errors stop the bench).
	failed string
	// noLimit says how the Go memory limit was left unset.
	noLimit string
	// watching and compared are from the start, s; syncCPU its CPU until
	// compared, syncChildCPU that of the commands it ran and waited for.
	watching, compared, syncCPU, syncChildCPU float64
	// idle is the idle window, s, idleCPU the CPU over it, s.
	idle, idleCPU float64
	// rssCompared is VmHWM after the idle window (initial sync and idle),
	// peakRSS at the end (after the changes and the state reads that
	// follow each run), MiB.
	rssCompared, peakRSS float64
	// latency is, per change, the run's start minus the write minus the
	// quiet time, s; detection the settle window's opening minus the
	// write, s.
	latency, detection []float64
	// extraRuns are runs that no change explains.
	extraRuns int
	// overdue are the changes whose settle window lasted longer than
	// -settle-max: the companion's loop was busy (a read of state, after
	// a run or every -state-interval) when it should have started the run.
	overdue int
	// reached is the last stage measured in full.
	reached scaleStage
}

// scaleStage is how far a run got.
type scaleStage int

const (
	stageStarted  scaleStage = iota
	stageWatching            // its `watching` line
	stageIdle                // its first comparison, then the idle window
	stageChanges             // every change
)

func (r *scaleRun) idlePct() float64 {
	if r.idle <= 0 {
		return 0
	}
	return r.idleCPU / r.idle * 100
}

// scaleConfig is the configuration of n Services: one k8s_services per
// namespace, syncScaleSingles k8s_ready_endpoints over the first Services
// of the first namespace, and an output that sums every endpoint read.
func scaleConfig(n int) string {
	var c strings.Builder
	c.WriteString(benchrun.ProviderBlock)
	var sums []string
	for ns := range syncScaleNamespaces(n) {
		name := fmt.Sprintf("scale_%02d", ns)
		fmt.Fprintf(&c, "\ndata \"k8s_services\" %q {\n  namespace = %q\n  port_name = \"http\"\n}\n", name, syncScaleNamespace(ns))
		sums = append(sums, fmt.Sprintf("    sum([for s in data.k8s_services.%s.services : length(s.endpoints)]),\n", name))
	}
	singles := make([]string, syncScaleSingles)
	for i := range singles {
		singles[i] = strconv.Quote(syncFleetName(i))
	}
	fmt.Fprintf(&c, "\nlocals {\n  singles = toset([%s])\n}\n\ndata \"k8s_ready_endpoints\" \"single\" {\n  for_each  = local.singles\n  namespace = %q\n  service   = each.key\n  port_name = \"http\"\n}\n",
		strings.Join(singles, ", "), syncScaleNamespace(0))
	sums = append(sums, "    sum([for s in data.k8s_ready_endpoints.single : length(s.endpoints)]),\n")
	fmt.Fprintf(&c, "\noutput \"endpoints\" {\n  value = sum([\n%s  ])\n}\n", strings.Join(sums, ""))
	return c.String()
}

// scaleEndpoints is what the output of scaleConfig(n) sums.
func scaleEndpoints(n int) int { return (n + syncScaleSingles) * syncFleetEndpoints }

// scaleChange is the endpoint the i-th change makes not ready (and then
// ready again): even changes in a fleet's Service (of the last namespace,
// from its last Service down, none of them a single's), odd ones in a
// single's; each change in another Service, or another endpoint.
func scaleChange(n, i int) (namespace, service string, endpoint int, single bool) {
	k := i / 2
	endpoint = k % syncFleetEndpoints
	if i%2 == 1 {
		return syncScaleNamespace(0), syncFleetName(k % syncScaleSingles), endpoint, true
	}
	last := syncScaleNamespaces(n) - 1
	inLast := n - last*syncScaleNamespaceSize
	return syncScaleNamespace(last), syncFleetName(inLast - 1 - k), endpoint, false
}

// scaleCurve creates, applies and measures each size of -sync-scale.
func (s *syncBench) scaleCurve(ctx context.Context, r *Results) error {
	o := s.b.opts
	res := &scaleResults{quiet: o.quiet, changes: o.scaleChanges, wait: o.scaleWait}
	if r.baseline != nil {
		res.baseline = r.baseline.commit
	}
	r.scale = res
	if len(o.scale) == 0 {
		return nil
	}
	if o.scaleChanges < 1 {
		return fmt.Errorf("-sync-scale-changes %d: at least 1", o.scaleChanges)
	}
	if o.scale[0] < syncScaleSingles+o.scaleChanges {
		return fmt.Errorf("-sync-scale %d: the smallest size must be at least %d (the singles and a fleet Service per change)", o.scale[0], syncScaleSingles+o.scaleChanges)
	}
	dir, err := s.b.Config("sync-scale", scaleConfig(o.scale[0]))
	if err != nil {
		return err
	}
	builds := s.builds(r)
	created := 0
	for _, n := range o.scale {
		p := &scalePoint{services: n, namespaces: syncScaleNamespaces(n), created: n - created}
		res.points = append(res.points, p)
		s.b.Say("companion at scale: %d Services x %d endpoints in %d namespace(s) (%d more Services and slices)", n, syncFleetEndpoints, p.namespaces, p.created)
		start := time.Now()
		for created < n {
			ns := created / syncScaleNamespaceSize
			from, to := created%syncScaleNamespaceSize, min(n-ns*syncScaleNamespaceSize, syncScaleNamespaceSize)
			if err := createSyncFleet(ctx, s.client, syncScaleNamespace(ns), from, to, syncScaleFirstAddress+ns*syncScaleNamespaceSize*syncFleetEndpoints); err != nil {
				return err
			}
			created = ns*syncScaleNamespaceSize + to
		}
		p.create = time.Since(start).Seconds()
		fmt.Fprintf(benchrun.Log, "  %d Services and their slices created in %.1f s\n", p.created, p.create)
		if _, err := s.b.Config("sync-scale", scaleConfig(n)); err != nil {
			return err
		}
		start = time.Now()
		applyCtx, cancel := context.WithTimeout(ctx, 45*time.Minute)
		err := s.Apply(applyCtx, dir)
		cancel()
		if err != nil {
			return fmt.Errorf("%d Services: %w", n, err)
		}
		p.apply = time.Since(start).Seconds()
		if err := s.WantOutput(ctx, dir, "endpoints", scaleEndpoints(n)); err != nil {
			return err
		}
		if info, err := os.Stat(filepath.Join(dir, "terraform.tfstate")); err == nil {
			p.stateMB = float64(info.Size()) / 1e6
		}
		fmt.Fprintf(benchrun.Log, "  applied in %.1f s; state %.1f MB\n", p.apply, p.stateMB)
		for i, build := range builds {
			run, err := build.scaleRun(ctx, dir, n)
			if err != nil && i == 0 {
				return fmt.Errorf("%d Services, %s: %w", n, build.label(), err)
			}
			if err != nil {
				run = &scaleRun{failed: firstLine(err.Error())}
				fmt.Fprintf(benchrun.Log, "  %s failed: %s\n%s\n", build.label(), firstLine(err.Error()), lastLines(err.Error(), 10))
			}
			if i == 0 {
				p.current = run
			} else {
				p.base = run
			}
		}
	}
	return nil
}

// scaleRun starts the companion on dir (n Services applied), with no memory
// limit and -command true, and measures it. A bound passed is a result
// (timeout), not an error.
func (s *syncBench) scaleRun(ctx context.Context, dir string, n int) (*scaleRun, error) {
	o := s.b.opts
	run := &scaleRun{noLimit: "GOMEMLIMIT unset and no -memory-limit-mib (the build has none)"}
	args := []string{"-command", "true", "-settle-quiet", o.quiet.String(), "-settle-max", (o.quiet + 2*time.Second).String()}
	if s.knowsSyncFlag("memory-limit-mib") {
		args, run.noLimit = append(args, "-memory-limit-mib", "0"), "-memory-limit-mib 0"
	}
	profile := o.scaleProfile != "" && s.knowsSyncFlag("profiling")
	if profile {
		args = append(args, "-profiling")
	}
	env := []string{"GODEBUG=gctrace=1"}
	for _, v := range os.Environ() {
		if strings.HasPrefix(v, "GOMEMLIMIT=") {
			return nil, errors.New("GOMEMLIMIT is set: the scale curve measures the companion without a memory limit")
		}
	}
	s.b.Say("  %s on %d Services (%s; waits bounded by %s)", s.label(), n, run.noLimit, o.scaleWait)
	started := time.Now()
	c, err := s.startCompanionEnv(ctx, dir, env, args...)
	if err != nil {
		return nil, err
	}
	defer c.Halt()
	idle := &Results{}
	err = s.measureIdle(ctx, c, started, idle, o.scaleWait, o.scaleWait)
	run.watching, run.compared, run.syncCPU, run.syncChildCPU = idle.watching, idle.syncWall, idle.syncCPU, idle.syncChildCPU
	run.idle, run.idleCPU, run.rssCompared = idle.idle, idle.idleCPU, idle.peakRSS
	if o.scaleProfile != "" {
		base := s.keepHeapProfile(ctx, c, n, profile)
		defer func() {
			if err := os.WriteFile(base+".log", []byte(c.Log()), 0o644); err != nil {
				fmt.Fprintf(benchrun.Log, "  -sync-profile: %v\n", err)
			}
		}()
	}
	if idle.watching > 0 {
		run.reached = stageWatching
	}
	if err == nil {
		run.reached = stageIdle
		for i := range o.scaleChanges {
			if err = s.scaleChangeOnce(ctx, c, n, i, run); err != nil {
				err = fmt.Errorf("change %d: %w", i+1, err)
				break
			}
		}
		if err == nil {
			run.reached = stageChanges
		}
	}
	if err != nil {
		timeout, ok := waitTimeout(ctx, err)
		if !ok {
			return nil, err
		}
		run.timeout = timeout
		fmt.Fprintf(benchrun.Log, "  timeout: %s\n%s\n", timeout, lastLines(c.Log(), 10))
	} else {
		time.Sleep(2 * time.Second)
		run.extraRuns = c.Seen("run started") - len(run.latency)
	}
	// The peak so far, also when a bound ran out.
	if run.peakRSS, err = peakRSS(c.Pid()); err != nil {
		return nil, err
	}
	if len(run.latency) > 0 {
		fmt.Fprintf(benchrun.Log, "  latency beyond the quiet time: p50 %.0f ms, p99 %.0f ms; peak RSS %.1f MiB; runs no change explains: %d\n",
			stats.Percentile(run.latency, 50)*1000, stats.Percentile(run.latency, 99)*1000, run.peakRSS, run.extraRuns)
	}
	return run, nil
}

// keepHeapProfile writes, with heap, c's heap profile to -sync-profile
// as scale-N-LABEL.heap.pb.gz, and returns the path without its ending
// (for the log, kept when the run ends).
func (s *syncBench) keepHeapProfile(ctx context.Context, c *companionproc.Proc, n int, heap bool) string {
	dir := s.b.opts.scaleProfile
	base := filepath.Join(dir, fmt.Sprintf("scale-%d-%s", n, strings.NewReplacer(" ", "-", "/", "-").Replace(s.label())))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(benchrun.Log, "  -sync-profile: %v\n", err)
	} else if heap {
		if err := fetchHeapProfile(ctx, c, base+".heap.pb.gz"); err != nil {
			fmt.Fprintf(benchrun.Log, "  heap profile: %v\n", err)
		}
	}
	fmt.Fprintf(benchrun.Log, "  log and heap profile kept as %s.*\n", base)
	return base
}

// fetchHeapProfile saves the heap profile served on c's -listen address.
func fetchHeapProfile(ctx context.Context, c *companionproc.Proc, path string) error {
	served := c.Events("serving /healthz and /metrics", nil)
	if len(served) == 0 {
		return errors.New("the companion serves no /debug/pprof")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+served[0].Str("address")+"/debug/pprof/heap", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/heap: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// nearestRank names the rank of the p-th percentile of n values.
func nearestRank(n int, p float64) string {
	rank := int(math.Ceil(p / 100 * float64(n)))
	if rank >= n {
		return "largest"
	}
	return fmt.Sprintf("%d-th smallest", rank)
}

// lastLines are the last n lines of text.
func lastLines(text string, n int) string {
	lines := strings.Split(text, "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// scaleChangeOnce makes the i-th change's endpoint not ready, times the run
// it starts, makes it ready again (the pool is then state's again: no
// run), and waits for the companion to be quiet (its read of state after
// the run, and the change back).
func (s *syncBench) scaleChangeOnce(ctx context.Context, c *companionproc.Proc, n, i int, run *scaleRun) error {
	o := s.b.opts
	namespace, service, endpoint, single := scaleChange(n, i)
	before := c.Seen("run started")
	written, err := s.writeEndpointReady(ctx, namespace, service+"-1", endpoint, false)
	if err != nil {
		return err
	}
	lat, det, err := c.TimedRun(ctx, before, written, o.quiet, i)
	if err != nil {
		return err
	}
	run.latency, run.detection = append(run.latency, lat), append(run.detection, det)
	if windowOverdue(lat, det, o.quiet) {
		run.overdue++
	}
	kind := "a fleet's"
	if single {
		kind = "a single's"
	}
	fmt.Fprintf(benchrun.Log, "    change %d (%s Service %s/%s): run started %.0f ms after the write, settle window opened after %.0f ms\n",
		i+1, kind, namespace, service, (lat+o.quiet.Seconds())*1000, det*1000)
	if _, err := s.writeEndpointReady(ctx, namespace, service+"-1", endpoint, true); err != nil {
		return err
	}
	return waitQuiet(ctx, c.Pid(), o.scaleWait)
}

// windowOverdue says whether a change's settle window (its run's start
// minus its opening) lasted longer than the -settle-max the scale curve
// gives (quiet + 2 s), with 100 ms of slack.
func windowOverdue(latency, detection float64, quiet time.Duration) bool {
	settled := latency + quiet.Seconds() - detection
	return settled > (quiet + 2*time.Second + 100*time.Millisecond).Seconds()
}

// writeEndpointReady sets the Ready condition of the slice's endpoint-th
// endpoint, as the controller that owns it would, and gives the time just
// before the write.
func (s *syncBench) writeEndpointReady(ctx context.Context, namespace, slice string, endpoint int, ready bool) (time.Time, error) {
	es, err := s.client.DiscoveryV1().EndpointSlices(namespace).Get(ctx, slice, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	if endpoint >= len(es.Endpoints) {
		return time.Time{}, fmt.Errorf("slice %s/%s has %d endpoints, no %d-th", namespace, slice, len(es.Endpoints), endpoint+1)
	}
	es.Endpoints[endpoint].Conditions.Ready = &ready
	written := time.Now()
	_, err = s.client.DiscoveryV1().EndpointSlices(namespace).Update(ctx, es, metav1.UpdateOptions{})
	return written, err
}

// waitQuiet waits, at most timeout, until the process has no child (the
// companion's `terraform state pull` after a run) and its CPU grows by at
// most a tick in a second.
func waitQuiet(ctx context.Context, pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if !hasChildren(pid) {
			if _, _, err := settleCPU(ctx, pid, time.Second, 1, time.Until(deadline)); err != nil {
				return err
			}
			if !hasChildren(pid) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w within %s (a command still running)", errNotSettled, timeout)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// hasChildren says whether any thread of pid has a child process.
func hasChildren(pid int) bool {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) != "" {
			return true
		}
	}
	return false
}

// knowsSyncFlag says whether the build's `sync` has the flag (its usage
// names it).
func (s *syncBench) knowsSyncFlag(name string) bool {
	out, _ := exec.Command(s.companion(), "sync", "-h").CombinedOutput()
	// "  -name value" for a flag with a value, "  -name" alone for a bool.
	for line := range strings.SplitSeq(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "-"+name {
			return true
		}
	}
	return false
}

// waitTimeout says whether err is a bounded wait that ran out (and not the
// bench's own end), and which.
func waitTimeout(ctx context.Context, err error) (string, bool) {
	if ctx.Err() != nil {
		return "", false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errNotSettled) {
		return firstLine(err.Error()), true
	}
	return "", false
}

func firstLine(text string) string {
	line, _, _ := strings.Cut(text, "\n")
	return strings.TrimSuffix(line, ":")
}

// largest is the largest size; nil when none.
func (res *scaleResults) largest() *scalePoint {
	if res == nil || len(res.points) == 0 {
		return nil
	}
	return res.points[len(res.points)-1]
}

// scaleTargetRows are the rows of the targets table: the targets of issue
// 29 at the largest size.
func scaleTargetRows(res *scaleResults) []string {
	p := res.largest()
	if p == nil || p.current == nil {
		return nil
	}
	var rows []string
	row := func(format string, args ...any) { rows = append(rows, fmt.Sprintf(format, args...)) }
	at := fmt.Sprintf("%d Services x %d endpoints", p.services, syncFleetEndpoints)
	if p.services != 50000 {
		at += " (the target is at 50000)"
	}
	cur := p.current
	stopped := ""
	if cur.timeout != "" {
		stopped = fmt.Sprintf(" (timeout: %s)", cur.timeout)
	}
	rssVerdict := stats.Verdict(cur.peakRSS, syncScaleRSSBound, " MiB")
	if cur.reached < stageChanges && cur.peakRSS <= syncScaleRSSBound {
		rssVerdict = "**miss**: not measured to the end" + stopped
	}
	row("| companion peak RSS (VmHWM) at %s, no memory limit (%s), after the changes | %.1f MiB | ≤ %.0f MiB | %s |", at, cur.noLimit, cur.peakRSS, syncScaleRSSBound, rssVerdict)
	if cur.reached == stageChanges {
		p99 := stats.Percentile(cur.latency, 99)
		overdue := ""
		if cur.overdue > 0 {
			overdue = fmt.Sprintf("; %d of them met the loop reading state", cur.overdue)
		}
		row("| companion detection latency beyond the %s settle window at %s, p99 (nearest rank) of %d changes%s | %.3f s (p50 %.3f s) | ≤ %.3f s | %s |",
			res.quiet, at, len(cur.latency), overdue, p99, stats.Percentile(cur.latency, 50), syncScaleLatencyBound, stats.Verdict(p99, syncScaleLatencyBound, " s"))
	} else {
		row("| companion detection latency beyond the %s settle window at %s, p99 | %d of %d changes measured | ≤ %.3f s | **miss**%s |",
			res.quiet, at, len(cur.latency), res.changes, syncScaleLatencyBound, stopped)
	}
	if cur.reached >= stageIdle {
		pct := cur.idlePct()
		idleVerdict := stats.Verdict(pct, syncScaleIdleBound, " %")
		if pct >= syncScaleIdleBound {
			idleVerdict = fmt.Sprintf("**miss** by %.2f %% of a core", pct-syncScaleIdleBound)
		}
		row("| companion idle CPU at %s (over %.0f s, no change) | %.2f %% of a core | < %.0f %% | %s |", at, cur.idle, pct, syncScaleIdleBound, idleVerdict)
		row("| companion start → `watching` at %s; → first comparison done (CPU quiet) | %.1f s; %.1f s | stated | |", at, cur.watching, cur.compared)
	} else {
		row("| companion idle CPU at %s | not measured | < %.0f %% | **miss**%s |", at, syncScaleIdleBound, stopped)
		watching := "no `watching`"
		if cur.reached >= stageWatching {
			watching = fmt.Sprintf("%.1f s", cur.watching)
		}
		row("| companion start → `watching` at %s; → first comparison done | %s; not within %s | stated | |", at, watching, res.wait)
	}
	return rows
}

// scaleColumns are the curve's figures of one run, in its table's order,
// each with the stage it needs.
var scaleColumns = []struct {
	title  string
	format string
	value  func(*scaleRun) float64
	needs  scaleStage
}{
	{"start → `watching`, s", "%.1f", func(r *scaleRun) float64 { return r.watching }, stageWatching},
	{"start → first comparison, s", "%.1f", func(r *scaleRun) float64 { return r.compared }, stageIdle},
	{"initial CPU (own + state pull), s", "%.2f", func(r *scaleRun) float64 { return r.syncCPU + r.syncChildCPU }, stageIdle},
	{"RSS after start and idle, MiB", "%.1f", func(r *scaleRun) float64 { return r.rssCompared }, stageIdle},
	{"peak RSS, MiB", "%.1f", func(r *scaleRun) float64 { return r.peakRSS }, stageChanges},
	{"idle CPU, % of a core", "%.3f", func(r *scaleRun) float64 { return r.idlePct() }, stageIdle},
	{"latency p50, s", "%.3f", func(r *scaleRun) float64 { return stats.Percentile(r.latency, 50) }, stageChanges},
	{"latency p99, s", "%.3f", func(r *scaleRun) float64 { return stats.Percentile(r.latency, 99) }, stageChanges},
	{"changes whose window outlasted -settle-max", "%.0f", func(r *scaleRun) float64 { return float64(r.overdue) }, stageChanges},
	{"runs no change explains", "%.0f", func(r *scaleRun) float64 { return float64(r.extraRuns) }, stageChanges},
}

// scaleUsable says whether the run measured the column.
func scaleUsable(r *scaleRun, col int) bool {
	return r != nil && r.failed == "" && r.reached >= scaleColumns[col].needs
}

// scaleColumn is the figure of a run, or what stopped it.
func scaleColumn(r *scaleRun, col int) string {
	switch {
	case r == nil:
		return "—"
	case r.failed != "":
		return "failed"
	case !scaleUsable(r, col):
		return "timeout"
	}
	c := scaleColumns[col]
	return fmt.Sprintf(c.format, c.value(r))
}

// scaleRatio is this build's figure over the baseline's, when both are
// measured.
func scaleRatio(cur, old *scaleRun, col int) string {
	c := scaleColumns[col]
	if !scaleUsable(cur, col) || !scaleUsable(old, col) || c.value(old) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f×", c.value(cur)/c.value(old))
}

// scaleSection is the curve: a paragraph, the table of this build and,
// with a baseline, the table of both and their ratios.
func scaleSection(res *scaleResults) string {
	if res.largest() == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The companion at scale: for each size, N selector-less Services x %d endpoints (one hand-written slice each) in namespaces of %d (`bench-scale-00`, ...), in one state: one `k8s_services` per namespace and %d `k8s_ready_endpoints` (`for_each`) over Services of the first; created incrementally (each size adds to the previous one) and applied again at each size. Each companion is started with no memory limit and `-command true`, alone on the machine: start → `watching`, start → its first comparison done (its CPU quiet: ≤ 10 ms in 2 s), its CPU over the idle window, then %d changes (an endpoint's Ready made false in a fleet's Service and in a single's, alternately, each in another Service, made true again after the run: a pool back to state starts no run), each timed from the write to the `run started` line minus the %s quiet time (nearest-rank percentiles: p99 of %d changes is the %s), then its peak RSS (VmHWM: the initial sync, the changes and the read of state after each run). A change whose settle window outlasted -settle-max (quiet + 2 s) met the companion's loop busy, reading state (after a run, or its read every 5 minutes): it counts in the percentiles, and is counted apart. Waits bounded by %s.",
		syncFleetEndpoints, syncScaleNamespaceSize, syncScaleSingles, res.changes, res.quiet, res.changes, nearestRank(res.changes, 99), res.wait)
	if res.baseline != "" {
		fmt.Fprintf(&b, " The baseline's companion (%s) right after this one at each size, on the same objects and state.", res.baseline)
	}
	b.WriteString("\n\n")
	b.WriteString("| Services | namespaces | created (this size's), s | apply, s | state, MB |")
	for _, c := range scaleColumns {
		b.WriteString(" " + c.title + " |")
	}
	b.WriteString("\n|---:|---:|---:|---:|---:|" + strings.Repeat("---:|", len(scaleColumns)) + "\n")
	for _, p := range res.points {
		fmt.Fprintf(&b, "| %d | %d | %.1f (%d) | %.1f | %.1f |", p.services, p.namespaces, p.create, p.created, p.apply, p.stateMB)
		for col := range scaleColumns {
			b.WriteString(" " + scaleColumn(p.current, col) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	if res.baseline != "" {
		fmt.Fprintf(&b, "Before/after at each size: this build / %s, same objects and state, one run each.\n\n", res.baseline)
		b.WriteString("| Services | measurement | this build | baseline | ratio |\n|---:|---|---:|---:|---:|\n")
		for _, p := range res.points {
			for col, c := range scaleColumns {
				fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", p.services, c.title, scaleColumn(p.current, col), scaleColumn(p.base, col), scaleRatio(p.current, p.base, col))
			}
		}
		b.WriteString("\n")
	}
	var notes []string
	for _, p := range res.points {
		for _, side := range []struct {
			name string
			r    *scaleRun
		}{{"this build", p.current}, {"the baseline", p.base}} {
			switch {
			case side.r == nil:
			case side.r.timeout != "":
				notes = append(notes, fmt.Sprintf("%d Services, %s: timeout (%s)", p.services, side.name, side.r.timeout))
			case side.r.failed != "":
				notes = append(notes, fmt.Sprintf("%d Services, %s: failed (%s)", p.services, side.name, side.r.failed))
			}
		}
	}
	if len(notes) > 0 {
		b.WriteString("Not measured in full: " + strings.Join(notes, "; ") + ".\n\n")
	}
	return b.String()
}

// syncParts are the parts of the companion's bench, in the order they run.
var syncParts = []string{"latency", "backends", "clusters", "idle", "check", "scale", "churn", "workspaces"}

// parseParts reads -sync-parts.
func parseParts(text string) (map[string]bool, error) {
	parts := map[string]bool{}
	for _, field := range strings.Split(text, ",") {
		name := strings.TrimSpace(field)
		if name == "" {
			continue
		}
		if !slices.Contains(syncParts, name) {
			return nil, fmt.Errorf("-sync-parts: %q is not one of %s", name, strings.Join(syncParts, ","))
		}
		parts[name] = true
	}
	return parts, nil
}
