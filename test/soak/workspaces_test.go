package soak

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/syncproc"
)

var t0 = time.Date(2026, 12, 2, 13, 20, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func singles(n int) []pool {
	var out []pool
	for i := range n {
		out = append(out, pool{namespace: nsSingles, service: fmt.Sprintf("svc-%02d", i)})
	}
	return out
}

func TestPoolsAreDealtOutSoThatEachWorkspaceHasItsShareAndEachPoolOneWorkspace(t *testing.T) {
	for _, tt := range []struct {
		name  string
		pools int
		k     int
		sizes []int
	}{
		{"the short schedule's 14 pools in 4 workspaces", 14, 4, []int{4, 4, 3, 3}},
		{"the long soak's 40 in 10", 40, 10, []int{4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
		{"one workspace has them all", 5, 1, []int{5}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			all := singles(tt.pools)
			split := splitPools(all, tt.k)
			var sizes []int
			seen := map[pool]int{}
			for _, ps := range split {
				sizes = append(sizes, len(ps))
				for _, p := range ps {
					seen[p]++
				}
			}
			if !slices.Equal(sizes, tt.sizes) {
				t.Errorf("sizes %v, want %v", sizes, tt.sizes)
			}
			for _, p := range all {
				if seen[p] != 1 {
					t.Errorf("%s is in %d workspaces, want 1", p, seen[p])
				}
			}
		})
	}
}

// Many deals at least 3 pools to each workspace, however few SOAK_POOLS
// asks for, and leaves out the fleet and the doomed namespace.
func TestManyGivesEachWorkspaceAtLeastThreeSinglePools(t *testing.T) {
	o := Short(time.Minute).Many(10)
	if o.Singles != 30 || o.Fleet != 0 || o.Workspaces != 10 || o.RunsPerReplica < 1 {
		t.Errorf("Many(10) of the short schedule: %d singles, fleet %d, %d workspaces, %d runs a replica; want 30, 0, 10, >= 1",
			o.Singles, o.Fleet, o.Workspaces, o.RunsPerReplica)
	}
	if o := Long(time.Minute).Many(10); o.Singles != 40 {
		t.Errorf("Many(10) of the long soak: %d singles, want its 40", o.Singles)
	}
	names := func(list []scheduled) []string {
		var out []string
		for _, f := range list {
			out = append(out, f.name)
		}
		return out
	}
	if got := names(scheduleFor(Short(time.Minute))); len(got) != len(schedule) {
		t.Errorf("the single soak's schedule %v, want all %d faults", got, len(schedule))
	}
	got := names(scheduleFor(o))
	for _, gone := range []string{"state file half-written", "a data source's namespace deleted", "leader SIGKILLed"} {
		if slices.Contains(got, gone) {
			t.Errorf("the many-workspace schedule %v has %q", got, gone)
		}
	}
	if !slices.Contains(got, "the replica leading the most workspaces SIGKILLed") || len(got) != 8 {
		t.Errorf("the many-workspace schedule %v, want 8 faults with the busiest replica killed", got)
	}
}

func TestChangesCloserThanTheQuietTimeForAtMostSettleMaxAreOneWindow(t *testing.T) {
	for _, tt := range []struct {
		name  string
		times []time.Time
		want  int
	}{
		{"none", nil, 0},
		{"one", []time.Time{at(0)}, 1},
		{"two within the quiet time", []time.Time{at(0), at(0.4)}, 1},
		{"two farther apart", []time.Time{at(0), at(0.6)}, 2},
		{"a stream closer than quiet, cut at settle-max", []time.Time{at(0), at(0.4), at(0.8), at(1.2), at(1.6), at(2.0), at(2.4), at(2.8), at(3.2)}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(windowsOf(tt.times, 500*time.Millisecond, 3*time.Second)); got != tt.want {
				t.Errorf("windows = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestAWindowBroughtInPiecesByAFaultIsNotARunForNothingButOneSplitInCalmIs(t *testing.T) {
	// A fault from 10 s to 12 s, caught up 1 s after.
	inFault := func(from, to time.Time) bool { return from.Before(at(13)) && to.After(at(10)) }
	applied := func(start, end float64) runSpan { return runSpan{start: at(start), end: at(end), result: "applied"} }
	for _, tt := range []struct {
		name    string
		changes []madeChange
		runs    []runSpan
		want    runCount
	}{
		{"a window and its run, in calm",
			[]madeChange{{at: at(0)}, {at: at(0.3)}},
			[]runSpan{applied(1, 1.5)},
			runCount{windows: 1, applies: 1}},
		{"a window split into two runs in calm is counted as two applies for one window",
			[]madeChange{{at: at(0)}, {at: at(0.3)}},
			[]runSpan{applied(1, 1.5), applied(2, 2.5)},
			runCount{windows: 1, applies: 2}},
		{"a window whose changes waited for state through a fault, applied in two runs at its end, is counted apart",
			[]madeChange{{at: at(9.8)}, {at: at(10.1)}},
			[]runSpan{applied(12.1, 12.4), applied(12.5, 12.9)},
			runCount{faultWindows: 1, faultApplies: 2}},
		{"a run under way when the fault began is counted apart; its window, seen before, is calm",
			[]madeChange{{at: at(9)}},
			[]runSpan{applied(9.6, 10.5)},
			runCount{windows: 1, faultApplies: 1}},
		{"a change seen in state just after a fault began, by a run that ended before it, is a calm window and a calm apply",
			[]madeChange{{at: at(8.5), sliced: at(8.6)}},
			[]runSpan{applied(9.1, 9.95)},
			runCount{windows: 1, applies: 1}},
		{"a run that did not apply is no apply; a change never seen is judged at its write",
			[]madeChange{{at: at(20)}},
			[]runSpan{{start: at(21), end: at(22), result: "no_changes"}, {start: at(23), end: at(24), result: "failed"}},
			runCount{windows: 1}},
		{"state_updated is an apply",
			[]madeChange{{at: at(30)}},
			[]runSpan{{start: at(30.5), end: at(31), result: "state_updated"}},
			runCount{windows: 1, applies: 1}},
		{"a burst written at once whose slices came in two pieces, farther apart than the quiet time, is two windows",
			[]madeChange{{at: at(0), sliced: at(0.5)}, {at: at(0.1), sliced: at(0.6)}, {at: at(0.2), sliced: at(2)}},
			[]runSpan{applied(1.1, 1.5), applied(2.6, 3)},
			runCount{windows: 2, applies: 2}},
		{"changes written farther apart than the quiet time whose slices came together are one window",
			[]madeChange{{at: at(0), sliced: at(1)}, {at: at(0.8), sliced: at(1.1)}},
			[]runSpan{applied(1.6, 2), applied(2.1, 2.4)},
			runCount{windows: 1, applies: 2}},
		{"changes out of order are sorted before they are windowed",
			[]madeChange{{at: at(0.9)}, {at: at(0)}, {at: at(0.5)}},
			[]runSpan{applied(1.5, 2)},
			runCount{windows: 1, applies: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := countRuns(tt.changes, tt.runs, 500*time.Millisecond, 3*time.Second, inFault); got != tt.want {
				t.Errorf("countRuns = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAFaultLastsForAWorkspaceAsLongAsTheCompanionHeldItsPoolsOutOfRunsAndItsQuietTime(t *testing.T) {
	// The API server killed from 10 s to 13 s, state caught up 1 s after
	// (14 s); quiet time 1 s, so a run the companion starts on its own
	// recovery starts 1 s after it.
	faults := []*fault{{start: at(10), end: at(13), catchUp: time.Second}}
	inFault := func(from, to time.Time) bool { return from.Before(at(14)) && to.After(at(10)) }
	applied := func(start, end float64) runSpan { return runSpan{start: at(start), end: at(end), result: "applied"} }
	down := func(from, to float64) holdSpan { return holdSpan{replica: "a", start: at(from), end: at(to)} }
	for _, tt := range []struct {
		name    string
		outages []holdSpan
		changes []madeChange
		runs    []runSpan
		want    runCount
	}{
		{"a change made while the cluster was held out, run 1 s after it answered again, after the state's catch-up, is the fault's",
			[]holdSpan{down(13.2, 18.2)},
			[]madeChange{{at: at(13.5), sliced: at(13.6)}},
			[]runSpan{applied(19.2012, 20)},
			runCount{faultWindows: 1, faultApplies: 1}},
		{"without the companion's outage, the same run is in calm (the judge's model before)",
			nil,
			[]madeChange{{at: at(13.5), sliced: at(13.6)}},
			[]runSpan{applied(19.2012, 20)},
			runCount{faultWindows: 1, applies: 1}},
		{"a change made after the outage and its quiet time is calm",
			[]holdSpan{down(13.2, 18.2)},
			[]madeChange{{at: at(20), sliced: at(20.1)}},
			[]runSpan{applied(21.1, 22)},
			runCount{windows: 1, applies: 1}},
		{"an outage beginning more than a minute after the fault's catch-up is no fault's: its runs are judged in calm",
			[]holdSpan{down(80, 85)},
			[]madeChange{{at: at(82), sliced: at(82.1)}},
			[]runSpan{applied(86, 87), applied(88, 89)},
			runCount{windows: 1, applies: 2}},
		{"an outage beginning before the fault is no fault's",
			[]holdSpan{down(5, 9)},
			[]madeChange{{at: at(6), sliced: at(6.1)}},
			[]runSpan{applied(9.5, 9.9)},
			runCount{windows: 1, applies: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := withOutages(inFault, faults, tt.outages, time.Second)
			if got := countRuns(tt.changes, tt.runs, time.Second, 3*time.Second, f); got != tt.want {
				t.Errorf("countRuns = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func ev(msg string, s float64, fields ...string) syncproc.Event {
	e := syncproc.Event{Time: at(s), Msg: msg, Fields: map[string]any{}}
	for i := 0; i+1 < len(fields); i += 2 {
		e.Fields[fields[i]] = fields[i+1]
	}
	return e
}

// A replica's runs of several workspaces interleave in its log: each
// "run ended" ends the run of its own workspace.
func TestRunsArePairedWorkspaceByWorkspace(t *testing.T) {
	started := []syncproc.Event{
		ev("run started", 1, "workspace", "ws-000"),
		ev("run started", 2, "workspace", "ws-001"),
		ev("run started", 6, "workspace", "ws-000"),
		ev("run started", 7, "workspace", "ws-001"),
	}
	ended := []syncproc.Event{
		ev("run ended", 3, "workspace", "ws-001", "result", "applied"),
		ev("run ended", 5, "workspace", "ws-000", "result", "failed"),
		ev("run ended", 8, "workspace", "ws-000", "result", "applied"),
	}
	describe := func(spans []runSpan) []string {
		var out []string
		for _, sp := range spans {
			out = append(out, fmt.Sprintf("%s %s-%s %s", sp.workspace, sp.start.Format("05"), sp.end.Format("05"), sp.result))
		}
		return out
	}
	got := describe(runSpans("soak-a-1", started, ended, at(9), at(20)))
	want := []string{"ws-000 01-05 failed", "ws-001 02-03 applied", "ws-000 06-08 applied", "ws-001 07-09 killed"}
	if !slices.Equal(got, want) {
		t.Errorf("runs %q, want %q", got, want)
	}
	// The single soak's log has no workspace: its runs pair in order.
	got = describe(runSpans("soak-a-1", []syncproc.Event{ev("run started", 1), ev("run started", 4)},
		[]syncproc.Event{ev("run ended", 2, "result", "applied")}, time.Time{}, at(20)))
	if want := []string{" 01-02 applied", " 04-20 "}; !slices.Equal(got, want) {
		t.Errorf("runs %q, want %q", got, want)
	}
}

// A replica leads a workspace from "leading" until the first of its
// release, its loss or its death; it may lead it again later.
func TestTimesOfLeadingEndAtTheFirstEndAfterEachStart(t *testing.T) {
	got := spansOf("soak-a-1", []time.Time{at(1), at(10)}, []time.Time{at(12), at(5)}, at(30))
	want := []holdSpan{{"soak-a-1", at(1), at(5)}, {"soak-a-1", at(10), at(12)}}
	if !slices.Equal(got, want) {
		t.Errorf("spans %v, want %v", got, want)
	}
	got = spansOf("soak-a-1", []time.Time{at(1), at(10)}, []time.Time{at(5)}, at(30))
	if want := []holdSpan{{"soak-a-1", at(1), at(5)}, {"soak-a-1", at(10), at(30)}}; !slices.Equal(got, want) {
		t.Errorf("spans without a last end %v, want %v", got, want)
	}
}

func span(replica string, from, to float64) holdSpan {
	return holdSpan{replica: replica, start: at(from), end: at(to)}
}

func TestTwoHoldersAreSpansOfTwoReplicasThatOverlap(t *testing.T) {
	for _, tt := range []struct {
		name  string
		spans []holdSpan
		want  []string
	}{
		{"one after the other", []holdSpan{span("a", 0, 10), span("b", 10, 20), span("a", 25, 30)}, nil},
		{"the same replica twice at once (two runs of one replica are the companion's own affair)",
			[]holdSpan{span("a", 0, 10), span("a", 5, 20)}, nil},
		{"b before a ended", []holdSpan{span("b", 9, 20), span("a", 0, 10)}, []string{"a<b"}},
		{"c inside a long span of a, after a short one of b: a check of neighbours alone misses it",
			[]holdSpan{span("a", 0, 30), span("b", 5, 6), span("c", 10, 12)}, []string{"a<b", "a<c"}},
		{"a's second span while b's long one goes on, a's own first span longer",
			[]holdSpan{span("a", 0, 40), span("b", 1, 30), span("a", 20, 21)}, []string{"a<b", "b<a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, o := range overlaps(tt.spans) {
				got = append(got, o.earlier.replica+"<"+o.later.replica)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("overlaps %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTheHoldersOverTimeAreTheLeasesChangesOfHolderAsPolled(t *testing.T) {
	samples := []leaseSample{
		{at: at(0)}, {at: at(0.5), holder: "soak-a-1"}, {at: at(1), holder: "soak-a-1"}, {at: at(1.5)},
		{at: at(2), holder: "soak-b-1"}, {at: at(2.5), holder: "soak-a-1"},
	}
	got := holderChanges(samples)
	want := []holding{{"soak-a-1", at(0.5)}, {"soak-b-1", at(2)}, {"soak-a-1", at(2.5)}}
	if !slices.Equal(got, want) {
		t.Errorf("holders %v, want %v", got, want)
	}
}

// The Lease never names another replica while one's log says it leads
// (its release is written before it is logged: the slack).
func TestALeaseNamingAnotherHolderThanTheLeadingReplicaIsAConflict(t *testing.T) {
	leads := []holdSpan{span("soak-a-1", 0, 10), span("soak-b-1", 12, 30)}
	for _, tt := range []struct {
		name   string
		sample leaseSample
		want   int
	}{
		{"the leader named", leaseSample{at: at(5), holder: "soak-a-1"}, 0},
		{"released, no holder", leaseSample{at: at(5)}, 0},
		{"the next holder, within the slack of a's release", leaseSample{at: at(9.5), holder: "soak-b-1"}, 0},
		{"the next holder named while a leads", leaseSample{at: at(5), holder: "soak-b-1"}, 1},
		{"the dead leader named between the two (its Lease not yet taken)", leaseSample{at: at(11), holder: "soak-a-1"}, 0},
		{"a named while b leads", leaseSample{at: at(20), holder: "soak-a-1"}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := leaseConflicts([]leaseSample{tt.sample}, leads, time.Second)
			if len(got) != tt.want {
				t.Errorf("conflicts %q, want %d", got, tt.want)
			}
		})
	}
}

// manyResult is a result of the many-workspace soak.
func manyResult() *Result {
	r := singleResult()
	r.Options = Short(3 * time.Minute).Many(2)
	r.LeaderIntervals = nil
	r.LeaseTransitions = 3
	r.Faults[1].name = "the replica leading the most workspaces SIGKILLed"
	r.Faults[1].detail = "soak-a-1 killed leading 1 of 2 workspaces; 1 taken over (soak-b-1 1) 16.2 to 16.2 s later"
	r.Checks = []string{"13:21:00: 0 change(s) pending, the oldest 0.0 s; leading soak-a-1 1, soak-b-1 1; RSS soak-a-1 40.1 MiB, soak-b-1 38.0 MiB"}
	r.Workspaces = []workspaceLine{
		{name: "ws-000", pools: 7, changes: 31, lost: 1, late: 0, calm: []float64{1.2, 1.4, 2.0}, runCount: runCount{windows: 20, applies: 19, faultWindows: 3, faultApplies: 4},
			holders: []holding{{"soak-a-1", at(1)}, {"soak-b-1", at(41)}, {"soak-a-2", at(90)}}},
		{name: "ws-001", pools: 7, changes: 29, lost: 0, late: 1, calm: []float64{1.5}, runCount: runCount{windows: 20, applies: 19},
			holders: []holding{{"soak-c-1", at(2)}, {"soak-b-1", at(60)}}},
	}
	return r
}

// The many-workspace soak's report: a table of workspaces (latency outside
// faults, windows and applies), one line per fault, and each workspace's
// holders over time.
func TestTheReportsOfTheManyWorkspaceSoakHaveWorkspacesAndHolders(t *testing.T) {
	md := manyResult().Markdown("Soak of the companion, many workspaces (short schedule)")
	for _, want := range []string{
		"| ws-000 | 7 | 31 | 1 | 0 | 3 | 1.40 | 2.00 | 2.00 | 20 | 19 |",
		"| ws-001 | 1 | soak-c-1 (13:20:02) → soak-b-1 (13:21:00) |",
		"| 13:20:40 | the replica leading the most workspaces SIGKILLed |",
		"Lease transitions seen, over all workspaces: 3.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(md, "## Leaders") {
		t.Error("the report has the single soak's leaders")
	}
	sameAsFile(t, "report-many.md", md)
}
