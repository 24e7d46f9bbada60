package companion

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// The property test of the companion's decisions: random sequences of
// events (pools change, reads fail, the backend goes down, time passes,
// runs end well or badly) through the real loop and machine over a fake
// workspace on a fake clock, with the invariants checked after every
// event, and once the events stop:
//   - never two runs at once;
//   - never a run without a change, or a retry of a failed run, and never
//     one on a state that could not be read;
//   - never a wake-up for a time already past twice in a row (a spin);
//   - once the events stop (and the backend and every pool are back),
//     within a bounded time (a plan of everything on the interval
//     included, for what the pools do not show) every pool is in state, or
//     its change is held
//     with a typed cause: the shrink guard refused it, or (-command, which
//     runs the whole configuration) another pool.
//
// Each sequence is seeded by its number: a failure names it, and
// -companion.seed reruns it alone.

var (
	propertySequences = flag.Int("companion.sequences", 10000, "the number of random sequences of the companion's property test")
	propertySeed      = flag.Int("companion.seed", -1, "run the companion's property test for this sequence only")
)

// propertyConfig has four pools, each used by a resource of its own, and
// a resource that uses p2 and p3.
const propertyConfig = `
data "k8s_ready_endpoints" "p0" {
  service = "p0"
}
data "k8s_ready_endpoints" "p1" {
  service = "p1"
}
data "k8s_ready_endpoints" "p2" {
  service = "p2"
}
data "k8s_ready_endpoints" "p3" {
  service = "p3"
}
resource "terraform_data" "r0" {
  input = data.k8s_ready_endpoints.p0.endpoints
}
resource "terraform_data" "r1" {
  input = data.k8s_ready_endpoints.p1.endpoints
}
resource "terraform_data" "r2" {
  input = data.k8s_ready_endpoints.p2.endpoints
}
resource "terraform_data" "r3" {
  input = data.k8s_ready_endpoints.p3.endpoints
}
resource "terraform_data" "mix" {
  input = [data.k8s_ready_endpoints.p2.endpoints, data.k8s_ready_endpoints.p3.endpoints]
}
`

func propertyOptions() machineOptions {
	return machineOptions{Quiet: quiet, MaxWait: 2 * second, RetryInitial: second, RetryMax: 8 * second,
		Guard: shrinkGuard{MaxShrink: 0.5}, StateInterval: 30 * second, CommandRepeat: 20 * second, FullPlanInterval: 20 * second}
}

func TestTheCompanionsInvariantsHoldForRandomEvents(t *testing.T) {
	var pools []string
	for i := range 4 {
		pools = append(pools, fmt.Sprintf("data.k8s_ready_endpoints.p%d", i))
	}
	filter := filterWatching(t, propertyConfig, pools...)
	first, last := 0, *propertySequences
	if *propertySeed >= 0 {
		first, last = *propertySeed, *propertySeed+1
	}
	runs := 0
	for seed := first; seed < last; seed++ {
		log, n, err := propertySequence(t, filter, pools, seed)
		runs += n
		if err != nil {
			t.Fatalf("sequence %d (rerun alone with -companion.seed=%d): %v\nevents:\n%s", seed, seed, err, strings.Join(log, "\n"))
		}
	}
	if runs == 0 {
		t.Fatal("no sequence started a run: the test checks nothing")
	}
	t.Logf("%d sequences, %d runs", last-first, runs)
}

