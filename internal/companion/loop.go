package companion

import (
	"context"
	"slices"
	"time"

	"k8s.io/utils/clock"
)

// world is what the loop reads and changes for the machine: state, the
// pools, the runs. The syncer is the real one (the CLI, the informers);
// the loop's tests give one over the fake Terraform.
type world interface {
	// readState reads state and starts watching what it names; permanent
	// says that waiting cannot cure its error.
	readState(ctx context.Context) (permanent bool, err error)
	// startProbes asks each cluster, from now on, whether it answers.
	startProbes(ctx context.Context)
	// view recomputes the pools the informers marked (all: every pool).
	view(ctx context.Context, all bool) view
	// run makes one run, and reports its facts (the machine decides how it
	// ended).
	run(ctx context.Context, r runRequest) runFacts
	// logNote logs a note of the machine, and counts it.
	logNote(ctx context.Context, n note)
}

// loop carries the machine's decisions out, and feeds what they give and
// what comes (the informers' marks, the time, the end of a run, SIGTERM)
// back in. It decides nothing.
type loop struct {
	world   world
	machine *machine
	clock   clock.WithTicker
	// kick says the informers marked pools.
	kick <-chan struct{}
	runs chan runFacts
	// ranFor observes each run's duration, without its wait for a slot.
	ranFor func(time.Duration)
	// waiting, when set (by the tests that drive the loop on a fake
	// clock), is told when the machine next wants the time each time the
	// loop is about to wait.
	waiting func(next time.Time)
}

// run is the companion's loop, until the machine decides to exit.
func (l *loop) run(ctx context.Context) error {
	timer := l.clock.NewTimer(time.Hour)
	defer timer.Stop()
	events := []event{{kind: evStart}}
	for {
		for len(events) > 0 {
			ev := events[0]
			events = events[1:]
			for _, d := range l.machine.step(l.clock.Now(), ev) {
				if d.kind == doExit {
					return d.err
				}
				if next, ok := l.carry(ctx, d); ok {
					events = append(events, next)
				}
			}
		}
		next := l.machine.next()
		l.wakeAt(timer, next)
		if l.waiting != nil {
			l.waiting(next)
		}
		select {
		case <-ctx.Done():
			events = append(events, event{kind: evStop})
		case <-l.kick:
			events = append(events, event{kind: evChanged})
		case <-timer.C():
			events = append(events, event{kind: evTick})
		case f := <-l.runs:
			events = append(events, ranWith(f))
		}
	}
}

// carry carries out one decision; one that reads something gives the
// event of what it read.
func (l *loop) carry(ctx context.Context, d decision) (event, bool) {
	switch d.kind {
	case doReadState:
		permanent, err := l.world.readState(ctx)
		return stateReadEnded(err, permanent), true
	case doStartProbes:
		l.world.startProbes(ctx)
	case doRecompute:
		return observed(l.world.view(ctx, d.all)), true
	case doStartRun:
		r, started := *d.run, l.clock.Now()
		go func() {
			f := l.world.run(ctx, r)
			l.ranFor(l.clock.Since(started) - f.queued)
			l.runs <- f
		}()
	case doAwaitRun:
		return ranWith(<-l.runs), true
	case doLog:
		l.world.logNote(ctx, d.note)
	}
	return event{}, false
}

// wakeAt sets timer to fire at, or not at all for zero. The timer never
// fires early, so the machine's deadlines are met when it fires.
func (l *loop) wakeAt(timer clock.Timer, at time.Time) {
	if !timer.Stop() {
		select {
		case <-timer.C():
		default:
		}
	}
	if !at.IsZero() {
		timer.Reset(max(at.Sub(l.clock.Now()), 0))
	}
}

// logNote logs a note of the machine and counts what it says.
func (s *syncer) logNote(ctx context.Context, n note) {
	attrs := n.attrs
	switch n.kind {
	case noteWindowOpened:
		s.metrics.drift.Inc()
	case noteShrinkRefused:
		s.metrics.runs.WithLabelValues(labelShrinkRefused).Inc()
	case noteRetry:
		attrs = append(slices.Clone(attrs), "backend", s.backend)
	case noteRunStarted:
		s.metrics.settleDelay.Observe(n.settled.Seconds())
	case noteRunEnded:
		s.metrics.runs.WithLabelValues(n.result.String()).Inc()
		s.metrics.lastRun.SetToCurrentTime()
	}
	s.log.Log(ctx, n.level, n.msg, attrs...)
}

var _ world = (*syncer)(nil)
