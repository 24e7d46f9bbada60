package companion

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// The companion's decisions, in one owner: the machine. It takes events
// (the companion starts, a read of state ended, the informers marked pools,
// the pools were recomputed, the time it asked for came, a run ended,
// SIGTERM) and answers each with decisions (read state, recompute the
// pools, start a run, wait for the run in flight, log, exit), and says when
// it next needs the time (next). It starts no goroutine, reads no clock and
// does no I/O: the loop (loop.go) carries its decisions out and feeds what
// they give back in as events. How a run goes on and ends is its decision
// too: the runner reports facts, and decideRun (its own table, runRules)
// says whether the run plans, applies or runs the command, and with what
// result it ended.
//
// The rule that answers an event is picked by the machine's phase and the
// event's kind, from one table (rules, below). The guide's "What it
// decides, and why" is that table, rendered (TestTheGuideSaysWhatTheTableDecides),
// and the decision table test (machine_test.go) says the phase after every
// step and reaches every rule of it.
//
// What it remembers besides its phase:
//   - the settle window: opened by the first change, fired after Quiet
//     without another or MaxWait after the first, like Consul-Terraform-
//     Sync's buffer_period;
//   - the run in flight, and when the pools first changed during it;
//   - a failed run, retried with exponential backoff (client-go's per-item
//     failure rate limiter, one item) until a run succeeds or a plan shows
//     nothing to do, whatever the state's pools say: a failed apply may
//     have written the pools into state and left a resource tainted;
//   - a failed read of state, read again with a backoff of its own;
//   - one held change set: changes a run (or the shrink guard) showed
//     there is no point running for again until they change, by signature,
//     with its typed cause;
//   - when state was last read (read again every StateInterval) and the
//     earliest expiry annotation of the pools (recomputed when it passes).
//
// client-go's workqueue is not used for the queue itself: there is one
// worker and one thing to do (a run of the configuration), and what makes
// two events the same is the signature of the pools' differences, not a
// key; its per-item rate limiter is what retries use.

// phase is what the companion is doing.
type phase int

const (
	// phaseStarting: the first read of state has not succeeded yet.
	phaseStarting phase = iota
	// phaseReading: a read of state is in flight, or its pools are being
	// recomputed against it.
	phaseReading
	// phaseIdle: every pool matches state, or nothing else is to be done.
	phaseIdle
	// phaseSettling: pools differ from state; the settle window is open.
	phaseSettling
	// phaseBackingOff: a run failed; its retry waits for the backoff.
	phaseBackingOff
	// phaseHeld: pools differ, and a run showed there is no point running
	// for them again until they change (the hold's cause says why).
	phaseHeld
	// phaseRunning: a run (plan and apply, or the command) is in flight.
	phaseRunning
	// phaseStale: the last read of state failed; no run until one succeeds.
	phaseStale
	// phaseStopping: SIGTERM came during a run: waiting for it to end.
	phaseStopping
)

var phaseNames = map[phase]string{
	phaseStarting: "starting", phaseReading: "reading state", phaseIdle: "idle", phaseSettling: "settling",
	phaseBackingOff: "backing off", phaseHeld: "held", phaseRunning: "running", phaseStale: "stale state",
	phaseStopping: "stopping",
}

func (p phase) String() string { return phaseNames[p] }

// eventKind is what happened.
type eventKind int

const (
	evStart eventKind = iota
	evStateRead
	evStateFailed
	evChanged
	evObserved
	evTick
	evRunApplied
	evRunNoChanges
	evRunRefused
	evRunDelivered
	evRunWaiting
	evRunFailed
	evRunStopped
	evStop
	// evRunEnded is the runner's report of the run in flight (its facts):
	// the machine decides how it ended (decideRun) and takes it as the
	// evRun* event of that result.
	evRunEnded
)

var eventNames = map[eventKind]string{
	evStart: "start", evStateRead: "state read", evStateFailed: "state read failed", evChanged: "informers marked pools",
	evObserved: "pools recomputed", evTick: "time due", evRunApplied: "run applied", evRunNoChanges: "run: no changes",
	evRunRefused: "run refused", evRunDelivered: "run: command succeeded", evRunWaiting: "run waiting",
	evRunFailed: "run failed", evRunStopped: "run stopped", evStop: "SIGTERM", evRunEnded: "run ended",
}

func (k eventKind) String() string { return eventNames[k] }

// event is what the loop feeds the machine.
type event struct {
	kind eventKind
	// view is the pools recomputed (evObserved).
	view view
	// outcome is how the run ended, as the machine decided it (evRun*).
	outcome runOutcome
	// facts are what the runner reports of the run (evRunEnded).
	facts runFacts
	// err is why the read of state failed (evStateFailed); permanent says
	// that waiting cannot cure it.
	err       error
	permanent bool
}

func observed(v view) event { return event{kind: evObserved, view: v} }

// stateReadEnded is the end of a read of state.
func stateReadEnded(err error, permanent bool) event {
	if err == nil {
		return event{kind: evStateRead}
	}
	return event{kind: evStateFailed, err: err, permanent: permanent}
}

// ranWith is the end of the run in flight, as the runner reports it: its
// facts, which the machine decides (step).
func ranWith(f runFacts) event { return event{kind: evRunEnded, facts: f} }

// runResult is how a run ended, as the machine decides it from the
// runner's facts (decideRun): the machine takes each as the event of its
// kind (runEnded), and the runs metric's label is made from it (String),
// never read back.
type runResult int

const (
	// resultApplied: the saved plan, pool changes only, was applied.
	resultApplied runResult = iota + 1
	// resultStateUpdated: the plan changed no resource (the pools differed
	// in attributes no resource uses); applying it brought the state's data
	// sources current.
	resultStateUpdated
	// resultNoChanges: the plan had nothing to do.
	resultNoChanges
	// resultRefused: the plan changed more than pools.
	resultRefused
	// resultFailed: the CLI or the command failed.
	resultFailed
	// resultDelivered: -command succeeded.
	resultDelivered
	// resultWaiting: what the run would change cannot leave out a pool
	// whose read fails or that the shrink guard refused; nothing was
	// planned or run.
	resultWaiting
	// resultStopped: the companion stopped during the run.
	resultStopped
)

// runResults are every result, each with its label and the event the
// machine takes it as: the one place both are decided.
var runResults = []runResult{resultApplied, resultStateUpdated, resultNoChanges, resultRefused, resultFailed, resultDelivered,
	resultWaiting, resultStopped}

