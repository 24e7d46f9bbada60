package soak

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
	"github.com/vigie/terraform-provider-k8s/test/syncproc"
)

// The many-workspace soak (issue 40): K working directories, each its own
// configuration of a few single pools and its own state, served by three
// replicas of `sync -workspaces` that share the workspaces' Leases out.
// The single soak is the same code with one workspace, served with -chdir
// under one Lease by two replicas.

// workspace is one working directory the companion keeps current.
type workspace struct {
	// name is the workspace's in the -workspaces file; "" for the single
	// soak's, which has no name in the companion's log.
	name  string
	dir   string
	pools []pool
}

// leaseGroup is the many-workspace soak's -lease-name: each workspace's
// Lease is leaseGroup-NAME.
const leaseGroup = "soak-ws"

// Many are o for k workspaces: the single pools dealt out among them, at
// least 3 each; no fleet and no namespace to delete (their faults are the
// single soak's); three replicas, each with at most 2 runs at once.
func (o Options) Many(k int) Options {
	o.Workspaces = k
	o.Singles = max(o.Singles, 3*k)
	o.Fleet = 0
	o.RunsPerReplica = 2
	return o
}

func (s *soak) many() bool { return s.o.Workspaces > 0 }

// replicaNames are the replicas' names: two for one workspace, three for many.
func (s *soak) replicaNames() []string {
	if s.many() {
		return []string{"a", "b", "c"}
	}
	return []string{"a", "b"}
}

// splitPools deals pools out to k workspaces in turn: workspace i has
// pools i, i+k, i+2k...
func splitPools(pools []pool, k int) [][]pool {
	out := make([][]pool, k)
	for i, p := range pools {
		out[i%k] = append(out[i%k], p)
	}
	return out
}

// makeWorkspaces makes the workspaces' directories: one of every pool for
// the single soak, else K of workspaceName(i), and the -workspaces file.
func (s *soak) makeWorkspaces() error {
	s.owner = map[pool]*workspace{}
	if !s.many() {
		s.workspaces = []*workspace{{dir: filepath.Join(s.o.Work, "config"), pools: s.model.pools()}}
	} else {
		s.workspaces = nil
		for i, pools := range splitPools(s.model.pools(), s.o.Workspaces) {
			name := workspaceName(i)
			s.workspaces = append(s.workspaces, &workspace{name: name, dir: filepath.Join(s.o.Work, "config-"+name), pools: pools})
		}
	}
	var file strings.Builder
	file.WriteString("workspaces:\n")
	for _, w := range s.workspaces {
		for _, p := range w.pools {
			s.owner[p] = w
		}
		if err := os.MkdirAll(w.dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(s.config(w)), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&file, "  - name: %s\n    dir: %s\n", w.name, w.dir)
	}
	if !s.many() {
		return nil
	}
	s.workspacesFile = filepath.Join(s.o.Work, "workspaces.yaml")
	return os.WriteFile(s.workspacesFile, []byte(file.String()), 0o644)
}

// workspaceName is the name of the i-th workspace; all have the same
// length, as the log's fields are matched by substring.
func workspaceName(i int) string { return fmt.Sprintf("ws-%03d", i) }

// label is how a line of the report or a violation names w: nothing for
// the single soak's.
func (w *workspace) label() string {
	if w.name == "" {
		return ""
	}
	return w.name + ": "
}

// fields select w's lines in a replica's log (all, for the single soak's).
func (w *workspace) fields() map[string]string {
	if w.name == "" {
		return nil
	}
	return map[string]string{"workspace": w.name}
}

// lease is the name of w's Lease in namespace default.
func (w *workspace) lease() string {
	if w.name == "" {
		return leaseName
	}
	return leaseGroup + "-" + w.name
}

// leaseFields select the lines of w's Lease in a replica's log.
func (w *workspace) leaseFields() map[string]string {
	return map[string]string{"lease": "default/" + w.lease()}
}

// workspaceOf is the workspace whose directory is dir, or nil.
func (s *soak) workspaceOf(dir string) *workspace {
	for _, w := range s.workspaces {
		resolved, err := filepath.EvalSymlinks(w.dir)
		if err != nil {
			resolved = w.dir
		}
		if dir != "" && (filepath.Clean(w.dir) == filepath.Clean(dir) || resolved == filepath.Clean(dir)) {
			return w
		}
	}
	return nil
}

// holder is the live replica that leads w from its log: it logged
// "leading" for w's Lease last, and has not lost nor released it since.
func (s *soak) holder(w *workspace) *replica {
	var best *replica
	var at time.Time
	for _, r := range s.live() {
		e := r.proc.Events("leading", w.leaseFields())
		if len(e) == 0 {
			continue
		}
		last := e[len(e)-1].Time
		gone := false
		for _, msg := range []string{"lost the Lease: stopping", "stopped leading"} {
			if ends := r.proc.Events(msg, w.leaseFields()); len(ends) > 0 && ends[len(ends)-1].Time.After(last) {
				gone = true
			}
		}
		if !gone && (best == nil || last.After(at)) {
			best, at = r, last
		}
	}
	return best
}

