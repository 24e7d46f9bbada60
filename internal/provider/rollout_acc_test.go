package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/internal/testcluster"
	"github.com/vigie/terraform-provider-k8s/internal/traffic"
)

// TestAccTrafficRollingUpdate replaces the 5 pods of a Service one by one
// (new pod ready, then the old one deleted with a grace period: it drains,
// then goes) while a bounded client sends 50 requests a second through
// HAProxy on the backend of examples/pools/haproxy, and reports failed/total.
//
//   - "pool applied once": the baseline. The backend of the apply before
//     the rollout names only the old pods: once they are gone, every request
//     fails.
//   - "pool re-applied during the rollout": the test itself re-applies and
//     reloads HAProxy in a loop, as the companion of issue 19 will when a
//     pool changes (this loop is its stand-in): no request fails.
func TestAccTrafficRollingUpdate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reapply bool
	}{{"pool applied once", false}, {"pool re-applied during the rollout", true}} {
		t.Run(tc.name, func(t *testing.T) { rollingUpdateThroughHAProxy(t, tc.reapply) })
	}
}

func rollingUpdateThroughHAProxy(t *testing.T, reapply bool) {
	c := accCluster(t)
	k := trafficSetUp(t, c)
	n := k.Network()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := c.namespace(t)
	c.createService(t, dualStackWebServiceSpec(ns, corev1.IPv4Protocol, corev1.IPv6Protocol))
	pod := func(i int) testcluster.Pod {
		return testcluster.Pod{Name: fmt.Sprintf("web-%d", i), Labels: webLabels, IPs: n.PodIPs(i), Ready: true, Node: accNode, Ports: map[string]int32{"http": 8080}}
	}
	var old, next []string
	var replacements []testcluster.Pod
	for i := 1; i <= 5; i++ {
		if err := k.RunPod(ctx, ns, pod(i)); err != nil {
			t.Fatal(err)
		}
		old = append(old, pod(i).Name)
		replacements = append(replacements, pod(i+5))
		next = append(next, pod(i+5).Name)
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		c.waitForSlices(t, ns, endpointCount(family, 5, 5))
	}
	dir := t.TempDir()
	backendFile := filepath.Join(dir, "backend.cfg")
	writeText(t, backendFile, applyHAProxyExample(t, c, dir, ns))
	h, err := traffic.StartHAProxy(ctx, traffic.HAProxyOptions{Dir: t.TempDir(), Backend: backendFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	if r := loadForASecond(t, h.URL(false), 50); r.Failed != 0 || !slices.Equal(r.Pods(), old) {
		t.Fatalf("before the rollout: %v, want answers from %v", r, old)
	}

	// What the companion will do on each change of the pool: apply, write
	// the backend, reload. Here, in a loop until the rollout is over.
	stop, looped := make(chan struct{}), make(chan error, 1)
	applies := 0
	reapplyOnce := func() error {
		backend, err := reapplyHAProxyExample(dir, c.kubeconfig, ns)
		if err != nil {
			return err
		}
		if err := os.WriteFile(backendFile, []byte(backend), 0o600); err != nil {
			return err
		}
		applies++
		return h.Reload(ctx)
	}
	if reapply {
		go func() {
			for {
				select {
				case <-stop:
					looped <- nil
					return
				default:
				}
				if err := reapplyOnce(); err != nil {
					looped <- err
					return
				}
			}
		}()
	} else {
		close(looped)
	}

	const pause, grace = 2 * time.Second, 10
	// The rollout takes 9 pauses and the last grace period; the load covers it.
	during := make(chan traffic.Result, 1)
	go func() {
		r, _ := traffic.Run(context.Background(), traffic.Load{URL: h.URL(true), Rate: 50, Duration: 9*pause + grace*time.Second + 2*time.Second})
		during <- r
	}()
	if err := k.RollingUpdate(ctx, testcluster.Rollout{Namespace: ns, Old: old, New: replacements, Pause: pause, Grace: grace}); err != nil {
		t.Fatal(err)
	}
	if reapply {
		close(stop)
		if err := <-looped; err != nil {
			t.Fatal(err)
		}
		// The change the loop may have missed: the last old pod gone.
		if err := reapplyOnce(); err != nil {
			t.Fatal(err)
		}
	}
	duringRollout := <-during
	after := loadForASecond(t, h.URL(false), 50)
	t.Logf("%s: during the rollout %d/%d requests failed %v (%d applies); after it %d/%d",
		map[bool]string{false: "pool applied once", true: "pool re-applied"}[reapply],
		duringRollout.Failed, duringRollout.Total, duringRollout.Failures, applies, after.Failed, after.Total)
	if !reapply {
		if after.Failed != after.Total || slices.ContainsFunc(duringRollout.Pods(), func(p string) bool { return slices.Contains(next, p) }) {
			t.Errorf("pool applied once: after the rollout %v, during %v; want every request failed, and no answer from the new pods", after, duringRollout)
		}
		return
	}
	if duringRollout.Failed != 0 {
		t.Errorf("pool re-applied: %d/%d requests failed during the rollout: %v", duringRollout.Failed, duringRollout.Total, duringRollout.Failures)
	}
	if after.Failed != 0 || !slices.Equal(after.Pods(), slices.Sorted(slices.Values(next))) {
		t.Errorf("pool re-applied, after the rollout: %v, want answers from %v only", after, next)
	}
}
