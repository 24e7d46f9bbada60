package companion

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The decision table of the companion: each case is a sequence of events
// at times from t0, what the machine must decide for each, and the phase
// it must be in after it. No clock, no goroutine, no sleep: the times are
// given. Every rule of the machine's table is reached by a case
// (TestEveryRuleIsReachedByTheDecisionTable).

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// change is a pool change to the members given, whose digest in the
// cluster is that of seed: two changes of one seed are the same change.
func change(seed string, added ...string) poolChange {
	return poolChange{Added: added, After: added, cluster: sha256.Sum256([]byte(seed)), state: sha256.Sum256([]byte("state"))}
}

// shrink is a change that removes removed of before's members.
func shrink(seed string, before, removed int) poolChange {
	c := change(seed)
	for i := range before {
		m := fmt.Sprintf("10.0.0.%d:80", i)
		c.Before = append(c.Before, m)
		if i < removed {
			c.Removed = append(c.Removed, m)
		} else {
			c.After = append(c.After, m)
		}
	}
	return c
}

const webData, xData = "data.k8s_ready_endpoints.web", "data.k8s_ready_endpoints.x"

func differs(changes ...poolChange) view {
	return view{changes: map[string][]poolChange{webData: changes}, unreadable: map[string]cause{}}
}

func matches() view { return view{changes: map[string][]poolChange{}, unreadable: map[string]cause{}} }

// withUnreadable is v with pool x unreadable.
func (v view) withUnreadable() view {
	v.unreadable = map[string]cause{xData: {kind: causeReadFails, text: "gone"}}
	return v
}

func (v view) inConfig(version string) view { v.config = version; return v }

// expiring is v with a pool whose expiry annotation passes at d.
func (v view) expiring(d time.Duration) view { v.expiry = t0.Add(d); return v }

// step is an event at a time, what the machine must decide, and the phase
// it must be in after.
type step struct {
	at time.Duration
	ev event
	// in is the phase after the step.
	in    phase
	phase bool
	// start says a run must start; retry that it is a retry, full that it
	// plans the whole configuration.
	start, retry, full bool
	// does are decisions that must be among those taken (beside a run).
	does []decisionKind
	// next is when the machine must next want the time (-1: not at all;
	// 0: not checked).
	next time.Duration
	// note is a message that must be among the notes; noNote one that
	// must not.
	note, noNote string
}

func seen(v view) step                   { return step{ev: observed(v)} }
func ticks() step                        { return step{ev: event{kind: evTick}} }
func marked() step                       { return step{ev: event{kind: evChanged}} }
func sigterm() step                      { return step{ev: event{kind: evStop}} }
func stateRead() step                    { return step{ev: stateReadEnded(nil, false)} }
func stateFails() step                   { return step{ev: stateReadEnded(errors.New("backend down"), false)} }
func stateLost() step                    { return step{ev: stateReadEnded(errors.New("no state"), true)} }
func ends(result runResult) step         { return step{ev: runEnded(runOutcome{result: result})} }
func endsOf(o runOutcome) step           { return step{ev: runEnded(o)} }
func (s step) when(d time.Duration) step { s.at = d; return s }
func (s step) starts() step              { s.start = true; return s }
func (s step) retries() step             { s.start, s.retry = true, true; return s }
func (s step) plansAll() step            { s.start, s.full = true, true; return s }
func (s step) decides(k ...decisionKind) step {
	s.does = append(s.does, k...)
	return s
}
func (s step) wakes(d time.Duration) step { s.next = d; return s }
func (s step) sleeps() step               { s.next = -1; return s }
func (s step) notes(msg string) step      { s.note = msg; return s }
func (s step) quietly(msg string) step    { s.noNote = msg; return s }
func (s step) then(p phase) step          { s.in, s.phase = p, true; return s }

const (
	second = time.Second
	quiet  = 500 * time.Millisecond
)

func testMachine() *machine {
	return newMachine(machineOptions{Quiet: quiet, MaxWait: 2 * second, RetryInitial: second, RetryMax: 4 * second,
		Guard: shrinkGuard{MaxShrink: 0.5}, CommandRepeat: 30 * second})
}

