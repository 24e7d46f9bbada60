package companion

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// The companion's loop (loop.go), not only its machine, on a fake clock:
// a fake workspace (pools in the cluster and in state, a Terraform that
// plans and applies them) under the real loop and runner. The tests give
// a sequence of events (a pool changes, a pool's read fails, the backend
// goes down, time passes, a run ends) and read the Terraform invocations
// and state pulls that come out.

// fakeWorkspace is a working directory, its state and its cluster: the
// world of a loop under test. Pools are sets of members, by data source
// address; the configuration's resources are those of its filter.
type fakeWorkspace struct {
	clock *testingclock.FakeClock
	// runner is the real one, over the workspace's Terraform.
	runner *runner

	mu sync.Mutex
	// cluster and state are the pools' members; read is the state as the
	// companion last read it.
	cluster, state, read map[string][]string
	// unreadable are the pools whose read fails; hidden those whose
	// changes the pools recomputed do not show (what targeting cannot
	// see: a resource left behind its pool in state).
	unreadable, hidden map[string]bool
	// backendDown fails state pulls, plans and applies.
	backendDown bool
	// calls are the Terraform invocations, in order.
	calls []string
	// inFlight counts the runs under way; requests are every run's.
	inFlight, mostInFlight int
	requests               []runRequest
	// pullFailed says the last state pull failed.
	pullFailed bool
	// status says how the run in flight goes on: true once it waits in
	// Terraform's plan for the test to release it, false when it ended
	// without calling Terraform.
	status chan bool
	// release lets the run in flight's plan go on, Terraform behaving as
	// it says.
	release chan tfBehaviour
	// reads is the cluster as the run in flight's plan reads it: as it was
	// when the run started.
	reads map[string][]string
	// plans are what each saved plan would write, by plan file.
	plans map[string]map[string][]string
	// behaviour is how Terraform behaves in the run released; planned
	// says the run in flight called plan (or the command).
	behaviour tfBehaviour
	planned   bool
	// violations are the invariants broken inside the world.
	violations []string
}

// tfBehaviour is how Terraform behaves in one run.
type tfBehaviour int

const (
	tfWorks tfBehaviour = iota
	// tfPlanFails: the plan fails (a provider error).
	tfPlanFails
	// tfApplyFailsAfterWriting: the apply writes the pools into state, then
	// fails (a resource after them fails, and is tainted).
	tfApplyFailsAfterWriting
)

var tfBehaviourNames = []string{"works", "plan fails", "apply fails after writing the pools"}

func (b tfBehaviour) String() string { return tfBehaviourNames[b] }

func newFakeWorkspace(filter poolChangeFilter, clock *testingclock.FakeClock, pools ...string) *fakeWorkspace {
	w := &fakeWorkspace{clock: clock, cluster: map[string][]string{}, state: map[string][]string{}, read: map[string][]string{},
		unreadable: map[string]bool{}, hidden: map[string]bool{}, status: make(chan bool), release: make(chan tfBehaviour), plans: map[string]map[string][]string{}}
	for _, address := range pools {
		w.cluster[address], w.state[address] = []string{"10.0.0.1:80"}, []string{"10.0.0.1:80"}
	}
	w.runner = &runner{tf: (*fakeWorkspaceTerraform)(w), filter: filter, refresh: true, targetChanged: true, log: discard()}
	return w
}

func (w *fakeWorkspace) called(call string) { w.calls = append(w.calls, call) }

func (w *fakeWorkspace) readState(context.Context) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.called("state pull")
	w.pullFailed = w.backendDown
	if w.backendDown {
		return false, errors.New("backend down")
	}
	w.read = maps.Clone(w.state)
	return false, nil
}

func (w *fakeWorkspace) startProbes(context.Context) {}

func (w *fakeWorkspace) view(context.Context, bool) view {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.against(w.read)
}