// leader is the single soak's leader: the holder of its one workspace.
func (s *soak) leader() *replica { return s.holder(s.workspaces[0]) }

// holdings are the workspaces each live replica leads, by identity.
func (s *soak) holdings() map[string][]*workspace {
	out := map[string][]*workspace{}
	for _, w := range s.workspaces {
		if h := s.holder(w); h != nil {
			out[h.identity] = append(out[h.identity], w)
		}
	}
	return out
}

// busiest is the live replica that leads the most workspaces, and those.
func (s *soak) busiest() (*replica, []*workspace) {
	held := s.holdings()
	live := s.live()
	var best *replica
	for _, id := range slices.Sorted(maps.Keys(held)) {
		if r := live[id]; r != nil && (best == nil || len(held[id]) > len(held[best.identity])) {
			best = r
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, held[best.identity]
}

// sharedOut says whether every workspace is led, and watched, by the live
// replica the group gives it (kube.Shares over the live replicas, as the
// replicas share them out); with what each replica leads.
func (s *soak) sharedOut() (bool, string) {
	var names []string
	for _, w := range s.workspaces {
		names = append(names, w.name)
	}
	given := kube.Shares(names, slices.Sorted(maps.Keys(s.live())))
	ok := true
	count := map[string]int{}
	for _, w := range s.workspaces {
		h := s.holder(w)
		if h == nil {
			ok = false
			continue
		}
		count[h.identity]++
		if (s.many() && given[w.name][0] != h.identity) || h.proc.Count("watching", w.fields()) == 0 {
			ok = false
		}
	}
	return ok, countText(count)
}

// countText is "a 4, b 3" for counts by name, in the names' order.
func countText(count map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, count[k]))
	}
	return strings.Join(parts, ", ")
}

