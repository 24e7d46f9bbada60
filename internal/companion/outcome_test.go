package companion

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Each result a run can end with is the machine's event of its own kind,
// decided in one place: no result counts as a failure but a failure, and
// each has the runs metric's label of its own.
func TestEveryRunResultIsAnEventOfItsOwnKind(t *testing.T) {
	for _, r := range runResults {
		o := runOutcome{result: r}
		if r == resultFailed {
			o.err = errors.New("exit 1")
		}
		ev := runEnded(o)
		if ev.kind == evRunFailed && r != resultFailed {
			t.Errorf("result %v is taken as a failed run", r)
		}
		if r == resultFailed && ev.kind != evRunFailed {
			t.Errorf("a failed run is taken as %v", ev.kind)
		}
	}
}

// The runs metric's labels are made from the results, one each, and the
// shrink guard's refusal (no run): the guide's metrics table names each.
func TestTheRunsLabelsAreMadeFromTheResults(t *testing.T) {
	seen := map[string]bool{}
	for _, label := range runLabels() {
		if label == "" || seen[label] {
			t.Errorf("label %q: empty or twice in %v", label, runLabels())
		}
		seen[label] = true
	}
	if len(seen) != len(runResults)+1 || !seen[labelShrinkRefused] {
		t.Errorf("labels %v: want one per result and %s", runLabels(), labelShrinkRefused)
	}
	if got := runEnded(runOutcome{}); got.kind != evRunFailed || got.outcome.err == nil {
		t.Errorf("an outcome without a result: %v, error %v; want a failed run that says why", got.kind, got.outcome.err)
	}
}

// How a run goes on and ends is decided by the machine (decideRun), from
// the facts its runner reports: a row for each of the guide's outcomes of
// a run ("What it does" 5, 7 and 8, "What a run plans", "Why"), and each
// rule of runRules reached (TestEveryRuleOfARunIsReachedByItsTable).

// requests of the rows: web changed; with api unreadable, or refused by
// the shrink guard; a retry (or a plan of everything) with nothing changed.
func webUnreadableAPI() runRequest {
	r := webChanged()
	r.unreadable = map[string]cause{"data.k8s_ready_endpoints.api": {kind: causeReadFails, text: "gone"}}
	return r
}

func webRefusedAPI() runRequest {
	r := webChanged()
	r.refused = map[string]cause{"data.k8s_ready_endpoints.api": {kind: causeShrink, text: "would be emptied"}}
	return r
}

func aRetry() runRequest { return runRequest{retry: true} }

// scopes of the rows: the configuration says what uses web (and, with
// both, what uses web and api too); it cannot (-allow, .tf.json).
var (
	webScope = runScope{targetable: true, users: []string{"terraform_data.web"},
		targets: []string{"data.k8s_ready_endpoints.web", "terraform_data.web"}}
	webScopeLeavingBoth = runScope{targetable: true, users: []string{"terraform_data.web"},
		targets: []string{"data.k8s_ready_endpoints.web", "terraform_data.web"}, leavesOutChanged: true}
	noUserLeft = runScope{targetable: true, targets: []string{"data.k8s_ready_endpoints.web"}}
	notScoped  = runScope{}
)

// a plan's facts.
var (
	poolsOnly     = planFacts{changes: true, changed: []string{"terraform_data.web"}}
	moreThanPools = planFacts{changes: true, changed: []string{"terraform_data.web", "terraform_data.unrelated"},
		notPools: []string{"terraform_data.unrelated"}}
	noResource          = planFacts{}
	noResourceButDrift  = planFacts{driftNotPools: []string{"terraform_data.unrelated"}}
	outputsOnly         = planFacts{changes: true}
	errPlan             = errors.New("terraform plan exited with 1")
	errPlanStopped      = fmt.Errorf("terraform plan: %w", errStopped)
	failingData         = []string{"data.k8s_ready_endpoints.x"}
	theBlockingResource = []string{"terraform_data.unrelated"}
)

// runRow is a row of the table: a request and facts, and what the machine
// must decide: a next step, or an outcome.
type runRow struct {
	name  string
	req   runRequest
	facts runFacts
	why   runCase
	// next is the step the run goes on with; stepNone: it ends with
	// result.
	next   runStep
	result runResult
	// reason is a part of the reason its log line must give; "": none.
	reason            string
	targeted, partial bool
	blocked, failing  []string
}

