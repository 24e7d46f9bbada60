package imagetest

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// chartReplica is one replica of the chart's Deployment run here: its pod
// (an object in the API server, for the downward API and as its member
// Lease's owner, and its containers under podman), its sync container.
type chartReplica struct {
	pod  *pod
	port int
	stop func() result
	log  *syncBuffer
}

// leading says whether the replica runs workspace (k8s_sync_leading).
func (r *chartReplica) leading(workspace string) bool {
	return metric(r.port, `k8s_sync_leading{workspace="`+workspace+`"}`) == 1
}

// applied is the replica's count of applied runs of workspace.
func (r *chartReplica) applied(workspace string) float64 {
	return max(0, metric(r.port, `k8s_sync_runs_total{result="applied",workspace="`+workspace+`"}`))
}

// TestAccChartWorkspacesInPods is issue 40's chart run as pods: the chart
// rendered with two workspaces and two replicas; each replica's pod run as
// the kubelet would (an init container per workspace into its own
// emptyDir, POD_NAME and POD_UID from the downward API); each replica's
// member Lease owned by its Pod; the workspaces shared out one each, as
// kube.Shares gives them; a pod becoming Ready behind each workspace's Service is
// applied by the replica that holds the workspace; when the replica holding
// team-a stops (SIGTERM, as in a rolling update), the other takes team-a
// over and applies its next change; each workspace's plan is then empty.
func TestAccChartWorkspacesInPods(t *testing.T) {
	needImage(t)
	ctx := testCtx(t, 10*time.Minute)
	const ns = "lb-chart-ws"
	names := []string{"team-a", "team-b"}
	set := []string{"rbac.clusterWide=false", "rbac.namespaces={shop}", "replicas=2",
		"image.repository=localhost/terraform-provider-k8s-sync", "image.pullPolicy=Never"}
	for i, n := range names {
		set = append(set, fmt.Sprintf("workspaces[%d].name=%s", i, n), fmt.Sprintf("workspaces[%d].configMap=%s-lb", i, n),
			fmt.Sprintf("workspaces[%d].settings.settle_quiet=500ms", i))
	}
	chart := filepath.Join(env.root, "charts", "terraform-provider-k8s-sync")
	rendered, err := helm(t, append([]string{"template", "chart-ws", chart, "--namespace", ns}, setArgs(set)...)...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, rendered)
	}
	deployment := (&scenario{objects: decode(t, []byte(rendered))}).deployment(t)
	ensureNamespaces(ctx, t, ns, workloadNS)
	kubectlApply(t, []byte(rendered))

	// Each workspace: a Service of two pods, one Ready; its configuration
	// applied once as a user would, then given to the chart as a ConfigMap.
	services := map[string]*scenario{}
	for i, n := range names {
		s := &scenario{service: "web-" + n, pods: []testcluster.Pod{
			{Name: "web-" + n + "-1", IPs: []string{fmt.Sprintf("10.244.9.%d", 10*i+1)}, Ready: true},
			{Name: "web-" + n + "-2", IPs: []string{fmt.Sprintf("10.244.9.%d", 10*i+2)}, Ready: false},
		}}
		s.runService(ctx, t)
		services[n] = s
		config := t.TempDir()
		writeConfiguration(t, config, ns, s.service)
		asAdmin(t, config, "init", "-input=false")
		asAdmin(t, config, "apply", "-auto-approve", "-input=false", "-no-color")
		kubectl(t, "-n", ns, "create", "configmap", n+"-lb",
			"--from-file="+filepath.Join(config, "main.tf"), "--from-file="+filepath.Join(config, ".terraform.lock.hcl"))
	}

	// The replicas: their Pods in the API server, their containers here.
	var replicas []*chartReplica
	for i := range 2 {
		name := fmt.Sprintf("%s-%d", deployment.Name, i)
		if err := testcluster.RunPod(ctx, env.client, ns, testcluster.Pod{Name: name, IPs: []string{fmt.Sprintf("10.244.10.%d", i+1)}, Node: node, Ready: true}); err != nil {
			t.Fatal(err)
		}
		object, err := env.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := &chartReplica{pod: env.podman.newPod(ctx, t, ns, name, deployment.Spec.Template.Spec), port: freePort(t)}
		r.pod.uid = string(object.UID)
		for _, n := range names {
			if res := r.pod.exec(ctx, t, "init-"+n, nil); res.code != 0 {
				t.Fatalf("%s: init container init-%s exited %d:\n%s%s", name, n, res.code, res.stdout, res.stderr)
			}
		}
		args := append(slices.Clone(r.pod.container(t, syncContainer).Args), "-listen=127.0.0.1:"+strconv.Itoa(r.port))
		r.stop, r.log = r.pod.start(ctx, t, args)
		replicas = append(replicas, r)
	}
	logs := func() string {
		var b strings.Builder
		for _, r := range replicas {
			fmt.Fprintf(&b, "--- %s:\n%s\n", r.pod.name, r.log.String())
		}
		return b.String()
	}
	// holder is the one replica leading workspace among those in, or nil
	// while none or both do.
	holder := func(workspace string, in []*chartReplica) *chartReplica {
		var out []*chartReplica
		for _, r := range in {
			if r.leading(workspace) {
				out = append(out, r)
			}
		}
		if len(out) != 1 {
			return nil
		}
		return out[0]
	}
	eachHeld := func(in []*chartReplica) wait.ConditionWithContextFunc {
		return func(context.Context) (bool, error) {
			for _, n := range names {
				if holder(n, in) == nil {
					return false, nil
				}
			}
			return true, nil
		}
	}
	// Each replica's member Lease is owned by its Pod (POD_NAME and POD_UID
	// from the downward API): the garbage collector deletes it with the pod.
	identity := map[*chartReplica]string{}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		members, err := env.client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.MemberLabel})
		if err != nil {
			return false, err
		}
		clear(identity)
		for _, r := range replicas {
			for _, l := range members.Items {
				for _, o := range l.OwnerReferences {
					if o.Kind == "Pod" && o.Name == r.pod.name && string(o.UID) == r.pod.uid && l.Spec.HolderIdentity != nil {
						identity[r] = *l.Spec.HolderIdentity
					}
				}
			}
		}
		return len(identity) == len(replicas) && len(members.Items) == len(replicas), nil
	})
	if err != nil {
		t.Fatalf("the replicas' member Leases, each owned by its Pod, were not there within 90 s (%d of %d):\n%s", len(identity), len(replicas), logs())
	}
	// The workspaces shared out as every replica computes it: one each,
	// once the replicas have seen each other for a Lease duration.
	shares := kube.Shares(names, []string{identity[replicas[0]], identity[replicas[1]]})
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		for _, n := range names {
			if h := holder(n, replicas); h == nil || identity[h] != shares[n][0] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the workspaces were not held as the group shares them (%v) within 90 s:\n%s", shares, logs())
	}
	for _, n := range names {
		t.Logf("%s is held by %s (%s)", n, holder(n, replicas).pod.name, identity[holder(n, replicas)])
	}

	// A pod Ready behind each Service: applied by the workspace's holder.
	for _, n := range names {
		services[n].setReady(ctx, t, services[n].pods[1].Name)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		for _, n := range names {
			if h := holder(n, replicas); h == nil || h.applied(n) < 1 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("a workspace's change was not applied by its holder within 2 minutes:\n%s", logs())
	}

	// The replica holding team-a stops as in a rolling update; the other
	// takes team-a over and applies its next change.
	gone := holder("team-a", replicas)
	survivor := replicas[0]
	if survivor == gone {
		survivor = replicas[1]
	}
	before := survivor.applied("team-a")
	stopped := time.Now()
	if end := gone.stop(); end.code != 0 || !strings.Contains(end.stderr, `"msg":"stopped"`) {
		t.Fatalf("%s on SIGTERM exited %d, want 0 and \"stopped\":\n%s", gone.pod.name, end.code, end.stderr)
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, eachHeld([]*chartReplica{survivor})); err != nil {
		t.Fatalf("%s did not take the workspaces over within a minute of %s's stop:\n%s", survivor.pod.name, gone.pod.name, logs())
	}
	t.Logf("%s holds both workspaces %.1f s after %s stopped", survivor.pod.name, time.Since(stopped).Seconds(), gone.pod.name)
	a := services["team-a"]
	third := testcluster.Pod{Name: "web-team-a-3", IPs: []string{"10.244.9.3"}, Ready: true, Labels: map[string]string{"app": a.service}, Node: node,
		Ports: map[string]int32{"http": 8080}}
	if err := testcluster.RunPod(ctx, env.client, workloadNS, third); err != nil {
		t.Fatal(err)
	}
	if err := testcluster.WaitForSlices(ctx, env.client, workloadNS, a.service, time.Minute, testcluster.EndpointCount("IPv4", 3, 3)); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return survivor.applied("team-a") > before, nil
	})
	if err != nil {
		t.Fatalf("%s did not apply team-a's change within 2 minutes of taking it over:\n%s", survivor.pod.name, logs())
	}

	// Each workspace's state is the cluster's: its plan, from its init
	// container (its TF_DATA_DIR, its configuration, the pod's identity),
	// has nothing to do.
	for _, n := range names {
		res := survivor.pod.exec(ctx, t, "init-"+n, []string{"-chdir=/config/" + n, "plan", "-detailed-exitcode", "-lock=false", "-input=false", "-no-color"})
		if res.code != 0 {
			t.Errorf("%s: plan exited %d, want 0 (state current):\n%s%s", n, res.code, res.stdout, res.stderr)
		}
	}
}
