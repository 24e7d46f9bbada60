package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/test/syncproc"
	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/test/traffic"
)

// haproxyGateFile is the file that the rollout guide adds beside main.tf of
// examples/pools/haproxy, whose data source gains haproxyGateArgument: the
// gate opens once terraform_data.haproxy_backend has delivered the pool.
// TestRolloutGuideShowsTheGateFileOfTheTrafficTest holds the guide to it.
const haproxyGateFile = `resource "k8s_readiness_gate" "web" {
  namespace      = var.namespace
  readiness_gate = data.k8s_ready_endpoints.web.readiness_gate
  pods           = [for e in data.k8s_ready_endpoints.web.endpoints : e.pod if e.pod != null]
  depends_on     = [terraform_data.haproxy_backend] # the load balancer's resource
}
`

// haproxyGateArgument is the line the guide adds to the data source of
// examples/pools/haproxy, after its pod_health_checks.
const haproxyGateArgument = `  readiness_gate        = "k8s.example/pool-web"` + "\n"

// The line of main.tf after which haproxyGateArgument goes.
const haproxyGateAfter = "  pod_health_checks     = true\n"

// TestRolloutGuideShowsTheGateFileOfTheTrafficTest: the rollout guide's
// section on readiness gates shows the argument and the file that
// TestAccTrafficGatedDeploymentRollout adds to the shipped HAProxy example,
// as they are, and the gate is the test's.
func TestRolloutGuideShowsTheGateFileOfTheTrafficTest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "templates", "guides", "rollout.md.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	// The snippets are in a numbered list, indented by 3 spaces.
	lines := strings.Split(string(raw), "\n")
	for i, line := range lines {
		lines[i] = strings.TrimPrefix(line, "   ")
	}
	guide := strings.Join(lines, "\n")
	for _, want := range []string{"```terraform\n" + haproxyGateFile + "```", haproxyGateArgument + "}\n```"} {
		if !strings.Contains(guide, want) {
			t.Errorf("templates/guides/rollout.md.tmpl does not show, as the traffic test has it:\n%s", want)
		}
	}
	if !strings.Contains(haproxyGateArgument, `"`+string(accGate)+`"`) {
		t.Errorf("the guide's gate %q is not the tests' %q", haproxyGateArgument, accGate)
	}
}

// addReadinessGate gives the example in e.dir the guide's readiness gate:
// the argument in its data source, and haproxyGateFile beside main.tf.
func (e *haproxyExample) addReadinessGate(t *testing.T) {
	t.Helper()
	main := filepath.Join(e.dir, "main.tf")
	text, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(text), haproxyGateAfter) != 1 {
		t.Fatalf("examples/pools/haproxy/main.tf: %q is not in it exactly once: the guide's edit (and the test's) is out of date", haproxyGateAfter)
	}
	writeText(t, main, strings.Replace(string(text), haproxyGateAfter, haproxyGateAfter+haproxyGateArgument, 1))
	writeText(t, filepath.Join(e.dir, "readiness_gate.tf"), haproxyGateFile)
}

// webDeployment is the Deployment web of ns: replicas pods of webLabels
// serving http on 8080 with a readinessProbe of /healthz (what the
// example's pod_health_checks gives HAProxy to check), each deleted with a
// grace period of rolloutGrace during which it still serves; rolled with
// maxSurge surge, maxUnavailable 0 and minReadySeconds minReady. With a
// gate, its pods declare that readiness gate.
func webDeployment(ns string, replicas int32, surge intstr.IntOrString, minReady int32, gate corev1.PodConditionType) *appsv1.Deployment {
	unavailable, grace := intstr.FromInt32(0), int64(rolloutGrace)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas:        &replicas,
			MinReadySeconds: minReady,
			Selector:        &metav1.LabelSelector{MatchLabels: webLabels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: webLabels, Annotations: map[string]string{"version": "1"}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1",
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: "/healthz", Port: intstr.FromInt32(8080)}}},
					}},
				},
			},
		},
	}
	if gate != "" {
		d.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
	}
	return d
}

