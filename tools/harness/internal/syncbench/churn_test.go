package syncbench

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/soak"
	"github.com/vigie/terraform-provider-k8s/test/syncproc"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/textcheck"
)

func TestTheChurnConfigurationsKeepEachPoolWhereTheJudgeLooks(t *testing.T) {
	singles := churnConfig{singles: 3}
	textcheck.Contains(t, "singles", singles.main(),
		"data \"k8s_ready_endpoints\" \"svc_000\" {\n  namespace = \"bench\"\n  service   = \"svc-000\"",
		"resource \"terraform_data\" \"svc_002\" {\n  input = [for e in data.k8s_ready_endpoints.svc_002.endpoints : \"${e.address}:${e.port}\"]",
	)
	if strings.Contains(singles.main(), "svc_003") || singles.key(2) != "svc_002" || singles.name() != "churn-3" {
		t.Errorf("3 singles: key %q, name %q, configuration:\n%s", singles.key(2), singles.name(), singles.main())
	}
	fleet := churnConfig{fleet: 500}
	textcheck.Contains(t, "fleet", fleet.main(),
		"data \"k8s_services\" \"fleet\" {\n  namespace = \"bench\"\n  port_name = \"http\"",
		"for_each = data.k8s_services.fleet.services\n  input    = [for e in each.value.endpoints : \"${e.address}:${e.port}\"]",
	)
	if strings.Contains(fleet.main(), "names     =") || fleet.key(7) != "bench/svc-007" || fleet.pools() != 500 {
		t.Errorf("fleet of 500: key %q, configuration:\n%s", fleet.key(7), fleet.main())
	}
	small := churnConfig{fleet: 2}
	textcheck.Contains(t, "fleet of 2", small.main(), "names     = [\"svc-000\", \"svc-001\"]")
	o := Options{churnSizes: sizeList{50, 500}, churnFleet: 500}
	if got := churnTitles(o); got != "50 `k8s_ready_endpoints`, 500 `k8s_ready_endpoints`, 1 `k8s_services` of 500 Services" {
		t.Errorf("titles %q", got)
	}
}