// against compares the cluster's pools with those of state.
func (w *fakeWorkspace) against(state map[string][]string) view {
	v := view{changes: map[string][]poolChange{}, unreadable: map[string]cause{}}
	for address, members := range w.cluster {
		switch {
		case w.unreadable[address]:
			v.unreadable[address] = cause{kind: causeReadFails, text: "service gone"}
		case !slices.Equal(members, state[address]) && !w.hidden[address]:
			before := state[address]
			v.changes[address] = []poolChange{{Before: before, After: members, Added: minus(members, before),
				Removed: minus(before, members), state: digest(before), cluster: digest(members)}}
		}
	}
	return v
}

func digest(members []string) [sha256.Size]byte {
	return sha256.Sum256([]byte(strings.Join(members, ",")))
}

// run is a run of the companion: the real runner on the workspace's
// Terraform, whose plan waits for the test to release it.
func (w *fakeWorkspace) run(ctx context.Context, r runRequest) runFacts {
	w.mu.Lock()
	w.inFlight++
	w.mostInFlight = max(w.mostInFlight, w.inFlight)
	w.requests = append(w.requests, r)
	w.reads = maps.Clone(w.cluster)
	switch {
	case len(r.changes) == 0 && !r.retry && !r.full:
		w.violations = append(w.violations, "a run with no change that is neither a retry nor a full plan")
	case w.pullFailed:
		w.violations = append(w.violations, "a run on a state that could not be read")
	}
	for address := range r.changes {
		if !r.retry && slices.Equal(w.cluster[address], w.read[address]) {
			w.violations = append(w.violations, "a run for "+address+", which the state read shows")
		}
	}
	w.mu.Unlock()
	o := w.runner.run(ctx, r)
	w.mu.Lock()
	w.inFlight--
	planned := w.planned
	w.planned = false
	w.mu.Unlock()
	if !planned {
		w.status <- false
	}
	return o
}

func (w *fakeWorkspace) logNote(context.Context, note) {}

// fakeWorkspaceTerraform is the workspace's Terraform: a plan reads the
// pools of the resources it targets (every pool without -target), and
// fails when one of them cannot be read; an apply writes them into state.
type fakeWorkspaceTerraform fakeWorkspace

func (f *fakeWorkspaceTerraform) statePull(context.Context, func(io.Reader) error) error {
	return errors.New("the loop reads state through the world")
}

func (f *fakeWorkspaceTerraform) plan(_ context.Context, planFile string, o planOptions) (bool, planSummary, error) {
	w := f.released()
	defer w.mu.Unlock()
	w.called(strings.TrimSpace("plan " + strings.Join(o.targets, " ")))
	if w.backendDown || w.behaviour == tfPlanFails {
		return false, planSummary{}, errors.New("plan failed")
	}
	read := map[string][]string{}
	for address, members := range w.reads {
		if len(o.targets) > 0 && !w.runner.filter.targetsRead(o.targets, address) {
			continue
		}
		if w.unreadable[address] {
			return false, planSummary{}, fmt.Errorf("reading %s: service gone", address)
		}
		read[address] = members
	}
	w.plans[planFile] = read
	changes := false
	var s planSummary
	for address, members := range read {
		if !slices.Equal(members, w.state[address]) {
			changes = true
			for node := range w.runner.filter.graph.dependents([]string{withoutKeys(address)}) {
				if isManagedResource(node) {
					s.changed = append(s.changed, node)
				}
			}
		}
	}
	slices.Sort(s.changed)
	s.changed = slices.Compact(s.changed)
	return changes, s, nil
}

func (f *fakeWorkspaceTerraform) apply(_ context.Context, planFile string) error {
	w := (*fakeWorkspace)(f)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.called("apply")
	if w.backendDown {
		return errors.New("apply failed: backend down")
	}
	maps.Copy(w.state, w.plans[planFile])
	if w.behaviour == tfApplyFailsAfterWriting {
		return errors.New("apply failed after writing the pools")
	}
	return nil
}

// released is the workspace, locked, once the test released the run.
func (f *fakeWorkspaceTerraform) released() *fakeWorkspace {
	w := (*fakeWorkspace)(f)
	w.status <- true
	b := <-w.release
	w.mu.Lock()
	w.behaviour, w.planned = b, true
	return w
}