// started is what every case begins with: the companion starts, state
// reads, the pools are to be recomputed (reading state).
func started() []step {
	return []step{
		{ev: event{kind: evStart}, in: phaseStarting, phase: true, does: []decisionKind{doReadState}},
		stateRead().decides(doStartProbes, doRecompute).then(phaseReading),
	}
}

// running is a run of a's change started at quiet, then in flight.
func running(a poolChange) []step {
	return append(started(), seen(differs(a)).then(phaseSettling), ticks().when(quiet).starts().then(phaseRunning))
}

type decisionCase struct {
	name string
	// from are the steps before (started() when nil).
	from  []step
	steps []step
}

func decisionCases() []decisionCase {
	a, b, c := change("a", "10.0.0.1:80"), change("b", "10.0.0.2:80"), change("c", "10.0.0.3:80")
	cases := []decisionCase{
		{name: "a pool that differs opens a window that fires after the quiet time", steps: []step{
			seen(differs(a)).wakes(quiet).notes("pool differs from state").then(phaseSettling),
			ticks().when(quiet).starts().then(phaseRunning),
		}},
		{name: "nothing that differs starts nothing", steps: []step{
			seen(matches()).sleeps().then(phaseIdle),
		}},
		{name: "the informers' marks are recomputed", steps: []step{
			seen(matches()).then(phaseIdle),
			marked().decides(doRecompute).then(phaseIdle),
			seen(differs(a)).then(phaseSettling),
		}},
		{name: "changes that keep coming fire at the longest wait from the first", steps: []step{
			seen(differs(a)).wakes(quiet).then(phaseSettling),
			seen(differs(b)).when(400 * time.Millisecond).wakes(900 * time.Millisecond).then(phaseSettling),
			seen(differs(c)).when(800 * time.Millisecond).wakes(1300 * time.Millisecond).then(phaseSettling),
			seen(differs(a)).when(1200 * time.Millisecond).wakes(1700 * time.Millisecond).then(phaseSettling),
			seen(differs(b)).when(1600 * time.Millisecond).wakes(2 * second).then(phaseSettling),
			ticks().when(2 * second).starts().then(phaseRunning),
		}},
		{name: "the same changes seen again do not move the window", steps: []step{
			seen(differs(a)).wakes(quiet).then(phaseSettling),
			seen(differs(a)).when(400 * time.Millisecond).wakes(quiet).quietly("pool differs from state").then(phaseSettling),
		}},
		{name: "a pool that flaps back to state closes the window without a run", steps: []step{
			seen(differs(a)).wakes(quiet).then(phaseSettling),
			seen(matches()).when(200 * time.Millisecond).sleeps().notes("pools match state again: no run").then(phaseIdle),
			ticks().when(quiet).then(phaseIdle),
		}},
		{name: "a run that applied reads state, and the pools against it", from: running(a), steps: []step{
			ends(resultApplied).when(second).decides(doReadState).notes("run ended").then(phaseReading),
			stateRead().when(second).decides(doRecompute).then(phaseReading),
			seen(matches()).when(second).sleeps().then(phaseIdle),
		}},
		{name: "a change during a run is exactly one more run, its window opened when it was seen", from: running(a), steps: []step{
			marked().when(second).decides(doRecompute).then(phaseRunning),
			seen(differs(b)).when(second).sleeps().then(phaseRunning),
			seen(differs(c)).when(3 * second).sleeps().then(phaseRunning),
			ends(resultApplied).when(4 * second).then(phaseReading),
			stateRead().when(4 * second).then(phaseReading),
			// b and c are what remains; the window opened at 1 s has
			// waited its longest at 3 s.
			seen(differs(c)).when(4 * second).starts().then(phaseRunning),
			ends(resultApplied).when(5 * second).then(phaseReading),
			stateRead().when(5 * second).then(phaseReading),
			seen(matches()).when(5 * second).sleeps().then(phaseIdle),
		}},
		{name: "a failed run is retried with backoff even when state shows its pools (a tainted resource)", from: running(a), steps: []step{
			ends(resultFailed).when(second).notes("run failed: retrying with backoff").decides(doReadState).then(phaseReading),
			stateRead().when(second).then(phaseReading),
			// The failed apply wrote the pools into state.
			seen(matches()).when(second).wakes(2 * second).then(phaseBackingOff),
			ticks().when(2 * second).retries().notes("retrying the failed run").then(phaseRunning),
			ends(resultApplied).when(3 * second).then(phaseReading),
			stateRead().when(3 * second).then(phaseReading),
			seen(matches()).when(3 * second).sleeps().then(phaseIdle),
		}},
		{name: "a failed run whose pools still differ is retried at the backoff, not before", from: running(a), steps: []step{
			ends(resultFailed).when(second).then(phaseReading),
			stateRead().when(second).then(phaseReading),
			seen(differs(a)).when(second).wakes(2 * second).then(phaseSettling),
			ticks().when(1500 * time.Millisecond).wakes(2 * second).then(phaseSettling),
			ticks().when(2 * second).retries().then(phaseRunning),
		}},
		{name: "the backoff doubles up to its cap, and a success ends it", from: running(a), steps: []step{
			ends(resultFailed).when(second), stateRead().when(second),
			seen(differs(a)).when(second).wakes(2 * second).then(phaseSettling),
			ticks().when(2 * second).retries(),
			ends(resultFailed).when(2 * second), stateRead().when(2 * second),
			seen(differs(a)).when(2 * second).wakes(4 * second).then(phaseSettling),
			ticks().when(4 * second).retries(),
			ends(resultFailed).when(4 * second), stateRead().when(4 * second),
			seen(differs(a)).when(4 * second).wakes(8 * second),
			ticks().when(8 * second).retries(),
			ends(resultFailed).when(8 * second), stateRead().when(8 * second),
			seen(differs(a)).when(8 * second).wakes(12 * second),
			ticks().when(12 * second).retries(),
			ends(resultApplied).when(12 * second), stateRead().when(12 * second),
			seen(differs(b)).when(13 * second).wakes(13*second + quiet).then(phaseSettling),
			ticks().when(13*second + quiet).starts(),
			ends(resultFailed).when(14 * second), stateRead().when(14 * second),
			seen(differs(b)).when(14 * second).wakes(15 * second),
		}},
		{name: "a new change during the backoff waits for the retry: one plan per backoff step", from: running(a), steps: []step{
			ends(resultFailed).when(second), stateRead().when(second),
			seen(differs(a)).when(second).wakes(2 * second),
			seen(differs(b)).when(1100 * time.Millisecond).wakes(2 * second).then(phaseSettling),
			ticks().when(2 * second).retries(),
		}},
		{name: "a change during the backoff, with state showing the failed run's pools, opens a window at the retry", from: running(a), steps: []step{
			ends(resultFailed).when(second), stateRead().when(second),
			seen(matches()).when(second).then(phaseBackingOff),
			marked().when(1100 * time.Millisecond).decides(doRecompute).then(phaseBackingOff),
			seen(differs(b)).when(1100 * time.Millisecond).wakes(2 * second).then(phaseSettling),
			ticks().when(2 * second).retries().then(phaseRunning),
		}},
		// Issue 38: the retry of a failed run whose pools state already
		// shows ends waiting (another pool fails to read, and every
		// resource of the run depends on it). It kept its backoff's time,
		// already past: the loop woke at once and retried, 5 times in 4 ms.
		{name: "a retry that ends waiting keeps its backoff: it is tried again at the next step, not at once", from: running(a), steps: []step{
			ends(resultFailed).when(second), stateRead().when(second),
			seen(matches()).when(second).wakes(2 * second).then(phaseBackingOff),
			seen(matches().withUnreadable()).when(1500 * time.Millisecond).wakes(2 * second).then(phaseBackingOff),
			ticks().when(2 * second).retries().then(phaseRunning),
			endsOf(runOutcome{result: resultWaiting, reason: "every resource uses an unreadable pool"}).when(2 * second).
				notes("retry waiting: every resource it needs uses a pool whose read fails").then(phaseReading),
			stateRead().when(2 * second),
			seen(matches().withUnreadable()).when(2 * second).wakes(4 * second).then(phaseBackingOff),
			ticks().when(3 * second).wakes(4 * second).then(phaseBackingOff),
			seen(matches()).when(3 * second).wakes(4 * second).notes("pool readable again").then(phaseBackingOff),
			ticks().when(4 * second).retries().then(phaseRunning),
			ends(resultApplied).when(5 * second), stateRead().when(5 * second),
			seen(matches()).when(5 * second).sleeps().then(phaseIdle),
		}},
		{name: "a plan with nothing to apply holds its changes until the cluster changes them again", from: running(a), steps: []step{
			ends(resultNoChanges).when(second), stateRead().when(second),
			seen(differs(a)).when(second).sleeps().notes("no run for these changes until they change").then(phaseHeld),
			marked().when(5 * second).decides(doRecompute).then(phaseHeld),
			seen(differs(a)).when(5 * second).sleeps().quietly("no run for these changes until they change").then(phaseHeld),
			seen(differs(b)).when(6 * second).wakes(6*second + quiet).then(phaseSettling),
		}},
		{name: "a state brought current leaves nothing to run", from: running(a), steps: []step{
			ends(resultStateUpdated).when(second), stateRead().when(second),
			seen(matches()).when(second).sleeps().then(phaseIdle),
		}},
		{name: "a command that succeeded is given the same changes again only after -command-repeat", from: running(a), steps: []step{
			ends(resultDelivered).when(second), stateRead().when(second),
			// The pipeline has not applied yet: state still differs.
			seen(differs(a)).when(second).wakes(31 * second).then(phaseHeld),
			seen(differs(a)).when(10 * second).wakes(31 * second).then(phaseHeld),
			ticks().when(31 * second).wakes(31*second + quiet).then(phaseSettling),
			ticks().when(31*second + quiet).starts().then(phaseRunning),
		}},
		{name: "a command is given changes again at once when the cluster changes the pool again", from: running(a), steps: []step{
			ends(resultDelivered).when(second), stateRead().when(second),
			seen(differs(a)).when(second).then(phaseHeld),
			seen(differs(b)).when(2 * second).wakes(2*second + quiet).then(phaseSettling),
			ticks().when(2*second + quiet).starts(),
		}},
		{name: "a refused plan is not tried again until its changes change", from: running(a), steps: []step{
			ends(resultRefused).when(second).notes("run refused: the plan changes more than pools; fix or apply it by hand"),
			stateRead().when(second),
			seen(differs(a)).when(second).sleeps().then(phaseHeld),
			seen(differs(b)).when(2 * second).wakes(2*second + quiet).then(phaseSettling),
		}},
		{name: "a refused plan is tried again once the configuration is edited", steps: []step{
			seen(differs(a).inConfig("v1")),
			ticks().when(quiet).starts(),
			ends(resultRefused).when(second), stateRead().when(second),
			seen(differs(a).inConfig("v1")).when(second).sleeps().then(phaseHeld),
			seen(differs(a).inConfig("v2")).when(3 * second).wakes(3*second + quiet).then(phaseSettling),
		}},
		{name: "the shrink guard refuses a run that would halve a pool, and holds it", steps: []step{
			seen(differs(shrink("s", 4, 3))).then(phaseSettling),
			ticks().when(quiet).sleeps().notes("run refused by the shrink guard").then(phaseHeld),
			seen(differs(shrink("s", 4, 3))).when(second).sleeps().quietly("run refused by the shrink guard").then(phaseHeld),
			seen(differs(shrink("t", 4, 1))).when(2 * second).wakes(2*second + quiet).then(phaseSettling),
			ticks().when(2*second + quiet).starts(),
		}},
		{name: "an unreadable pool is noted once, the others go on, and it is noted when it reads again", steps: []step{
			seen(matches().withUnreadable()).notes("pool not recomputed: its dependents are left out of runs until it reads again").then(phaseIdle),
			seen(differs(a).withUnreadable()).when(second).wakes(second + quiet).
				quietly("pool not recomputed: its dependents are left out of runs until it reads again"),
			ticks().when(second + quiet).starts(),
			ends(resultApplied).when(2 * second), stateRead().when(2 * second),
			seen(matches()).when(3 * second).notes("pool readable again").then(phaseIdle),
		}},
		{name: "a run that could not leave an unreadable pool out and failed is not retried until something changes", steps: []step{
			seen(differs(a).withUnreadable()),
			ticks().when(quiet).starts(),
			ends(resultFailed).when(second), stateRead().when(second),
			seen(differs(a).withUnreadable()).when(second).sleeps().then(phaseHeld),
			ticks().when(time.Minute).sleeps().then(phaseHeld),
			// x reads again: its dependents can be planned.
			seen(differs(a)).when(2 * time.Minute).wakes(2*time.Minute + quiet).then(phaseSettling),
		}},
		{name: "a run with nothing plannable but unreadable pools waits for them", steps: []step{
			seen(differs(a).withUnreadable()),
			ticks().when(quiet).starts(),
			ends(resultWaiting).when(second), stateRead().when(second),
			seen(differs(a).withUnreadable()).when(second).sleeps().then(phaseHeld),
			seen(differs(b).withUnreadable()).when(2 * second).wakes(2*second + quiet).then(phaseSettling),
		}},
		{name: "a run that left out what also uses an unreadable pool plans everything once the pool reads again", steps: []step{
			seen(differs(a).withUnreadable()).then(phaseSettling),
			ticks().when(quiet).starts(),
			endsOf(runOutcome{result: resultApplied, targeted: true, partial: true}).when(second), stateRead().when(second),
			seen(matches().withUnreadable()).when(second).sleeps().then(phaseIdle),
			seen(matches()).when(5 * second).wakes(5 * second).then(phaseIdle),
			ticks().when(5 * second).plansAll().then(phaseRunning),
			ends(resultNoChanges).when(6 * second), stateRead().when(6 * second),
			seen(matches()).when(6 * second).sleeps().then(phaseIdle),
		}},
		{name: "a failed read of state starts no run until state is read again", from: running(a), steps: []step{
			ends(resultApplied).when(second),
			stateFails().when(second).decides(doRecompute).then(phaseReading),
			seen(differs(b)).when(second).wakes(2 * second).then(phaseStale),
			marked().when(1500 * time.Millisecond).decides(doRecompute).then(phaseStale),
			seen(differs(c)).when(1500 * time.Millisecond).wakes(2 * second).then(phaseStale),
			ticks().when(2 * second).decides(doReadState).then(phaseReading),
			stateFails().when(2 * second), seen(differs(c)).when(2 * second).wakes(4 * second).then(phaseStale),
			ticks().when(4 * second).decides(doReadState), stateRead().when(4 * second),
			seen(differs(c)).when(4 * second).wakes(4*second + quiet).then(phaseSettling),
		}},
		{name: "a first read of state that fails is read again after the backoff", from: []step{}, steps: []step{
			{ev: event{kind: evStart}, in: phaseStarting, phase: true, does: []decisionKind{doReadState}},
			stateFails().wakes(second).then(phaseStarting),
			marked().when(500 * time.Millisecond).wakes(second).then(phaseStarting),
			ticks().when(second).decides(doReadState).then(phaseStarting),
			stateFails().when(second).wakes(3 * second).then(phaseStarting),
			ticks().when(3 * second).decides(doReadState),
			stateRead().when(3*second).decides(doStartProbes, doRecompute).then(phaseReading),
		}},
		{name: "a first read of state that waiting cannot cure exits with its error", from: []step{}, steps: []step{
			{ev: event{kind: evStart}, in: phaseStarting, phase: true, does: []decisionKind{doReadState}},
			stateLost().decides(doExit),
		}},
		{name: "state is read again every -state-interval", steps: []step{
			seen(matches()).wakes(time.Minute).then(phaseIdle),
			ticks().when(time.Minute).decides(doReadState).then(phaseReading),
			stateRead().when(time.Minute).decides(doRecompute),
			seen(matches()).when(time.Minute).wakes(2 * time.Minute).then(phaseIdle),
		}},
		{name: "a pool's expiry recomputes every pool when it passes, in any phase", steps: []step{
			seen(matches().expiring(10 * second)).wakes(10*second + time.Millisecond).then(phaseIdle),
			ticks().when(10*second + time.Millisecond).then(phaseIdle).decides(doRecompute),
			seen(differs(a).expiring(20 * second)).when(10 * second).then(phaseSettling),
			ticks().when(10*second + quiet).starts(),
			seen(differs(a).expiring(11 * second)).when(10*second + quiet).wakes(11*second + time.Millisecond).then(phaseRunning),
			ticks().when(11*second + time.Millisecond).decides(doRecompute).then(phaseRunning),
		}},
		{name: "a run that ends stopped reads state", from: running(a), steps: []step{
			ends(resultStopped).when(second).decides(doReadState).then(phaseReading),
		}},
		{name: "SIGTERM during a run waits for it", from: running(a), steps: []step{
			sigterm().when(second).decides(doAwaitRun).notes("stopping: waiting for the running command, which got SIGINT").then(phaseStopping),
			ends(resultStopped).when(2 * second).decides(doExit).notes("run ended"),
		}},
	}
	for _, result := range []runResult{resultApplied, resultNoChanges, resultRefused, resultDelivered, resultWaiting, resultFailed} {
		cases = append(cases, decisionCase{name: "SIGTERM during a run that ends " + result.String() + " exits", from: running(a), steps: []step{
			sigterm().when(second).then(phaseStopping), ends(result).when(2 * second).decides(doExit),
		}})
	}
	// SIGTERM, and the informers' marks, in every phase that takes them.
	for name, before := range phasesReached(a) {
		cases = append(cases,
			decisionCase{name: "SIGTERM while " + name + " exits", from: before, steps: []step{sigterm().decides(doExit)}},
		)
		last := before[len(before)-1]
		cases = append(cases, decisionCase{name: "the informers' marks while " + name, from: before, steps: []step{
			marked().when(last.at).then(last.in),
		}})
	}
	return cases
}

