package soak

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Result is what the soak judged.
type Result struct {
	Options Options
	Start   time.Time
	// Elapsed is the churn's duration as it ran.
	Elapsed time.Duration

	Changes, Bursts, Seen, Superseded, Lost, Late, FaultAffected int
	Noise                                                        int
	NoiseRuns                                                    int
	NoiseStretch                                                 time.Duration
	// Windows are the settled windows of the driver's changes as the slices
	// showed them, and Applies the applied and state_updated runs, outside
	// faults; the Fault ones during them (countRuns).
	Windows, Applies           int
	FaultWindows, FaultApplies int
	Runs                       map[string]int
	ShrinkRefused              int
	// Latency of the changes seen, s: all and outside faults.
	LatencyAll, LatencyCalm []float64
	RunDurations            []float64
	Faults                  []*fault
	Checks                  []string
	LeaderIntervals         []string
	LeaseTransitions        int
	Exits                   []string
	Resources               []resourceLine
	CPU                     map[string][2]float64
	LockFree                bool
	LockDetail              string
	Notes                   []string
	Violations              []string
	// Workspaces are the many-workspace soak's, a line each (none for the
	// single soak's).
	Workspaces []workspaceLine
}

// workspaceLine is what was judged of one workspace.
type workspaceLine struct {
	name                string
	pools               int
	changes, lost, late int
	// calm are the latencies outside faults, s.
	calm []float64
	// runCount is its windows and applies, outside faults and in them.
	runCount
	// holders are the holders its Lease named, polled, in order.
	holders []holding
}

type resourceLine struct {
	name                    string
	start, end, slopePer10m float64
	unit                    string
}

// runSpan is one run of a replica, from its log.
type runSpan struct {
	start, end time.Time
	result     string
	identity   string
	// workspace is the run's ("" in the single soak).
	workspace string
}