func runRows() []runRow {
	return []runRow{
		{name: "a run stopped before it started (SIGTERM, a hand-over) ends stopped",
			req: webChanged(), facts: runFacts{err: errStopped}, why: caseStopped, result: resultStopped},
		{name: "a plan stopped by SIGTERM ends stopped, saying what it left out uses a changed pool",
			req: webUnreadableAPI(), facts: runFacts{scope: webScopeLeavingBoth, did: stepPlan, err: errPlanStopped},
			why: caseStopped, result: resultStopped, targeted: true, partial: true},
		{name: "a plan that failed ends failed, naming the addresses of its errors",
			req: webChanged(), facts: runFacts{scope: webScope, did: stepPlan, err: errPlan, failing: failingData},
			why: caseFailed, result: resultFailed, failing: failingData},
		{name: "an apply that failed ends failed, and may have written the changed pool without what it left out",
			req: webUnreadableAPI(), facts: runFacts{scope: webScopeLeavingBoth, did: stepApply, plan: poolsOnly, err: errPlan},
			why: caseFailed, result: resultFailed, targeted: true, partial: true},
		{name: "a run whose saved plan's file cannot be made fails, having planned nothing",
			req: webUnreadableAPI(), facts: runFacts{scope: webScopeLeavingBoth, err: errors.New("no space left on device")},
			why: caseFailed, result: resultFailed},
		{name: "-command is not run while the shrink guard refuses a pool: it runs the whole configuration",
			req: webRefusedAPI(), facts: runFacts{command: true}, why: caseCommandWithRefusedPool, result: resultWaiting,
			reason: "-command runs the whole configuration"},
		{name: "-command is run for the changes, an unreadable pool named to it",
			req: webUnreadableAPI(), facts: runFacts{command: true}, why: caseRunCommand, next: stepCommand},
		{name: "a -command that succeeded is delivered",
			req: webChanged(), facts: runFacts{command: true, did: stepCommand}, why: caseDelivered, result: resultDelivered},
		{name: "a -command that failed ends failed, not having left the unreadable pool out",
			req: webUnreadableAPI(), facts: runFacts{command: true, did: stepCommand, err: errPlan}, why: caseFailed, result: resultFailed},
		{name: "a pool the shrink guard refused makes a run wait when the configuration cannot say what uses it",
			req: webRefusedAPI(), facts: runFacts{scope: notScoped}, why: caseRefusedPoolNotScoped, result: resultWaiting,
			reason: "the configuration does not say which resources leave out the pools the shrink guard refused"},
		{name: "an unreadable pool does not, when the configuration cannot say what uses it: the run plans everything",
			req: webUnreadableAPI(), facts: runFacts{scope: notScoped}, why: casePlan, next: stepPlan},
		{name: "a run waits when every resource that uses the changed pools also uses an unreadable pool",
			req: webUnreadableAPI(), facts: runFacts{scope: noUserLeft}, why: caseNoUserLeft, result: resultWaiting,
			reason: "every resource that uses the changed pools also uses a pool whose read fails"},
		{name: "a run waits when every resource that uses the changed pools also uses a pool the shrink guard refused",
			req: webRefusedAPI(), facts: runFacts{scope: noUserLeft}, why: caseNoUserLeft, result: resultWaiting,
			reason: "or that the shrink guard refused"},
		{name: "a changed pool that no resource uses, none left out, is planned: its data source is brought current",
			req: webChanged(), facts: runFacts{scope: noUserLeft}, why: casePlan, next: stepPlan},
		{name: "a run plans what the changed pools need, leaving out what uses an unreadable pool",
			req: webUnreadableAPI(), facts: runFacts{scope: webScope}, why: casePlan, next: stepPlan},
		{name: "a retry (or a plan of everything) whose plan has nothing to do ends no_changes",
			req: aRetry(), facts: runFacts{did: stepPlan, plan: noResource}, why: caseNothingToDo, result: resultNoChanges},
		{name: "a plan that changes more than pools is refused, naming what blocked it, having written nothing",
			req: webUnreadableAPI(), facts: runFacts{scope: webScopeLeavingBoth, did: stepPlan, plan: moreThanPools},
			why: caseMoreThanPools, result: resultRefused, blocked: theBlockingResource, targeted: true},
		{name: "a plan that changes no resource but records drift of resources that are not pools is not applied: no_changes, naming them",
			req: webChanged(), facts: runFacts{scope: webScope, did: stepPlan, plan: noResourceButDrift},
			why: caseDriftOutsidePools, result: resultNoChanges, reason: "changes made outside Terraform to terraform_data.unrelated"},
		{name: "a plan that changes pools only is applied",
			req: webChanged(), facts: runFacts{scope: webScope, did: stepPlan, plan: poolsOnly}, why: caseApply, next: stepApply},
		{name: "a plan that changes no resource is applied, to bring the state's data sources current",
			req: webChanged(), facts: runFacts{scope: webScope, did: stepPlan, plan: noResource}, why: caseApply, next: stepApply},
		{name: "a plan whose outputs alone change is applied",
			req: webChanged(), facts: runFacts{scope: webScope, did: stepPlan, plan: outputsOnly}, why: caseApply, next: stepApply},
		{name: "an applied plan that changed no resource brought the state current: state_updated",
			req: webChanged(), facts: runFacts{scope: webScope, did: stepApply, plan: noResource}, why: caseStateUpdated,
			result: resultStateUpdated},
		{name: "an applied plan of pool changes ends applied",
			req: webChanged(), facts: runFacts{scope: webScope, did: stepApply, plan: poolsOnly}, why: caseApplied, result: resultApplied},
		{name: "an applied plan that left out what also uses a changed pool says so: a plan of everything follows",
			req: webUnreadableAPI(), facts: runFacts{scope: webScopeLeavingBoth, did: stepApply, plan: poolsOnly}, why: caseApplied,
			result: resultApplied, targeted: true, partial: true},
	}
}