// phasesReached are steps that leave the machine in each phase but
// running (which waits for the run).
func phasesReached(a poolChange) map[string][]step {
	held := append(running(a), ends(resultNoChanges).when(second), stateRead().when(second), seen(differs(a)).when(second).then(phaseHeld))
	return map[string][]step{
		"starting":      {{ev: event{kind: evStart}, in: phaseStarting, phase: true}, stateFails().then(phaseStarting)},
		"reading state": started(),
		"idle":          append(started(), seen(matches()).then(phaseIdle)),
		"settling":      append(started(), seen(differs(a)).then(phaseSettling)),
		"backing off": append(running(a), ends(resultFailed).when(second), stateRead().when(second),
			seen(matches()).when(second).then(phaseBackingOff)),
		"held": held,
		"stale state": append(running(a), ends(resultApplied).when(second), stateFails().when(second),
			seen(matches()).when(second).then(phaseStale)),
	}
}

// reached are the rules the decision table's steps took.
var reached = map[*rule]bool{}

func TestTheCompanionDecides(t *testing.T) {
	for _, tc := range decisionCases() {
		t.Run(tc.name, func(t *testing.T) {
			m := testMachine()
			m.opts.StateInterval = 0
			if strings.Contains(tc.name, "-state-interval") {
				m.opts.StateInterval = time.Minute
			}
			from := tc.from
			if from == nil {
				from = started()
			}
			for i, s := range append(slices.Clone(from), tc.steps...) {
				where := fmt.Sprintf("step %d (%s in %s) at %s", i, s.ev.kind, m.phase, s.at)
				if i < len(from) {
					where = "before: " + where
				}
				r := ruleOf[m.phase][s.ev.kind]
				if r == nil {
					t.Fatalf("%s: no rule takes it", where)
				}
				reached[r] = true
				d := m.step(t0.Add(s.at), s.ev)
				checkStep(t, where, m, s, d)
			}
		})
	}
}