// command is a pipeline that applies the whole configuration: it fails
// when a pool cannot be read, and writes every pool otherwise.
func (f *fakeWorkspaceTerraform) command(context.Context, string, []string) error {
	w := f.released()
	defer w.mu.Unlock()
	w.called("command")
	if w.backendDown || w.behaviour == tfPlanFails {
		return errors.New("the pipeline failed")
	}
	for address := range w.reads {
		if w.unreadable[address] {
			return fmt.Errorf("the pipeline failed: reading %s: service gone", address)
		}
	}
	maps.Copy(w.state, w.reads)
	if w.behaviour == tfApplyFailsAfterWriting {
		return errors.New("the pipeline failed after writing the pools")
	}
	return nil
}

// targetsRead says whether a plan of targets reads the data source at
// address: -target plans the targets and what they depend on.
func (f poolChangeFilter) targetsRead(targets []string, address string) bool {
	dependents := f.graph.dependents([]string{withoutKeys(address)})
	return slices.ContainsFunc(targets, func(t string) bool { return dependents[t] })
}

// loopDriver drives a loop over a fake workspace on a fake clock: each of
// its steps is one event for the loop, and returns once the loop waits
// again.
type loopDriver struct {
	t     testing.TB
	w     *fakeWorkspace
	m     *machine
	clock *testingclock.FakeClock
	kick  chan struct{}
	// waits gives when the machine next wants the time, each time the loop
	// waits; next is the last.
	waits chan time.Time
	next  time.Time
	// pastWakes counts the waits in a row for a time already past.
	pastWakes, mostPastWakes int
	// running says a run is in flight; acked that it waits in its plan.
	running, acked bool
	cancel         context.CancelFunc
	done           chan error
	exited         bool
}

func startLoop(t testing.TB, w *fakeWorkspace, opts machineOptions) *loopDriver {
	d := &loopDriver{t: t, w: w, m: newMachine(opts), clock: w.clock, kick: make(chan struct{}, 1), waits: make(chan time.Time),
		done: make(chan error, 1)}
	l := &loop{world: w, machine: d.m, clock: w.clock, kick: d.kick, runs: make(chan runFacts, 1), ranFor: func(time.Duration) {},
		waiting: func(next time.Time) { d.waits <- next }}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() { d.done <- l.run(ctx) }()
	d.wait()
	return d
}

// wait waits for the loop to wait again, or to exit.
func (d *loopDriver) wait() {
	d.t.Helper()
	select {
	case d.next = <-d.waits:
	case err := <-d.done:
		d.exited = true
		if err != nil {
			d.t.Fatalf("the loop exited: %v", err)
		}
		return
	case <-time.After(10 * time.Second):
		d.t.Fatal("the loop did not wait again within 10 s")
	}
	// The loop waits: the machine is the test's to read until the next
	// event.
	d.running = d.m.phase == phaseRunning || d.m.phase == phaseStopping
	if d.running && !d.acked {
		// The test goes on once the run waits in its plan, or, when it
		// ended without one, once the loop took its end.
		if d.acked = <-d.w.status; !d.acked {
			d.wait()
			return
		}
	}
	if d.next.IsZero() || d.next.After(d.clock.Now()) {
		d.pastWakes = 0
		return
	}
	// A time already past: a real clock fires at once. Twice in a row is
	// a spin; the test stops it after a few.
	d.pastWakes++
	d.mostPastWakes = max(d.mostPastWakes, d.pastWakes)
	if d.pastWakes < 5 {
		d.clock.SetTime(d.clock.Now())
		d.wait()
	}
}

// marked says the informers marked pools: the loop recomputes them.
func (d *loopDriver) marked() {
	d.kick <- struct{}{}
	d.wait()
}

// change sets a pool's members in the cluster.
func (d *loopDriver) change(address string, members ...string) {
	d.w.mu.Lock()
	d.w.cluster[address] = members
	d.w.mu.Unlock()
	d.marked()
}