func (s *soak) runs() []runSpan {
	var out []runSpan
	now := time.Now()
	for _, r := range s.allReplicas() {
		out = append(out, runSpans(r.identity, r.proc.Events("run started", nil), r.proc.Events("run ended", nil), r.killedAt, now)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// minute is the check of every SampleEvery: what is pending, and for how long.
func (j *judge) minute() {
	now := time.Now()
	pending := j.pending(now)
	oldest := time.Duration(0)
	for _, c := range pending {
		oldest = max(oldest, now.Sub(c.At))
	}
	j.mu.Lock()
	inFault := len(j.faults) > 0 && now.Sub(j.faults[len(j.faults)-1].end) < time.Minute
	var rss float64
	if len(j.samples) > 0 {
		rss = j.samples[len(j.samples)-1].rss / (1 << 20)
	}
	line := fmt.Sprintf("%s: %d change(s) pending, the oldest %.1f s; leader %s, RSS %.1f MiB", now.UTC().Format("15:04:05"), len(pending),
		oldest.Seconds(), j.lastLeaseLocked(j.s.workspaces[0]).holder, rss)
	if j.s.many() {
		line = fmt.Sprintf("%s: %d change(s) pending, the oldest %.1f s; leading %s; RSS %s", now.UTC().Format("15:04:05"), len(pending),
			oldest.Seconds(), j.leadingLocked(), j.rssLocked())
	}
	j.checks = append(j.checks, line)
	j.mu.Unlock()
	// A change pending for 2 minutes with no fault in the last minute is
	// lost as far as a user can tell.
	if oldest > 2*time.Minute && !inFault {
		j.note("minute check: a change pending for %.0f s with no fault in the last minute", oldest.Seconds())
	}
}

// leadingLocked is how many workspaces each replica leads, from the
// Leases as last polled.
func (j *judge) leadingLocked() string {
	count := map[string]int{}
	for _, w := range j.s.workspaces {
		if h := j.lastLeaseLocked(w).holder; h != "" {
			count[h]++
		}
	}
	return countText(count)
}

// rssLocked is each replica's RSS as last sampled within a SampleEvery, MiB.
func (j *judge) rssLocked() string {
	last := map[string]sample{}
	for _, sm := range j.samples {
		last[sm.identity] = sm
	}
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(last)) {
		if sm := last[id]; time.Since(sm.at) < 2*j.s.o.SampleEvery {
			parts = append(parts, fmt.Sprintf("%s %.1f MiB", id, sm.rss/(1<<20)))
		}
	}
	return strings.Join(parts, ", ")
}

// verdict judges the soak once the churn stopped and the pools caught up.
func (s *soak) verdict() *Result {
	j := s.judge
	runs := s.runs()
	j.mu.Lock()
	defer j.mu.Unlock()
	r := &Result{Options: s.o, Start: s.started, Elapsed: time.Since(s.started), Runs: map[string]int{}, Faults: j.faults,
		Checks: j.checks, Exits: j.exits, CPU: j.cpu, Noise: j.noise}
	r.Notes = append(r.Notes, j.notes...)
	lines := map[string]*workspaceLine{}
	for _, w := range s.workspaces {
		lines[w.name] = &workspaceLine{name: w.name, pools: len(w.pools), holders: holderChanges(j.lease[w.name])}
	}
	for _, c := range j.changes {
		if c.burst {
			r.Bursts++
		}
	}

	// Each change's resolution: when it, or a later change of its pool
	// that superseded it, was seen in state.
	resolved := Resolutions(j.pairs())

	// Catch-up per fault: until every change made before its end (and the
	// one made right after it) is resolved.
	for _, f := range j.faults {
		f.caughtUp = true
		for _, c := range j.changes {
			if c.At.After(f.end.Add(2*time.Second)) || c.At.Before(f.start.Add(-time.Minute)) {
				continue
			}
			t, ok := resolved[&c.Change]
			if !ok {
				f.caughtUp = false
				continue
			}
			f.catchUp = max(f.catchUp, t.Sub(f.end))
		}
		if !f.caughtUp {
			r.Violations = append(r.Violations, fmt.Sprintf("after %q, a change made before its end never reached state", f.name))
		}
		if f.violation != "" {
			r.Violations = append(r.Violations, f.name+": "+f.violation)
		}
		if f.err != nil {
			r.Violations = append(r.Violations, f.name+": the fault could not be made: "+f.err.Error())
		}
	}
	inFault := func(from, to time.Time) bool {
		for _, f := range j.faults {
			if from.Before(f.end.Add(f.catchUp)) && to.After(f.start) {
				return true
			}
		}
		for _, h := range j.humans {
			if !from.After(h) && !to.Before(h) {
				return true
			}
		}
		return false
	}

	// For each workspace, faults last as long as the companion held its
	// pools out of runs for one (withOutages).
	faultFor := map[string]func(from, to time.Time) bool{}
	for _, w := range s.workspaces {
		faultFor[w.name] = withOutages(inFault, j.faults, s.outages(w), s.o.Quiet)
	}

	// Each change: seen within the bound, superseded, or lost.
	for _, c := range j.changes {
		r.Changes++
		line := lines[c.workspace]
		line.changes++
		t, ok := resolved[&c.Change]
		switch {
		case !ok:
			r.Lost++
			line.lost++
			r.Violations = append(r.Violations, fmt.Sprintf("lost: %s%s %s at %s (want %v, state %v)", s.owner[c.pool].label(), c.pool, c.what,
				c.At.UTC().Format("15:04:05.000"), c.Want, j.state[stateKey(c.pool)]))
			continue
		case c.Superseded:
			r.Superseded++
		default:
			r.Seen++
		}
		affected := faultFor[c.workspace](c.At, t)
		if affected {
			r.FaultAffected++
		}
		if c.Superseded {
			continue
		}
		lat := t.Sub(c.At).Seconds()
		r.LatencyAll = append(r.LatencyAll, lat)
		if affected {
			continue
		}
		r.LatencyCalm = append(r.LatencyCalm, lat)
		line.calm = append(line.calm, lat)
		// The bound: settle-max, what was left of a run of its workspace
		// under way when the change was made, the run that applied it
		// (with its wait for one of the replica's -max-concurrent-runs),
		// 5 s (and the judge's 250 ms poll).
		var busy, apply time.Duration
		for _, sp := range runs {
			if sp.workspace != c.workspace {
				continue
			}
			if !sp.start.After(c.At) && sp.end.After(c.At) {
				busy = max(busy, sp.end.Sub(c.At))
			}
			if !sp.start.After(t) && !sp.end.Add(time.Second).Before(t) {
				apply = max(apply, sp.end.Sub(sp.start))
			}
		}
		bound := s.o.SettleMax + busy + apply + 5*time.Second + 250*time.Millisecond
		if t.Sub(c.At) > bound {
			r.Late++
			line.late++
			r.Violations = append(r.Violations, fmt.Sprintf("late: %s%s %s at %s seen after %.1f s, bound %.1f s", s.owner[c.pool].label(), c.pool, c.what,
				c.At.UTC().Format("15:04:05.000"), t.Sub(c.At).Seconds(), bound.Seconds()))
		}
	}

	// No run for nothing: each workspace's applies against the settled
	// windows of the changes of its pools as their EndpointSlices showed
	// them (shownChanges; changes closer than the quiet time, for at most
	// settle-max, are one window), outside faults (countRuns).
	written := map[string]map[pool][]time.Time{}
	for _, c := range j.changes {
		if written[c.workspace] == nil {
			written[c.workspace] = map[pool][]time.Time{}
		}
		written[c.workspace][c.pool] = append(written[c.workspace][c.pool], c.At)
	}
	made := map[string][]madeChange{}
	for name, pools := range written {
		made[name] = shownChanges(pools, j.sliceEvents)
	}
	ran := map[string][]runSpan{}
	for _, sp := range runs {
		r.Runs[sp.result]++
		ran[sp.workspace] = append(ran[sp.workspace], sp)
		r.RunDurations = append(r.RunDurations, sp.end.Sub(sp.start).Seconds())
	}
	for _, w := range s.workspaces {
		line := lines[w.name]
		n := countRuns(made[w.name], ran[w.name], s.o.Quiet, s.o.SettleMax, faultFor[w.name])
		line.runCount = n
		r.Windows += n.windows
		r.Applies += n.applies
		r.FaultWindows += n.faultWindows
		r.FaultApplies += n.faultApplies
		if n.applies > n.windows {
			r.Violations = append(r.Violations, fmt.Sprintf("%s%d applies for %d settled windows that changed a pool, outside faults: %s", w.label(), n.applies, n.windows,
				calmText(made[w.name], ran[w.name], s.o.Quiet, s.o.SettleMax, faultFor[w.name])))
		}
		if s.many() {
			r.Workspaces = append(r.Workspaces, *line)
		}
	}

	// Shrink refusals: each must follow a shrink of the driver's, one
	// that removes more than -max-shrink (0.5) of a pool in state.
	for _, rep := range s.allReplicas() {
		for _, e := range rep.proc.Events("run refused by the shrink guard", nil) {
			r.ShrinkRefused++
			if !j.driverShrank(e.Time) && !j.badInputShrank(e.Time, e.Str("reason")) {
				r.Violations = append(r.Violations, fmt.Sprintf("%s: shrink guard refusal the driver did not make: %s (%s)",
					rep.identity, e.Str("reason"), j.shrinkContext(rep, e.Time, e.Str("reason"))))
			}
		}
	}

	if s.many() {
		s.judgeHolders(r, runs)
	} else {
		s.judgeLeaders(r)
	}
	s.judgeResources(r)
	r.LockFree = true
	for _, w := range s.workspaces {
		if free, detail := lockFree(w.dir); !free {
			r.LockFree = false
			r.LockDetail = strings.TrimPrefix(r.LockDetail+"; "+w.label()+detail, "; ")
		}
	}
	if !r.LockFree {
		r.Violations = append(r.Violations, "a state lock is left at the end: "+r.LockDetail)
	}
	return r
}

// driverShrank says whether, at t, some pool's state would lose more than
// half its members to reach what the driver made. The state is any the
// judge saw within one -state-interval before t, the one it held then
// among them: the companion learns of an apply not its own (a human's)
// only by reading state, at most that interval later, and its guard
// judges the state it last read.
func (j *judge) driverShrank(t time.Time) bool {
	since := t.Add(-j.s.o.StateInterval)
	for key, hist := range j.history {
		var states [][]string
		for _, o := range hist {
			switch {
			case o.at.After(t):
			case o.at.After(since):
				states = append(states, o.members)
			default:
				states = [][]string{o.members} // the state held at since
			}
		}
		var want []string
		found := false
		for _, c := range j.changes {
			if stateKey(c.pool) == key && !c.At.After(t) {
				want, found = c.Want, true
			}
		}
		if !found {
			continue
		}
		for _, inState := range states {
			if len(inState) == 0 {
				continue
			}
			removed := 0
			for _, m := range inState {
				if !slices.Contains(want, m) {
					removed++
				}
			}
			if float64(removed) > 0.5*float64(len(inState)) {
				return true
			}
		}
	}
	return false
}

func (j *judge) shrinkContext(rep *replica, t time.Time, reason string) string {
	var out []string
	for key, hist := range j.history {
		if !strings.Contains(reason, "."+key+" ") {
			continue
		}
		var inState []string
		for _, o := range hist {
			if !o.at.After(t) {
				inState = o.members
			}
		}
		var want []string
		for _, c := range j.changes {
			if stateKey(c.pool) == key && !c.At.After(t) {
				want = c.Want
			}
		}
		out = append(out, fmt.Sprintf("state %v, the driver's last %v", inState, want))
		for _, e := range rep.proc.Events("pool differs from state", nil) {
			if e.Time.After(t) || e.Time.Before(t.Add(-30*time.Second)) || !strings.HasSuffix(e.Str("data_source"), "."+key) {
				continue
			}
			out = append(out, fmt.Sprintf("at %s: added %q, removed %q", e.Time.UTC().Format("15:04:05.000"), e.Str("added"), e.Str("removed")))
		}
	}
	if len(out) == 0 {
		return "no pool of the judge's named"
	}
	return strings.Join(out, "; ")
}

// badInputShrank says whether a refusal at t names the pool of a bad
// input under way (a Service or a namespace deleted: its pods can go
// before it, and the pool is then empty, as the driver made it).
func (j *judge) badInputShrank(t time.Time, reason string) bool {
	for _, f := range j.faults {
		if f.address == "" || !strings.Contains(reason, "."+f.address+" ") {
			continue
		}
		if f.nearby(t) {
			return true
		}
	}
	return false
}

// judgeLeaders checks that at most one replica led at any time, from the
// replicas' logs (leading, lost, stopped, killed) and the Lease's history.
func (s *soak) judgeLeaders(r *Result) {
	var spans []holdSpan
	for _, rep := range s.allReplicas() {
		lead := rep.proc.Events("leading", nil)
		if len(lead) == 0 {
			continue
		}
		end := time.Now()
		if !rep.killedAt.IsZero() {
			end = rep.killedAt
		}
		for _, msg := range []string{"lost the Lease: stopping", "stopped"} {
			if e := rep.proc.Events(msg, nil); len(e) > 0 && e[0].Time.Before(end) {
				end = e[0].Time
			}
		}
		spans = append(spans, holdSpan{rep.identity, lead[0].Time, end})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	for _, sp := range spans {
		r.LeaderIntervals = append(r.LeaderIntervals, fmt.Sprintf("%s led %s to %s", sp.replica, clock(sp.start), clock(sp.end)))
	}
	for _, o := range overlaps(spans) {
		r.Violations = append(r.Violations, fmt.Sprintf("two leaders: %s from %s while %s led until %s", o.later.replica,
			clock(o.later.start), o.earlier.replica, clock(o.earlier.end)))
	}
	// The Lease: once a holder is replaced, it never holds it again (each
	// identity is one process).
	j := s.judge
	gone := map[string]bool{}
	prev := ""
	for _, ls := range j.lease[""] {
		if ls.holder == "" || ls.holder == prev {
			continue
		}
		if gone[ls.holder] {
			r.Violations = append(r.Violations, fmt.Sprintf("the Lease went back to %s at %s", ls.holder, ls.at.UTC().Format("15:04:05")))
		}
		if prev != "" {
			gone[prev] = true
			r.LeaseTransitions++
		}
		prev = ls.holder
	}
}

// judgeHolders checks that no workspace ever had two holders: from the
// replicas' logs, each one's times of leading it (from "leading" to
// "stopped leading", logged before the release, "lost the Lease: stopping"
// or its death) and of
// running it; and from its Lease as polled, which never names another
// replica while one's log says it leads. A replica may lead a workspace
// again after another did (it was handed back once the other was gone).
func (s *soak) judgeHolders(r *Result, runs []runSpan) {
	j := s.judge
	now := time.Now()
	for _, w := range s.workspaces {
		var leads, ran []holdSpan
		for _, rep := range s.allReplicas() {
			leads = append(leads, rep.spans(now, w.leaseFields(), "leading", "stopped leading", "lost the Lease: stopping")...)
		}
		for _, sp := range runs {
			if sp.workspace == w.name {
				ran = append(ran, holdSpan{replica: sp.identity, start: sp.start, end: sp.end})
			}
		}
		for _, o := range overlaps(leads) {
			r.Violations = append(r.Violations, fmt.Sprintf("%stwo holders: %s led from %s while %s led until %s", w.label(), o.later.replica,
				clock(o.later.start), o.earlier.replica, clock(o.earlier.end)))
		}
		for _, o := range overlaps(ran) {
			r.Violations = append(r.Violations, fmt.Sprintf("%stwo runs at once: %s ran from %s while %s ran until %s", w.label(), o.later.replica,
				clock(o.later.start), o.earlier.replica, clock(o.earlier.end)))
		}
		for _, c := range leaseConflicts(j.lease[w.name], leads, time.Second) {
			r.Violations = append(r.Violations, w.label()+c)
		}
		held := holderChanges(j.lease[w.name])
		if len(held) == 0 {
			r.Violations = append(r.Violations, w.label()+"no holder seen in its Lease")
		}
		r.LeaseTransitions += max(0, len(held)-1)
	}
}

// judgeResources fits RSS, goroutines and FDs of the longest-leading
// replica over time: slope per 10 minutes, as a share of the start.
func (s *soak) judgeResources(r *Result) {
	byID := map[string][]sample{}
	for _, sm := range s.judge.samples {
		byID[sm.identity] = append(byID[sm.identity], sm)
	}
	var best []sample
	for _, list := range byID {
		if len(list) > 1 && (best == nil || list[len(list)-1].at.Sub(list[0].at) > best[len(best)-1].at.Sub(best[0].at)) {
			best = list
		}
	}
	if len(best) < 2 {
		r.Notes = append(r.Notes, "fewer than two samples of one leader: no slope")
		return
	}
	for _, m := range []struct {
		name, unit string
		get        func(sample) float64
	}{
		{"RSS " + best[0].identity, "MiB", func(x sample) float64 { return x.rss / (1 << 20) }},
		{"goroutines " + best[0].identity, "", func(x sample) float64 { return x.goroutines }},
		{"open FDs " + best[0].identity, "", func(x sample) float64 { return x.fds }},
	} {
		var xs, ys []float64
		for _, x := range best {
			xs = append(xs, x.at.Sub(best[0].at).Minutes()/10)
			ys = append(ys, m.get(x))
		}
		r.Resources = append(r.Resources, resourceLine{name: m.name, unit: m.unit, start: ys[0], end: ys[len(ys)-1], slopePer10m: slope(xs, ys)})
	}
}

// slope is the least-squares slope of ys over xs.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	v = slices.Clone(v)
	slices.Sort(v)
	i := int(math.Ceil(p/100*float64(len(v)))) - 1
	return v[max(0, min(i, len(v)-1))]
}

// Markdown is the report.
func (r *Result) Markdown(title string) string {
	var b strings.Builder
	o := r.Options
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	many := o.Workspaces > 0
	w("# %s", title)
	w("")
	if many {
		least, most := 0, 0
		for i, l := range r.Workspaces {
			if i == 0 || l.pools < least {
				least = l.pools
			}
			most = max(most, l.pools)
		}
		share := fmt.Sprintf("%d to %d", least, most)
		if least == most {
			share = strconv.Itoa(least)
		}
		w("Written by `test/soak` (issues 28 and 40) at %s: the companion (three replicas of `sync -workspaces`, `-leader-elect`,", r.Start.UTC().Format("2006-01-02 15:04 UTC"))
		w("`-max-concurrent-runs` %d) against the local control plane, %d workspaces, each its own working directory, configuration and state", o.RunsPerReplica, o.Workspaces)
		w("in the local backend, and its own Lease (%s-NAME), shared out among the replicas: %d single `k8s_ready_endpoints` data sources", leaseGroup, o.Singles)
		w("in all, %s a workspace, %d pods each at the start, pools kept by `terraform_data`. Settle window %s quiet, %s max;", share, o.Pods, o.Quiet, o.SettleMax)
		w("`-lock-timeout` %s; `-state-interval` %s. Churn for **%s** (asked: %s) over every workspace's pools: %d pool changes a minute,", o.LockTimeout, o.StateInterval,
			r.Elapsed.Round(time.Second), o.Duration, o.ChangesPerMinute)
		w("bursts of %d every %s, a change that must start nothing every %s. The judge reads each terraform.tfstate every 250 ms, the", o.Burst, o.BurstEvery, o.NoiseEvery)
		w("Leases every 500 ms, the replicas' /metrics every %s, and their JSON logs.", o.SampleEvery)
	} else {
		w("Written by `test/soak` (issue 28) at %s: the companion (two replicas, leader election) against the local control plane,", r.Start.UTC().Format("2006-01-02 15:04 UTC"))
		w("%d single `k8s_ready_endpoints` data sources, a `k8s_services` fleet of %d Services and the Service of a namespace deleted on", o.Singles, o.Fleet)
		w("purpose, %d pods each at the start, pools kept by `terraform_data`, state in the local backend. Settle window %s quiet, %s max;", o.Pods, o.Quiet, o.SettleMax)
		w("`-lock-timeout` %s; `-state-interval` %s. Churn for **%s** (asked: %s): %d pool changes a minute, bursts of %d every %s,", o.LockTimeout, o.StateInterval,
			r.Elapsed.Round(time.Second), o.Duration, o.ChangesPerMinute, o.Burst, o.BurstEvery)
		w("a change that must start nothing every %s. The judge reads terraform.tfstate every 250 ms, the Lease every 500 ms, the", o.NoiseEvery)
		w("leader's /metrics every %s, and the replicas' JSON logs.", o.SampleEvery)
	}
	w("")
	verdict := "**all invariants held**"
	if len(r.Violations) > 0 {
		verdict = fmt.Sprintf("**%d violation(s)**", len(r.Violations))
	}
	w("Verdict: %s.", verdict)
	w("")
	w("## Changes")
	w("")
	w("| made | of which in bursts | applied (seen in state) | superseded | lost | late (outside faults) | resolved during a fault's window |")
	w("|---|---|---|---|---|---|---|")
	w("| %d | %d | %d | %d | %d | %d | %d |", r.Changes, r.Bursts, r.Seen, r.Superseded, r.Lost, r.Late, r.FaultAffected)
	w("")
	w("Changes that must start nothing: %d made during the churn; during the first %s only those were made: %d run(s) started.", r.Noise, r.NoiseStretch, r.NoiseRuns)
	w("")
	w("Latency from a change's write to the state showing it (250 ms resolution), s:")
	w("")
	w("| | n | p50 | p99 | max |")
	w("|---|---|---|---|---|")
	for _, l := range []struct {
		name string
		v    []float64
	}{{"outside faults", r.LatencyCalm}, {"all", r.LatencyAll}, {"run duration", r.RunDurations}} {
		w("| %s | %d | %.2f | %.2f | %.2f |", l.name, len(l.v), percentile(l.v, 50), percentile(l.v, 99), percentile(l.v, 100))
	}
	w("")
	if many {
		r.workspacesSection(w)
	}
	w("## Runs")
	w("")
	w("Outside faults, settled windows that changed a pool (from when their EndpointSlices showed the changes, as the companion sees them): %d; applies (applied + state_updated): %d. During faults (a window with a fault between a change's write and its run's start, a run under way during one; for a workspace, a fault lasts until the companion's probe found its cluster again and the quiet time after; a fault can bring a window's changes to the companion in pieces, each a run that applies a real change): %d windows, %d applies.", r.Windows, r.Applies, r.FaultWindows, r.FaultApplies)
	w("")
	w("| result | runs |")
	w("|---|---|")
	for _, k := range sortedKeys(r.Runs) {
		w("| %s | %d |", k, r.Runs[k])
	}
	w("| shrink_refused (no run) | %d |", r.ShrinkRefused)
	w("")
	w("## Faults")
	w("")
	w("| at (UTC) | fault | lasted | catch-up | what happened |")
	w("|---|---|---|---|---|")
	var catch []float64
	for _, f := range r.Faults {
		cu := "never"
		if f.caughtUp {
			cu = fmt.Sprintf("%.1f s", f.catchUp.Seconds())
			catch = append(catch, f.catchUp.Seconds())
		}
		detail := f.detail
		if f.err != nil {
			detail += " " + errText(f.err)
		}
		if f.violation != "" {
			detail += " **" + f.violation + "**"
		}
		w("| %s | %s | %.1f s | %s | %s |", f.start.UTC().Format("15:04:05"), f.name, f.end.Sub(f.start).Seconds(), cu, strings.ReplaceAll(detail, "|", "/"))
	}
	w("")
	w("Catch-up (from a fault's end until every change made before it, and one made right after it, is in state): median %.1f s, max %.1f s.",
		percentile(catch, 50), percentile(catch, 100))
	w("")
	if many {
		r.holdersSection(w)
	} else {
		w("## Leaders")
		w("")
		w("Lease transitions seen: %d. Replicas that exited by themselves: %d.", r.LeaseTransitions, len(r.Exits))
		w("")
		for _, l := range r.LeaderIntervals {
			w("- %s", l)
		}
		for _, e := range r.Exits {
			w("- exited: %s", e)
		}
	}
	w("")
	if many {
		w("## Resources of the replica sampled longest")
	} else {
		w("## Resources of the leader")
	}
	w("")
	w("| | start | end | slope per 10 min | slope / start |")
	w("|---|---|---|---|---|")
	for _, l := range r.Resources {
		w("| %s | %.1f %s | %.1f %s | %+.2f %s | %+.2f %% |", l.name, l.start, l.unit, l.end, l.unit, l.slopePer10m, l.unit, 100*l.slopePer10m/l.start)
	}
	w("")
	var own, child float64
	for _, v := range r.CPU {
		own += v[0]
		child += v[1]
	}
	hours := r.Elapsed.Hours()
	w("CPU of the replicas still running at the end (killed ones not counted): %.1f s own, %.1f s of the terraform they ran; per hour of churn: %.0f s own, %.0f s terraform.",
		own, child, own/hours, child/hours)
	w("")
	if many {
		w("State locks at the end, in every workspace: %s.", map[bool]string{true: "none", false: "**left**: " + r.LockDetail}[r.LockFree])
	} else {
		w("State lock at the end: %s.", map[bool]string{true: "none", false: "**left**: " + r.LockDetail}[r.LockFree])
	}
	w("")
	w("## Checks every %s", o.SampleEvery)
	w("")
	for _, c := range r.Checks {
		w("- %s", c)
	}
	for _, list := range []struct {
		title string
		items []string
	}{{"Violations", r.Violations}, {"Notes", r.Notes}} {
		if len(list.items) == 0 {
			continue
		}
		w("")
		w("## %s", list.title)
		w("")
		for _, item := range list.items {
			w("- %s", item)
		}
	}
	return b.String()
}

// workspacesSection is the many-workspace soak's table of workspaces.
func (r *Result) workspacesSection(w func(format string, args ...any)) {
	w("## Workspaces")
	w("")
	w("Per workspace: changes made to its pools, lost and late; latency from a change's write to its state showing it, outside faults, s;")
	w("settled windows of its changes and its applies outside faults (no run for nothing: applies <= windows), and during faults (not judged).")
	w("")
	w("| workspace | pools | changes | lost | late | n | p50 | p99 | max | windows | applies | windows in faults | applies in faults |")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, l := range r.Workspaces {
		w("| %s | %d | %d | %d | %d | %d | %.2f | %.2f | %.2f | %d | %d | %d | %d |", l.name, l.pools, l.changes, l.lost, l.late, len(l.calm),
			percentile(l.calm, 50), percentile(l.calm, 99), percentile(l.calm, 100), l.windows, l.applies, l.faultWindows, l.faultApplies)
	}
	w("")
}

// holdersSection is the many-workspace soak's holders over time.
func (r *Result) holdersSection(w func(format string, args ...any)) {
	w("## Holders")
	w("")
	w("Lease transitions seen, over all workspaces: %d. Replicas that exited by themselves: %d.", r.LeaseTransitions, len(r.Exits))
	w("")
	for _, e := range r.Exits {
		w("- exited: %s", e)
	}
	if len(r.Exits) > 0 {
		w("")
	}
	w("Each workspace's holders as its Lease named them, polled every 500 ms, each from when it was first seen (UTC):")
	w("")
	w("| workspace | transitions | holders |")
	w("|---|---|---|")
	for _, l := range r.Workspaces {
		var seq []string
		for _, h := range l.holders {
			seq = append(seq, fmt.Sprintf("%s (%s)", h.holder, h.at.UTC().Format("15:04:05")))
		}
		w("| %s | %d | %s |", l.name, max(0, len(l.holders)-1), strings.Join(seq, " → "))
	}
}

func sortedKeys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