func checkStep(t *testing.T, where string, m *machine, s step, d decisions) {
	t.Helper()
	if run := d.started(); (run != nil) != s.start {
		t.Fatalf("%s: run started %v, want %v; decided %v", where, run != nil, s.start, kinds(d))
	} else if s.start && (run.retry != s.retry || run.full != s.full) {
		t.Errorf("%s: retry %v, full %v; want %v, %v", where, run.retry, run.full, s.retry, s.full)
	}
	for _, k := range s.does {
		if !d.has(k) {
			t.Errorf("%s: decided %v, want %v among them", where, kinds(d), k)
		}
	}
	if s.phase && m.phase != s.in {
		t.Errorf("%s: phase %s after, want %s", where, m.phase, s.in)
	}
	switch next := m.next(); {
	case s.next == -1 && !next.IsZero():
		t.Errorf("%s: wants the time at %s, want not at all", where, next.Sub(t0))
	case s.next > 0 && !next.Equal(t0.Add(s.next)):
		t.Errorf("%s: wants the time at %s, want %s", where, next.Sub(t0), s.next)
	}
	msgs := noteMessages(d)
	if s.note != "" && !slices.Contains(msgs, s.note) {
		t.Errorf("%s: notes %q, want %q among them", where, msgs, s.note)
	}
	if s.noNote != "" && slices.Contains(msgs, s.noNote) {
		t.Errorf("%s: notes %q, want no %q", where, msgs, s.noNote)
	}
}