// readable makes a pool's read succeed, or fail.
func (d *loopDriver) readable(address string, ok bool) {
	d.w.mu.Lock()
	d.w.unreadable[address] = !ok
	d.w.mu.Unlock()
	d.marked()
}

// backend takes the backend down, or brings it back: nothing the loop
// sees until it reads state or runs.
func (d *loopDriver) backend(up bool) {
	d.w.mu.Lock()
	d.w.backendDown = !up
	d.w.mu.Unlock()
}

// advance moves the clock to now+by, through each time the machine asks
// for on the way.
func (d *loopDriver) advance(by time.Duration) {
	d.t.Helper()
	to := d.clock.Now().Add(by)
	for !d.exited && !d.next.IsZero() && !d.next.After(to) && d.pastWakes == 0 {
		d.clock.SetTime(d.next)
		d.wait()
	}
	d.clock.SetTime(to)
}

// ends ends the run in flight, Terraform behaving as b.
func (d *loopDriver) ends(b tfBehaviour) {
	d.t.Helper()
	if !d.running {
		d.t.Fatalf("no run in flight to end: phase %s at %s, wants the time at %s", d.m.phase, d.clock.Now().Sub(t0), d.next.Sub(t0))
	}
	d.acked = false
	d.w.release <- b
	d.wait()
}

// stop cancels the loop and waits for it to exit.
func (d *loopDriver) stop() {
	d.t.Helper()
	d.cancel()
	for !d.exited {
		if d.running {
			d.ends(tfWorks)
			continue
		}
		d.wait()
	}
}

// takeCalls are the Terraform invocations since the last take.
func (d *loopDriver) takeCalls() []string {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	calls := d.w.calls
	d.w.calls = nil
	return calls
}

// lbConfig has pools web and api; terraform_data.lb uses both, and
// terraform_data.api api alone: a run of web's change needs api.
const lbConfig = `
data "k8s_ready_endpoints" "web" {
  service = "web"
}
data "k8s_ready_endpoints" "api" {
  service = "api"
}
resource "terraform_data" "lb" {
  input = [data.k8s_ready_endpoints.web.endpoints, data.k8s_ready_endpoints.api.endpoints]
}
resource "terraform_data" "api" {
  input = data.k8s_ready_endpoints.api.endpoints
}
`

func loopOptions() machineOptions {
	return machineOptions{Quiet: quiet, MaxWait: 2 * second, RetryInitial: 2 * second, RetryMax: 16 * second,
		Guard: shrinkGuard{MaxShrink: 0.5}}
}

// loopStep is one event for the loop, and the Terraform invocations and
// state pulls it must give.
type loopStep struct {
	does  string
	event func(d *loopDriver)
	calls []string
	// next, when set, is when the machine must next want the time, from
	// t0; -1: not at all.
	next time.Duration
	// after, when set, checks the workspace after the step.
	after func(*testing.T, *loopDriver)
}

