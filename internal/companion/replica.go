package companion

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// A replica of the companion serves its workspaces: each runs its own
// loop, under its own Lease when replicas share them out, with at most
// maxRuns runs of the replica at once. The single-workspace flags are a
// list of one, served as before: its metrics have no workspace label, its
// Lease is -lease-name, and its failure ends the process.

// replica serves workspaces.
type replica struct {
	workspaces []workspace
	// single says the workspaces are the flags' one.
	single   bool
	client   *kube.Client
	hub      *hub
	log      *slog.Logger
	registry *prometheus.Registry
	// lease, when set, is the Lease of the one workspace (single), or the
	// group whose Leases the replicas share (Name is the prefix of each
	// workspace's).
	lease *kube.LeaseConfig
	// pod, when set, is the pod this replica runs in: it owns the
	// replica's member Lease.
	pod *kube.PodRef
	// slots bound the runs under way on this replica; nil: no bound.
	slots chan struct{}
	// members are the replicas of the group, when they share Leases.
	members group
	// clock is the time of the Leases, the hand-over and the restarts.
	clock clock.WithTicker

	mu sync.Mutex
	// running are the workspaces this replica runs now; problems why
	// others stopped.
	running  map[string]*syncer
	problems map[string]string
}

// group is what a replica knows of the replicas it shares Leases with
// (*kube.Membership).
type group interface {
	// Agreeing are the live replicas that share out the same workspaces,
	// this one among them, sorted.
	Agreeing() []string
	// Settled says whether the replica has been live for a Lease duration.
	Settled(id string) bool
}

func newReplica(workspaces []workspace, single bool, client *kube.Client, h *hub, log *slog.Logger, registry *prometheus.Registry,
	clk clock.WithTicker) *replica {
	return &replica{workspaces: workspaces, single: single, client: client, hub: h, log: log, registry: registry, clock: clk,
		running: map[string]*syncer{}, problems: map[string]string{}}
}

// serve runs every workspace until ctx ends; with one workspace of the
// flags, it gives that workspace's error.
func (r *replica) serve(ctx context.Context) error {
	if r.lease != nil && !r.single {
		members, err := r.client.JoinGroup(ctx, kube.MemberConfig{Namespace: r.lease.Namespace, Group: r.lease.Name,
			Identity: r.lease.Identity, LeaseDuration: r.lease.LeaseDuration, RetryPeriod: r.lease.RetryPeriod, Pod: r.pod, Keys: r.names(),
			Clock: r.clock}, r.log)
		if err != nil {
			return fmt.Errorf("the replicas' Leases in %s: %w; the companion needs get, list, create and update on leases there",
				r.lease.Namespace, err)
		}
		r.members = members
	}
	if r.single {
		return r.serveWorkspace(ctx, r.workspaces[0], newMetrics(r.registry))
	}
	var wg sync.WaitGroup
	for _, w := range r.workspaces {
		m := newMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"workspace": w.name}, r.registry))
		wg.Go(func() { _ = r.serveWorkspace(ctx, w, m) })
	}
	wg.Wait()
	return nil
}

// serveWorkspace runs w until ctx ends: a workspace that stops with an
// error (its state cannot be read, its configuration is wrong) starts
// again after its backoff, and is named in /healthz meanwhile.
func (r *replica) serveWorkspace(ctx context.Context, w workspace, m *metrics) error {
	log := r.log
	if !r.single {
		log = log.With("workspace", w.name)
	}
	wait := w.opts.RetryInitial
	for {
		s, err := newSyncer(w.opts, r.client, r.hub, log)
		if err == nil {
			s.metrics, s.slots = m, r.slots
			err = r.lead(ctx, w, s)
		}
		if r.single || ctx.Err() != nil {
			return err
		}
		if err == nil {
			wait = w.opts.RetryInitial
			continue
		}
		err = explain(err, w.opts.Terraform, w.opts.Dir)
		log.Error("workspace stopped: starting it again after the backoff", "error", err.Error(), "retry_in", wait.String())
		r.setProblem(w.name, "stopped: "+err.Error())
		select {
		case <-ctx.Done():
			return nil
		case <-r.clock.After(wait):
		}
		wait = min(2*wait, w.opts.RetryMax)
	}
}