// waitShared waits up to bound for the workspaces to be shared out; how
// long that took, or an error.
func (s *soak) waitShared(ctx context.Context, bound time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		ok, held := s.sharedOut()
		if ok {
			return time.Since(start), nil
		}
		if time.Since(start) > bound || ctx.Err() != nil {
			return time.Since(start), fmt.Errorf("the workspaces not shared out after %s (leading: %s)", bound.Round(time.Second), held)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// windowsOf is the settled windows of change times (sorted), each the
// indexes of its changes: changes closer than quiet, for at most most, are
// one window, as the companion's settle window makes them one run.
func windowsOf(times []time.Time, quiet, most time.Duration) [][]int {
	var out [][]int
	var open, last time.Time
	for i, t := range times {
		if open.IsZero() || t.Sub(last) > quiet || t.Sub(open) > most {
			out = append(out, nil)
			open = t
		}
		out[len(out)-1] = append(out[len(out)-1], i)
		last = t
	}
	return out
}

// madeChange is one change of a workspace's pools as the companion could
// see it: when the driver wrote it, and when the pool's EndpointSlices
// showed it (zero if they never did; shownChanges).
type madeChange struct {
	at, sliced time.Time
}

// shown is when the companion could see c: when the slices showed it, or,
// if they never did, when it was written.
func (c madeChange) shown() time.Time {
	if c.sliced.IsZero() {
		return c.at
	}
	return c.sliced
}

// inFault says whether a fault came between c's write and the moment the
// companion would start its run (shown, and the quiet time after it): a
// fault delays what the companion sees of the changes. What comes after,
// the run and state showing its result, is the run's: a run under way
// during a fault is counted apart by its own span. (Judged up to state's
// sight instead, a change seen in state 0.1 s after a fault began, its
// run ended just before, was a window in a fault applied by a run in calm:
// a run for nothing, wrongly, in the short soak of 2026-12-06.)
func (c madeChange) inFault(quiet time.Duration, inFault func(from, to time.Time) bool) bool {
	return inFault(c.at, c.shown().Add(quiet))
}

// The companion's own messages for its probe of a cluster: it holds the
// cluster's pools out of runs from the first to the second.
const (
	msgClusterDown = "cluster does not answer: its pools are left as they are and out of runs"
	msgClusterUp   = "cluster answers again"
)

// outages are the spans in which a replica held w's pools out of runs
// because their cluster did not answer its probe, from each replica's log.
func (s *soak) outages(w *workspace) []holdSpan {
	now := time.Now()
	var out []holdSpan
	for _, rep := range s.allReplicas() {
		out = append(out, rep.spans(now, w.fields(), msgClusterDown, msgClusterUp)...)
	}
	return out
}

// spans are the spans of the replica's log from each line start (of
// fields) to the first line of ends after it, or to the replica's death,
// or now.
func (r *replica) spans(now time.Time, fields map[string]string, start string, ends ...string) []holdSpan {
	last := now
	if !r.killedAt.IsZero() {
		last = r.killedAt
	}
	var starts, stops []time.Time
	for _, e := range r.proc.Events(start, fields) {
		starts = append(starts, e.Time)
	}
	for _, msg := range ends {
		for _, e := range r.proc.Events(msg, fields) {
			stops = append(stops, e.Time)
		}
	}
	return spansOf(r.identity, starts, stops, last)
}

// timerSlack is how late a settle timer may fire, and a run start after
// it, on a busy machine.
const timerSlack = 500 * time.Millisecond

// withOutages is inFault for one workspace: a fault lasts, for it, as long
// as the companion held its pools out of runs for one (an outage that
// began during a fault, or in the minute after it, as a probe that failed
// once may take a period to answer again; its state catch-up alone can end
// before), and the quiet time after: what the companion finds changed
// when its cluster answers again is settled and run then, a change the
// fault brought. (The many-workspace soak of 2026-12-06 04:26 counted such
// a run, 1 s after "cluster answers again" and 1.6 s after the judge's
// catch-up for the API server's kill, as a run for nothing.) An outage
// outside any fault is left to be judged as calm.
func withOutages(inFault func(from, to time.Time) bool, faults []*fault, outages []holdSpan, quiet time.Duration) func(from, to time.Time) bool {
	var spans []holdSpan
	for _, o := range outages {
		for _, f := range faults {
			if f.nearby(o.start) {
				spans = append(spans, o)
				break
			}
		}
	}
	return func(from, to time.Time) bool {
		if inFault(from, to) {
			return true
		}
		for _, o := range spans {
			if from.Before(o.end.Add(quiet+timerSlack)) && to.After(o.start) {
				return true
			}
		}
		return false
	}
}

// runCount is one workspace's settled windows and applies (applied and
// state_updated runs), outside faults and during them.
type runCount struct {
	windows, applies           int
	faultWindows, faultApplies int
}

// countRuns counts a workspace's windows and applies for the check that no
// run is for nothing (applies <= windows), leaving faults out as the
// latency does (judged).
func countRuns(changes []madeChange, runs []runSpan, quiet, most time.Duration, inFault func(from, to time.Time) bool) runCount {
	var n runCount
	for _, w := range judged(changes, runs, quiet, most, inFault) {
		switch {
		case w.apply && w.fault:
			n.faultApplies++
		case w.apply:
			n.applies++
		case w.fault:
			n.faultWindows++
		default:
			n.windows++
		}
	}
	return n
}

// calmText lists what countRuns counted outside faults, for a violation
// to be read without the logs: each window (the first and last time its
// changes were shown, written from, how many) and each apply (start-end).
func calmText(changes []madeChange, runs []runSpan, quiet, most time.Duration, inFault func(from, to time.Time) bool) string {
	var windows, applies []string
	for _, w := range judged(changes, runs, quiet, most, inFault) {
		switch {
		case w.fault:
		case w.apply:
			applies = append(applies, clock(w.from)+"-"+clock(w.to))
		default:
			windows = append(windows, fmt.Sprintf("%s-%s (%d, written from %s)", clock(w.from), clock(w.to), w.changes, clock(w.written)))
		}
	}
	unsliced := 0
	for _, c := range changes {
		if c.sliced.IsZero() {
			unsliced++
		}
	}
	return fmt.Sprintf("windows shown %s; applies %s; %d of %d changes never shown by the slices (windowed at their writes)",
		strings.Join(windows, ", "), strings.Join(applies, ", "), unsliced, len(changes))
}

// judgedSpan is a settled window of changes (from its first change shown
// to its last, written from written, changes of them) or an apply (its
// run's start and end), in a fault or not.
type judgedSpan struct {
	from, to, written time.Time
	changes           int
	apply, fault      bool
}

// judged are a workspace's settled windows and applies as the check that
// no run is for nothing sees them. The windows are those of the changes
// as the slices showed them (shown): the companion settles on what it
// sees. A fault delays what the companion sees of the changes (a cut
// watch, 429s, etcd down, a killed run to retry), so that the changes of
// one window can reach it in pieces at the fault's end, each a run that
// applies a real change: those are left apart. A window is in a fault when
// one came between one of its changes' write and its run's start
// (madeChange.inFault); an apply (an applied or state_updated run), when
// it was under way during one.
func judged(changes []madeChange, runs []runSpan, quiet, most time.Duration, inFault func(from, to time.Time) bool) []judgedSpan {
	changes = slices.Clone(changes)
	slices.SortFunc(changes, func(a, b madeChange) int { return a.shown().Compare(b.shown()) })
	times := make([]time.Time, len(changes))
	for i, c := range changes {
		times[i] = c.shown()
	}
	var out []judgedSpan
	for _, w := range windowsOf(times, quiet, most) {
		span := judgedSpan{from: times[w[0]], to: times[w[len(w)-1]], written: changes[w[0]].at, changes: len(w)}
		for _, i := range w {
			span.fault = span.fault || changes[i].inFault(quiet, inFault)
		}
		out = append(out, span)
	}
	for _, sp := range runs {
		if sp.result == "applied" || sp.result == "state_updated" {
			out = append(out, judgedSpan{from: sp.start, to: sp.end, apply: true, fault: inFault(sp.start, sp.end)})
		}
	}
	return out
}

// runSpans pairs one replica's "run started" and "run ended" lines,
// workspace by workspace (the runs of one workspace are one at a time, of
// several workspaces they interleave): a run not ended was killed with the
// replica at killed, when it was killed, or is under way at now.
func runSpans(identity string, started, ended []syncproc.Event, killed, now time.Time) []runSpan {
	ends := map[string][]syncproc.Event{}
	for _, e := range ended {
		ends[e.Str("workspace")] = append(ends[e.Str("workspace")], e)
	}
	seen := map[string]int{}
	var out []runSpan
	for _, e := range started {
		w := e.Str("workspace")
		i := seen[w]
		seen[w]++
		sp := runSpan{start: e.Time, identity: identity, workspace: w, end: now}
		if i < len(ends[w]) {
			sp.end, sp.result = ends[w][i].Time, ends[w][i].Str("result")
		} else if !killed.IsZero() {
			sp.end, sp.result = killed, "killed"
		}
		out = append(out, sp)
	}
	return out
}

// holdSpan is when one replica led, or ran, one workspace.
type holdSpan struct {
	replica    string
	start, end time.Time
}

// spansOf pairs starts with ends: each start ends at the first end not
// before it, or at last (the replica's death, or now).
func spansOf(replica string, starts, ends []time.Time, last time.Time) []holdSpan {
	ends = slices.Clone(ends)
	slices.SortFunc(ends, time.Time.Compare)
	var out []holdSpan
	for _, s := range starts {
		end := last
		if i, _ := slices.BinarySearchFunc(ends, s, time.Time.Compare); i < len(ends) {
			end = ends[i]
		}
		out = append(out, holdSpan{replica: replica, start: s, end: end})
	}
	return out
}

// overlap is a span that started while another replica's still went on.
type overlap struct{ earlier, later holdSpan }

// overlaps are the spans that start before a span of another replica
// ended: each against the one that, of those started before it, ends last.
func overlaps(spans []holdSpan) []overlap {
	spans = slices.Clone(spans)
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	var out []overlap
	// longest is, of the spans before, the one that ends last; other, of
	// those of another replica than longest's, the one that ends last.
	var longest, other *holdSpan
	for i := range spans {
		sp := &spans[i]
		for _, prev := range []*holdSpan{longest, other} {
			if prev != nil && prev.replica != sp.replica && sp.start.Before(prev.end) {
				out = append(out, overlap{earlier: *prev, later: *sp})
				break
			}
		}
		switch {
		case longest == nil || sp.end.After(longest.end):
			if longest != nil && longest.replica != sp.replica {
				other = longest
			}
			longest = sp
		case sp.replica != longest.replica && (other == nil || sp.end.After(other.end)):
			other = sp
		}
	}
	return out
}

// holding is a holder of a Lease, from when it was first seen so.
type holding struct {
	holder string
	at     time.Time
}

// holderChanges are the holders one workspace's Lease named, polled, in
// the order seen; a released Lease (no holder) is not a holder.
func holderChanges(samples []leaseSample) []holding {
	var out []holding
	for _, ls := range samples {
		if ls.holder == "" || len(out) > 0 && out[len(out)-1].holder == ls.holder {
			continue
		}
		out = append(out, holding{holder: ls.holder, at: ls.at})
	}
	return out
}

// leaseConflicts are the polls of a Lease that name another holder than a
// replica whose log says it led then: from its "leading" line until slack
// before its span's end (its release is written to the Lease before it is
// logged).
func leaseConflicts(samples []leaseSample, leads []holdSpan, slack time.Duration) []string {
	var out []string
	for _, ls := range samples {
		if ls.holder == "" {
			continue
		}
		for _, sp := range leads {
			if sp.replica != ls.holder && sp.start.Before(ls.at) && ls.at.Add(slack).Before(sp.end) {
				out = append(out, fmt.Sprintf("the Lease named %s at %s while %s led (%s to %s)", ls.holder, clock(ls.at),
					sp.replica, clock(sp.start), clock(sp.end)))
				break
			}
		}
	}
	return out
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05.000") }