func TestTheLoopOnAFakeClock(t *testing.T) {
	const web, api = "data.k8s_ready_endpoints.web", "data.k8s_ready_endpoints.api"
	// A run plans what the changed pools need: the pool, and what uses it.
	const planWeb, planAPI = "plan " + web + " terraform_data.lb", "plan " + api + " terraform_data.api terraform_data.lb"
	inState := func(address string, members ...string) func(*testing.T, *loopDriver) {
		return func(t *testing.T, d *loopDriver) {
			d.w.mu.Lock()
			defer d.w.mu.Unlock()
			if !slices.Equal(d.w.state[address], members) {
				t.Errorf("%s in state: %v, want %v", address, d.w.state[address], members)
			}
		}
	}
	filter := filterOf(t, lbConfig)
	at := func(d time.Duration) func(*loopDriver) {
		return func(l *loopDriver) { l.advance(t0.Add(d).Sub(l.clock.Now())) }
	}
	for _, tc := range []struct {
		name  string
		opts  func(*machineOptions)
		steps []loopStep
	}{
		// Issue 38: the retry of a failed run whose apply wrote the pools
		// ends waiting (api's read fails, and the only resource that uses
		// web uses api too). It kept its backoff's time, already past: the
		// loop woke at once and retried, over and over, a state pull each.
		{name: "a retry that ends waiting waits for its backoff's next step", steps: []loopStep{
			{does: "start", calls: []string{"state pull"}, next: -1},
			{does: "web changes", event: func(d *loopDriver) { d.change(web, "10.0.0.1:80", "10.0.0.2:80") }, next: quiet},
			{does: "the window fires", event: at(quiet), calls: []string{}},
			{does: "the apply writes the pools, then fails", event: func(d *loopDriver) { d.ends(tfApplyFailsAfterWriting) },
				calls: []string{planWeb, "apply", "state pull"}, next: quiet + 2*second},
			{does: "api's read fails", event: func(d *loopDriver) { d.readable(api, false) }, next: quiet + 2*second},
			{does: "the retry is due: it ends waiting, planning nothing", event: at(quiet + 2*second),
				calls: []string{"state pull"}, next: quiet + 6*second},
			{does: "a second passes", event: at(quiet + 3*second), calls: []string{}, next: quiet + 6*second},
			{does: "the next step of the backoff: waiting again", event: at(quiet + 6*second),
				calls: []string{"state pull"}, next: quiet + 14*second},
			{does: "api reads again", event: func(d *loopDriver) { d.readable(api, true) }, calls: []string{}, next: quiet + 14*second},
			{does: "the retry plans what web needs and brings state current", event: func(d *loopDriver) {
				at(quiet + 14*second)(d)
				d.ends(tfWorks)
			}, calls: []string{planWeb, "apply", "state pull"}, next: -1},
		}},
		{name: "a change during a run is one more run, at once when its window has waited its longest", steps: []loopStep{
			{does: "start", calls: []string{"state pull"}, next: -1},
			{does: "api's read fails", event: func(d *loopDriver) { d.readable(api, false) }, next: -1},
			{does: "api reads again and changes", event: func(d *loopDriver) {
				d.w.mu.Lock()
				d.w.cluster[api] = []string{"10.0.0.1:80", "10.0.0.3:80"}
				d.w.mu.Unlock()
				d.readable(api, true)
			}, next: quiet},
			{does: "the window fires", event: at(quiet), calls: []string{}},
			{does: "web changes during the run", event: func(d *loopDriver) { d.change(web, "10.0.0.1:80", "10.0.0.2:80") }},
			{does: "the run ends; web's change is one more run at once: its window counts from when it was seen",
				event: func(d *loopDriver) {
					at(quiet + 2*second)(d)
					d.ends(tfWorks)
				}, calls: []string{planAPI, "apply", "state pull"}},
			{does: "that run ends: nothing more", event: func(d *loopDriver) { d.ends(tfWorks) },
				calls: []string{planWeb, "apply", "state pull"}, next: -1},
		}},
		{name: "changes during a run start the next run as it ends when their quiet time passed during it", steps: []loopStep{
			{does: "start", calls: []string{"state pull"}, next: -1},
			{does: "web changes", event: func(d *loopDriver) { d.change(web, "10.0.0.1:80", "10.0.0.2:80") }, next: quiet},
			{does: "the window fires", event: at(quiet), calls: []string{}},
			{does: "api changes during the run", event: func(d *loopDriver) {
				at(quiet + 200*time.Millisecond)(d)
				d.change(api, "10.0.0.1:80", "10.0.0.3:80")
			}},
			{does: "the run ends 1.3 s later: api's run starts at once", event: func(d *loopDriver) {
				at(2 * second)(d)
				d.ends(tfWorks)
				if !d.running {
					d.t.Errorf("no run as the run ended: phase %s, wants the time at %s", d.m.phase, d.next.Sub(t0))
				}
			}, calls: []string{planWeb, "apply", "state pull"}},
			{does: "that run ends", event: func(d *loopDriver) { d.ends(tfWorks) }, calls: []string{planAPI, "apply", "state pull"},
				next: -1, after: inState(api, "10.0.0.1:80", "10.0.0.3:80")},
		}},
		{name: "a full plan on the interval catches a change the pools do not show", opts: func(o *machineOptions) {
			o.FullPlanInterval = 10 * second
		}, steps: []loopStep{
			{does: "start", calls: []string{"state pull"}, next: 10 * second},
			{does: "web changes, and the pools do not show it", event: func(d *loopDriver) {
				d.w.mu.Lock()
				d.w.hidden[web] = true
				d.w.mu.Unlock()
				d.change(web, "10.0.0.1:80", "10.0.0.2:80")
			}, calls: []string{}, next: 10 * second},
			{does: "the interval passes: a plan of everything", event: func(d *loopDriver) {
				at(10 * second)(d)
				d.ends(tfWorks)
			}, calls: []string{"plan", "apply", "state pull"}, next: 20 * second, after: inState(web, "10.0.0.1:80", "10.0.0.2:80")},
			{does: "api changes: a run of what it needs, which does not move the interval", event: func(d *loopDriver) {
				d.change(api, "10.0.0.1:80", "10.0.0.3:80")
				at(10*second + quiet)(d)
				d.ends(tfWorks)
			}, calls: []string{planAPI, "apply", "state pull"}, next: 20 * second},
		}},
		{name: "a backend down is read again with backoff, and no run starts until state reads", steps: []loopStep{
			{does: "start", calls: []string{"state pull"}, next: -1},
			{does: "web changes", event: func(d *loopDriver) { d.change(web, "10.0.0.1:80", "10.0.0.2:80") }, next: quiet},
			{does: "the backend goes down; the run fails", event: func(d *loopDriver) {
				d.backend(false)
				at(quiet)(d)
				d.ends(tfWorks)
			}, calls: []string{planWeb, "state pull"}, next: quiet + 2*second},
			{does: "the state's backoff passes: read again, failing", event: at(quiet + 2*second), calls: []string{"state pull"},
				next: quiet + 6*second},
			{does: "the backend comes back: state reads, and web's change opens a window", event: func(d *loopDriver) {
				d.backend(true)
				at(quiet + 6*second)(d)
			}, calls: []string{"state pull"}, next: 2*quiet + 6*second},
			{does: "the window fires: the retry brings state current", event: func(d *loopDriver) {
				at(2*quiet + 6*second)(d)
				d.ends(tfWorks)
			}, calls: []string{planWeb, "apply", "state pull"}, next: -1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testingclock.NewFakeClock(t0)
			w := newFakeWorkspace(filter, clock, web, api)
			var d *loopDriver
			for i, s := range tc.steps {
				if i == 0 {
					opts := loopOptions()
					if tc.opts != nil {
						tc.opts(&opts)
					}
					d = startLoop(t, w, opts)
				} else {
					s.event(d)
				}
				calls := d.takeCalls()
				if s.calls != nil && !slices.Equal(calls, s.calls) {
					t.Errorf("step %d (%s): Terraform and state calls %q, want %q", i, s.does, calls, s.calls)
				}
				switch {
				case s.next == -1 && !d.next.IsZero():
					t.Errorf("step %d (%s): the machine wants the time at %s, want not at all", i, s.does, d.next.Sub(t0))
				case s.next > 0 && !d.next.Equal(t0.Add(s.next)):
					t.Errorf("step %d (%s): the machine wants the time at %s, want %s", i, s.does, d.next.Sub(t0), s.next)
				}
				if s.after != nil {
					s.after(t, d)
				}
				if d.mostPastWakes > 1 {
					t.Fatalf("step %d (%s): the loop woke %d times in a row for a time already past (a spin): calls %q",
						i, s.does, d.mostPastWakes, calls)
				}
			}
			if d.running {
				d.ends(tfWorks)
			}
			d.stop()
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.mostInFlight > 1 {
				t.Errorf("%d runs at once", w.mostInFlight)
			}
			if len(w.violations) > 0 {
				t.Errorf("invariants broken: %q", w.violations)
			}
		})
	}
}