var resultOf = map[runResult]struct {
	label string
	event eventKind
}{
	resultApplied:      {"applied", evRunApplied},
	resultStateUpdated: {"state_updated", evRunApplied},
	resultNoChanges:    {"no_changes", evRunNoChanges},
	resultRefused:      {"refused", evRunRefused},
	resultFailed:       {"failed", evRunFailed},
	resultDelivered:    {"delivered", evRunDelivered},
	resultWaiting:      {"waiting", evRunWaiting},
	resultStopped:      {"stopped", evRunStopped},
}

// String is the result's label in the runs metric and the log.
func (r runResult) String() string { return resultOf[r].label }

// runEnded is the end of the run in flight, by the result the machine
// decided. A run always ends with one of runResults; an outcome without
// one (none decideRun gives) is a failed run that says so.
func runEnded(o runOutcome) event {
	r, ok := resultOf[o.result]
	if !ok {
		o.result = resultFailed
		if o.err == nil {
			o.err = errors.New("the run ended without a result")
		}
		return event{kind: evRunFailed, outcome: o}
	}
	return event{kind: r.event, outcome: o}
}

// How a run ends is the machine's decision too. The runner (run.go) makes
// the steps of a run (a plan, its apply, or the command) and reports what
// it found (runFacts): what it could scope, what the plan said, whether a
// step failed. It decides nothing: before each step it asks decideRun
// whether the run goes on, and the machine decides the run's result from
// the same facts when the run ends. The rules are one ordered table
// (runRules): the first that holds decides.

// runStep is a step of a run.
type runStep int

const (
	// stepNone: as the step made, none yet; as the next step, none: the
	// run ends.
	stepNone runStep = iota
	// stepPlan: plan, with the scope's targets, into a saved plan.
	stepPlan
	// stepApply: apply the saved plan.
	stepApply
	// stepCommand: run -command, which replaces plan and apply.
	stepCommand
)

// runFacts are what the runner reports of a run: facts, no decision.
type runFacts struct {
	// command says -command replaces plan and apply.
	command bool
	// scope is what the plan would cover (plan and apply, not -command).
	scope runScope
	// did is the last step the run made; err is why it failed, or why
	// the run could not make it (its saved plan's file, a run stopped
	// before it started).
	did runStep
	err error
	// failing are the addresses the CLI's errors name (plan, apply).
	failing []string
	// plan is what the plan said (did is stepPlan or stepApply).
	plan planFacts
	// queued is how long the run waited for a slot of the replica.
	queued time.Duration
}

// stopped says the run was stopped: SIGTERM, a lost Lease, a hand-over.
func (f runFacts) stopped() bool { return errors.Is(f.err, errStopped) }

// planned says the run made its plan.
func (f runFacts) planned() bool { return f.did == stepPlan || f.did == stepApply }

// runScope is what the runner could compute of what a plan covers.
type runScope struct {
	// targetable says the configuration says what depends on what (no
	// -allow, no .tf.json file): what uses a pool can be left out of a
	// plan.
	targetable bool
	// users are the resources (and modules from a registry) that use the
	// changed pools and no pool left out (unreadable, or refused by the
	// shrink guard): computed when the configuration is targetable and
	// the plan is targeted or a pool is left out.
	users []string
	// targets are the plan's -target addresses; none: the whole
	// configuration.
	targets []string
	// leavesOutChanged says that what the targets leave out, because it
	// uses a pool left out, also uses a changed pool.
	leavesOutChanged bool
}

// planFacts are what a plan said.
type planFacts struct {
	// changes says the plan has something to do (-detailed-exitcode 2).
	changes bool
	// changed are the managed resources the plan changes; notPools those
	// of them that are not pool changes (the filter's reading of the
	// configuration, or -allow).
	changed, notPools []string
	// driftNotPools are the resources that are not pools whose drift
	// (changes made outside Terraform) the plan records.
	driftNotPools []string
}

// runCase names a rule of runRules.
type runCase int

const (
	caseStopped runCase = iota + 1
	caseFailed
	caseCommandWithRefusedPool
	caseRunCommand
	caseDelivered
	caseRefusedPoolNotScoped
	caseNoUserLeft
	casePlan
	caseNothingToDo
	caseMoreThanPools
	caseDriftOutsidePools
	caseApply
	caseStateUpdated
	caseApplied
)

// runRule is one decision of a run: when it holds of the run's request and
// facts, the run goes on with next, or, when next is stepNone, ends with
// result.
type runRule struct {
	why  runCase
	when func(r runRequest, f runFacts) bool
	next runStep
	// result, and the reason that its log line gives (nil: none).
	result runResult
	reason func(f runFacts) string
}

// leavesPoolsOut says the run leaves pools out: unreadable ones, or ones
// the shrink guard refused.
func leavesPoolsOut(r runRequest) bool { return len(r.unreadable)+len(r.refused) > 0 }

func says(text string) func(runFacts) string { return func(runFacts) string { return text } }

// runRules are how a run goes on and ends, in order: the sync guide's
// "What it does" (5, 7, 8) and "Why" say each.
var runRules = []runRule{
	{why: caseStopped, when: func(_ runRequest, f runFacts) bool { return f.stopped() }, result: resultStopped},
	{why: caseFailed, when: func(_ runRequest, f runFacts) bool { return f.err != nil }, result: resultFailed},
	// -command runs the whole configuration: it would apply what the
	// guard refused.
	{why: caseCommandWithRefusedPool, when: func(r runRequest, f runFacts) bool { return f.command && len(r.refused) > 0 },
		result: resultWaiting, reason: says("the shrink guard refused a pool, and -command runs the whole configuration")},
	{why: caseRunCommand, when: func(_ runRequest, f runFacts) bool { return f.command && f.did == stepNone }, next: stepCommand},
	{why: caseDelivered, when: func(_ runRequest, f runFacts) bool { return f.command }, result: resultDelivered},
	// A plan of everything would apply what the guard refused.
	{why: caseRefusedPoolNotScoped, when: func(r runRequest, f runFacts) bool { return !f.scope.targetable && len(r.refused) > 0 },
		result: resultWaiting, reason: says("the configuration does not say which resources leave out the pools the shrink guard refused")},
	{why: caseNoUserLeft, when: func(r runRequest, f runFacts) bool {
		return f.scope.targetable && leavesPoolsOut(r) && len(f.scope.users) == 0
	}, result: resultWaiting,
		reason: says("every resource that uses the changed pools also uses a pool whose read fails or that the shrink guard refused")},
	{why: casePlan, when: func(_ runRequest, f runFacts) bool { return f.did == stepNone }, next: stepPlan},
	// A retry, or a plan of the whole configuration, that finds nothing
	// to do.
	{why: caseNothingToDo, when: func(r runRequest, f runFacts) bool {
		return f.did == stepPlan && !f.plan.changes && len(r.changes) == 0
	}, result: resultNoChanges},
	{why: caseMoreThanPools, when: func(_ runRequest, f runFacts) bool { return f.did == stepPlan && len(f.plan.notPools) > 0 },
		result: resultRefused},
	// Applying a plan that changes no resource would write the drift of
	// resources that are not pools into state with the pools.
	{why: caseDriftOutsidePools, when: func(_ runRequest, f runFacts) bool {
		return f.did == stepPlan && len(f.plan.changed) == 0 && len(f.plan.driftNotPools) > 0
	}, result: resultNoChanges, reason: func(f runFacts) string {
		return "the state's data sources are not brought current: the plan also records changes made outside Terraform to " +
			strings.Join(f.plan.driftNotPools, ",")
	}},
	{why: caseApply, when: func(_ runRequest, f runFacts) bool { return f.did == stepPlan }, next: stepApply},
	// Nothing a load balancer sees changed (an endpoint's zone, a draining
	// flag no resource reads): the apply wrote the data sources' new
	// results into state, so that neither sync nor check sees the same
	// difference again.
	{why: caseStateUpdated, when: func(_ runRequest, f runFacts) bool { return f.did == stepApply && len(f.plan.changed) == 0 },
		result: resultStateUpdated},
	{why: caseApplied, when: func(_ runRequest, f runFacts) bool { return f.did == stepApply }, result: resultApplied},
}

