package companion

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// The companion's decisions, apart from the loop that carries them out
// (sync.go): a state machine fed events (what the pools look like now, the
// end of a run, the time passing) that answers with a decision (start this
// run) and notes (what to log and count), and says when it next needs the
// time. It starts no goroutine and reads no clock: the loop passes the time
// in, so its transitions are tested one by one as a table (machine_test.go).
//
// What it remembers:
//   - the settle window: opened by the first change, fired after Quiet
//     without another or MaxWait after the first, like Consul-Terraform-
//     Sync's buffer_period;
//   - the run in flight, and whether the pools changed during it;
//   - a failed run, retried with exponential backoff (client-go's per-item
//     failure rate limiter, one item) until a run succeeds or a plan shows
//     nothing to do, whatever the state's pools say: a failed apply may
//     have written the pools into state and left a resource tainted;
//   - one held change set: changes a run (or the shrink guard) showed
//     there is no point running for again until they change, by signature.
//
// client-go's workqueue is not used for the queue itself: there is one
// worker and one thing to do (a run of the whole configuration), and what
// makes two events the same is the signature of the pools' differences,
// not a key; its per-item rate limiter is what retries use.

// view is what the pools look like at one moment, compared with state.
type view struct {
	// changes are the pools that differ from state, by instance address.
	changes map[string][]poolChange
	// unreadable are the pools whose read would fail, by instance address:
	// why. Runs leave their dependents out.
	unreadable map[string]string
	// stale says that state could not be read since the last run: the view
	// compares with an older state, and no run starts on it.
	stale bool
	// config identifies the configuration's files: a change set refused or
	// held for a configuration is tried again once it is edited.
	config string
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
	unreadable map[string]string
	// refused are the pools the shrink guard refused, by instance address:
	// why. Like unreadable ones, the run leaves their dependents out.
	refused map[string]string
	// sig is the signature of the changes, "" for a retry of a failed run
	// that state shows no difference for.
	sig string
	// retry says the run retries a failed one.
	retry bool
	// settled is the time from the first change to the start.
	settled time.Duration
}

// addresses are the data source instances the run is for, sorted.
func (r runRequest) addresses() []string { return slices.Sorted(maps.Keys(r.changes)) }

// runOutcome is how a run ended.
type runOutcome struct {
	result string
	err    error
	// blocked are the addresses that made a plan not pool-only.
	blocked []string
	// failing are the addresses the CLI's errors name.
	failing []string
	// targeted says the plan left the dependents of unreadable pools out.
	targeted bool
	// reason says why a run applied nothing (no_changes, waiting).
	reason string
}

// holdReason is why a change set is held.
type holdReason string

const (
	heldNoChanges  holdReason = "a plan showed these changes change nothing that can be applied"
	heldRefused    holdReason = "the plan changes more than pools"
	heldShrink     holdReason = "the shrink guard refused them"
	heldDelivered  holdReason = "the command ran for these changes; waiting for state to catch up"
	heldUnreadable holdReason = "a run for them needs a pool whose read fails"
)

type held struct {
	sig    string
	reason holdReason
	at     time.Time
	// noted says the hold was logged for the current view.
	noted bool
}

// note is something to log, and count.
type note struct {
	kind  noteKind
	level slog.Level
	msg   string
	attrs []any
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
)

// decision is what the machine answers an event with.
type decision struct {
	// start, when set, is a run to start now.
	start *runRequest
	notes []note
}

func (d *decision) note(kind noteKind, level slog.Level, msg string, attrs ...any) {
	d.notes = append(d.notes, note{kind: kind, level: level, msg: msg, attrs: attrs})
}

type machineOptions struct {
	Quiet, MaxWait         time.Duration
	RetryInitial, RetryMax time.Duration
	Guard                  shrinkGuard
	// CommandRepeat is how long a change set delivered to -command waits
	// for state to catch up before it is delivered again; 0: never.
	CommandRepeat time.Duration
}

type machine struct {
	opts    machineOptions
	retries workqueue.TypedRateLimiter[string]

	view view
	sig  string

	// The settle window.
	windowOpen              bool
	windowStart, lastChange time.Time
	windowSig               string

	running bool
	// run is the run in flight, or the last one.
	run runRequest
	// changedDuringRun is when the pools were first seen to change during
	// the run in flight; zero when they did not.
	changedDuringRun time.Time

	retrying bool
	retryAt  time.Time

	held held
	// refusedSig is the signature of the changes the shrink guard last
	// refused, so that a refusal is noted once.
	refusedSig string
	// reported are the unreadable pools logged, with their reasons.
	reported map[string]string
}

