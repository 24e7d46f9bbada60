package companion

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The decision table of the companion: each case is a sequence of events
// at times from t0, and what the machine must answer to each. No clock, no
// goroutine, no sleep: the times are given.

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

func differs(changes ...poolChange) view {
	return view{changes: map[string][]poolChange{"data.k8s_ready_endpoints.web": changes}, unreadable: map[string]string{}}
}

func matches() view { return view{changes: map[string][]poolChange{}, unreadable: map[string]string{}} }

// withUnreadable is v with pool x unreadable.
func (v view) withUnreadable() view {
	v.unreadable = map[string]string{"data.k8s_ready_endpoints.x": "gone"}
	return v
}

func (v view) inConfig(version string) view { v.config = version; return v }

func (v view) staleState() view { v.stale = true; return v }

// step is an event at a time, and what the machine must answer.
type step struct {
	at time.Duration
	// One of: observe this view, tick, or end the run with this result.
	observe *view
	tick    bool
	ended   *runOutcome
	// start says a run must start; retry that it is a retry.
	start, retry bool
	// next is when the machine must next want the time (-1: not at all;
	// 0: not checked).
	next time.Duration
	// note is a message that must be among the notes; noNote one that
	// must not.
	note, noNote string
}

func seen(v view) step                   { return step{observe: &v} }
func ticks() step                        { return step{tick: true} }
func ends(result string) step            { return step{ended: &runOutcome{result: result}} }
func (s step) when(d time.Duration) step { s.at = d; return s }
func (s step) starts() step              { s.start = true; return s }
func (s step) retries() step             { s.start, s.retry = true, true; return s }
func (s step) wakes(d time.Duration) step {
	s.next = d
	return s
}
func (s step) sleeps() step            { s.next = -1; return s }
func (s step) notes(msg string) step   { s.note = msg; return s }
func (s step) quietly(msg string) step { s.noNote = msg; return s }

const (
	second = time.Second
	quiet  = 500 * time.Millisecond
)

func testMachine() *machine {
	return newMachine(machineOptions{Quiet: quiet, MaxWait: 2 * second, RetryInitial: second, RetryMax: 4 * second,
		Guard: shrinkGuard{MaxShrink: 0.5}, CommandRepeat: 30 * second})
}