func TestTheChurnFlagsAreChecked(t *testing.T) {
	good := Options{churnSizes: sizeList{50, 500}, churnFleet: 500, churnRounds: 2, churnDuration: time.Minute, churnRate: 10, churnBurst: 50}
	if err := good.checkChurn(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for name, change := range map[string]func(*Options){
		"more singles than Services": func(o *Options) { o.churnSizes = sizeList{50, 501} },
		"a fleet larger":             func(o *Options) { o.churnFleet = 501 },
		"no round":                   func(o *Options) { o.churnRounds = 0 },
		"no churn":                   func(o *Options) { o.churnDuration = 0 },
		"no change":                  func(o *Options) { o.churnRate, o.churnBurst = 0, 0 },
	} {
		o := good
		change(&o)
		if err := o.checkChurn(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestAChurnRoundIsTheSoaksRateAndABurstInDistinctPoolsTheSameForEveryBuild(t *testing.T) {
	events := churnSchedule(churnSeed("churn-50", 0), 50, 3*time.Minute, 10, 50)
	var steady, bursts int
	for i, e := range events {
		if i > 0 && e.at < events[i-1].at {
			t.Errorf("event %d at %s before the one before it", i, e.at)
		}
		if !e.burst {
			steady++
			if len(e.pools) != 1 || e.at%(6*time.Second) != 0 {
				t.Errorf("steady change %d at %s in %v", i, e.at, e.pools)
			}
			continue
		}
		bursts++
		if e.at != 90*time.Second || len(e.pools) != 50 {
			t.Errorf("burst at %s of %d changes", e.at, len(e.pools))
		}
		distinct := slices.Compact(slices.Sorted(slices.Values(e.pools)))
		if len(distinct) != 50 {
			t.Errorf("the burst changes %d distinct pools, want 50", len(distinct))
		}
	}
	// 6 s apart from 6 s on, before 3 min: 29.
	if steady != 29 || bursts != 1 {
		t.Errorf("%d steady changes and %d bursts, want 29 and 1", steady, bursts)
	}
	again := churnSchedule(churnSeed("churn-50", 0), 50, 3*time.Minute, 10, 50)
	other := churnSchedule(churnSeed("churn-50", 1), 50, 3*time.Minute, 10, 50)
	same := func(a, b []churnEvent) bool {
		return slices.EqualFunc(a, b, func(x, y churnEvent) bool {
			return x.at == y.at && x.burst == y.burst && slices.Equal(x.pools, y.pools)
		})
	}
	if !same(events, again) || same(events, other) {
		t.Error("the same round did not draw the same churn, or another round drew it too")
	}
	if wrapped := churnSchedule(churnSeed("churn-5", 0), 5, time.Minute, 0, 8); len(wrapped) != 1 || len(wrapped[0].pools) != 8 {
		t.Errorf("a burst larger than the pools: %v", wrapped)
	}
}

func TestTheChurnKeepsMoreThanHalfOfEachPoolReady(t *testing.T) {
	rng := churnSeed("flips", 0)
	ready := slices.Repeat([]bool{true}, 10)
	lowest := 10
	for i := range 2000 {
		pod, up := churnFlip(rng, ready)
		if ready[pod] == up {
			t.Fatalf("flip %d: pod %d is already ready=%v", i, pod, up)
		}
		all := !slices.Contains(ready, false)
		if all && up {
			t.Fatalf("flip %d: a full pool got a pod made ready", i)
		}
		ready[pod] = up
		n := 0
		for _, r := range ready {
			if r {
				n++
			}
		}
		lowest = min(lowest, n)
	}
	if lowest != 6 {
		t.Errorf("the pool went down to %d ready of 10, want 6 (more than half) and no lower", lowest)
	}
}

// stateFile writes a state of terraform_data pools to path, written at.
func stateFile(t *testing.T, path string, at time.Time, pools map[string][]string) {
	t.Helper()
	var resources []string
	for _, key := range slices.Sorted(maps.Keys(pools)) {
		quoted := make([]string, len(pools[key]))
		for i, m := range pools[key] {
			quoted[i] = fmt.Sprintf("%q", m)
		}
		resources = append(resources, fmt.Sprintf(`{"mode": "managed", "type": "terraform_data", "name": %q, "instances": [{"attributes": {"input": {"value": [%s]}}}]}`,
			key, strings.Join(quoted, ", ")))
	}
	if err := os.WriteFile(path, []byte(`{"version": 4, "resources": [`+strings.Join(resources, ", ")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func TestTheChurnJudgePairsEachChangeWithTheStateFileThatFirstShowsIt(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return at.Add(time.Duration(s * float64(time.Second))) }
	j := &churnJudge{path: filepath.Join(t.TempDir(), "terraform.tfstate")}
	stateFile(t, j.path, sec(0), map[string][]string{"svc_000": {"a", "b", "c"}, "svc_001": {"a", "b", "c"}})
	if err := j.read(); err != nil {
		t.Fatal(err)
	}
	change := func(s float64, key string, want ...string) *churnChange {
		c := &churnChange{Change: soak.Change{At: sec(s), Key: key, Want: want}, pod: key + "-pod"}
		j.record(c)
		return c
	}
	// Seen at 2.5 s, when the state that shows it was written.
	seen := change(1, "svc_000", "a", "b")
	// Superseded by the next change of its pool before any state showed it,
	// which is then seen.
	superseded := change(1.2, "svc_001", "a", "b")
	later := change(1.4, "svc_001", "a")
	stateFile(t, j.path, sec(2.5), map[string][]string{"svc_000": {"a", "b"}, "svc_001": {"a"}})
	if err := j.read(); err != nil {
		t.Fatal(err)
	}
	// Undone: back to what state showed.
	away := change(3, "svc_000", "a")
	back := change(3.5, "svc_000", "a", "b")
	// Lost: state never shows it.
	lost := change(4, "svc_001", "a", "c")
	stateFile(t, j.path, sec(6), map[string][]string{"svc_000": {"a", "b"}, "svc_001": {"a", "b", "c"}})
	if err := j.read(); err != nil {
		t.Fatal(err)
	}
	// A state written before a change that it already shows, read after
	// it: seen at the change's own time (it undid one still pending).
	toC := change(7, "svc_001", "c")
	stateFile(t, j.path, sec(8), map[string][]string{"svc_000": {"a", "b"}, "svc_001": {"b"}})
	bAgain := change(8.5, "svc_001", "b")
	if err := j.read(); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name       string
		c          *churnChange
		seen       time.Time
		superseded bool
	}{
		{"seen", seen, sec(2.5), false},
		{"superseded", superseded, time.Time{}, true},
		{"the change after it", later, sec(2.5), false},
		{"away from state", away, time.Time{}, true},
		{"back to state", back, sec(3.5), false},
		{"never in state, then superseded", lost, time.Time{}, true},
		{"away again", toC, time.Time{}, true},
		{"back to a state written before it", bAgain, sec(8.5), false},
	} {
		if !tt.c.Seen.Equal(tt.seen) || tt.c.Superseded != tt.superseded {
			t.Errorf("%s: seen %v, superseded %v; want %v, %v", tt.name, tt.c.Seen, tt.c.Superseded, tt.seen, tt.superseded)
		}
	}
	if n := j.pending(); n != 0 {
		t.Errorf("%d change(s) pending, want none", n)
	}

	var tally churnTally
	tally.tally(j.changes)
	if tally.changes != 8 || tally.seen != 2 || tally.superseded != 4 || tally.undone != 2 || len(tally.lost) != 0 {
		t.Errorf("tally: %d changes, %d seen, %d superseded, %d undone, %d lost", tally.changes, tally.seen, tally.superseded, tally.undone, len(tally.lost))
	}
	if !slices.Equal(tally.latency, []float64{1.5, 1.1}) || !slices.Equal(tally.steady, tally.latency) || len(tally.burst) != 0 {
		t.Errorf("latencies %v (steady %v, burst %v), want 1.5 and 1.1, both steady", tally.latency, tally.steady, tally.burst)
	}

	// A change that nothing resolves is lost, and named.
	var none churnTally
	none.tally([]*churnChange{{Change: soak.Change{At: sec(9), Key: "svc_002", Want: []string{"a"}}, pod: "svc-002-4"}})
	if none.changes != 1 || len(none.lost) != 1 || !strings.Contains(none.lost[0], "svc_002: pod svc-002-4 made not ready at 10:00:09.000") {
		t.Errorf("lost: %v", none.lost)
	}
}

func TestRunsArePairedFromTheLogOneAtATime(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	ev := func(s float64, result string) syncproc.Event {
		e := syncproc.Event{Time: at.Add(time.Duration(s * float64(time.Second)))}
		if result != "" {
			e.Fields = map[string]any{"result": result}
		}
		return e
	}
	runs := pairRuns([]syncproc.Event{ev(0, ""), ev(5, ""), ev(9, ""), ev(20, "")}, []syncproc.Event{ev(2, "applied"), ev(8, "applied"), ev(10, "no_changes")})
	var tally churnTally
	tally.addRuns(runs)
	// The change of 4 s waited for the run of 5 s; the one of 9 s, written
	// as a run started, for the next; those superseded, undone or lost
	// have none.
	change := func(at, seen float64, superseded bool) *churnChange {
		c := &churnChange{Change: soak.Change{At: ev(at, "").Time, Key: "svc_000", Superseded: superseded}, pod: "svc-000-1"}
		if seen >= 0 {
			c.Seen = ev(seen, "").Time
		}
		return c
	}
	got := untilRun([]*churnChange{change(4, 8, false), change(9, 25, false), change(6, -1, true), change(7, 7, false), change(8, -1, false)}, runs)
	if !slices.Equal(got, []float64{1, 11}) {
		t.Errorf("write → next run started %v, want 1 and 11", got)
	}
	var trace strings.Builder
	traceChanges(&trace, []*churnChange{change(4, 8, false), change(19, -1, false), change(6, -1, true)}, runs)
	textcheck.Contains(t, "trace", trace.String(),
		"    change 1, svc_000 (pod svc-000-1 made not ready): next run started +1.00 s, ended +4.00 s; in state +4.00 s\n",
		"    change 2, svc_000 (pod svc-000-1 made not ready): next run started +1.00 s; lost\n",
		"    change 3, svc_000 (pod svc-000-1 made not ready): next run started +3.00 s, ended +4.00 s; superseded\n",
	)
	if !slices.Equal(tally.durations, []float64{2, 3, 1}) || tally.unended != 1 {
		t.Errorf("durations %v, %d under way; want 2, 3, 1 and one", tally.durations, tally.unended)
	}
	if tally.runCount() != 3 || tally.nothingToDo() != 1 || otherResults(&tally) != "no_changes 1" {
		t.Errorf("%d runs, %d with nothing to do, others %q", tally.runCount(), tally.nothingToDo(), otherResults(&tally))
	}
}

func churnFixture() *churnResults {
	tally := func(latency, durations []float64, nothing int, lost ...string) *churnTally {
		toRun := make([]float64, len(latency))
		for i, v := range latency {
			toRun[i] = v / 2
		}
		t := &churnTally{changes: len(latency) + len(lost), toRun: toRun, steady: latency[:1], burst: latency[1:], burstWrites: []float64{1.2, 1.5}, seen: len(latency), latency: latency, lost: lost,
			runs: map[string]int{"applied": len(durations) - nothing}, durations: durations, applies: []float64{3, 4}}
		if nothing > 0 {
			t.runs[resultNoChanges] = nothing
		}
		return t
	}
	return &churnResults{rounds: 2, duration: 3 * time.Minute, wait: 5 * time.Minute, perMinute: 10, burst: 50, baseline: "c53f66b", current: "abc1234", points: []*churnPoint{
		{config: churnConfig{singles: 50}, current: tally(twenty(), []float64{1, 2, 3}, 0), base: tally([]float64{1, 2, 4}, []float64{2, 4, 6}, 0)},
		{config: churnConfig{singles: 500}, current: tally([]float64{5, 6}, []float64{2, 3, 4}, 1), base: tally([]float64{10, 12}, []float64{8, 9, 10}, 0)},
		{config: churnConfig{fleet: 500}, current: tally([]float64{1}, []float64{1}, 0, "bench/svc-001: pod svc-001-3 made ready at 10:00:00.000 (want 10 members)"), base: tally([]float64{2}, []float64{2}, 0)},
	}}
}

func TestChurnRowsGiveTheTargetsOfIssue39(t *testing.T) {
	rows := churnTargetRows(churnFixture())
	textcheck.RowSuffixes(t, rows,
		"| 0.10 s | ≤ 2.0 s | **pass** (95 % under) |",
		"| 0.20 s | ≤ 4.0 s | **pass** (95 % under) |",
		"| 3.00 s / 2.00 s = 1.50× | ≤ 1.5× | **pass** (0 % under) |",
		"(not in state when a round ended, 5m0s after its churn), every configuration | 1 of 24 | 0 | **miss** by 1 |",
		"| 1 of 7 | 0 | **miss** by 1 |",
	)
	if rows := churnTargetRows(&churnResults{points: []*churnPoint{{config: churnConfig{singles: 5}, current: &churnTally{}}}}); !strings.Contains(rows[0], "not measured") || !strings.Contains(rows[1], "not measured") {
		t.Errorf("rows without 50 and 500:\n%s", strings.Join(rows, "\n"))
	}
	if churnTargetRows(nil) != nil || churnSection(nil) != "" {
		t.Error("no churn gave rows or a section")
	}
}

func TestTheChurnSectionGivesEachBuildAndTheirRatios(t *testing.T) {
	section := churnSection(churnFixture())
	textcheck.Contains(t, "section", section,
		"2 round(s) of 3m0s of churn, this build (abc1234) and the baseline's (c53f66b) in turn",
		"the wait, 5m0s at most, for every change to be in state: a change not in state when it ends is lost",
		"| 50 `k8s_ready_endpoints` | this build | 20 | 20 | 0 | 0 | 0 | 0.10 | 0.20 | 0.20 | 0.05 | 2.00 | 3.00 | 3.00 | 3 | 0 | — | 3.0–4.0 |",
		"| 50 `k8s_ready_endpoints` | baseline c53f66b | 3 | 3 | 0 | 0 | 0 | 2.00 | 4.00 | 4.00 | 1.00 | 4.00 | 6.00 | 6.00 | 3 |",
		"| 50 `k8s_ready_endpoints` | this build / baseline | 6.67× | | | | | 0.05× | 0.05× | 0.05× | 0.05× | 0.50× | 0.50× | 0.50× | 1.00× | | | |",
		"| 500 `k8s_ready_endpoints` | this build | 2 | 2 | 0 | 0 | 0 | 5.00 | 6.00 | 6.00 | 2.50 | 3.00 | 4.00 | 4.00 | 3 | 1 | no_changes 1 |",
		"| 1 `k8s_services` of 500 Services | this build | 2 | 1 | 0 | 0 | 1 |",
		"| 50 `k8s_ready_endpoints` | this build | 1 | 0.01 | 0.01 | 19 | 0.11 | 0.20 | 1.2–1.5 |",
		"| 1 `k8s_services` of 500 Services | baseline c53f66b | 1 | 2.00 | 2.00 | 0 | — | — | 1.2–1.5 |",
		"Lost (not in state when the round ended), 1 `k8s_services` of 500 Services, this build (1): bench/svc-001: pod svc-001-3 made ready at 10:00:00.000 (want 10 members).",
	)
}
