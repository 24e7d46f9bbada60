package companion

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// fakeGroup is a group whose live replicas and settled ones the test sets.
type fakeGroup struct {
	agreeing []string
	settled  map[string]bool
}

func (g fakeGroup) Agreeing() []string     { return g.agreeing }
func (g fakeGroup) Settled(id string) bool { return g.settled[id] }

// blockingTerraform is a Terraform whose plan lasts until the test ends it
// or its context ends (SIGINT): it says whether a plan was interrupted.
type blockingTerraform struct {
	entered chan struct{}
	finish  chan struct{}

	mu          sync.Mutex
	interrupted bool
}

func (b *blockingTerraform) statePull(context.Context, func(io.Reader) error) error { return nil }
func (b *blockingTerraform) plan(ctx context.Context, _ string, _ planOptions) (bool, planSummary, error) {
	close(b.entered)
	select {
	case <-b.finish:
		return false, planSummary{}, nil
	case <-ctx.Done():
		b.mu.Lock()
		b.interrupted = true
		b.mu.Unlock()
		return false, planSummary{}, errStopped
	}
}
func (b *blockingTerraform) apply(context.Context, string) error { return nil }
func (b *blockingTerraform) command(context.Context, string, []string) error {
	return errors.New("no command")
}

// twoReplicas are the identities of two replicas, the second the one the
// group prefers for workspace name.
func twoReplicas(name string) (me, preferred string) {
	order := kube.Shares([]string{name}, []string{"replica-a", "replica-b"})[name]
	return order[1], order[0]
}

// A hand-over happens between two runs: the run's start and the hand-over
// exclude each other. A run under way is not interrupted for it, and a run
// that starts as the hand-over is decided does not start (no plan to
// interrupt): the replica the group prefers takes the workspace and runs.
func TestAHandOverNeverInterruptsARun(t *testing.T) {
	const name = "team-a"
	me, preferred := twoReplicas(name)
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name string
		// settled says whether the preferred replica has been live for a
		// Lease duration.
		settled bool
		// running says a run is under way when the hand-over is
		// considered; racing that one starts as it is decided.
		running, racing bool
		handedOver      bool
	}{
		{name: "between two runs, to a replica that settled", settled: true, handedOver: true},
		{name: "not to a replica that has not settled", settled: false, handedOver: false},
		{name: "not during a run", settled: true, running: true, handedOver: false},
		{name: "a run that starts as the hand-over is decided does not start", settled: true, racing: true, handedOver: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			r := &replica{workspaces: []workspace{{name: name}}, log: log, clock: clk,
				lease:   &kube.LeaseConfig{Identity: me, RetryPeriod: 2 * time.Second},
				members: fakeGroup{agreeing: []string{"replica-a", "replica-b"}, settled: map[string]bool{preferred: tc.settled}}}
			tf := &blockingTerraform{entered: make(chan struct{}), finish: make(chan struct{})}
			s := &syncer{runner: &runner{tf: tf, log: log}, clock: clk, log: log}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			runCtx, stopRun := context.WithCancel(ctx)
			defer stopRun()
			runs := make(chan runOutcome, 1)
			startRun := func() {
				go func() { runs <- decideRun(runRequest{}, s.run(runCtx, runRequest{})).outcome }()
			}
			if tc.running {
				startRun()
				<-tf.entered
			}
			var handedOver bool
			handOver := func() {
				handedOver = true
				if tc.racing {
					// Between the decision and the cancel: a run starts.
					startRun()
					select {
					case <-tf.entered:
					case <-time.After(300 * time.Millisecond):
					}
				}
				stopRun()
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				r.handOverWhenPreferred(runCtx, name, s, handOver)
			}()
			for tick := 0; tick < 3; tick++ {
				ended := false
				if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
					select {
					case <-done:
						ended = true
						return true, nil
					default:
						return clk.HasWaiters(), nil
					}
				}); err != nil {
					t.Fatal("the hand-over does not wait for its ticker")
				}
				if ended {
					break
				}
				clk.Step(2 * time.Second)
				// The hand-over's tick is taken in before the next.
				select {
				case <-done:
				case <-time.After(20 * time.Millisecond):
				}
			}
			if tc.running {
				close(tf.finish)
				if o := <-runs; o.result != resultNoChanges {
					t.Errorf("the run under way ended %s, want %s", o.result, resultNoChanges)
				}
			}
			cancel()
			<-done
			if handedOver != tc.handedOver {
				t.Errorf("handed over: %v, want %v", handedOver, tc.handedOver)
			}
			if tc.racing {
				o := <-runs
				tf.mu.Lock()
				interrupted := tf.interrupted
				tf.mu.Unlock()
				if interrupted {
					t.Errorf("the run that started as the hand-over was decided was interrupted (SIGINT to its plan): %s", o.result)
				}
				if o.result != resultStopped {
					t.Errorf("the run that raced the hand-over ended %s, want %s without a plan", o.result, resultStopped)
				}
			}
		})
	}
}