// propertySequence runs the sequence of seed; it gives the events it made,
// the runs started, and the first invariant broken.
func propertySequence(t *testing.T, filter poolChangeFilter, pools []string, seed int) (log []string, runs int, err error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 38))
	clock := testingclock.NewFakeClock(t0)
	w := newFakeWorkspace(filter, clock, pools...)
	if seed%4 == 3 {
		// A pipeline (-command) in place of plan and apply.
		w.runner.command = "apply"
	}
	d := startLoop(t, w, propertyOptions())
	defer func() {
		d.stop()
		runs = len(w.requests)
	}()
	did := func(format string, args ...any) {
		log = append(log, fmt.Sprintf("%8s %-12s ", clock.Now().Sub(t0), d.m.phase)+fmt.Sprintf(format, args...))
	}
	check := func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		switch {
		case w.mostInFlight > 1:
			return fmt.Errorf("%d runs at once", w.mostInFlight)
		case len(w.violations) > 0:
			return fmt.Errorf("%s", w.violations[0])
		case d.mostPastWakes > 1:
			return fmt.Errorf("%d wake-ups in a row for a time already past (a spin)", d.mostPastWakes)
		}
		return nil
	}
	for range 5 + rng.IntN(36) {
		pool := pools[rng.IntN(len(pools))]
		switch x := rng.IntN(100); {
		case x < 32:
			members := randomMembers(rng)
			did("%s changes to %v", pool, members)
			d.change(pool, members...)
		case x < 35:
			// What only a plan of everything sees: a resource left behind
			// its pool in state.
			members := randomMembers(rng)
			did("%s changes to %v, and the pools do not show it", pool, members)
			w.mu.Lock()
			w.hidden[pool] = true
			w.mu.Unlock()
			d.change(pool, members...)
		case x < 45:
			w.mu.Lock()
			ok := w.unreadable[pool]
			w.mu.Unlock()
			did("%s readable %v", pool, ok)
			d.readable(pool, ok)
		case x < 53:
			w.mu.Lock()
			up := w.backendDown
			w.mu.Unlock()
			did("backend up %v", up)
			d.backend(up)
		case x < 83 || !d.running:
			by := time.Duration(rng.IntN(31)) * 100 * time.Millisecond
			did("%s pass", by)
			d.advance(by)
		default:
			b := tfWorks
			if y := rng.IntN(10); y >= 8 {
				b = tfApplyFailsAfterWriting
			} else if y >= 6 {
				b = tfPlanFails
			}
			did("the run ends: terraform %s", b)
			d.ends(b)
		}
		if err := check(); err != nil {
			return log, 0, err
		}
	}
	// The events stop: the backend and every pool are back, and runs work.
	did("the backend and every pool back")
	d.backend(true)
	w.mu.Lock()
	clear(w.unreadable)
	w.mu.Unlock()
	d.marked()
	// Long enough for the backoff's longest step, a window, and a plan of
	// everything on the interval.
	end := clock.Now().Add(time.Minute)
	for d.running || clock.Now().Before(end) {
		if clock.Now().After(end.Add(time.Minute)) {
			return log, 0, fmt.Errorf("not settled 2 minutes after the last event: %s", d.m.phase)
		}
		if d.running {
			did("the run ends: terraform works")
			d.ends(tfWorks)
		} else {
			by := end.Sub(clock.Now())
			if !d.next.IsZero() {
				by = min(by, d.next.Sub(clock.Now()))
			}
			did("%s pass", by)
			d.advance(by)
		}
		if err := check(); err != nil {
			return log, 0, err
		}
	}
	did("settled")
	if d.m.phase != phaseIdle && d.m.phase != phaseHeld {
		return log, 0, fmt.Errorf("not settled a minute after the last event: %s", d.m.phase)
	}
	// Every pool is in state, or its change is held with a typed cause.
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.hidden)
	v := w.against(w.state)
	refused := d.m.opts.Guard.refusals(v.changes)
	held := d.m.phase == phaseHeld && d.m.held.cause != 0
	for _, address := range slices.Sorted(maps.Keys(v.changes)) {
		if _, ok := refused[address]; ok && held {
			continue
		}
		if w.runner.command != "" && len(refused) > 0 && held {
			// The pipeline runs the whole configuration: it cannot leave
			// the pools the guard refused out.
			continue
		}
		return log, 0, fmt.Errorf("%s: %v in the cluster, %v in state, settled %s (held: %q): neither applied nor held with a cause",
			address, w.cluster[address], w.state[address], d.m.phase, d.m.held.cause)
	}
	return log, 0, nil
}

// randomMembers are 0 to 4 of 4 members.
func randomMembers(rng *rand.Rand) []string {
	var out []string
	for i := range 4 {
		if rng.IntN(2) == 0 {
			out = append(out, fmt.Sprintf("10.0.0.%d:80", i+1))
		}
	}
	return out
}