func TestEveryRuleIsReachedByTheDecisionTable(t *testing.T) {
	if len(reached) == 0 {
		TestTheCompanionDecides(t)
	}
	for i := range rules {
		if r := &rules[i]; !reached[r] {
			t.Errorf("no case of the decision table takes %s in %s (%q)", r.event, r.phase, r.does)
		}
	}
}

func kinds(d decisions) []decisionKind {
	var out []decisionKind
	for _, x := range d {
		out = append(out, x.kind)
	}
	return out
}

func noteMessages(d decisions) []string {
	var out []string
	for _, n := range d.notes() {
		out = append(out, n.msg)
	}
	return out
}

// observe feeds m the pools as seen at now.
func (m *machine) observe(now time.Time, v view) decisions { return m.step(now, observed(v)) }

func TestTheSignatureOfAViewNamesItsChanges(t *testing.T) {
	a, b := change("a", "10.0.0.1:80"), change("b", "10.0.0.1:80")
	if differs(a).signature() == differs(b).signature() {
		t.Error("two pools with the same members but other attributes have one signature")
	}
	if again := differs(change("a", "10.0.0.1:80")); again.signature() != differs(a).signature() {
		t.Error("the same changes have two signatures")
	}
	if differs(a).signature() == differs(a).withUnreadable().signature() {
		t.Error("an unreadable pool does not change the signature")
	}
	if matches().signature() != "" {
		t.Error("nothing that differs has a signature")
	}
}

