package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vigie/terraform-provider-k8s/test/syncproc"
	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/test/traffic"
)

// TestAccTrafficRollingUpdate rolls a real Deployment of 5 pods one pod at
// a time (maxSurge 1, maxUnavailable 0, minReadySeconds rolloutPause: a new
// pod Ready, then an old one deleted with a grace period of rolloutGrace:
// it drains, then goes) while a bounded client sends 50 requests a second
// through HAProxy on the backend of examples/pools/haproxy, and reports
// failed/total in one line per case ("rollout: ..."), which
// bench/results-rollout.md records.
//
//   - "baseline": the pool applied once, before the rollout. Its backend
//     names only the old pods: once they are gone, every request fails.
//   - "companion, terminating_endpoints=MODE": `terraform-provider-k8s
//     sync` runs on the working directory (rolloutSettleQuiet,
//     rolloutSettleMax) and applies each change of the pool: the example's
//     terraform_data writes the backend, checks it with haproxy -c, saves
//     the servers' state and reloads HAProxy (startHAProxyExample).
//     The configuration also keeps rolloutUnrelated other pools (a run
//     plans what the changed pool needs, so they cost it nothing).
//     With exclude and fallback, no request fails (asserted): the
//     companion's apply ends within the grace period, while the old pod
//     still serves. With include, the count is reported, not asserted.
func TestAccTrafficRollingUpdate(t *testing.T) {
	t.Run("baseline", func(t *testing.T) { rollingUpdateThroughHAProxy(t, "exclude", false) })
	for _, mode := range []string{"exclude", "fallback", "include"} {
		t.Run("companion terminating_endpoints="+mode, func(t *testing.T) { rollingUpdateThroughHAProxy(t, mode, true) })
	}
}

// The companion's settle window in the rollout test and the rollout guide:
// small beside the pods' grace period (rolloutGrace, in seconds), so that a
// run starts within a second of a change, and each one before the old pod
// is gone. rolloutPause is the Deployment's minReadySeconds: how long a new
// pod is Ready before an old one is deleted.
const (
	rolloutSettleQuiet = "500ms"
	rolloutSettleMax   = "2s"
	rolloutGrace       = 10
	rolloutPause       = 2 * time.Second
	// rolloutUnrelated are the pools beside the one rolled in the
	// companion's cases: Services other-000... of no pod, each kept by an
	// instance of terraform_data.other.
	rolloutUnrelated = 100
)

// unrelatedPools are n pools of their own Services, beside the example's.
func unrelatedPools(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(`
data "k8s_ready_endpoints" "other" {
  for_each  = toset([for i in range(%d) : format("other-%%03d", i)])
  namespace = var.namespace
  service   = each.key
  port_name = "http"
}

resource "terraform_data" "other" {
  for_each = data.k8s_ready_endpoints.other
  input    = [for e in each.value.endpoints : "${e.address}:${e.port}"]
}
`, n)
}