// reachedRunRules are the rules of runRules the table's rows took.
var reachedRunRules = map[runCase]bool{}

func TestTheMachineDecidesHowARunGoesOnAndEnds(t *testing.T) {
	for _, tc := range runRows() {
		t.Run(tc.name, func(t *testing.T) {
			v := decideRun(tc.req, tc.facts)
			reachedRunRules[v.why] = true
			if v.why != tc.why || v.next != tc.next {
				t.Fatalf("rule %d, next step %s; want rule %d, next step %s", v.why, v.next, tc.why, tc.next)
			}
			if tc.next != stepNone {
				return
			}
			o := v.outcome
			if o.result != tc.result || o.why != tc.why {
				t.Errorf("result %s (rule %d), want %s (rule %d)", o.result, o.why, tc.result, tc.why)
			}
			if (tc.reason == "") != (o.reason == "") || !strings.Contains(o.reason, tc.reason) {
				t.Errorf("reason %q, want one with %q", o.reason, tc.reason)
			}
			if o.targeted != tc.targeted || o.partial != tc.partial {
				t.Errorf("targeted %v, partial %v; want %v, %v", o.targeted, o.partial, tc.targeted, tc.partial)
			}
			if !slices.Equal(o.blocked, tc.blocked) || !slices.Equal(o.failing, tc.failing) {
				t.Errorf("blocked %q, failing %q; want %q, %q", o.blocked, o.failing, tc.blocked, tc.failing)
			}
			if !errors.Is(o.err, tc.facts.err) {
				t.Errorf("error %v, want the run's %v", o.err, tc.facts.err)
			}
		})
	}
}

func TestEveryRuleOfARunIsReachedByItsTable(t *testing.T) {
	if len(reachedRunRules) == 0 {
		TestTheMachineDecidesHowARunGoesOnAndEnds(t)
	}
	for _, r := range runRules {
		if !reachedRunRules[r.why] {
			t.Errorf("no row of the table takes rule %d (%s, next %s)", r.why, r.result, r.next)
		}
	}
}

// The machine decides the runner's report against the run it started, and
// takes it as the event of its result: a plan that changes more than pools
// is held and named, the log line and the runs metric say refused.
func TestTheMachineTakesARunnersFactsAsTheEventOfTheResultItDecides(t *testing.T) {
	m := startedMachine(t)
	m.observe(t0, differs(change("a", "10.0.0.1:80")))
	if d := m.step(t0.Add(quiet), event{kind: evTick}); d.started() == nil {
		t.Fatal("no run started")
	}
	d := m.step(t0.Add(second), ranWith(runFacts{scope: webScope, did: stepPlan, plan: moreThanPools}))
	var ended *note
	for _, n := range d.notes() {
		if n.kind == noteRunEnded {
			ended = &n
		}
	}
	if ended == nil || ended.result != resultRefused {
		t.Fatalf("notes %q: want the run's end, refused", noteMessages(d))
	}
	if !slices.Contains(noteMessages(d), "run refused: the plan changes more than pools; fix or apply it by hand") ||
		m.held.cause != heldRefused || m.phase != phaseReading {
		t.Errorf("notes %q, hold %v, phase %s: want the refusal noted, held, and state read", noteMessages(d), m.held.cause, m.phase)
	}
	// A report of a run that stopped before its next step (none a runner
	// gives) is a failed run that says so, retried.
	m = startedMachine(t)
	m.observe(t0, differs(change("a", "10.0.0.1:80")))
	m.step(t0.Add(quiet), event{kind: evTick})
	d = m.step(t0.Add(second), ranWith(runFacts{scope: webScope, did: stepPlan, plan: poolsOnly}))
	if !slices.Contains(noteMessages(d), "run failed: retrying with backoff") || !m.retrying {
		t.Errorf("notes %q, retrying %v: want a failed run, retried", noteMessages(d), m.retrying)
	}
}