// retryItem is the one item of the rate limiter: runs.
const retryItem = "run"

func newMachine(opts machineOptions) *machine {
	return &machine{
		opts:     opts,
		retries:  workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.RetryInitial, opts.RetryMax),
		reported: map[string]string{},
	}
}

// observe takes the pools as they are now.
func (m *machine) observe(now time.Time, v view) decision {
	var d decision
	m.noteUnreadable(&d, v.unreadable)
	if v.signature() != m.sig {
		m.held.noted = false
	}
	m.view, m.sig = v, v.signature()
	if m.running {
		if m.sig != "" && m.sig != m.run.sig && m.changedDuringRun.IsZero() {
			m.changedDuringRun = now
		}
		return d
	}
	m.settle(now, &d)
	return d
}

// tick is the time passing: the machine asked for it with next.
func (m *machine) tick(now time.Time) decision {
	var d decision
	if m.running || m.view.stale {
		return d
	}
	if !m.windowOpen && m.sig == "" && m.retrying && !now.Before(m.retryAt) {
		// A failed run is retried even when state shows no difference: the
		// apply may have written the pools into state and failed after.
		d.note(noteRetry, slog.LevelInfo, "retrying the failed run", "data_sources", strings.Join(m.run.addresses(), ","))
		m.start(&d, runRequest{changes: m.run.changes, unreadable: m.view.unreadable, retry: true})
		return d
	}
	m.settle(now, &d)
	return d
}

// runEnded takes the end of the run in flight. The loop reads state again
// after it and observes the pools compared with that state.
func (m *machine) runEnded(now time.Time, o runOutcome) decision {
	var d decision
	m.running = false
	switch o.result {
	case resultApplied, resultStateUpdated:
		m.succeeded()
	case resultNoChanges:
		m.succeeded()
		if m.run.sig != "" {
			m.hold(now, heldNoChanges)
		}
	case resultRefused:
		m.succeeded()
		m.hold(now, heldRefused)
		d.note(noteRefused, slog.LevelWarn, "run refused: the plan changes more than pools; fix or apply it by hand",
			"blocked", strings.Join(o.blocked, ","))
	case resultDelivered:
		m.succeeded()
		m.hold(now, heldDelivered)
	case resultWaiting:
		m.hold(now, heldUnreadable)
	case resultFailed:
		if len(m.run.unreadable)+len(m.run.refused) > 0 && !o.targeted {
			// The plan could not leave the unreadable pools out: one
			// attempt per change set, not a stream of failing plans.
			m.hold(now, heldUnreadable)
			m.retrying = false
			break
		}
		wait := m.retries.When(retryItem)
		m.retrying, m.retryAt = true, now.Add(wait)
		d.note(noteRetry, slog.LevelWarn, "run failed: retrying with backoff", "retry_in", wait.String(),
			"failing", strings.Join(o.failing, ","), "error", errText(o.err))
	}
	return d
}

// next is when the machine needs the time again; zero when it does not.
func (m *machine) next() time.Time {
	switch {
	case m.running || m.view.stale:
		return time.Time{}
	case m.windowOpen:
		return m.fireAt()
	case m.retrying:
		return m.retryAt
	case m.held.reason == heldDelivered && m.held.sig == m.sig && m.opts.CommandRepeat > 0:
		return m.held.at.Add(m.opts.CommandRepeat)
	}
	return time.Time{}
}