// startRolloutCompanion starts the companion built from this provider on
// dir (syncproc follows its JSON log) and waits until it watches; it is
// stopped with SIGTERM at the test's end, or by the test.
func startRolloutCompanion(t *testing.T, c *testCluster, dir, rc string) *syncproc.Process {
	t.Helper()
	s, err := syncproc.Start(providerBinary(t), []string{"sync", "-chdir", dir, "-terraform", os.Getenv("TF_ACC_TERRAFORM_PATH"),
		"-kubeconfig", c.kubeconfig, "-listen", "",
		"-settle-quiet", rolloutSettleQuiet, "-settle-max", rolloutSettleMax, "-stop-timeout", "30s"},
		// Its runs' terraform finds the cluster as the provider does: $KUBECONFIG.
		syncproc.Options{Env: []string{"TF_CLI_CONFIG_FILE=" + rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "KUBECONFIG=" + c.kubeconfig}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if code := s.Stop(45 * time.Second); code != 0 {
			t.Errorf("the companion exited %d on SIGTERM", code)
		}
		if t.Failed() {
			t.Logf("companion log:\n%s", s.Log())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Wait(ctx, "watching", 1, nil); err != nil {
		t.Fatalf("%v:\n%s", err, s.Log())
	}
	return s
}

// webBehindControllerPods is a new namespace with a dual-stack Service
// web whose pods, made by its controllers, the test kubelet k runs.
func webBehindControllerPods(t *testing.T, c *testCluster, k *testcluster.NetKubelet) string {
	t.Helper()
	ns := c.namespace(t)
	c.createService(t, dualStackWebServiceSpec(ns, corev1.IPv4Protocol, corev1.IPv6Protocol))
	k.RunControllerPods(testcluster.ControllerPods{Namespace: ns, Selector: labels.SelectorFromSet(webLabels), Node: accNode})
	t.Cleanup(func() {
		if err := k.Err(); err != nil {
			t.Errorf("the test kubelet could not start pods: %v", err)
		}
	})
	return ns
}

func rollingUpdateThroughHAProxy(t *testing.T, terminating string, companion bool) {
	c := accCluster(t)
	k := trafficSetUp(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := webBehindControllerPods(t, c, k)
	c.createDeployment(t, webDeployment(ns, 5, intstr.FromInt32(1), int32(rolloutPause/time.Second), ""))
	c.waitRolledOut(t, ns, time.Minute)
	old := c.servingPods(t, ns)
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		c.waitForSlices(t, ns, endpointCount(family, 5, 5))
	}
	unrelated := 0
	if companion {
		unrelated = rolloutUnrelated
		for i := range unrelated {
			other := webServiceSpec(ns, httpPort)
			other.Name, other.Spec.Selector = fmt.Sprintf("other-%03d", i), map[string]string{"app": fmt.Sprintf("other-%03d", i)}
			c.createService(t, other)
		}
	}
	dir := t.TempDir()
	ex := startHAProxyExample(t, ctx, c, dir, ns, terminating)
	h := ex.h
	writeText(t, filepath.Join(dir, "others.tf"), unrelatedPools(unrelated))
	if _, err := ex.apply(ctx); err != nil {
		t.Fatal(err)
	}
	// The reloads from here on are the rollout's.
	if err := os.Remove(filepath.Join(dir, "reloads")); err != nil {
		t.Fatal(err)
	}
	if r := loadForASecond(t, h.URL(false), 50); r.Failed != 0 || !slices.Equal(r.Pods(), old) {
		t.Fatalf("before the rollout: %v, want answers from %v", r, old)
	}
	rc := ex.rc
	var s *syncproc.Process
	if companion {
		s = startRolloutCompanion(t, c, dir, rc)
	}

	// The load covers the rollout, until the old pods are gone and the
	// companion has applied what it saw.
	stop := make(chan struct{})
	during := make(chan traffic.Result, 1)
	go func() {
		r, _ := traffic.Run(context.Background(), traffic.Load{URL: h.URL(true), Rate: 50, Duration: 4 * time.Minute, Stop: stop})
		during <- r
	}()
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			<-during
		}
	}()
	started := c.rollDeployment(t, ns)
	rolled := c.waitRolledOut(t, ns, 2*time.Minute)
	next := c.servingPods(t, ns)
	c.waitPodsGone(t, ns, old, rolloutGrace*time.Second+time.Minute)
	runs, applied, stateUpdated, noChanges := 0, 0, 0, 0
	var longestRun time.Duration
	if companion {
		// The last change (the last old pod gone) may still be settling:
		// no run pending for twice the longest settle window.
		quiet, _ := time.ParseDuration(rolloutSettleMax)
		idle, cancelIdle := context.WithTimeout(ctx, 2*time.Minute)
		if err := s.Idle(idle, 2*quiet); err != nil {
			t.Fatal(err)
		}
		cancelIdle()
	}
	close(stop)
	stopped = true
	duringRollout := <-during
	if companion {
		ended := func(result string) int { return s.Count("run ended", map[string]string{"result": result}) }
		runs, applied, stateUpdated, noChanges = s.Count("run started", nil), ended("applied"), ended("state_updated"), ended("no_changes")
		for _, e := range s.Events("run ended", nil) {
			if d, err := time.ParseDuration(e.Str("duration")); err == nil {
				longestRun = max(longestRun, d)
			}
		}
		if code := s.Stop(45 * time.Second); code != 0 {
			t.Errorf("the companion exited %d on SIGTERM", code)
		}
	}
	after := loadForASecond(t, h.URL(false), 50)
	reloads, err := os.ReadFile(filepath.Join(dir, "reloads"))
	if err != nil && companion {
		t.Fatal(err)
	}
	reloadCount := strings.Count(string(reloads), "\n")
	name := "baseline (pool applied once)"
	if companion {
		name = "companion terminating_endpoints=" + terminating
	}
	t.Logf("rollout: %s: failed/total during the rollout %d/%d, after it %d/%d; the Deployment rolled out in %.1fs; companion runs %d (applied %d, state_updated %d, no_changes %d), HAProxy reloads %d; %d unrelated pools beside, the longest run %s; failures %v",
		name, duringRollout.Failed, duringRollout.Total, after.Failed, after.Total, rolled.Sub(started).Seconds(), runs, applied, stateUpdated, noChanges, reloadCount, unrelated,
		longestRun, duringRollout.Failures)
	if !companion {
		if after.Failed != after.Total || slices.ContainsFunc(duringRollout.Pods(), func(p string) bool { return slices.Contains(next, p) }) {
			t.Errorf("baseline: after the rollout %v, during %v; want every request failed, and no answer from the new pods", after, duringRollout)
		}
		return
	}
	// 10 changes of the pool (5 pods in, 5 out; with include, 5 more: each
	// old pod in as terminating first), each one reload at most: a run that
	// changes nothing reloads nothing.
	if reloadCount < 1 || reloadCount > 15 || applied != reloadCount {
		t.Errorf("%s: %d reloads, %d runs applied (of %d); want one reload per applied run, 1 to 15", name, reloadCount, applied, runs)
	}
	// A change no resource uses (a draining flag under include) is brought
	// into state once, never planned again and again.
	if noChanges != 0 {
		t.Errorf("%s: %d runs had nothing to do, want none", name, noChanges)
	}
	if duringRollout.Failed != 0 {
		log, _ := os.ReadFile(filepath.Join(dir, "haproxy", "haproxy.log"))
		reloadsAt := reloadTimes(string(reloads))
		t.Logf("%s: the failures beside the reloads: %s\nHAProxy's log:\n%s", name, failuresBesideReloads(duringRollout, reloadsAt), log)
		// A reload whose master could not take over the old worker's
		// sockets (HAProxy says so) resets what waits on them: HAProxy's
		// loss, not the pool's. Only such resets, at a reload, are counted
		// apart, and the line says how many.
		if lost := resetsOfLostSockets(duringRollout, reloadsAt, string(log)); lost > 0 {
			t.Logf("%s: %d of the %d failed requests are connections reset at a reload that HAProxy says could not take over the old worker's sockets (%q); they are HAProxy's, not the pool's",
				name, lost, duringRollout.Failed, traffic.HAProxyLostSockets)
			duringRollout.Failed -= lost
		}
	}
	// The documented settings for zero (docs/guides/rollout.md) are exclude
	// and fallback; include is measured and reported (a pod kept in the pool
	// until it is gone: a request may still reach it as its network goes).
	if terminating != "include" && duringRollout.Failed != 0 {
		t.Errorf("%s: %d/%d requests failed during the rollout: %v", name, duringRollout.Failed, duringRollout.Total, duringRollout.Failures)
	}
	if after.Failed != 0 || !slices.Equal(after.Pods(), next) {
		t.Errorf("%s, after the rollout: %v, want answers from %v only", name, after, next)
	}
}

// failuresBesideReloads gives each failure kept by r with its time from the
// start of the load, and how far it came from the nearest HAProxy reload
// (at: reloadTimes): what tells a failure at a reload from one of a pod.
func failuresBesideReloads(r traffic.Result, at []time.Time) string {
	var out []string
	for _, f := range r.FailedAt {
		nearest, best := "no reload", time.Duration(-1)
		for i, reload := range at {
			if d := f.At.Sub(reload); best < 0 || d.Abs() < best {
				nearest, best = fmt.Sprintf("%+dms from reload %d", d.Milliseconds(), i+1), d.Abs()
			}
		}
		out = append(out, fmt.Sprintf("%.3fs %s (%s)", f.At.Sub(r.Started).Seconds(), f.Reason, nearest))
	}
	return strings.Join(out, "; ")
}

// resetsOfLostSockets counts the failures of r that a reload (at:
// reloadTimes) which lost its sockets explains: none unless HAProxy's log says a reload lost them, and
// then only connections reset from half a second before a reload to two
// seconds after it (the old worker closes its sockets once the new one is
// up). The failures r did not keep (after the first 20) are never counted.
func resetsOfLostSockets(r traffic.Result, at []time.Time, haproxyLog string) int {
	if !strings.Contains(haproxyLog, traffic.HAProxyLostSockets) {
		return 0
	}
	n := 0
	for _, f := range r.FailedAt {
		if !strings.HasSuffix(f.Reason, "connection reset by peer") {
			continue
		}
		if slices.ContainsFunc(at, func(reload time.Time) bool {
			d := f.At.Sub(reload)
			return d >= -500*time.Millisecond && d <= 2*time.Second
		}) {
			n++
		}
	}
	return n
}

// reloadTimes are the times of the provisioner's reloads file: one Unix
// time a line, in seconds (date +%s.%N).
func reloadTimes(reloads string) []time.Time {
	var at []time.Time
	for _, line := range strings.Fields(reloads) {
		if secs, err := strconv.ParseFloat(line, 64); err == nil {
			at = append(at, time.Unix(0, int64(secs*float64(time.Second))))
		}
	}
	return at
}