func TestTheCompanionDecides(t *testing.T) {
	a, b, c := change("a", "10.0.0.1:80"), change("b", "10.0.0.2:80"), change("c", "10.0.0.3:80")
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a pool that differs opens a window that fires after the quiet time", []step{
			seen(differs(a)).wakes(quiet).notes("pool differs from state"),
			ticks().when(quiet).starts(),
		}},
		{"nothing that differs starts nothing", []step{
			seen(matches()).sleeps(),
		}},
		{"changes that keep coming fire at the longest wait from the first", []step{
			seen(differs(a)).wakes(quiet),
			seen(differs(b)).when(400 * time.Millisecond).wakes(900 * time.Millisecond),
			seen(differs(c)).when(800 * time.Millisecond).wakes(1300 * time.Millisecond),
			seen(differs(a)).when(1200 * time.Millisecond).wakes(1700 * time.Millisecond),
			seen(differs(b)).when(1600 * time.Millisecond).wakes(2 * second),
			ticks().when(2 * second).starts(),
		}},
		{"the same changes seen again do not move the window", []step{
			seen(differs(a)).wakes(quiet),
			seen(differs(a)).when(400 * time.Millisecond).wakes(quiet).quietly("pool differs from state"),
		}},
		{"a pool that flaps back to state closes the window without a run", []step{
			seen(differs(a)).wakes(quiet),
			seen(matches()).when(200 * time.Millisecond).sleeps().notes("pools match state again: no run"),
			ticks().when(quiet),
		}},
		{"a change during a run is exactly one more run, its window opened when it was seen", []step{
			seen(differs(a)),
			ticks().when(quiet).starts(),
			seen(differs(b)).when(second).sleeps(),
			seen(differs(c)).when(3 * second).sleeps(),
			ends(resultApplied).when(4 * second),
			// State read again: b and c are what remains; the window
			// opened at 1 s has waited its longest at 3 s.
			seen(differs(c)).when(4 * second).starts(),
			ends(resultApplied).when(5 * second),
			seen(matches()).when(5 * second).sleeps(),
		}},
		{"a failed run is retried with backoff even when state shows its pools (a tainted resource)", []step{
			seen(differs(a)),
			ticks().when(quiet).starts(),
			ends(resultFailed).when(second).notes("run failed: retrying with backoff"),
			// The failed apply wrote the pools into state.
			seen(matches()).when(second).wakes(2 * second),
			ticks().when(2 * second).retries().notes("retrying the failed run"),
			ends(resultApplied).when(3 * second),
			seen(matches()).when(3 * second).sleeps(),
		}},
		{"a failed run whose pools still differ is retried at the backoff, not before", []step{
			seen(differs(a)),
			ticks().when(quiet).starts(),
			ends(resultFailed).when(second),
			seen(differs(a)).when(second).wakes(2 * second),
			ticks().when(1500 * time.Millisecond).wakes(2 * second),
			ticks().when(2 * second).retries(),
		}},
		{"the backoff doubles up to its cap, and a success ends it", []step{
			seen(differs(a)),
			ticks().when(quiet).starts(),
			ends(resultFailed).when(second),
			seen(differs(a)).when(second).wakes(2 * second),
			ticks().when(2 * second).retries(),
			ends(resultFailed).when(2 * second),
			seen(differs(a)).when(2 * second).wakes(4 * second),
			ticks().when(4 * second).retries(),
			ends(resultFailed).when(4 * second),
			seen(differs(a)).when(4 * second).wakes(8 * second),
			ticks().when(8 * second).retries(),
			ends(resultFailed).when(8 * second),
			seen(differs(a)).when(8 * second).wakes(12 * second),
			ticks().when(12 * second).retries(),
			ends(resultApplied).when(12 * second),
			seen(differs(b)).when(13 * second).wakes(13*second + quiet),
			ticks().when(13*second + quiet).starts(),
			ends(resultFailed).when(14 * second),
			seen(differs(b)).when(14 * second).wakes(15 * second),
		}},
		{"a new change during the backoff waits for the retry: one plan per backoff step", []step{
			seen(differs(a)),
			ticks().when(quiet).starts(),
			ends(resultFailed).when(second),
			seen(differs(a)).when(second).wakes(2 * second),
			seen(differs(b)).when(1100 * time.Millisecond).wakes(2 * second),
			ticks().when(2 * second).retries(),
		}},
		{"a plan with nothing to apply holds its changes until the cluster changes them again", []step{
			seen(differs(a)),
			ticks().when(quiet).starts(),
			ends(resultNoChanges).when(second),
			seen(differs(a)).when(second).sleeps().notes("no run for these changes until they change"),
			seen(differs(a)).when(5 * second).sleeps().quietly("no run for these changes until they change"),
			seen(differs(b)).when(6 * second).wakes(6*second + quiet),
		}},
		{"a state brought current leaves nothing to run", []step{
			seen(differs(a)),
			ticks().when(quiet).starts(),
			ends(resultStateUpdated).when(second),
			seen(matches()).when(second).sleeps(),
		}},
		{"a command that succeeded is given the same changes again only after -command-repeat", []step{
			seen(differs(a)),
			ticks().when(quiet).starts(),
			ends(resultDelivered).when(second),
			// The pipeline has not applied yet: state still differs.
			seen(differs(a)).when(second).wakes(31 * second),
			seen(differs(a)).when(10 * second).wakes(31 * second),
			ticks().when(31 * second).wakes(31*second + quiet),
			ticks().when(31*second + quiet).starts(),
		}},
		{"a command is given changes again at once when the cluster changes the pool again", []step{
			seen(differs(a)),
			ticks().when(quiet).starts(),
			ends(resultDelivered).when(second),
			seen(differs(a)).when(second),
			seen(differs(b)).when(2 * second).wakes(2*second + quiet),
			ticks().when(2*second + quiet).starts(),
		}},
		{"a refused plan is not tried again until its changes change", []step{
			seen(differs(a)),
			ticks().when(quiet).starts(),
			ends(resultRefused).when(second).notes("run refused: the plan changes more than pools; fix or apply it by hand"),
			seen(differs(a)).when(second).sleeps(),
			seen(differs(b)).when(2 * second).wakes(2*second + quiet),
		}},
		{"a refused plan is tried again once the configuration is edited", []step{
			seen(differs(a).inConfig("v1")),
			ticks().when(quiet).starts(),
			ends(resultRefused).when(second),
			seen(differs(a).inConfig("v1")).when(second).sleeps(),
			seen(differs(a).inConfig("v2")).when(3 * second).wakes(3*second + quiet),
		}},
		{"the shrink guard refuses a run that would halve a pool, and holds it", []step{
			seen(differs(shrink("s", 4, 3))),
			ticks().when(quiet).sleeps().notes("run refused by the shrink guard"),
			seen(differs(shrink("s", 4, 3))).when(second).sleeps().quietly("run refused by the shrink guard"),
			seen(differs(shrink("t", 4, 1))).when(2 * second).wakes(2*second + quiet),
			ticks().when(2*second + quiet).starts(),
		}},
		{"an unreadable pool is noted once, the others go on, and it is noted when it reads again", []step{
			seen(matches().withUnreadable()).notes("pool not recomputed: its dependents are left out of runs until it reads again"),
			seen(differs(a).withUnreadable()).when(second).wakes(second + quiet).
				quietly("pool not recomputed: its dependents are left out of runs until it reads again"),
			ticks().when(second + quiet).starts(),
			ends(resultApplied).when(2 * second),
			seen(matches()).when(3 * second).notes("pool readable again"),
		}},
		{"a run that could not leave an unreadable pool out and failed is not retried until something changes", []step{
			seen(differs(a).withUnreadable()),
			ticks().when(quiet).starts(),
			ends(resultFailed).when(second),
			seen(differs(a).withUnreadable()).when(second).sleeps(),
			ticks().when(time.Minute).sleeps(),
			// x reads again: its dependents can be planned.
			seen(differs(a)).when(2 * time.Minute).wakes(2*time.Minute + quiet),
		}},
		{"a run with nothing plannable but unreadable pools waits for them", []step{
			seen(differs(a).withUnreadable()),
			ticks().when(quiet).starts(),
			ends(resultWaiting).when(second),
			seen(differs(a).withUnreadable()).when(second).sleeps(),
			seen(differs(b).withUnreadable()).when(2 * second).wakes(2*second + quiet),
		}},
		{"a stale state starts no run until it is read again", []step{
			seen(differs(a).staleState()).sleeps(),
			ticks().when(second).sleeps(),
			seen(differs(a)).when(2 * second).wakes(2*second + quiet),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMachine()
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				var d decision
				switch {
				case s.observe != nil:
					d = m.observe(now, *s.observe)
				case s.tick:
					d = m.tick(now)
				default:
					d = m.runEnded(now, *s.ended)
				}
				where := fmt.Sprintf("step %d at %s", i, s.at)
				if (d.start != nil) != s.start {
					t.Fatalf("%s: run started %v, want %v", where, d.start != nil, s.start)
				}
				if s.start && d.start.retry != s.retry {
					t.Errorf("%s: retry %v, want %v", where, d.start.retry, s.retry)
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
		})
	}
}