// runVerdict is what decideRun says of a run so far: the step it makes
// next, or, when next is stepNone, how it ended.
type runVerdict struct {
	// why is the rule that decided.
	why     runCase
	next    runStep
	outcome runOutcome
}

// decideRun decides, from the run's request and the facts its runner
// reports so far, the run's next step or its outcome: the first rule of
// runRules that holds. Facts no rule takes (none a runner gives) end the
// run as failed, saying so.
func decideRun(r runRequest, f runFacts) runVerdict {
	for i := range runRules {
		rule := &runRules[i]
		if !rule.when(r, f) {
			continue
		}
		if rule.next != stepNone {
			return runVerdict{why: rule.why, next: rule.next}
		}
		o := runOutcome{result: rule.result, why: rule.why, err: f.err, queued: f.queued}
		if rule.reason != nil {
			o.reason = rule.reason(f)
		}
		switch rule.result {
		case resultRefused:
			o.blocked = f.plan.notPools
		case resultFailed:
			o.failing = f.failing
		}
		// The plan left out what uses an unreadable or refused pool; what
		// also used a changed pool is behind it in state once the run may
		// have written it (a plan of everything brings it current).
		o.targeted = f.planned() && f.scope.targetable && leavesPoolsOut(r)
		switch rule.result {
		case resultApplied, resultStateUpdated, resultFailed, resultStopped:
			o.partial = o.targeted && f.scope.leavesOutChanged
		}
		return runVerdict{why: rule.why, outcome: o}
	}
	return runVerdict{outcome: runOutcome{result: resultFailed, err: errors.New("no rule decides how the run ended"), queued: f.queued}}
}

// decided is how the run in flight ended, from its runner's facts; a run
// reported before its last step (none a runner gives) failed, saying so.
func (m *machine) decided(f runFacts) runOutcome {
	v := decideRun(m.run, f)
	if v.next != stepNone {
		return runOutcome{result: resultFailed, err: fmt.Errorf("the run ended before its next step (%s)", v.next), queued: f.queued}
	}
	return v.outcome
}

var stepNames = map[runStep]string{stepNone: "none", stepPlan: "plan", stepApply: "apply", stepCommand: "-command"}

func (s runStep) String() string { return stepNames[s] }

// causeKind is the kind of reason a pool is left out of runs, or a change
// set held: what the decisions test, where the text is what is logged.
type causeKind int

const (
	// causeReadFails: a plan's read of the pool would fail (its Service
	// deleted, min_ready not met, a namespace not watched).
	causeReadFails causeKind = iota + 1
	// causeClusterDown: the pool's cluster does not answer, or its
	// informers did not start: its pools are left as they are.
	causeClusterDown
	// causeShrink: the shrink guard refused the pool's changes.
	causeShrink
)

// cause is why a pool is left out of runs: its kind, and what the log says.
type cause struct {
	kind causeKind
	text string
}

func (c cause) String() string { return c.text }

// MarshalText gives the text: -command's $K8S_SYNC_UNREADABLE maps each
// pool to why.
func (c cause) MarshalText() ([]byte, error) { return []byte(c.text), nil }

// view is what the pools look like at one moment, compared with state.
type view struct {
	// changes are the pools that differ from state, by instance address.
	changes map[string][]poolChange
	// unreadable are the pools whose read would fail, by instance address:
	// why. Runs leave their dependents out.
	unreadable map[string]cause
	// config identifies the configuration's files: a change set refused or
	// held for a configuration is tried again once it is edited.
	config string
	// expiry is the earliest expiry annotation of the pools to pass; zero
	// when none.
	expiry time.Time
}