// lead runs s while this replica may: always without Leases, else while it
// holds the workspace's Lease, which it hands over when the group prefers
// another live replica for it.
func (r *replica) lead(ctx context.Context, w workspace, s *syncer) error {
	run := func(ctx context.Context) error {
		r.track(w.name, s)
		defer r.untrack(w.name)
		s.metrics.leading.Set(1)
		defer s.metrics.leading.Set(0)
		return s.Run(ctx)
	}
	if r.lease == nil {
		return run(ctx)
	}
	cfg := *r.lease
	cfg.Clock = r.clock
	if r.single {
		return r.client.WithLease(ctx, cfg, s.log, run)
	}
	cfg.Name = r.lease.Name + "-" + w.name
	cfg.Patience = func(lastHolder string) time.Duration { return r.patience(w.name, lastHolder) }
	err := r.client.WithLease(ctx, cfg, s.log, func(leadCtx context.Context) error {
		runCtx, handOver := context.WithCancel(leadCtx)
		defer handOver()
		go r.handOverWhenPreferred(runCtx, w.name, s, handOver)
		return run(runCtx)
	})
	return err
}

// names are the names of the file's workspaces: the keys this replica
// shares out with the group.
func (r *replica) names() []string {
	names := make([]string, len(r.workspaces))
	for i, w := range r.workspaces {
		names[i] = w.name
	}
	return names
}

// order is the order in which the live replicas but without try the Lease
// of workspace name (kube.Shares over every workspace of the file).
func (r *replica) order(name string, live []string) []string {
	return kube.Shares(r.names(), live)[name]
}

// patience is how long this replica waits, once the Lease of workspace
// name can be taken, before it takes it: none when the group gives it the
// workspace among the live replicas that read the same workspaces
// (Agreeing; the last holder left out: it is gone, or handing over), two
// retry periods for each replica before it.
func (r *replica) patience(name, lastHolder string) time.Duration {
	live := r.members.Agreeing()
	if lastHolder != r.lease.Identity {
		live = slices.DeleteFunc(live, func(id string) bool { return id == lastHolder })
	}
	return time.Duration(slices.Index(r.order(name, live), r.lease.Identity)) * 2 * r.lease.RetryPeriod
}

// handOverWhenPreferred ends the run of workspace name (handOver), between
// two runs, once the group gives it to another live replica that has been
// up for a Lease duration: replicas that start take their share. The group
// is the replicas that read the same workspaces (Agreeing): while a
// rollout runs replicas of two lists, each keeps what it holds rather than
// pass a workspace back and forth.
func (r *replica) handOverWhenPreferred(ctx context.Context, name string, s *syncer, handOver context.CancelFunc) {
	ticker := r.clock.NewTicker(r.lease.RetryPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		preferred := r.order(name, r.members.Agreeing())[0]
		if preferred == r.lease.Identity || !r.members.Settled(preferred) {
			continue
		}
		if s.handOver(handOver) {
			s.log.Info("handing the workspace over to the replica the group prefers for it", "to", preferred)
			return
		}
	}
}

func (r *replica) track(name string, s *syncer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[name] = s
	delete(r.problems, name)
}

func (r *replica) untrack(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, name)
}

func (r *replica) setProblem(name, problem string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems[name] = problem
}

// healthText is /healthz's body: "ok", then what is degraded, a line each;
// a workspace's lines start with its name, but with the flags' one.
func (r *replica) healthText() string {
	lines := []string{"ok"}
	r.mu.Lock()
	running, problems := maps.Clone(r.running), maps.Clone(r.problems)
	r.mu.Unlock()
	for _, w := range r.workspaces {
		var own []string
		if s := running[w.name]; s != nil {
			own = s.healthLines()
		} else if p := problems[w.name]; p != "" {
			own = []string{p}
		}
		for _, line := range own {
			if !r.single {
				line = "workspace " + w.name + ": " + line
			}
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