// Found by the soak (issue 28): a pool the shrink guard refused (a
// namespace being deleted takes its pods before its Service) held every
// other pool's change, and the refusal was noted again at each of them.
func TestAPoolTheShrinkGuardRefusesLeavesTheOthersCurrent(t *testing.T) {
	const web, api = "data.k8s_ready_endpoints.web", "data.k8s_ready_endpoints.api"
	emptied := shrink("s", 5, 5)
	both := func(other poolChange) view {
		return view{changes: map[string][]poolChange{web: {emptied}, api: {other}}, unreadable: map[string]cause{}}
	}
	m := startedMachine(t)
	m.observe(t0, both(change("a", "10.0.0.1:80")))
	d := m.step(t0.Add(quiet), event{kind: evTick})
	run := d.started()
	if run == nil {
		t.Fatalf("no run for %s while %s is refused: notes %q", api, web, noteMessages(d))
	}
	if !slices.Equal(run.addresses(), []string{api}) || run.refused[web].kind != causeShrink {
		t.Fatalf("run for %v, refused %v: want a run for %s that leaves %s out", run.addresses(), run.refused, api, web)
	}
	if !slices.Contains(noteMessages(d), "run refused by the shrink guard") {
		t.Errorf("notes %q: want the refusal", noteMessages(d))
	}
	m.ends(t0.Add(second), runOutcome{result: resultApplied})
	// Another change of api, web still refused for the same change: a run,
	// and no second note of the refusal.
	m.observe(t0.Add(2*second), both(change("b", "10.0.0.2:80")))
	d = m.step(t0.Add(2*second+quiet), event{kind: evTick})
	if run := d.started(); run == nil || !slices.Equal(run.addresses(), []string{api}) {
		t.Fatalf("no run for the second change of %s: notes %q", api, noteMessages(d))
	}
	if slices.Contains(noteMessages(d), "run refused by the shrink guard") {
		t.Errorf("the same refusal noted again: %q", noteMessages(d))
	}
	m.ends(t0.Add(3*second), runOutcome{result: resultApplied})
	// web alone: nothing to run, nothing noted again, nothing to wake for.
	d = m.observe(t0.Add(4*second), view{changes: map[string][]poolChange{web: {emptied}}, unreadable: map[string]cause{}})
	d2 := m.step(t0.Add(4*second+quiet), event{kind: evTick})
	if d.started() != nil || d2.started() != nil || slices.Contains(append(noteMessages(d), noteMessages(d2)...), "run refused by the shrink guard") {
		t.Errorf("web alone: runs %v %v, notes %q %q; want none and no second refusal", d.started(), d2.started(), noteMessages(d), noteMessages(d2))
	}
	if next := m.next(); !next.IsZero() {
		t.Errorf("web alone wants the time at %s, want not at all", next.Sub(t0))
	}
}