// signature identifies the view's change set: the pools that differ, each
// with its digests in state and in the cluster, the unreadable pools, and
// the configuration. "" when no pool differs.
func (v view) signature() string {
	if len(v.changes) == 0 {
		return ""
	}
	h := sha256.New()
	for _, address := range slices.Sorted(maps.Keys(v.changes)) {
		h.Write([]byte(address + "\x00"))
		for _, c := range v.changes[address] {
			h.Write([]byte(c.Name + "\x00"))
			h.Write(c.state[:])
			h.Write(c.cluster[:])
		}
	}
	for _, address := range slices.Sorted(maps.Keys(v.unreadable)) {
		h.Write([]byte("unreadable\x00" + address + "\x00"))
	}
	h.Write([]byte("config\x00" + v.config))
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// runRequest is a run the machine starts.
type runRequest struct {
	changes    map[string][]poolChange
	unreadable map[string]cause
	// refused are the pools the shrink guard refused, by instance address:
	// why. Like unreadable ones, the run leaves their dependents out.
	refused map[string]cause
	// sig is the signature of the changes, "" for a retry of a failed run
	// that state shows no difference for.
	sig string
	// retry says the run retries a failed one.
	retry bool
	// full says the run plans the whole configuration, not only what the
	// changed pools need.
	full bool
	// settled is the time from the first change to the start.
	settled time.Duration
}

// addresses are the data source instances the run is for, sorted.
func (r runRequest) addresses() []string { return slices.Sorted(maps.Keys(r.changes)) }

// runOutcome is how a run ended, as the machine decided it (decideRun).
type runOutcome struct {
	result runResult
	// why is the rule of runRules that decided it.
	why runCase
	err error
	// blocked are the addresses that made a plan not pool-only.
	blocked []string
	// failing are the addresses the CLI's errors name.
	failing []string
	// targeted says the plan left the dependents of unreadable pools out;
	// partial that among them was something that uses a changed pool too.
	targeted, partial bool
	// reason says why a run applied nothing (no_changes, waiting), in the
	// words of its rule.
	reason string
	// queued is how long the run waited for a slot of the replica.
	queued time.Duration
}

// holdCause is why a change set is held.
type holdCause int

const (
	heldNoChanges holdCause = iota + 1
	heldRefused
	heldShrink
	heldDelivered
	heldUnreadable
)

var holdTexts = map[holdCause]string{
	heldNoChanges:  "a plan showed these changes change nothing that can be applied",
	heldRefused:    "the plan changes more than pools",
	heldShrink:     "the shrink guard refused them",
	heldDelivered:  "the command ran for these changes; waiting for state to catch up",
	heldUnreadable: "a run for them needs a pool whose read fails or that the shrink guard refused",
}

func (c holdCause) String() string { return holdTexts[c] }

type held struct {
	sig   string
	cause holdCause
	at    time.Time
	// noted says the hold was logged for the current view.
	noted bool
}

// note is something to log, and count.
type note struct {
	kind  noteKind
	level slog.Level
	msg   string
	attrs []any
	// result is the run's result (noteRunEnded); settled the run's settle
	// time (noteRunStarted).
	result  runResult
	settled time.Duration
}

type noteKind int

const (
	noteDiffers noteKind = iota
	noteWindowOpened
	noteMatch
	noteUnreadable
	noteReadable
	noteShrinkRefused
	noteHeld
	noteRetry
	noteRefused
	noteRunStarted
	noteFullPlan
	noteRunEnded
	noteStopping
)

// decisionKind is what the machine decides.
type decisionKind int

const (
	// doReadState: read state (and start what it asks to watch); its end
	// is an evStateRead or evStateFailed.
	doReadState decisionKind = iota + 1
	// doStartProbes: ask each cluster, from now on, whether it answers.
	doStartProbes
	// doRecompute: recompute the pools the informers marked (all: every
	// pool); gives an evObserved.
	doRecompute
	// doStartRun: start the run; its end is an evRun* event.
	doStartRun
	// doAwaitRun: wait for the run in flight to end; gives its evRun*.
	doAwaitRun
	// doLog: log the note, and count it.
	doLog
	// doExit: stop, with err.
	doExit
)

// decision is one thing the machine decides.
type decision struct {
	kind decisionKind
	// all says that every pool is recomputed (doRecompute).
	all bool
	// run is the run to start (doStartRun).
	run  *runRequest
	note note
	err  error
}

// decisions is what the machine answers one event with, in order.
type decisions []decision

func (d *decisions) add(kind decisionKind)     { *d = append(*d, decision{kind: kind}) }
func (d *decisions) exit(err error)            { *d = append(*d, decision{kind: doExit, err: err}) }
func (d *decisions) recompute(all bool)        { *d = append(*d, decision{kind: doRecompute, all: all}) }
func (d *decisions) start(r runRequest)        { *d = append(*d, decision{kind: doStartRun, run: &r}) }
func (d *decisions) log(n note)                { *d = append(*d, decision{kind: doLog, note: n}) }
func (d decisions) started() *runRequest       { return d.find(doStartRun).run }
func (d decisions) has(kind decisionKind) bool { return d.find(kind).kind == kind }
func (d decisions) find(kind decisionKind) decision {
	for _, x := range d {
		if x.kind == kind {
			return x
		}
	}
	return decision{}
}

func (d *decisions) note(kind noteKind, level slog.Level, msg string, attrs ...any) {
	d.log(note{kind: kind, level: level, msg: msg, attrs: attrs})
}

// notes are the notes among d.
func (d decisions) notes() []note {
	var out []note
	for _, x := range d {
		if x.kind == doLog {
			out = append(out, x.note)
		}
	}
	return out
}

type machineOptions struct {
	Quiet, MaxWait         time.Duration
	RetryInitial, RetryMax time.Duration
	Guard                  shrinkGuard
	// CommandRepeat is how long a change set delivered to -command waits
	// for state to catch up before it is delivered again; 0: never.
	CommandRepeat time.Duration
	// StateInterval is how often state is read again without a run; 0:
	// never.
	StateInterval time.Duration
	// StopTimeout is how long the command gets after SIGINT (for the log).
	StopTimeout time.Duration
	// FullPlanInterval is how often a run plans the whole configuration
	// rather than what the changed pools need; 0: never.
	FullPlanInterval time.Duration
}

type machine struct {
	opts  machineOptions
	phase phase
	// notedChanges are the pool changes last noted (noteChanges), by data
	// source and pool name: the members each adds and removes.
	notedChanges map[string]string
	// retries is the backoff of runs, stateRetries that of reads of state.
	retries, stateRetries workqueue.TypedRateLimiter[string]

	view view
	sig  string

	// The settle window: open in phaseSettling, and kept open through a
	// read of state.
	windowOpen              bool
	windowStart, lastChange time.Time
	windowSig               string

	// run is the run in flight, or the last one; runStarted when it
	// started.
	run        runRequest
	runStarted time.Time
	// changedDuringRun and lastDuringRun are when the pools were first
	// and last seen to change during the run in flight; zero when they did
	// not.
	changedDuringRun, lastDuringRun time.Time
	// fullAt is when a run plans the whole configuration again; zero:
	// never. fullPending says one is due as soon as no pool is left out: a
	// run left behind something that uses a changed pool.
	fullAt      time.Time
	fullPending bool

	// retrying says a failed run waits for its retry, at retryAt.
	retrying bool
	retryAt  time.Time

	// stale says the last read of state failed; it is read again at
	// stateRetryAt. stateReadAt is when state is read again anyway.
	stale                     bool
	stateRetryAt, stateReadAt time.Time
	// expiry is the pools' earliest expiry annotation to pass; zero: none.
	expiry time.Time

	held held
	// refusedSig is the signature of the changes the shrink guard last
	// refused, so that a refusal is noted once.
	refusedSig string
	// reported are the unreadable pools logged, with their causes.
	reported map[string]cause
}

// retryItem is the one item of the rate limiters.
const retryItem = "run"

func newMachine(opts machineOptions) *machine {
	return &machine{
		opts:         opts,
		retries:      workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.RetryInitial, opts.RetryMax),
		stateRetries: workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.RetryInitial, opts.RetryMax),
		reported:     map[string]cause{},
	}
}

