// Package companionproc drives a running companion (`sync`) for the
// benches, followed by its JSON log (test/syncproc of the provider's
// module, as the companion's acceptance tests follow it): its events, never
// its text.
package companionproc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/syncproc"
)

// Proc is a running `sync`.
type Proc struct{ *syncproc.Process }

// Start starts argv, a companion (or what runs one: podman, the
// companion's flags last), with env, and follows its JSON log; it is
// stopped when ctx ends.
func Start(ctx context.Context, argv, env []string) (*Proc, error) {
	p, err := syncproc.Start(argv[0], argv[1:], syncproc.Options{Env: env})
	if err != nil {
		return nil, err
	}
	c := &Proc{p}
	go func() {
		select {
		case <-ctx.Done():
			c.Halt()
		case <-p.Done():
		}
	}()
	return c, nil
}

// Seen is how many events msg it has logged.
func (c *Proc) Seen(msg string) int { return c.Count(msg, nil) }

// CountPrefix is how many lines of its standard error start with prefix
// (gctrace's, which are not events).
func (c *Proc) CountPrefix(prefix string) int {
	n := 0
	for line := range strings.SplitSeq(c.Log(), "\n") {
		if strings.HasPrefix(line, prefix) {
			n++
		}
	}
	return n
}

// CountForcedGC is how many gctrace lines are of a forced collection.
func (c *Proc) CountForcedGC() int {
	n := 0
	for line := range strings.SplitSeq(c.Log(), "\n") {
		if strings.HasPrefix(line, "gc ") && strings.HasSuffix(line, "(forced)") {
			n++
		}
	}
	return n
}

// WaitNth waits for the n-th event msg and gives it.
func (c *Proc) WaitNth(ctx context.Context, msg string, n int, timeout time.Duration) (syncproc.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	e, err := c.Wait(ctx, msg, n, nil)
	if err != nil {
		return e, fmt.Errorf("%w:\n%s", err, c.Log())
	}
	return e, nil
}

// Halt sends SIGTERM and waits for the companion to end, a minute at most.
func (c *Proc) Halt() { c.Stop(time.Minute) }

// TimedRun waits for the companion's run after change i, written at
// written when it had started before runs, checks that the run delivered
// it, and gives its latency and detection (ChangeLatency).
func (c *Proc) TimedRun(ctx context.Context, before int, written time.Time, quiet time.Duration, i int) (latency, detection float64, err error) {
	started, err := c.WaitNth(ctx, "run started", before+1, 2*time.Minute)
	if err != nil {
		return 0, 0, err
	}
	ended, err := c.WaitNth(ctx, "run ended", before+1, 5*time.Minute)
	if err != nil {
		return 0, 0, err
	}
	// A -command's run is "delivered" since the companion tells it from an
	// apply of its own (issue 24); "applied" before.
	if res, _ := ended.Fields["result"].(string); res != "applied" && res != "delivered" {
		return 0, 0, fmt.Errorf("change %d: the run ended %q, not delivered:\n%s", i+1, res, c.Log())
	}
	return ChangeLatency(written, started, quiet)
}

// ChangeLatency is the run's start minus the write minus the quiet time,
// and the opening of the settle window minus the write, s.
func ChangeLatency(written time.Time, started syncproc.Event, quiet time.Duration) (latency, detection float64, err error) {
	settledText, _ := started.Fields["settled"].(string)
	settled, err := time.ParseDuration(settledText)
	if err != nil {
		return 0, 0, fmt.Errorf("run started line without a settled duration: %v", started.Fields)
	}
	run := started.Time.Sub(written)
	return (run - quiet).Seconds(), (run - settled).Seconds(), nil
}