// startedMachine is a test machine that started and read state.
func startedMachine(t *testing.T) *machine {
	t.Helper()
	m := testMachine()
	m.step(t0, event{kind: evStart})
	m.step(t0, stateReadEnded(nil, false))
	if m.phase != phaseReading {
		t.Fatalf("started: phase %s, want %s", m.phase, phaseReading)
	}
	return m
}

// ends ends the run in flight at now, and reads state.
func (m *machine) ends(now time.Time, o runOutcome) {
	m.step(now, runEnded(o))
	m.step(now, stateReadEnded(nil, false))
}

// Found by the soak (issue 28): an API server's restart was a warning per
// pool (51 in the soak, each with the server's whole /readyz answer), on
// top of the cluster's own line; the pools of a cluster that does not
// answer are one note when it goes, one when it comes back.
func TestThePoolsOfAClusterThatDoesNotAnswerAreOneNote(t *testing.T) {
	down := cause{kind: causeClusterDown, text: "cluster k8s does not answer (connection refused): not recomputed, left as they are"}
	v := matches()
	for _, name := range []string{"a", "b", "c"} {
		v.unreadable["data.k8s_ready_endpoints."+name] = down
	}
	v.unreadable["data.k8s_ready_endpoints.gone"] = cause{kind: causeReadFails, text: "service web/gone not found: a plan would fail"}
	m := startedMachine(t)
	d := m.observe(t0, v)
	count := func(d decisions, prefix string) (n int) {
		for _, msg := range noteMessages(d) {
			if strings.HasPrefix(msg, prefix) {
				n++
			}
		}
		return n
	}
	if n := count(d, "pool"); n != 2 {
		t.Errorf("notes %q: want one for the cluster's three pools and one for the deleted Service", noteMessages(d))
	}
	if n := count(m.observe(t0.Add(second), v), "pool"); n != 0 {
		t.Errorf("the same pools noted again: %d notes", n)
	}
	back := matches()
	back.unreadable["data.k8s_ready_endpoints.gone"] = v.unreadable["data.k8s_ready_endpoints.gone"]
	if d := m.observe(t0.Add(2*second), back); count(d, "pool") != 1 {
		t.Errorf("the cluster back: notes %q, want one", noteMessages(d))
	}
}