func noteMessages(d decision) []string {
	var out []string
	for _, n := range d.notes {
		out = append(out, n.msg)
	}
	return out
}

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
		return view{changes: map[string][]poolChange{web: {emptied}, api: {other}}, unreadable: map[string]string{}}
	}
	m := testMachine()
	m.observe(t0, both(change("a", "10.0.0.1:80")))
	d := m.tick(t0.Add(quiet))
	if d.start == nil {
		t.Fatalf("no run for %s while %s is refused: notes %q", api, web, noteMessages(d))
	}
	if !slices.Equal(d.start.addresses(), []string{api}) || d.start.refused[web] == "" {
		t.Fatalf("run for %v, refused %v: want a run for %s that leaves %s out", d.start.addresses(), d.start.refused, api, web)
	}
	if !slices.Contains(noteMessages(d), "run refused by the shrink guard") {
		t.Errorf("notes %q: want the refusal", noteMessages(d))
	}
	m.runEnded(t0.Add(second), runOutcome{result: resultApplied})
	// Another change of api, web still refused for the same change: a run,
	// and no second note of the refusal.
	m.observe(t0.Add(2*second), both(change("b", "10.0.0.2:80")))
	d = m.tick(t0.Add(2*second + quiet))
	if d.start == nil || !slices.Equal(d.start.addresses(), []string{api}) {
		t.Fatalf("no run for the second change of %s: notes %q", api, noteMessages(d))
	}
	if slices.Contains(noteMessages(d), "run refused by the shrink guard") {
		t.Errorf("the same refusal noted again: %q", noteMessages(d))
	}
	m.runEnded(t0.Add(3*second), runOutcome{result: resultApplied})
	// web alone: nothing to run, nothing noted again, nothing to wake for.
	d = m.observe(t0.Add(4*second), view{changes: map[string][]poolChange{web: {emptied}}, unreadable: map[string]string{}})
	d2 := m.tick(t0.Add(4*second + quiet))
	if d.start != nil || d2.start != nil || slices.Contains(append(noteMessages(d), noteMessages(d2)...), "run refused by the shrink guard") {
		t.Errorf("web alone: run %v %v, notes %q %q; want none and no second refusal", d.start, d2.start, noteMessages(d), noteMessages(d2))
	}
	if next := m.next(); !next.IsZero() {
		t.Errorf("web alone wants the time at %s, want not at all", next.Sub(t0))
	}
}

// Found by the soak (issue 28): an API server's restart was a warning per
// pool (51 in the soak, each with the server's whole /readyz answer), on
// top of the cluster's own line; the pools of a cluster that does not
// answer are one line when it goes, one when it comes back.
func TestThePoolsOfAClusterThatDoesNotAnswerAreOneNote(t *testing.T) {
	down := unreachablePrefix + "k8s does not answer (connection refused): not recomputed, left as they are"
	v := matches()
	for _, name := range []string{"a", "b", "c"} {
		v.unreadable["data.k8s_ready_endpoints."+name] = down
	}
	v.unreadable["data.k8s_ready_endpoints.gone"] = "service web/gone not found: a plan would fail"
	m := testMachine()
	d := m.observe(t0, v)
	count := func(d decision, prefix string) (n int) {
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