// rule is how the machine answers one kind of event in one phase.
type rule struct {
	phase phase
	event eventKind
	// does is what the rule decides, in the guide's words.
	does string
	act  func(m *machine, now time.Time, ev event, d *decisions)
}

// rules are every decision of the companion: the guide renders them.
var rules = []rule{
	{phaseStarting, evStart, "Read state.", func(_ *machine, _ time.Time, _ event, d *decisions) { d.add(doReadState) }},
	{phaseStarting, evStateRead, "Start asking each cluster whether it answers, and recompute every pool (reading state).",
		func(m *machine, now time.Time, _ event, d *decisions) {
			d.add(doStartProbes)
			m.stateReadOK(now, d)
		}},
	{phaseStarting, evStateFailed, "Exit with the error when waiting cannot cure it (no state, no pool in it, a format this " +
		"version does not read, a working directory not initialised for its backend, a backend that refuses the identity " +
		"its Secret or Lease: an RBAC rule to add); else read state again after the state backoff, the failure named in " +
		"`/healthz`: a backend out of reach or refusing the credentials is waited for.",
		func(m *machine, now time.Time, ev event, d *decisions) {
			if ev.permanent {
				d.exit(ev.err)
				return
			}
			m.stateRetryAt = now.Add(m.stateRetries.When(retryItem))
		}},
	{phaseStarting, evChanged, "Nothing: state is read first.", nothing},
	{phaseStarting, evTick, "Read state again: its backoff is over.", func(m *machine, now time.Time, _ event, d *decisions) {
		if !now.Before(m.stateRetryAt) {
			d.add(doReadState)
		}
	}},
	{phaseStarting, evStop, "Exit.", exit},

	{phaseReading, evStateRead, "Recompute the pools against the state read.", func(m *machine, now time.Time, _ event, d *decisions) {
		m.stateReadOK(now, d)
	}},
	{phaseReading, evStateFailed, "Recompute the pools (for `/healthz` and the metrics) and read state again after the state " +
		"backoff; no run starts until a read succeeds.",
		func(m *machine, now time.Time, _ event, d *decisions) {
			m.stale, m.stateRetryAt = true, now.Add(m.stateRetries.When(retryItem))
			d.recompute(false)
		}},
	{phaseReading, evChanged, "Nothing: the recompute that follows the read sees it.", nothing},
	{phaseReading, evObserved, "Settle, as idle does (stale state when the read failed).", func(m *machine, now time.Time, ev event, d *decisions) {
		m.take(now, ev.view, d)
		m.rest(now, d)
	}},
	{phaseReading, evStop, "Exit.", exit},

	{phaseIdle, evChanged, "Recompute the pools the informers marked.", recompute},
	{phaseIdle, evObserved, "A pool differs: open the settle window (settling), or, for a change set held, note it once (held). " +
		"A pool whose read fails is noted once, and once when it reads again.", settleOn},
	{phaseIdle, evTick, "The earliest expiry passed: recompute every pool. `-state-interval` passed since state was read: read " +
		"it (reading state). `-full-plan-interval` passed since the last plan of the whole configuration, or a run left out what " +
		"uses a pool that now reads again: plan the whole configuration (running).", tick},
	{phaseIdle, evStop, "Exit.", exit},

	{phaseSettling, evChanged, "Recompute the pools the informers marked.", recompute},
	{phaseSettling, evObserved, "Other changes: the quiet time starts again, within the longest wait from the first change. " +
		"Every pool matches state again: close the window, no run (idle).", settleOn},
	{phaseSettling, evTick, "The window is due (`-settle-quiet` after the last change, at most `-settle-max` after the first, " +
		"never before a retry is due): start a run of the changed pools (running), leaving out those the shrink guard refuses, " +
		"noted once, and planning the whole configuration when `-full-plan-interval` passed; when the guard refuses them all, hold " +
		"them (held).", tick},
	{phaseSettling, evStop, "Exit.", exit},

	{phaseBackingOff, evChanged, "Recompute the pools the informers marked.", recompute},
	{phaseBackingOff, evObserved, "A pool differs: open the settle window, which fires no earlier than the retry (settling).", settleOn},
	{phaseBackingOff, evTick, "The retry is due: retry the failed run, even when state shows its pools (a failed apply may have " +
		"written them and left a resource tainted) (running).", tick},
	{phaseBackingOff, evStop, "Exit.", exit},

	{phaseHeld, evChanged, "Recompute the pools the informers marked.", recompute},
	{phaseHeld, evObserved, "The same changes: nothing, noted once. The changes changed (or the configuration was edited): " +
		"open the settle window (settling).", settleOn},
	{phaseHeld, evTick, "A change set given to `-command` waited `-command-repeat` without state showing it: open the settle " +
		"window again (settling). `-full-plan-interval` passed: plan the whole configuration, leaving out the pools the shrink " +
		"guard refuses (running).", tick},
	{phaseHeld, evStop, "Exit.", exit},

	{phaseRunning, evChanged, "Recompute the pools the informers marked.", recompute},
	{phaseRunning, evObserved, "Other changes than the run's: remember when they were first seen; they make exactly one more " +
		"run after this one, whose window opens when they were first seen and whose quiet time counts from the last of them: " +
		"when they have waited long enough by the end of this run, the next starts at once.", func(m *machine, now time.Time, ev event, d *decisions) {
		before := m.sig
		m.take(now, ev.view, d)
		if m.sig != "" && m.sig != m.run.sig {
			if m.changedDuringRun.IsZero() {
				m.changedDuringRun = now
			}
			if m.sig != before {
				m.lastDuringRun = now
			}
		}
	}},
	{phaseRunning, evTick, "The earliest expiry passed: recompute every pool.", tick},
	{phaseRunning, evRunApplied, "The backoff ends and any hold is dropped; read state (reading state).", func(m *machine, now time.Time, ev event, d *decisions) {
		m.ended(now, ev, d)
		m.succeeded()
		m.readState(d)
	}},
	{phaseRunning, evRunNoChanges, "The backoff ends; the run's changes are held until they change (they change nothing that " +
		"can be applied); read state.", func(m *machine, now time.Time, ev event, d *decisions) {
		m.ended(now, ev, d)
		m.succeeded()
		if m.run.sig != "" {
			m.hold(now, heldNoChanges)
		}
		m.readState(d)
	}},
	{phaseRunning, evRunRefused, "The plan changes more than pools: log the addresses that blocked it; the backoff ends; " +
		"hold the changes until they change or the configuration is edited; read state.",
		func(m *machine, now time.Time, ev event, d *decisions) {
			m.ended(now, ev, d)
			m.succeeded()
			m.hold(now, heldRefused)
			d.note(noteRefused, slog.LevelWarn, "run refused: the plan changes more than pools; fix or apply it by hand",
				"blocked", strings.Join(ev.outcome.blocked, ","))
			m.readState(d)
		}},
	{phaseRunning, evRunDelivered, "`-command` succeeded: the backoff ends; hold the changes until state shows them, they " +
		"change, or `-command-repeat` passes; read state.", func(m *machine, now time.Time, ev event, d *decisions) {
		m.ended(now, ev, d)
		m.succeeded()
		m.hold(now, heldDelivered)
		m.readState(d)
	}},
	{phaseRunning, evRunWaiting, "Every resource the changes need also needs a pool whose read fails (or that the guard " +
		"refused): hold the changes until they change; a retry keeps its backoff and waits for its next step; read state.",
		func(m *machine, now time.Time, ev event, d *decisions) {
			m.ended(now, ev, d)
			m.hold(now, heldUnreadable)
			if m.retrying {
				m.backoff(now, d, "retry waiting: every resource it needs uses a pool whose read fails", ev.outcome)
			}
			m.readState(d)
		}},
	{phaseRunning, evRunFailed, "Retry with backoff (`-retry-initial`, doubling to `-retry-max`), naming the addresses the " +
		"CLI's errors are about; when the plan could not leave an unreadable pool out (`-command`, `-allow`), hold the changes " +
		"instead: one attempt per change set. Read state.", func(m *machine, now time.Time, ev event, d *decisions) {
		m.ended(now, ev, d)
		if len(m.run.unreadable)+len(m.run.refused) > 0 && !ev.outcome.targeted {
			m.hold(now, heldUnreadable)
			m.retrying = false
		} else {
			m.backoff(now, d, "run failed: retrying with backoff", ev.outcome)
		}
		m.readState(d)
	}},
	{phaseRunning, evRunStopped, "Read state.", func(m *machine, now time.Time, ev event, d *decisions) {
		m.ended(now, ev, d)
		m.readState(d)
	}},
	{phaseRunning, evStop, "The command got SIGINT with the companion's: wait for it, up to `-stop-timeout` (stopping).",
		func(m *machine, _ time.Time, _ event, d *decisions) {
			m.phase = phaseStopping
			d.note(noteStopping, slog.LevelInfo, "stopping: waiting for the running command, which got SIGINT", "bound", m.opts.StopTimeout.String())
			d.add(doAwaitRun)
		}},

	{phaseStale, evChanged, "Recompute the pools the informers marked (for `/healthz`).", recompute},
	{phaseStale, evObserved, "Nothing starts: the pools are compared with a state that may be old.", func(m *machine, now time.Time, ev event, d *decisions) {
		m.take(now, ev.view, d)
	}},
	{phaseStale, evTick, "The state backoff is over: read state (reading state). The earliest expiry passed: recompute every pool.", tick},
	{phaseStale, evStop, "Exit.", exit},

	{phaseStopping, evRunApplied, "Exit.", stopped},
	{phaseStopping, evRunNoChanges, "Exit.", stopped},
	{phaseStopping, evRunRefused, "Exit.", stopped},
	{phaseStopping, evRunDelivered, "Exit.", stopped},
	{phaseStopping, evRunWaiting, "Exit.", stopped},
	{phaseStopping, evRunFailed, "Exit.", stopped},
	{phaseStopping, evRunStopped, "Exit.", stopped},
}