// A pool that differs from state is noted once for the members it adds
// and removes: a change of another pool, or of the pool's other
// attributes, does not note it again; the same pool adding other members
// does, and so does a change that comes back after the pools matched
// state. A k8s_ready_endpoints' single pool has no name.
func TestAPoolThatDiffersIsNotedOnceForTheMembersItAddsAndRemoves(t *testing.T) {
	m := testMachine()
	web, api := change("web", "10.0.0.1:80"), change("api", "10.0.0.2:80")
	web.Name, api.Name = "shop/web", "shop/api"
	web2 := change("web-2", "10.0.0.3:80")
	web2.Name = "shop/web"
	webAttrs := change("web-zone", "10.0.0.1:80")
	webAttrs.Name = "shop/web"
	single := change("single", "10.0.0.4:80")
	noted := func(v view) []string {
		m.view = v
		var d decisions
		m.noteChanges(&d)
		var out []string
		for _, n := range d.notes() {
			name := "(no pool attribute)"
			for i := 0; i+1 < len(n.attrs); i += 2 {
				if v, ok := n.attrs[i+1].(string); ok && n.attrs[i] == "pool" {
					name = v
				}
			}
			out = append(out, name)
		}
		return out
	}
	for _, step := range []struct {
		name string
		v    view
		want []string
	}{
		{"web differs", differs(web), []string{"shop/web"}},
		{"api differs too", differs(web, api), []string{"shop/api"}},
		{"the same again", differs(web, api), nil},
		{"web's other attributes move", differs(webAttrs, api), nil},
		{"web differs otherwise", differs(web2, api), []string{"shop/web"}},
		{"the pools match state", matches(), nil},
		{"both differ again", differs(web2, api), []string{"shop/api", "shop/web"}},
		{"a single pool", differs(single), []string{"(no pool attribute)"}},
	} {
		got := noted(step.v)
		slices.Sort(got)
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: noted %v, want %v", step.name, got, step.want)
		}
	}
}
