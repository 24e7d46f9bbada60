package companion

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// Pods that wait for a readiness gate. A pool read with readiness_gate
// holds the pods ready but for it (gate_pending): a new one is a pool
// change like any, and the run that applies it opens the gate through
// k8s_readiness_gate. The companion counts the pods that wait and how long
// each waited (from when it first saw it wait to when it saw it no longer
// wait), and, with -gate-open-after, opens the gate itself of a pod that
// waited that long: the fail-safe that lets a rollout go on when the pool
// cannot be applied (the load balancer refuses it, a run keeps failing or
// is refused), at the price of a pod Ready that the load balancer may not
// have. By default it never does: the rollout waits, and loses no traffic.

// waitingPod is a pod that waits for the readiness gate of a pool of a
// cluster (the instance's provider configuration).
type waitingPod struct {
	cluster string
	gate    corev1.PodConditionType
	pod     types.NamespacedName
}

// waitingPods are the pods of eps that wait for their gate, in namespace.
func waitingPods(namespace string, eps []endpoints.Endpoint) []types.NamespacedName {
	var out []types.NamespacedName
	for _, e := range eps {
		if e.GatePending && e.Pod != "" {
			out = append(out, types.NamespacedName{Namespace: namespace, Name: e.Pod})
		}
	}
	return out
}

// gateWait is what is known of one waiting pod.
type gateWait struct {
	since time.Time
	// opened says the fail-safe opened its gate; retry, when a try
	// failed, is when to try again.
	opened bool
	retry  time.Time
}

// gateRetry is how long a failed opening waits before it is tried again.
const gateRetry = 10 * time.Second

// gateWaits are the pods that wait for a gate now. Its methods are safe
// for concurrent use: /metrics reads the oldest wait while the pools are
// recomputed.
type gateWaits struct {
	mu    sync.Mutex
	waits map[waitingPod]*gateWait
}

// update records the pods waiting at now: those not seen before start
// their wait, those no longer waiting end it (their waits are given back),
// but those that keep says are kept as they are (the pools of a cluster
// that did not answer, or whose read fails, were not recomputed).
func (g *gateWaits) update(now time.Time, waiting map[waitingPod]bool, keep func(waitingPod) bool) (ended []time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.waits == nil {
		g.waits = map[waitingPod]*gateWait{}
	}
	for p := range waiting {
		if g.waits[p] == nil {
			g.waits[p] = &gateWait{since: now}
		}
	}
	for p, w := range g.waits {
		if !waiting[p] && !keep(p) {
			ended = append(ended, now.Sub(w.since))
			delete(g.waits, p)
		}
	}
	return ended
}

// count is how many pods wait now.
func (g *gateWaits) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waits)
}

// oldest is how long the pod that has waited longest has waited at now;
// 0 when none waits.
func (g *gateWaits) oldest(now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	var d time.Duration
	for _, w := range g.waits {
		d = max(d, now.Sub(w.since))
	}
	return d
}

// due are the pods whose gate the fail-safe is to open at now: waiting for
// bound or longer, not opened yet, not waiting for a retry.
func (g *gateWaits) due(now time.Time, bound time.Duration) []waitingPod {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []waitingPod
	for p, w := range g.waits {
		if !w.opened && !now.Before(w.since.Add(bound)) && !now.Before(w.retry) {
			out = append(out, p)
		}
	}
	return out
}

// tried records the fail-safe's opening of p at now: done, or to try again
// gateRetry later.
func (g *gateWaits) tried(p waitingPod, done bool, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.waits[p]; w != nil {
		w.opened, w.retry = done, now.Add(gateRetry)
	}
}

// next is when the fail-safe has next to open a gate; zero when never.
func (g *gateWaits) next(bound time.Duration) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	var next time.Time
	for _, w := range g.waits {
		if w.opened {
			continue
		}
		at := w.since.Add(bound)
		if w.retry.After(at) {
			at = w.retry
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// noteGates records the pods that the evaluations of instances find
// waiting for a gate, in the metrics, and, with -gate-open-after, opens
// the gates of those that have waited that long.
func (s *syncer) noteGates(ctx context.Context, instances []instance, now time.Time) {
	waiting := map[waitingPod]bool{}
	notRecomputed := map[string]bool{}
	for i, in := range instances {
		e := s.evals[i]
		if e.clusterDown || e.unreadable != "" {
			notRecomputed[in.cluster] = true
			continue
		}
		for _, pod := range e.waiting {
			waiting[waitingPod{cluster: in.cluster, gate: e.gate, pod: pod}] = true
		}
	}
	for _, d := range s.metrics.gates.update(now, waiting, func(p waitingPod) bool { return notRecomputed[p.cluster] }) {
		s.metrics.gateWait.Observe(d.Seconds())
	}
	if s.opts.GateOpenAfter <= 0 {
		return
	}
	for _, p := range s.metrics.gates.due(now, s.opts.GateOpenAfter) {
		cl := s.clusters[p.cluster]
		if cl == nil || cl.client == nil {
			continue
		}
		openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := cl.client.OpenGate(openCtx, p.pod.Namespace, p.pod.Name, "", p.gate, "OpenedAfterBound",
			fmt.Sprintf("terraform-provider-k8s sync: the pool that holds the pod was not applied within -gate-open-after (%s)", s.opts.GateOpenAfter))
		cancel()
		s.metrics.gates.tried(p, err == nil, now)
		if err != nil {
			s.log.Error("opening a readiness gate after -gate-open-after failed; tried again", "pod", p.pod.String(), "gate", string(p.gate), "error", err)
			continue
		}
		s.metrics.gatesOpenedAfterBound.Inc()
		s.log.Warn("readiness gate opened by -gate-open-after: the pod is Ready although its pool is not applied yet",
			"pod", p.pod.String(), "gate", string(p.gate), "cluster", cl.name, "waited", s.opts.GateOpenAfter.String())
	}
}