// createDeployment creates d; when the test ends, its Deployment and
// ReplicaSets go before the namespace, their pods orphaned, so that no
// controller makes pods again while the namespace's pods are deleted.
func (c *testCluster) createDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	if _, err := c.client.AppsV1().Deployments(d.Namespace).Create(c.ctx(t), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		orphan := metav1.DeletePropagationOrphan
		_ = c.client.AppsV1().Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &orphan})
		_ = c.client.AppsV1().ReplicaSets(d.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &orphan}, metav1.ListOptions{})
	})
}

// deployment is the Deployment web of ns.
func (c *testCluster) deployment(t *testing.T, ns string) *appsv1.Deployment {
	t.Helper()
	d, err := c.client.AppsV1().Deployments(ns).Get(c.ctx(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// waitRolledOut waits, up to bound, until the Deployment web of ns has
// rolled out (rolledOut), and gives when it saw it.
func (c *testCluster) waitRolledOut(t *testing.T, ns string, bound time.Duration) time.Time {
	t.Helper()
	var d *appsv1.Deployment
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, bound, true, func(ctx context.Context) (bool, error) {
		var err error
		d, err = c.client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && rolledOut(d), nil
	})
	if err != nil {
		t.Fatalf("the Deployment did not roll out within %s: %+v", bound, d.Status)
	}
	return time.Now()
}

// rollDeployment starts a rollout of the Deployment web of ns (a new
// annotation of its template) and gives when.
func (c *testCluster) rollDeployment(t *testing.T, ns string) time.Time {
	t.Helper()
	d := c.deployment(t, ns)
	d.Spec.Template.Annotations["version"] = fmt.Sprint(d.Generation + 1)
	if _, err := c.client.AppsV1().Deployments(ns).Update(c.ctx(t), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// servingPods are the names of the pods of ns that are not terminating,
// sorted.
func (c *testCluster) servingPods(t *testing.T, ns string) []string {
	t.Helper()
	list, err := c.client.CoreV1().Pods(ns).List(c.ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// waitPodsGone waits, up to bound, until none of the pods named is left in
// ns.
func (c *testCluster) waitPodsGone(t *testing.T, ns string, names []string, bound time.Duration) {
	t.Helper()
	left := names
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, bound, true, func(ctx context.Context) (bool, error) {
		left = slices.DeleteFunc(slices.Clone(left), func(name string) bool {
			_, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		return len(left) == 0, nil
	})
	if err != nil {
		t.Fatalf("pods %v still there after %s", left, bound)
	}
}

// expectRolloutHeld waits (up to 30 s) for the rollout's new pods, as many
// as the old ones, each running with its containers ready and waiting for
// its gate; then, until until, checks every half second that the rollout
// does not progress: each old pod still there, not terminating and Ready,
// no new pod Ready, the Deployment not rolled out.
func (c *testCluster) expectRolloutHeld(t *testing.T, ns string, old []string, until time.Time) {
	t.Helper()
	// held says what shows the rollout going on, or "" while it holds;
	// waiting, whether every new pod is there, waiting for its gate.
	check := func(ctx context.Context) (held string, waiting bool, err error) {
		list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", false, err
		}
		newPods, gatePending := 0, 0
		for i := range list.Items {
			p := &list.Items[i]
			ready := testcluster.KubeletReady(p) == corev1.ConditionTrue && endpoints.ConditionTrue(p, corev1.PodReady)
			if slices.Contains(old, p.Name) {
				if p.DeletionTimestamp != nil || !ready {
					return fmt.Sprintf("old pod %s terminating %t, Ready %t", p.Name, p.DeletionTimestamp != nil, ready), false, nil
				}
				continue
			}
			newPods++
			if ready {
				return fmt.Sprintf("new pod %s is Ready", p.Name), false, nil
			}
			if p.Status.PodIP != "" && endpoints.ConditionTrue(p, corev1.ContainersReady) {
				gatePending++
			}
		}
		if len(list.Items)-newPods != len(old) {
			return fmt.Sprintf("%d of the %d old pods left", len(list.Items)-newPods, len(old)), false, nil
		}
		d, err := c.client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return "", false, err
		}
		if rolledOut(d) {
			return fmt.Sprintf("the Deployment rolled out: %+v", d.Status), false, nil
		}
		return "", newPods == len(old) && gatePending == newPods, nil
	}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		held, waiting, err := check(ctx)
		if held != "" {
			t.Fatalf("the rollout went on while its new pods waited for the gate: %s", held)
		}
		return err == nil && waiting, nil
	})
	if err != nil {
		t.Fatalf("the rollout's %d new pods did not all start, waiting for the gate, within 30 s: %v", len(old), err)
	}
	hold, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	err = wait.PollUntilContextCancel(hold, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		held, _, err := check(ctx)
		if held != "" {
			t.Fatalf("the rollout went on while its new pods waited for the gate: %s", held)
		}
		if err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
		return false, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}

// cliName is the CLI under test and its version, as one word
// ("Terraform/v1.11.4", "OpenTofu/v1.12.6").
func cliName(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", os.Getenv("TF_ACC_TERRAFORM_PATH"), err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.ReplaceAll(strings.TrimSpace(first), " ", "/")
}

// The gated rollout's Deployment: 5 pods, all replaced at once (maxSurge
// 100%, maxUnavailable 0), the old ones deleted 2 s after the new ones are
// Ready.
const (
	gatedReplicas = 5
	gatedMinReady = 2
	// gatedCompanionDown is how long the companion is down in the cases
	// that stop it, from the rollout's start: longer than the grace period.
	gatedCompanionDown = rolloutGrace*time.Second + 4*time.Second
	// gatedHold is how long the case without a companion checks that the
	// rollout waits before terraform apply runs.
	gatedHold = 6 * time.Second
)

// How the pool is kept current during a gated rollout.
const (
	companionUp   = "companion"
	companionDown = "companion-down"
	noCompanion   = "no-companion"
)

// TestAccTrafficGatedDeploymentRollout rolls a real Deployment of 5 pods
// (maxSurge 100%, maxUnavailable 0, minReadySeconds 2, pods that serve
// through a grace period of rolloutGrace) while a bounded client sends 50
// requests a second through HAProxy on the backend of examples/pools/haproxy
// (terminating_endpoints exclude), with and without the readiness gate of
// the rollout guide (the argument in its data source, haproxyGateFile
// beside it). Each case logs one line "rollout-gates: case=... cli=...
// failed=F total=T duration=Ds" (duration: from the template's change until
// the Deployment has rolled out), which bench/results-rollout.md records.
//
//   - companion (the companion runs throughout): with gates, no request
//     fails and HAProxy serves every new pod after the rollout (asserted);
//     without, the same rollout's count, duration and the new pods HAProxy
//     serves after it are reported beside.
//   - companion-down (the companion stopped as the rollout starts, started
//     again gatedCompanionDown later, longer than the grace period):
//     without gates, the Deployment finishes while HAProxy still names the
//     old pods, and requests fail (asserted above zero); with gates, the
//     rollout does not progress while the companion is down (the old pods
//     stay, the new ones are not Ready: asserted), no request fails, and it
//     completes once the companion is back.
//   - no-companion, with gates: the rollout does not progress until
//     terraform apply runs (asserted for gatedHold), then completes; a
//     second apply takes the old pods out; no request fails.
func TestAccTrafficGatedDeploymentRollout(t *testing.T) {
	cli := ""
	durations := map[string]time.Duration{}
	for _, tc := range []struct {
		pool  string
		gates bool
	}{
		{companionUp, false}, {companionUp, true},
		{companionDown, false}, {companionDown, true},
		{noCompanion, true},
	} {
		name := "no-gates+" + tc.pool
		if tc.gates {
			name = "gates+" + tc.pool
		}
		t.Run(name, func(t *testing.T) {
			if cli == "" {
				cli = cliName(t)
			}
			durations[name] = gatedRolloutThroughHAProxy(t, name, cli, tc.gates, tc.pool)
		})
	}
	if with, without := durations["gates+"+companionUp], durations["no-gates+"+companionUp]; with > 0 && without > 0 {
		t.Logf("rollout-gates: cli=%s the rollout with the companion took %.1fs with gates, %.1fs without", cli, with.Seconds(), without.Seconds())
	}
}

// gatedRolloutThroughHAProxy runs one case of
// TestAccTrafficGatedDeploymentRollout and gives the rollout's duration.
func gatedRolloutThroughHAProxy(t *testing.T, name, cli string, gates bool, pool string) time.Duration {
	c := accCluster(t)
	k := trafficSetUp(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := webBehindControllerPods(t, c, k)
	dir := t.TempDir()
	ex := startHAProxyExample(t, ctx, c, dir, ns, "exclude")
	h := ex.h
	var gate corev1.PodConditionType
	if gates {
		gate = accGate
		ex.addReadinessGate(t)
	}
	c.createDeployment(t, webDeployment(ns, gatedReplicas, intstr.FromString("100%"), gatedMinReady, gate))
	// The first pods run; with gates, they wait for the first apply.
	ready := gatedReplicas
	if gates {
		ready = 0
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		c.waitForSlices(t, ns, endpointCount(family, ready, gatedReplicas))
	}
	if _, err := ex.apply(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitRolledOut(t, ns, time.Minute)
	old := c.servingPods(t, ns)
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		c.waitForSlices(t, ns, endpointCount(family, gatedReplicas, gatedReplicas))
	}
	// The reloads from here on are the rollout's.
	if err := os.Remove(filepath.Join(dir, "reloads")); err != nil {
		t.Fatal(err)
	}
	if r := loadForASecond(t, h.URL(false), 50); r.Failed != 0 || !slices.Equal(r.Pods(), old) {
		t.Fatalf("before the rollout: %v, want answers from %v", r, old)
	}
	quiet, _ := time.ParseDuration(rolloutSettleMax)
	// idle waits until the companion has run what it saw (no run pending
	// for twice the longest settle window).
	idle := func(s *syncproc.Process) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := s.Idle(ctx, 2*quiet); err != nil {
			t.Fatal(err)
		}
	}
	var s *syncproc.Process
	if pool != noCompanion {
		// Its first run, if any (the gates' opening), before the rollout.
		s = startRolloutCompanion(t, c, dir, ex.rc)
		idle(s)
	}

	stop := make(chan struct{})
	during := make(chan traffic.Result, 1)
	go func() {
		r, _ := traffic.Run(context.Background(), traffic.Load{URL: h.URL(true), Rate: 50, Duration: 4 * time.Minute, Stop: stop})
		during <- r
	}()
	stopLoad := func() traffic.Result {
		close(stop)
		return <-during
	}
	defer func() {
		select {
		case <-stop:
		default:
			stopLoad()
		}
	}()
	if pool == companionDown {
		if code := s.Stop(45 * time.Second); code != 0 {
			t.Fatalf("the companion exited %d on SIGTERM", code)
		}
	}
	started := c.rollDeployment(t, ns)
	var rolled time.Time
	notes := ""
	switch pool {
	case companionUp:
		rolled = c.waitRolledOut(t, ns, 2*time.Minute)
	case companionDown:
		back := started.Add(gatedCompanionDown)
		if gates {
			c.expectRolloutHeld(t, ns, old, back)
		} else {
			rolled = c.waitRolledOut(t, ns, time.Minute)
			c.waitPodsGone(t, ns, old, time.Until(back)+time.Minute)
			time.Sleep(time.Until(back)) // the companion stays down that long
		}
		s = startRolloutCompanion(t, c, dir, ex.rc)
		notes = fmt.Sprintf(" down=%.1fs", time.Since(started).Seconds())
		if gates {
			rolled = c.waitRolledOut(t, ns, 2*time.Minute)
		}
	case noCompanion:
		c.expectRolloutHeld(t, ns, old, started.Add(gatedHold))
		applied := time.Now()
		if _, err := ex.apply(ctx); err != nil {
			t.Fatal(err)
		}
		rolled = c.waitRolledOut(t, ns, 2*time.Minute)
		notes = fmt.Sprintf(" apply_to_rolled_out=%.1fs", rolled.Sub(applied).Seconds())
		// The old pods terminate: a second apply takes them out of HAProxy
		// within their grace period.
		if _, err := ex.apply(ctx); err != nil {
			t.Fatal(err)
		}
	}
	next := c.servingPods(t, ns)
	if gates || pool != companionDown {
		c.waitPodsGone(t, ns, old, rolloutGrace*time.Second+time.Minute)
	}
	if s != nil {
		// The last change (the old pods gone) may still be settling.
		idle(s)
		// The runs of the rollout: those that ended after its start.
		ended := map[string]int{}
		for _, e := range s.Events("run ended", nil) {
			if e.Time.After(started) {
				ended[""]++
				ended[e.Str("result")]++
			}
		}
		notes += fmt.Sprintf(" runs=%d applied=%d state_updated=%d no_changes=%d", ended[""], ended["applied"], ended["state_updated"], ended["no_changes"])
		// The shrink guard refuses a run that would remove more than
		// -max-shrink of a pool: what it said, once per refusal.
		for _, line := range strings.Split(s.Log(), "\n") {
			if strings.Contains(line, "max-shrink") {
				notes += " shrink_guard_refused=1"
				t.Logf("%s: the companion's shrink guard: %s", name, line)
			}
		}
	}
	duringRollout := stopLoad()
	after := loadForASecond(t, h.URL(false), 50)
	duration := rolled.Sub(started)
	if rolled.IsZero() {
		t.Fatal("the rollout's end was not seen")
	}
	if duringRollout.Failed != 0 {
		log, _ := os.ReadFile(filepath.Join(dir, "haproxy", "haproxy.log"))
		reloads, _ := os.ReadFile(filepath.Join(dir, "reloads"))
		reloadsAt := reloadTimes(string(reloads))
		t.Logf("%s: the failures beside the reloads: %s", name, failuresBesideReloads(duringRollout, reloadsAt))
		// As in TestAccTrafficRollingUpdate: connections reset at a reload
		// that HAProxy says could not take over the old worker's sockets
		// are HAProxy's loss, not the pool's.
		if lost := resetsOfLostSockets(duringRollout, reloadsAt, string(log)); lost > 0 && gates {
			t.Logf("%s: %d of the %d failed requests are connections reset at a reload that HAProxy says could not take over the old worker's sockets (%q)",
				name, lost, duringRollout.Failed, traffic.HAProxyLostSockets)
			duringRollout.Failed -= lost
			notes += fmt.Sprintf(" haproxy_lost_sockets=%d", lost)
		}
	}
	if duringRollout.Failed > 0 {
		notes += fmt.Sprintf(" first_failure=%.1fs", duringRollout.FailedAt[0].At.Sub(started).Seconds())
	}
	served := 0
	for _, pod := range next {
		if after.ByPod[pod] > 0 {
			served++
		}
	}
	notes += fmt.Sprintf(" new_pods_served_after=%d/%d", served, len(next))
	t.Logf("rollout-gates: case=%s cli=%s failed=%d total=%d duration=%.1fs reloads=%d%s; failures %v; after %v",
		name, cli, duringRollout.Failed, duringRollout.Total, duration.Seconds(), ex.reloads(), notes, duringRollout.Failures, after)
	switch {
	case gates && duringRollout.Failed != 0:
		t.Errorf("%s: %d/%d requests failed during a rollout with gates: %v", name, duringRollout.Failed, duringRollout.Total, duringRollout.Failures)
	case !gates && pool == companionDown && duringRollout.Failed == 0:
		t.Errorf("%s: no request failed while the Deployment replaced every pod with the companion down: %v", name, duringRollout)
	}
	// Without gates, what HAProxy serves after the rollout is reported, not
	// asserted: the Deployment does not wait for it, and when the
	// companion's first run took only some of the new pods, the next one
	// would remove every old pod at once, which the shrink guard refuses.
	if gates && (after.Failed != 0 || !slices.Equal(after.Pods(), next)) {
		t.Errorf("%s, after the rollout: %v, want answers from %v only", name, after, next)
	}
	return duration
}