// settle decides what the pools call for while no run is going on.
func (m *machine) settle(now time.Time, d *decision) {
	if m.view.stale {
		return
	}
	during := m.changedDuringRun
	m.changedDuringRun = time.Time{}
	switch {
	case m.sig == "":
		if m.windowOpen {
			d.note(noteMatch, slog.LevelInfo, "pools match state again: no run")
		}
		m.windowOpen = false
		return
	case m.isHeld(now):
		m.windowOpen = false
		if !m.held.noted {
			m.held.noted = true
			d.note(noteHeld, slog.LevelInfo, "no run for these changes until they change", "reason", string(m.held.reason),
				"data_sources", strings.Join(slices.Sorted(maps.Keys(m.view.changes)), ","))
		}
		return
	}
	if !m.windowOpen {
		start := now
		if !during.IsZero() {
			start = during
		}
		m.windowOpen, m.windowStart, m.lastChange, m.windowSig = true, start, now, m.sig
		d.note(noteWindowOpened, slog.LevelDebug, "settle window opened")
		m.noteChanges(d)
	} else if m.sig != m.windowSig {
		m.lastChange, m.windowSig = now, m.sig
		m.noteChanges(d)
	}
	if now.Before(m.fireAt()) {
		return
	}
	changes, refused := m.view.changes, m.opts.Guard.refusals(m.view.changes)
	if len(refused) > 0 {
		// The refused pools are left out of the run, as unreadable ones
		// are, and the others kept current; a refusal is noted once for
		// its pools' changes, not again at each change of another pool.
		if key := refusedSignature(m.view.changes, refused); key != m.refusedSig {
			m.refusedSig = key
			reasons := make([]string, 0, len(refused))
			for _, address := range slices.Sorted(maps.Keys(refused)) {
				reasons = append(reasons, refused[address])
			}
			d.note(noteShrinkRefused, slog.LevelWarn, "run refused by the shrink guard", "reason", strings.Join(reasons, "; "),
				"data_sources", strings.Join(slices.Sorted(maps.Keys(refused)), ","))
		}
		changes = maps.Clone(changes)
		for address := range refused {
			delete(changes, address)
		}
		if len(changes) == 0 {
			m.windowOpen = false
			m.hold(now, heldShrink)
			m.held.noted = true
			return
		}
	} else {
		m.refusedSig = ""
	}
	m.start(d, runRequest{changes: changes, unreadable: m.view.unreadable, refused: refused, sig: m.sig, retry: m.retrying,
		settled: now.Sub(m.windowStart)})
}

// refusedSignature identifies the refused pools' changes.
func refusedSignature(changes map[string][]poolChange, refused map[string]string) string {
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

func (m *machine) start(d *decision, r runRequest) {
	m.running, m.windowOpen, m.run, m.changedDuringRun = true, false, r, time.Time{}
	d.start = &r
}

// isHeld says whether the current changes are held; a delivery to the
// command is held until CommandRepeat passes.
func (m *machine) isHeld(now time.Time) bool {
	if m.held.sig == "" || m.held.sig != m.sig {
		return false
	}
	if m.held.reason == heldDelivered && m.opts.CommandRepeat > 0 && !now.Before(m.held.at.Add(m.opts.CommandRepeat)) {
		return false
	}
	return true
}

func (m *machine) hold(now time.Time, reason holdReason) {
	sig := m.run.sig
	if reason == heldShrink {
		sig = m.sig
	}
	m.held = held{sig: sig, reason: reason, at: now}
}

// succeeded ends the backoff: a run got through.
func (m *machine) succeeded() {
	m.retrying, m.retryAt = false, time.Time{}
	m.retries.Forget(retryItem)
	m.held = held{}
}

func (m *machine) noteChanges(d *decision) {
	for _, address := range slices.Sorted(maps.Keys(m.view.changes)) {
		for _, c := range m.view.changes[address] {
			d.note(noteDiffers, slog.LevelInfo, "pool differs from state", "data_source", address, "pool", c.Name,
				"added", strings.Join(c.Added, ","), "removed", strings.Join(c.Removed, ","), "members_unchanged", c.membersOnly())
		}
	}
}

// noteUnreadable notes the pools whose read fails, once per reason, and
// those that read again. The pools of a cluster that does not answer are
// one note (the cluster's own line says why), not one per pool: an API
// server's restart is not fifty warnings.
func (m *machine) noteUnreadable(d *decision, unreadable map[string]string) {
	byCluster := map[string][]string{}
	for _, address := range slices.Sorted(maps.Keys(unreadable)) {
		reason := unreadable[address]
		if m.reported[address] == reason {
			continue
		}
		m.reported[address] = reason
		if strings.HasPrefix(reason, unreachablePrefix) {
			byCluster[reason] = append(byCluster[reason], address)
			continue
		}
		d.note(noteUnreadable, slog.LevelWarn, "pool not recomputed: its dependents are left out of runs until it reads again",
			"data_source", address, "reason", reason)
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
		if strings.HasPrefix(m.reported[address], unreachablePrefix) {
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