// ruleOf indexes rules by phase and event.
var ruleOf = func() map[phase]map[eventKind]*rule {
	out := map[phase]map[eventKind]*rule{}
	for i := range rules {
		r := &rules[i]
		if out[r.phase] == nil {
			out[r.phase] = map[eventKind]*rule{}
		}
		out[r.phase][r.event] = r
	}
	return out
}()

func nothing(*machine, time.Time, event, *decisions)      {}
func exit(_ *machine, _ time.Time, _ event, d *decisions) { d.exit(nil) }
func recompute(_ *machine, _ time.Time, _ event, d *decisions) {
	d.recompute(false)
}

func settleOn(m *machine, now time.Time, ev event, d *decisions) {
	m.take(now, ev.view, d)
	m.rest(now, d)
}

func stopped(m *machine, now time.Time, ev event, d *decisions) {
	m.ended(now, ev, d)
	d.exit(nil)
}

// step answers one event at now. An event no rule of the phase takes
// (none the loop gives) changes nothing. The runner's report of a run is
// decided first, against the run the machine started, and taken as the
// event of its result.
func (m *machine) step(now time.Time, ev event) decisions {
	if ev.kind == evRunEnded {
		ev = runEnded(m.decided(ev.facts))
	}
	var d decisions
	if r := ruleOf[m.phase][ev.kind]; r != nil {
		r.act(m, now, ev, &d)
	}
	return d
}

// next is when the machine needs the time again; zero when it does not.
func (m *machine) next() time.Time {
	var at time.Time
	if !m.expiry.IsZero() && m.phase != phaseStarting && m.phase != phaseReading && m.phase != phaseStopping {
		// A millisecond more, so that the pools evaluated then are past it.
		at = m.expiry.Add(time.Millisecond)
	}
	switch m.phase {
	case phaseStarting, phaseStale:
		at = earliest(at, m.stateRetryAt)
	case phaseSettling:
		at = earliest(at, m.fireAt())
	case phaseBackingOff:
		at = earliest(at, m.retryAt)
	case phaseHeld:
		if m.held.cause == heldDelivered && m.opts.CommandRepeat > 0 {
			at = earliest(at, m.held.at.Add(m.opts.CommandRepeat))
		}
	}
	if m.phase == phaseIdle || m.phase == phaseHeld {
		at = earliest(at, m.fullAt)
	}
	switch m.phase {
	case phaseIdle, phaseSettling, phaseBackingOff, phaseHeld:
		at = earliest(at, m.stateReadAt)
	}
	return at
}

