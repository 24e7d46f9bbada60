package companion

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The waits of pods for their readiness gate: a pod seen waiting starts its
// wait, one no longer seen ends it (and its length is given), one of a
// cluster not recomputed keeps it; the fail-safe's pods are those that
// waited the bound, once each, a failed opening tried again later.
func TestAPodsWaitForItsGateIsTimedAndTheFailSafeOpensItOnce(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(cluster, name string) waitingPod {
		return waitingPod{cluster: cluster, gate: "k8s.example/pool-web", pod: types.NamespacedName{Namespace: "shop", Name: name}}
	}
	a, b, east := pod("", "web-a"), pod("", "web-b"), pod("east", "web-c")
	keepNone := func(waitingPod) bool { return false }
	var g gateWaits
	bound := 10 * time.Second

	if ended := g.update(t0, map[waitingPod]bool{a: true, east: true}, keepNone); len(ended) != 0 || g.count() != 2 {
		t.Fatalf("two pods start waiting: ended %v, count %d", ended, g.count())
	}
	if ended := g.update(t0.Add(3*time.Second), map[waitingPod]bool{a: true, b: true}, func(p waitingPod) bool { return p.cluster == "east" }); len(ended) != 0 || g.count() != 3 {
		t.Errorf("east not recomputed keeps its pod: ended %v, count %d", ended, g.count())
	}
	if got := g.oldest(t0.Add(4 * time.Second)); got != 4*time.Second {
		t.Errorf("oldest wait %v, want 4s", got)
	}
	if got := g.next(bound); !got.Equal(t0.Add(bound)) {
		t.Errorf("the fail-safe's next time %v, want the first pod's wait plus the bound", got)
	}
	if due := g.due(t0.Add(9*time.Second), bound); len(due) != 0 {
		t.Errorf("before the bound, due %v", due)
	}
	due := g.due(t0.Add(bound), bound)
	slices.SortFunc(due, func(x, y waitingPod) int { return strings.Compare(x.pod.Name, y.pod.Name) })
	if !slices.Equal(due, []waitingPod{a, east}) {
		t.Fatalf("at the bound, due %v, want web-a and web-c", due)
	}
	g.tried(a, true, t0.Add(bound))
	g.tried(east, false, t0.Add(bound))
	if due := g.due(t0.Add(bound+time.Second), bound); len(due) != 0 {
		t.Errorf("web-a opened and web-c's retry not yet due: due %v", due)
	}
	due = g.due(t0.Add(bound+gateRetry), bound)
	slices.SortFunc(due, func(x, y waitingPod) int { return strings.Compare(x.pod.Name, y.pod.Name) })
	if !slices.Equal(due, []waitingPod{b, east}) {
		t.Errorf("after the retry delay, due %v, want web-b (its bound passed) and web-c again", due)
	}
	ended := g.update(t0.Add(12*time.Second), map[waitingPod]bool{b: true}, keepNone)
	slices.Sort(ended)
	if !slices.Equal(ended, []time.Duration{12 * time.Second, 12 * time.Second}) || g.count() != 1 {
		t.Errorf("web-a and web-c no longer wait: ended %v, count %d", ended, g.count())
	}
	if g.update(t0.Add(20*time.Second), nil, keepNone); g.count() != 0 || g.oldest(t0.Add(20*time.Second)) != 0 || !g.next(bound).IsZero() {
		t.Errorf("none waits: count %d, oldest %v, next %v", g.count(), g.oldest(t0.Add(20*time.Second)), g.next(bound))
	}
}
