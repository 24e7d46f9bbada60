package syncbench

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigie/terraform-provider-k8s/test/syncproc"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/textcheck"
)

func TestAWorkspaceKeepsItsServicesPoolWhereTheStateIsRead(t *testing.T) {
	textcheck.Contains(t, "workspace 7", workspaceMain(7),
		"data \"k8s_ready_endpoints\" \"pool\" {\n  namespace = \"bench\"\n  service   = \"svc-007\"\n  port_name = \"http\"\n}",
		"resource \"terraform_data\" \"pool\" {\n  input = [for e in data.k8s_ready_endpoints.pool.endpoints : \"${e.address}:${e.port}\"]\n}",
	)
	got := workspacesFile([]string{"/w/ws-000", "/w/a dir/ws-001"})
	want := "workspaces:\n  - name: ws-000\n    dir: \"/w/ws-000\"\n  - name: ws-001\n    dir: \"/w/a dir/ws-001\"\n"
	if got != want {
		t.Errorf("workspaces file:\n%s\nwant:\n%s", got, want)
	}
}

func TestTheWorkspacesFlagsAreChecked(t *testing.T) {
	good := workspacesOptions{count: 100, idle: time.Minute, churn: 3 * time.Minute, replicas: sizeList{1, 2, 3}, wait: 10 * time.Minute}
	if err := good.check(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	noReplicas := good
	noReplicas.replicas, noReplicas.churn = nil, 0
	if err := noReplicas.check(); err != nil {
		t.Errorf("no replicas, no churn: %v", err)
	}
	for name, change := range map[string]func(*workspacesOptions){
		"no workspace":           func(o *workspacesOptions) { o.count = 0 },
		"more than the Services": func(o *workspacesOptions) { o.count = 501 },
		"no idle window":         func(o *workspacesOptions) { o.idle = 0 },
		"replicas not from one":  func(o *workspacesOptions) { o.replicas = sizeList{2, 3} },
		"replicas without churn": func(o *workspacesOptions) { o.churn = 0 },
		"no wait":                func(o *workspacesOptions) { o.wait = 0 },
	} {
		o := good
		change(&o)
		if err := o.check(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The audit log's lines as the API server's log backend writes them
// (Metadata level, RequestReceived omitted).
const auditLines = `{"kind":"Event","auditID":"a","stage":"ResponseStarted","verb":"watch","requestURI":"/api/v1/namespaces/bench/services?allowWatchBookmarks=true\u0026resourceVersion=\u0026sendInitialEvents=true\u0026watch=true","userAgent":"terraform-provider-k8s-sync","objectRef":{"resource":"services","namespace":"bench","apiVersion":"v1"},"responseStatus":{"code":200}}
{"kind":"Event","auditID":"b","stage":"ResponseStarted","verb":"watch","userAgent":"terraform-provider-k8s-sync","objectRef":{"resource":"endpointslices","namespace":"bench","apiGroup":"discovery.k8s.io"}}
{"kind":"Event","auditID":"l","stage":"ResponseComplete","verb":"list","userAgent":"terraform-provider-k8s-sync","objectRef":{"resource":"services","namespace":"bench"}}
{"kind":"Event","auditID":"b","stage":"ResponseComplete","verb":"watch","userAgent":"terraform-provider-k8s-sync","objectRef":{"resource":"endpointslices","namespace":"bench"}}
{"kind":"Event","auditID":"c","stage":"ResponseStarted","verb":"watch","userAgent":"terraform-provider-k8s-sync","objectRef":{"resource":"endpointslices","namespace":"bench"}}
{"kind":"Event","auditID":"d","stage":"ResponseStarted","verb":"watch","userAgent":"kube-controller-manager/v1.35.0","objectRef":{"resource":"pods"}}
{"kind":"Event","auditID":"e","stage":"ResponseStarted","verb":"watch","userAgent":"terraform-provider-k8s/1.2.0","objectRef":{"resource":"services","namespace":"bench"}}
{"kind":"Event","auditID":"f","stage":"ResponseStarted","verb":"watch","userAgent":"terraform-provider-k8s-sync","objectRef":{"resource":"leases","namespace":"bench-workspaces","apiGroup":"coordination.k8s.io"}}
{"kind":"Event","auditID":"f","stage":"ResponseComplete","verb":"watch","userAgent":"terraform-provider-k8s-sync","objectRef":{"resource":"leases","namespace":"bench-workspaces"}}
{"kind":"Event","auditID":"g","stage":"ResponseComplete","verb":"get","userAgent":"terraform-provider-k8s-sync","requestURI":"/version"}
not json
`

func TestWatchesAreCountedFromTheAuditLogByKindAndNamespace(t *testing.T) {
	c, err := countWatches(strings.NewReader(auditLines), wsSyncAgent)
	if err != nil {
		t.Fatal(err)
	}
	svc, eps, leases := watchKey{"services", "bench"}, watchKey{"endpointslices", "bench"}, watchKey{"leases", "bench-workspaces"}
	for _, check := range []struct {
		what   string
		counts map[watchKey]int
		want   map[watchKey]int
	}{
		// The slices' first watch ended, and another was opened; the
		// Lease's watch ended; the controller's and the provider's are
		// not the companion's.
		{"opened", c.opened, map[watchKey]int{svc: 1, eps: 2, leases: 1}},
		{"open", c.open, map[watchKey]int{svc: 1, eps: 1}},
		{"lists", c.lists, map[watchKey]int{svc: 1}},
	} {
		if len(check.counts) != len(check.want) {
			t.Errorf("%s: %v, want %v", check.what, check.counts, check.want)
		}
		for k, v := range check.want {
			if check.counts[k] != v {
				t.Errorf("%s: %v, want %v", check.what, check.counts, check.want)
			}
		}
	}
	if got := c.describe(c.open); got != "endpointslices in bench: 1, services in bench: 1" {
		t.Errorf("open described as %q", got)
	}
	if got := c.describe(nil); got != "none" {
		t.Errorf("nothing described as %q", got)
	}
	if c.streamed != 1 {
		t.Errorf("%d watches listed by streaming, want 1", c.streamed)
	}
	if c.total(c.opened) != 4 || !onePerKind(c.open) || onePerKind(c.opened) || onePerKind(nil) {
		t.Errorf("total opened %d; one per kind: open %v, opened %v, none %v", c.total(c.opened), onePerKind(c.open), onePerKind(c.opened), onePerKind(nil))
	}
	if got := (watchKey{"nodes", ""}).String(); got != "nodes (every namespace)" {
		t.Errorf("a cluster-wide kind is %q", got)
	}
}

// ended is a `run ended` line of workspace at at, of result, that lasted
// d.
func ended(workspace string, at time.Time, result, d string) syncproc.Event {
	return syncproc.Event{Time: at, Msg: "run ended", Fields: map[string]any{"workspace": workspace, "result": result, "duration": d}}
}

// queued is e with the wait for the replica's slot that the companion logs.
func queued(e syncproc.Event, d string) syncproc.Event {
	e.Fields["queued"] = d
	return e
}

func TestAFlipIsTakenByAnAppliedRunThatStartedAfterIt(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	flipped := map[string]time.Time{"ws-000": t0, "ws-001": t0, "ws-002": t0, "ws-003": t0}
	runs := []syncproc.Event{
		// Started 1 s after the flip: taken.
		ended("ws-000", t0.Add(3*time.Second), "applied", "2s"),
		// Under way at the flip (started 1 s before it): not taken.
		ended("ws-001", t0.Add(2*time.Second), "applied", "3s"),
		// Started after it, but failed: not taken.
		ended("ws-002", t0.Add(5*time.Second), "failed", "1s"),
		// A workspace never flipped.
		ended("ws-009", t0.Add(5*time.Second), "applied", "1s"),
		// No duration: its start is unknown.
		ended("ws-003", t0.Add(5*time.Second), "applied", ""),
		// Decided 1 s before the flip, it waited 2 s for the replica's
		// slot (`queued`, left out of its duration): not taken.
		queued(ended("ws-004", t0.Add(3*time.Second), "applied", "2s"), "2s"),
	}
	flipped["ws-004"] = t0
	got := takenFlips(runs, flipped)
	if !got["ws-000"] || got["ws-001"] || got["ws-002"] || got["ws-003"] || got["ws-004"] || got["ws-009"] || len(got) != 1 {
		t.Errorf("taken %v, want ws-000 alone", got)
	}
}

func TestRunsAreTalliedWithinTheWindow(t *testing.T) {
	from := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	to := from.Add(time.Minute)
	// One replica's runs, one at a time, out of order as the replicas'
	// logs are gathered.
	runs := []syncproc.Event{
		ended("ws-004", to, "applied", "2s"),                          // after
		ended("ws-000", from.Add(-time.Millisecond), "applied", "2s"), // before
		// Decided 2 s before its end, while the run before held the slot
		// until 1 ms before: 0.001 s in the slot.
		ended("ws-000", from, "applied", "2s"),
		// Decided at 25.5 s, the slot free since 0 s: 4.5 s in it.
		ended("ws-001", from.Add(30*time.Second), "applied", "4.5s"),
		ended("ws-002", from.Add(40*time.Second), "failed", "1s"),
		ended("ws-003", from.Add(50*time.Second), "no_changes", "1s"),
		// Decided at 45 s, the slot free at 50 s: 3 s in it; the
		// companion logs the 5 s wait apart.
		queued(ended("ws-005", from.Add(53*time.Second), "applied", "3s"), "5s"),
	}
	got := tallyRuns(runs, from, to)
	if got.applied != 3 || got.other["failed"] != 1 || got.other["no_changes"] != 1 || len(got.other) != 2 {
		t.Errorf("tally %+v, want 3 applied, 1 failed, 1 no_changes", got)
	}
	if !slices.Equal(got.durations, []float64{2, 4.5, 8}) {
		t.Errorf("durations %v, want [2 4.5 8]", got.durations)
	}
	if want := []float64{0.001, 4.5, 3}; !slices.EqualFunc(got.slotTimes, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
		t.Errorf("times in the slot %v, want %v", got.slotTimes, want)
	}
	if text := resultsText(got.other); text != "failed 1, no_changes 1" {
		t.Errorf("other results %q", text)
	}
	st := &replicaStage{applied: 30, window: 180}
	if len(runs) != 7 || runs[0].Str("workspace") != "ws-004" {
		t.Error("tallyRuns reordered its argument")
	}
	if st.perMinute() != 10 {
		t.Errorf("30 runs in 3 minutes: %v a minute", st.perMinute())
	}
}

func lease(name, holder string) coordinationv1.Lease {
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if holder != "-" {
		l.Spec.HolderIdentity = &holder
	}
	return l
}

func TestTheLeasesAreSharedOutWhenEveryWorkspaceIsHeldAndEveryReplicaHoldsSome(t *testing.T) {
	names := []string{"ws-000", "ws-001", "ws-002"}
	ids := []string{"replica-1", "replica-2"}
	leases := []coordinationv1.Lease{
		lease("wsbench-2-ws-000", "replica-1"), lease("wsbench-2-ws-001", "replica-2"), lease("wsbench-2-ws-002", ""),
		lease("wsbench-1-ws-002", "replica-1"), // another group's
		lease("wsbench-2", "replica-1"),        // not a workspace's
	}
	holders := holdersOf(leases, "wsbench-2", names)
	if len(holders) != 2 || holders["ws-000"] != "replica-1" || holders["ws-001"] != "replica-2" {
		t.Fatalf("holders %v", holders)
	}
	if sharedOut(holders, names, ids) {
		t.Error("ws-002 is free: shared out")
	}
	holders["ws-002"] = "replica-1"
	if !sharedOut(holders, names, ids) {
		t.Error("every workspace held, each replica holding some: not shared out")
	}
	if got := shares(holders, ids); got[0] != 2 || got[1] != 1 {
		t.Errorf("shares %v, want [2 1]", got)
	}
	if sharedOut(map[string]string{"ws-000": "replica-1", "ws-001": "replica-1", "ws-002": "replica-1"}, names, ids) {
		t.Error("replica-2 holds none: shared out")
	}
	if sharedOut(map[string]string{"ws-000": "replica-1", "ws-001": "replica-2", "ws-002": "replica-9"}, names, ids) {
		t.Error("a workspace held by a replica not of the stage: shared out")
	}
	now := map[string]string{"ws-000": "replica-2", "ws-001": "replica-2"}
	if got := holderChanges(holders, now); got != 2 {
		t.Errorf("ws-000 handed over and ws-002 let go: %d changes, want 2", got)
	}
	if got := holderChanges(now, now); got != 0 {
		t.Errorf("no change: %d", got)
	}
	if got := holdersOf([]coordinationv1.Lease{lease("wsbench-2-ws-000", "-")}, "wsbench-2", names); len(got) != 0 {
		t.Errorf("a Lease without holder: %v", got)
	}
}

func TestBoundedRunsEveryCallAtMostWorkersAtOnceAndGivesTheFirstError(t *testing.T) {
	var running, most, calls atomic.Int32
	err := bounded(context.Background(), 20, 3, func(context.Context, int) error {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		running.Add(-1)
		calls.Add(1)
		return nil
	})
	if err != nil || calls.Load() != 20 || most.Load() > 3 {
		t.Errorf("err %v, %d calls, at most %d at once; want nil, 20, 3", err, calls.Load(), most.Load())
	}
	failed := errors.New("apply failed")
	calls.Store(0)
	err = bounded(context.Background(), 50, 2, func(_ context.Context, i int) error {
		calls.Add(1)
		if i == 3 {
			return failed
		}
		time.Sleep(time.Millisecond)
		return nil
	})
	if !errors.Is(err, failed) || calls.Load() == 50 {
		t.Errorf("err %v after %d calls; want the apply's error, the rest skipped", err, calls.Load())
	}
}

// fixedWorkspaces are results as a run of 100 workspaces could give them.
func fixedWorkspaces() *workspacesResults {
	svc, eps := watchKey{"services", "bench"}, watchKey{"endpointslices", "bench"}
	// Each process probes each kind with a watch of a second, then its
	// informers watch, listing by streaming.
	one := &companionSet{processes: 1, watching: 4, settled: 12, startCPU: 3, startChildCPU: 20, idle: 60, idleCPU: 0.3, peakRSS: 60, largestRSS: 60,
		watches: watchCount{opened: map[watchKey]int{svc: 2, eps: 2}, open: map[watchKey]int{svc: 1, eps: 1}, lists: map[watchKey]int{svc: 1, eps: 1}, streamed: 2}}
	each := &companionSet{processes: 100, watching: 40, settled: 80, startCPU: 60, startChildCPU: 25, idle: 60, idleCPU: 3, peakRSS: 3000, largestRSS: 31,
		watches: watchCount{opened: map[watchKey]int{svc: 200, eps: 200}, open: map[watchKey]int{svc: 100, eps: 100}, lists: map[watchKey]int{svc: 100, eps: 100}, streamed: 200}}
	stage := func(k, applied int, busy float64) *replicaStage {
		return &replicaStage{replicas: k, sharedOut: 25, shares: make([]int, k), window: 180, flips: applied + 100, applied: applied, perReplica: []int{applied},
			other: map[string]int{}, durations: []float64{3, 4, 5}, slotTimes: []float64{0.5, 0.6, 0.9}, busy: busy, load: "2.10 2.00 1.90",
			replicaCPU: 18, commandCPU: 270, controlPlaneCPU: 36, harnessCPU: 9}
	}
	return &workspacesResults{count: 100, pods: 10, apply: 150, workers: 4, idle: time.Minute, one: one, each: each, churn: 3 * time.Minute, cores: 2,
		stages: []*replicaStage{stage(1, 60, 0.6), stage(2, 110, 0.85), stage(3, 120, 0.97)}}
}

func TestTheWorkspacesRowsGiveVerdicts(t *testing.T) {
	res := fixedWorkspaces()
	rows := workspacesTargetRows(res)
	textcheck.RowSuffixes(t, rows,
		"| 60.0 MiB / 3000.0 MiB = 0.020× | ≤ 0.1× | **pass** (80 % under) |",
		"| endpointslices in bench: 1, services in bench: 1 | one per kind per namespace | **pass** |",
		// 110 / 60 = 1.83 against 1.6; 120 / 60 = 2.00 against 2.4, on a
		// saturated machine (0.97 of 2 cores).
		"| 36.7 / 20.0 = 1.83× | ≥ 1.6× (near-linear: 0.8 × replicas) | **pass** (15 % over) |",
		"| 40.0 / 20.0 = 2.00× | ≥ 2.4× (near-linear: 0.8 × replicas) | **miss** by 0.40× (17 % under): the CPU was saturated, the machine 97 % busy over the window (1.94 of 2 cores; load 2.10 2.00 1.90 at its end): the replicas' commands (terraform and its providers) 1.50 cores, the replicas 0.10, the control plane 0.20, the harness 0.05, the rest (the machine's other work) 0.09 |",
	)
	res.one.watches.open[watchKey{"services", "bench"}] = 2
	res.stages[2].busy = 0.5
	rows = workspacesTargetRows(res)
	if !strings.HasSuffix(rows[1], "| one per kind per namespace | **miss** |") {
		t.Errorf("two watches of a kind: %q", rows[1])
	}
	if !strings.HasSuffix(rows[3], "| **miss** by 0.40× (17 % under) |") {
		t.Errorf("a miss on a machine not saturated names no cause: %q", rows[3])
	}
	if workspacesTargetRows(nil) != nil || workspacesSection(nil) != "" {
		t.Error("no results gave rows or a section")
	}
}

func TestTheWorkspacesSectionSaysWhatWasRun(t *testing.T) {
	s := workspacesSection(fixedWorkspaces())
	textcheck.Contains(t, "section", s,
		"100 working directories, each a configuration of one `k8s_ready_endpoints`",
		"| measurement | one replica of 100 workspaces | 100 single-workspace processes | one / the processes |",
		"| peak RSS (VmHWM), MiB: the process; the sum of the processes | 60.0 | 3000.0 | 0.020× |",
		"| idle CPU over 60 s, % of a core (a clock tick is 0.017 %): own + commands | 0.500 + 0.000 | 5.000 + 0.000 | 0.100× |",
		"| watches open at the idle window's end | 2 (endpointslices in bench: 1, services in bench: 1) | 200 (endpointslices in bench: 100, services in bench: 100) | 0.010× |",
		"-max-concurrent-runs 1` (one run at a time each",
		"| watches opened from the start to the idle window's end (of them, lists streamed: `sendInitialEvents=true`) | 4 (2) | 400 (200) | |",
		"| 3 | 25.0 | 0, 0, 0 | 220 | 120 (120) | 40.0 | 2.00× | 4.00, 5.00 | 0.60, 0.90 | — | 0 | 0 | 97 | 2.10 2.00 1.90 | 0.10 | 1.50 | 2.25 | 0.20 | 0.05 |",
		"3 replica(s): the CPU was saturated, the machine 97 % busy",
	)
	if strings.Contains(s, "2 replica(s): the CPU was saturated") {
		t.Errorf("0.85 busy is not saturated:\n%s", s)
	}
	// No tick in the idle window: less than one tick's share.
	res := fixedWorkspaces()
	res.one.idleCPU = 0
	textcheck.Contains(t, "idle for less than a tick", workspacesSection(res), "| 0.000 + 0.000 | 5.000 + 0.000 | < 0.003× |")
}