// tick is the time passing in phase: what is due is done, the earliest
// expiry first (its recompute settles again), then a read of state that
// is due, then a retry, then the window.
func tick(m *machine, now time.Time, _ event, d *decisions) {
	if !m.expiry.IsZero() && !now.Before(m.expiry.Add(time.Millisecond)) {
		m.expiry = time.Time{}
		d.recompute(true)
		return
	}
	switch m.phase {
	case phaseRunning:
		return
	case phaseStale:
		if !now.Before(m.stateRetryAt) {
			m.readState(d)
		}
		return
	}
	if !m.stateReadAt.IsZero() && !now.Before(m.stateReadAt) {
		m.readState(d)
		return
	}
	if (m.phase == phaseIdle || m.phase == phaseHeld) && m.fullDue(now) {
		// What the pools cannot show (a resource left behind its pool in
		// state, a change made outside Terraform): a plan of everything,
		// the pools the guard refuses left out.
		refused := m.opts.Guard.refusals(m.view.changes)
		d.note(noteFullPlan, slog.LevelInfo, "planning the whole configuration: -full-plan-interval passed")
		m.start(now, d, runRequest{changes: without(m.view.changes, refused), unreadable: m.view.unreadable, refused: refused,
			sig: m.sig, full: true})
		return
	}
	if m.phase == phaseBackingOff && !now.Before(m.retryAt) {
		// A failed run is retried even when state shows no difference: the
		// apply may have written the pools into state and failed after.
		d.note(noteRetry, slog.LevelInfo, "retrying the failed run", "data_sources", strings.Join(m.run.addresses(), ","))
		m.start(now, d, runRequest{changes: m.run.changes, unreadable: m.view.unreadable, retry: true, full: m.run.full})
		return
	}
	m.rest(now, d)
}

func (m *machine) readState(d *decisions) {
	m.phase = phaseReading
	d.add(doReadState)
}

// stateReadOK takes a successful read of state: the pools are recomputed
// against it.
func (m *machine) stateReadOK(now time.Time, d *decisions) {
	m.stale, m.stateRetryAt = false, time.Time{}
	m.stateRetries.Forget(retryItem)
	if m.opts.StateInterval > 0 {
		m.stateReadAt = now.Add(m.opts.StateInterval)
	}
	if m.fullAt.IsZero() && m.opts.FullPlanInterval > 0 {
		m.fullAt = now.Add(m.opts.FullPlanInterval)
	}
	m.phase = phaseReading
	d.recompute(false)
}

// take takes the pools as they are now.
func (m *machine) take(now time.Time, v view, d *decisions) {
	m.noteUnreadable(d, v.unreadable)
	sig := v.signature()
	if sig != m.sig {
		m.held.noted = false
	}
	m.view, m.sig = v, sig
	if m.fullPending && len(v.unreadable) == 0 {
		// What was left out can be planned again: a plan of everything,
		// now.
		m.fullAt, m.fullPending = now, false
	}
	m.expiry = time.Time{}
	if v.expiry.After(now) {
		m.expiry = v.expiry
	}
}

// rest decides what the pools call for while no run is in flight, and the
// phase the machine rests in.
func (m *machine) rest(now time.Time, d *decisions) {
	if m.stale {
		m.phase = phaseStale
		return
	}
	during, lastDuring := m.changedDuringRun, m.lastDuringRun
	m.changedDuringRun, m.lastDuringRun = time.Time{}, time.Time{}
	open := m.windowOpen
	m.windowOpen = false
	switch {
	case m.sig == "":
		if open {
			d.note(noteMatch, slog.LevelInfo, "pools match state again: no run")
		}
		m.phase = phaseIdle
		if m.retrying {
			m.phase = phaseBackingOff
		}
		return
	case m.isHeld(now):
		m.phase = phaseHeld
		if !m.held.noted {
			m.held.noted = true
			d.note(noteHeld, slog.LevelInfo, "no run for these changes until they change", "reason", m.held.cause.String(),
				"data_sources", strings.Join(slices.Sorted(maps.Keys(m.view.changes)), ","))
		}
		return
	}
	if !open {
		// Changes seen during a run open the window when they were first
		// seen, and their quiet time counts from the last of them: a run
		// starts at once when they have waited long enough already.
		start, last := now, now
		if !during.IsZero() {
			start, last = during, during
			if lastDuring.After(during) {
				last = lastDuring
			}
		}
		m.phase, m.windowStart, m.lastChange, m.windowSig = phaseSettling, start, last, m.sig
		d.note(noteWindowOpened, slog.LevelDebug, "settle window opened")
		m.noteChanges(d)
	} else if m.sig != m.windowSig {
		m.lastChange, m.windowSig = now, m.sig
		m.noteChanges(d)
	}
	m.phase, m.windowOpen = phaseSettling, true
	if now.Before(m.fireAt()) {
		return
	}
	m.windowOpen = false
	changes, refused := m.view.changes, m.opts.Guard.refusals(m.view.changes)
	if len(refused) > 0 {
		// The refused pools are left out of the run, as unreadable ones
		// are, and the others kept current; a refusal is noted once for
		// its pools' changes, not again at each change of another pool.
		if key := refusedSignature(m.view.changes, refused); key != m.refusedSig {
			m.refusedSig = key
			reasons := make([]string, 0, len(refused))
			for _, address := range slices.Sorted(maps.Keys(refused)) {
				reasons = append(reasons, refused[address].text)
			}
			d.note(noteShrinkRefused, slog.LevelWarn, "run refused by the shrink guard", "reason", strings.Join(reasons, "; "),
				"data_sources", strings.Join(slices.Sorted(maps.Keys(refused)), ","))
		}
		changes = without(changes, refused)
		if len(changes) == 0 {
			m.hold(now, heldShrink)
			m.held.noted = true
			m.phase = phaseHeld
			return
		}
	} else {
		m.refusedSig = ""
	}
	m.start(now, d, runRequest{changes: changes, unreadable: m.view.unreadable, refused: refused, sig: m.sig, retry: m.retrying,
		settled: now.Sub(m.windowStart)})
}

// without is changes less the pools of refused.
func without(changes map[string][]poolChange, refused map[string]cause) map[string][]poolChange {
	out := maps.Clone(changes)
	for address := range refused {
		delete(out, address)
	}
	return out
}

// refusedSignature identifies the refused pools' changes.
func refusedSignature(changes map[string][]poolChange, refused map[string]cause) string {
	return view{changes: maps.Collect(func(yield func(string, []poolChange) bool) {
		for address := range refused {
			if !yield(address, changes[address]) {
				return
			}
		}
	})}.signature()
}

// fireAt is when the open window fires: Quiet after the last change, at
// most MaxWait after the first, never before a retry is due.
func (m *machine) fireAt() time.Time {
	at := m.lastChange.Add(m.opts.Quiet)
	if limit := m.windowStart.Add(m.opts.MaxWait); limit.Before(at) {
		at = limit
	}
	if m.retrying && m.retryAt.After(at) {
		at = m.retryAt
	}
	return at
}

func (m *machine) start(now time.Time, d *decisions, r runRequest) {
	r.full = r.full || m.fullDue(now)
	m.phase, m.run, m.runStarted, m.changedDuringRun, m.lastDuringRun = phaseRunning, r, now, time.Time{}, time.Time{}
	d.log(note{kind: noteRunStarted, level: slog.LevelInfo, msg: "run started", settled: r.settled,
		attrs: []any{"data_sources", strings.Join(r.addresses(), ","), "retry", r.retry, "full", r.full, "settled", r.settled.Round(time.Millisecond).String()}})
	d.start(r)
}

// ended notes the end of the run in flight.
func (m *machine) ended(now time.Time, ev event, d *decisions) {
	o := ev.outcome
	if m.run.full {
		m.fullAt, m.fullPending = time.Time{}, false
		if m.opts.FullPlanInterval > 0 {
			m.fullAt = now.Add(m.opts.FullPlanInterval)
		}
	}
	if o.partial && !m.run.full {
		m.fullPending = true
	}
	// The run's duration is its own: without the wait for a slot of the
	// replica (-max-concurrent-runs), which is said apart.
	attrs := []any{"result", o.result.String(), "duration", (now.Sub(m.runStarted) - o.queued).Round(time.Millisecond).String(), "error", errText(o.err)}
	if o.queued > 0 {
		attrs = append(attrs, "queued", o.queued.Round(time.Millisecond).String())
	}
	if o.reason != "" {
		attrs = append(attrs, "reason", o.reason)
	}
	if len(o.failing) > 0 {
		attrs = append(attrs, "failing", strings.Join(o.failing, ","))
	}
	d.log(note{kind: noteRunEnded, level: slog.LevelInfo, msg: "run ended", attrs: attrs, result: o.result})
}

// backoff schedules the retry of the failed run at the backoff's next step.
func (m *machine) backoff(now time.Time, d *decisions, msg string, o runOutcome) {
	wait := m.retries.When(retryItem)
	m.retrying, m.retryAt = true, now.Add(wait)
	d.note(noteRetry, slog.LevelWarn, msg, "retry_in", wait.String(), "failing", strings.Join(o.failing, ","), "error", errText(o.err))
}

// isHeld says whether the current changes are held; a delivery to the
// command is held until CommandRepeat passes.
func (m *machine) isHeld(now time.Time) bool {
	if m.held.sig == "" || m.held.sig != m.sig {
		return false
	}
	if m.held.cause == heldDelivered && m.opts.CommandRepeat > 0 && !now.Before(m.held.at.Add(m.opts.CommandRepeat)) {
		return false
	}
	return true
}

func (m *machine) hold(now time.Time, c holdCause) {
	sig := m.run.sig
	if c == heldShrink {
		sig = m.sig
	}
	m.held = held{sig: sig, cause: c, at: now}
}

// fullDue says a run now plans the whole configuration.
func (m *machine) fullDue(now time.Time) bool { return !m.fullAt.IsZero() && !now.Before(m.fullAt) }

// succeeded ends the backoff: a run got through.
func (m *machine) succeeded() {
	m.retrying, m.retryAt = false, time.Time{}
	m.retries.Forget(retryItem)
	m.held = held{}
}

// noteChanges notes each pool that differs from state, once for the
// members it adds and removes: a pool noted at the last note with the same
// members added and removed is not noted again when another pool changes,
// nor when only its endpoints' other attributes move (a pod's two slices,
// IPv4 and IPv6, written one after the other). The pool's name is given
// for a Service of a k8s_services (a k8s_ready_endpoints has one pool).
func (m *machine) noteChanges(d *decisions) {
	noted := map[string]string{}
	for _, address := range slices.Sorted(maps.Keys(m.view.changes)) {
		for _, c := range m.view.changes[address] {
			key := address + "\x00" + c.Name
			added, removed := strings.Join(c.Added, ","), strings.Join(c.Removed, ",")
			noted[key] = added + "\x00" + removed
			if before, ok := m.notedChanges[key]; ok && before == noted[key] {
				continue
			}
			attrs := []any{"data_source", address}
			if c.Name != "" {
				attrs = append(attrs, "pool", c.Name)
			}
			attrs = append(attrs, "added", added, "removed", removed, "members_unchanged", c.membersOnly())
			d.note(noteDiffers, slog.LevelInfo, "pool differs from state", attrs...)
		}
	}
	m.notedChanges = noted
}

// noteUnreadable notes the pools whose read fails, once per reason, and
// those that read again. The pools of a cluster that does not answer are
// one note (the cluster's own line says why), not one per pool: an API
// server's restart is not fifty warnings.
func (m *machine) noteUnreadable(d *decisions, unreadable map[string]cause) {
	byCluster := map[string][]string{}
	for _, address := range slices.Sorted(maps.Keys(unreadable)) {
		c := unreadable[address]
		if m.reported[address] == c {
			continue
		}
		m.reported[address] = c
		if c.kind == causeClusterDown {
			byCluster[c.text] = append(byCluster[c.text], address)
			continue
		}
		d.note(noteUnreadable, slog.LevelWarn, "pool not recomputed: its dependents are left out of runs until it reads again",
			"data_source", address, "reason", c.text)
	}
	for _, reason := range slices.Sorted(maps.Keys(byCluster)) {
		d.note(noteUnreadable, slog.LevelWarn, "pools not recomputed: their cluster does not answer; their dependents are left out of runs until it does",
			"data_sources", strings.Join(byCluster[reason], ","), "pools", len(byCluster[reason]), "reason", reason)
	}
	var back []string
	for _, address := range slices.Sorted(maps.Keys(m.reported)) {
		if _, ok := unreadable[address]; ok {
			continue
		}
		if m.reported[address].kind == causeClusterDown {
			back = append(back, address)
		} else {
			d.note(noteReadable, slog.LevelInfo, "pool readable again", "data_source", address)
		}
		delete(m.reported, address)
	}
	if len(back) > 0 {
		d.note(noteReadable, slog.LevelInfo, "pools readable again: their cluster answers", "data_sources", strings.Join(back, ","), "pools", len(back))
	}
}
