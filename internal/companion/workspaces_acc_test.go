package companion

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
	"github.com/vigie/terraform-provider-k8s/test/syncproc"
)

// Issue 40: one deployment for many configurations. Three replicas serve
// twenty workspaces (a Service and a configuration each), their Leases
// shared out: each replica runs some; every change in every workspace is
// applied once; a replica killed has its workspaces taken over; and no
// workspace ever has two holders, judged from its Lease (polled) and from
// the replicas' logs (when each led it, when each ran it).

// workspacePool is a configuration of one pool, Service svc in ns, kept by
// terraform_data.pool, with the output members.
func workspacePool(ns, svc string) string {
	return strings.Replace(poolConfig(ns, ""), `service   = "web"`, fmt.Sprintf(`service   = %q`, svc), 1)
}

// newWorkspaces makes a workspace for each of names: a Service of that name
// in ns with one Ready pod, and a working directory of its pool, applied.
func newWorkspaces(t *testing.T, ns string, names []string) []*workdir {
	t.Helper()
	for i, name := range names {
		createService(t, ns, name, "ClusterIP")
		runPod(t, ns, name, name+"-1", fmt.Sprintf("10.245.%d.1", i), true)
	}
	workdirs := make([]*workdir, len(names))
	for i, name := range names {
		waitForReady(t, ns, name, 1, 1)
		workdirs[i] = newWorkdir(t, workspacePool(ns, name))
	}
	return workdirs
}

// writeWorkspacesFile writes a -workspaces file of names, each at the directory
// of its workdir, and gives its path.
func writeWorkspacesFile(t *testing.T, names []string, workdirs []*workdir) string {
	t.Helper()
	var file strings.Builder
	file.WriteString("workspaces:\n")
	for i, name := range names {
		fmt.Fprintf(&file, "  - name: %s\n    dir: %s\n", name, workdirs[i].dir)
	}
	path := filepath.Join(t.TempDir(), "workspaces.yaml")
	if err := os.WriteFile(path, []byte(file.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startReplica starts `sync -workspaces file` with args.
func startReplica(t *testing.T, file string, args ...string) *companion {
	t.Helper()
	return startCompanion(t, append([]string{"-workspaces", file}, args...))
}

func TestAccSyncThreeReplicasShareTwentyWorkspaces(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	const n = 20
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("team-%02d", i)
	}
	workdirs := newWorkspaces(t, ns, names)
	path := writeWorkspacesFile(t, names, workdirs)

	// Each replica runs in a pod (an object of its own here), which owns
	// its member Lease, as the chart's replicas do.
	pods := map[string]string{}
	for i, id := range []string{"r-a", "r-b", "r-c"} {
		runPod(t, ns, "replica-"+id, id, fmt.Sprintf("10.246.0.%d", i+1), true)
		pod, err := acc.client.CoreV1().Pods(ns).Get(testCtx(t), id, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods[id] = string(pod.UID)
	}
	lease := func(id string) []string {
		return []string{"-leader-elect", "-lease-namespace", ns, "-lease-name", "ws", "-identity", id, "-max-concurrent-runs", "3",
			"-pod-name", id, "-pod-uid", pods[id]}
	}
	replicas := map[string]*companion{}
	for _, id := range []string{"r-a", "r-b", "r-c"} {
		replicas[id] = startReplica(t, path, lease(id)...)
	}
	judge := newLeaseJudge(t, ns, names)
	defer judge.stop()

	// The Leases shared out: every workspace held, every replica holding
	// some, once the replicas have seen each other for a Lease duration.
	held := judge.waitFor(t, 90*time.Second, "every workspace held and every replica holding some", func(holders map[string]string) bool {
		count := map[string]int{}
		for _, h := range holders {
			count[h]++
		}
		return len(holders) == n && len(count) == 3
	})
	t.Logf("holders after sharing: %v", countOf3(held))
	// Replicas that started apart hand the workspaces to the one the group
	// prefers for each, once it has been up a Lease duration.
	preferred := func(live []string) func(map[string]string) bool {
		shares := kube.Shares(names, live)
		return func(holders map[string]string) bool {
			for _, name := range names {
				if holders[name] != shares[name][0] {
					return false
				}
			}
			return true
		}
	}
	held = judge.waitFor(t, 90*time.Second, "every workspace held by the replica the group prefers for it", preferred([]string{"r-a", "r-b", "r-c"}))
	t.Logf("holders once shared out: %v", countOf3(held))
	for _, c := range replicas {
		c.quiet(t, 3*time.Second)
	}

	change := func(round int) {
		for i := range n {
			runPod(t, ns, names[i], fmt.Sprintf("%s-%d", names[i], round+1), fmt.Sprintf("10.245.%d.%d", i, round+1), true)
		}
	}
	applied := func(name string) int {
		total := 0
		for _, c := range replicas {
			total += c.count("run ended", map[string]string{"workspace": name, "result": "applied"})
		}
		return total
	}
	waitApplied := func(want int) {
		t.Helper()
		done := 0
		if err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
			done = 0
			for _, name := range names {
				if applied(name) >= want {
					done++
				}
			}
			return done == n, nil
		}); err != nil {
			t.Fatalf("%d of %d workspaces applied their change %d", done, n, want)
		}
	}

	change(1)
	waitApplied(1)
	for i := range n {
		if got := workdirs[i].members(t); len(got) != 2 {
			t.Errorf("%s: members %v, want 2", names[i], got)
		}
	}

	// Kill the replica that holds the most; its workspaces are taken over
	// and the next change of every workspace is applied once.
	holders := judge.holders()
	victim := ""
	for id, k := range countOf3(holders) {
		if victim == "" || k > countOf3(holders)[victim] {
			victim = id
		}
	}
	killedAt := time.Now()
	if err := replicas[victim].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	judge.killed(victim, killedAt)
	change(2)
	waitApplied(2)
	took := time.Since(killedAt)
	for i := range n {
		if got := workdirs[i].members(t); len(got) != 3 {
			t.Errorf("%s: members %v, want 3", names[i], got)
		}
	}
	after := judge.holders()
	for name, h := range after {
		if h == victim {
			t.Errorf("%s is still held by the killed replica %s", name, victim)
		}
	}
	t.Logf("killed %s (held %d); every change applied %.1f s later; holders now %v", victim, countOf3(holders)[victim], took.Seconds(), countOf3(after))
	var survivors []string
	for id := range replicas {
		if id != victim {
			survivors = append(survivors, id)
		}
	}
	judge.waitFor(t, 30*time.Second, "every workspace held by the survivor the group prefers for it", preferred(survivors))
	// The killed replica's pod is deleted, as its Deployment would: the
	// garbage collector deletes its member Lease; the survivors' stay.
	deletePod(t, ns, victim)
	memberGone(t, ns, victim, pods)
	for _, id := range survivors {
		if _, err := acc.client.CoordinationV1().Leases(ns).Get(testCtx(t), kube.MemberLeaseName("ws", id), metav1.GetOptions{}); err != nil {
			t.Errorf("the member Lease of %s, which is live: %v", id, err)
		}
	}
	for _, c := range replicas {
		c.quiet(t, 3*time.Second)
	}
	for _, name := range names {
		if got := applied(name); got != 2 {
			t.Errorf("%s: %d applied runs, want 2 (one per change)", name, got)
		}
	}
	judge.check(t, replicas)
}

// memberGone waits for the member Lease of id, owned by its pod, to be
// deleted by the garbage collector once the pod is gone.
func memberGone(t *testing.T, ns, id string, pods map[string]string) {
	t.Helper()
	name := kube.MemberLeaseName("ws", id)
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err := acc.client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if owners := lease.OwnerReferences; len(owners) != 1 || owners[0].Kind != "Pod" || owners[0].Name != id || string(owners[0].UID) != pods[id] {
			return false, fmt.Errorf("the member Lease %s has owners %+v, want the pod %s (%s)", name, owners, id, pods[id])
		}
		return false, nil
	})
	if wait.Interrupted(err) {
		t.Fatalf("the member Lease %s of %s is still there 60 s after its pod was deleted", name, id)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// countOf3 counts workspaces by holder.
func countOf3(holders map[string]string) map[string]int {
	out := map[string]int{}
	for _, h := range holders {
		out[h]++
	}
	return out
}

// leaseJudge polls the workspaces' Leases and keeps every holder seen.
type leaseJudge struct {
	ns    string
	names []string
	done  chan struct{}

	mu sync.Mutex
	// seen are each workspace's holders in the order seen; last the
	// latest poll; kills when each replica was killed.
	seen  map[string][]string
	last  map[string]string
	kills map[string]time.Time
	err   error
}

func newLeaseJudge(t *testing.T, ns string, names []string) *leaseJudge {
	j := &leaseJudge{ns: ns, names: names, done: make(chan struct{}), seen: map[string][]string{}, last: map[string]string{},
		kills: map[string]time.Time{}}
	go func() {
		ticker := time.NewTicker(500 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-j.done:
				return
			case <-ticker.C:
			}
			j.poll(t)
		}
	}()
	return j
}

func (j *leaseJudge) stop() { close(j.done) }

func (j *leaseJudge) poll(t *testing.T) {
	list, err := acc.client.CoordinationV1().Leases(j.ns).List(testCtx(t), metav1.ListOptions{})
	j.mu.Lock()
	defer j.mu.Unlock()
	if err != nil {
		j.err = err
		return
	}
	byName := map[string]coordinationv1.Lease{}
	for _, l := range list.Items {
		byName[l.Name] = l
	}
	for _, name := range j.names {
		l, ok := byName["ws-"+name]
		holder := ""
		if ok && l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if holder == "" {
			delete(j.last, name)
			continue
		}
		j.last[name] = holder
		if s := j.seen[name]; len(s) == 0 || s[len(s)-1] != holder {
			j.seen[name] = append(s, holder)
		}
	}
}

func (j *leaseJudge) holders() map[string]string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[string]string{}
	for k, v := range j.last {
		out[k] = v
	}
	return out
}

func (j *leaseJudge) killed(id string, at time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.kills[id] = at
}

func (j *leaseJudge) waitFor(t *testing.T, timeout time.Duration, what string, ok func(map[string]string) bool) map[string]string {
	t.Helper()
	var h map[string]string
	if err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		h = j.holders()
		return ok(h), nil
	}); err != nil {
		t.Fatalf("not %s within %s: holders %v", what, timeout, countOf3(h))
	}
	return h
}

// span is when a replica led, or ran, a workspace.
type span struct {
	replica    string
	start, end time.Time
}

// check judges the replicas' logs: for each workspace, no two replicas'
// times of leading it (from "leading" to "stopped leading", logged before
// the Lease is released, or "lost the Lease: stopping", or the replica's
// death) overlap, nor do two runs. "released the Lease" is logged after
// the release, when another replica may already have logged "leading".
func (j *leaseJudge) check(t *testing.T, replicas map[string]*companion) {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		t.Errorf("polling the Leases: %v", j.err)
	}
	for _, name := range j.names {
		var leads, runs []span
		lease := j.ns + "/ws-" + name
		for id, c := range replicas {
			end := time.Now()
			if at, ok := j.kills[id]; ok {
				end = at
			}
			// A lead ends when the Lease is released, or lost.
			ended := append(c.Events("stopped leading", map[string]string{"lease": lease}),
				c.Events("lost the Lease: stopping", map[string]string{"lease": lease})...)
			slices.SortFunc(ended, func(a, b syncproc.Event) int { return a.Time.Compare(b.Time) })
			leads = append(leads, pairs(id, c.Events("leading", map[string]string{"lease": lease}), ended, end)...)
			runs = append(runs, pairs(id, c.Events("run started", map[string]string{"workspace": name}),
				c.Events("run ended", map[string]string{"workspace": name}), end)...)
		}
		for what, spans := range map[string][]span{"led": leads, "ran": runs} {
			for i, a := range spans {
				for _, b := range spans[i+1:] {
					if a.replica != b.replica && a.start.Before(b.end) && b.start.Before(a.end) {
						t.Errorf("%s: %s %s from %s to %s, and %s from %s to %s", name, a.replica, what, a.start.Format("15:04:05.000"),
							a.end.Format("15:04:05.000"), b.replica, b.start.Format("15:04:05.000"), b.end.Format("15:04:05.000"))
					}
				}
			}
		}
		if len(j.seen[name]) == 0 {
			t.Errorf("%s: no holder seen", name)
		}
	}
}

// pairs are the spans of starts, each ended by the first end after it, or
// by last.
func pairs(replica string, starts, ends []syncproc.Event, last time.Time) []span {
	var out []span
	for _, s := range starts {
		end := last
		for _, e := range ends {
			if !e.Time.Before(s.Time) {
				end = e.Time
				break
			}
		}
		out = append(out, span{replica: replica, start: s.Time, end: end})
	}
	return out
}

// A rollout that adds a workspace runs, for a while, replicas of two lists;
// the lists give some workspaces to different replicas (kube.Shares:
// here team-04 to r-a by the old list, to r-b by the new one). Handing
// those to each other, two replicas passed team-04 back and forth every few
// seconds, at times with no holder (16 transitions in 2 minutes before the
// fix): a replica now shares its workspaces only among the replicas that
// read the same list, and keeps what it holds.
func TestAccSyncReplicasReadingDifferentListsDoNotPassAWorkspaceBackAndForth(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	names := []string{"team-00", "team-01", "team-02", "team-03", "team-04", "new-01"}
	old, added := names[:5], names
	if kube.Shares(old, []string{"r-a", "r-b"})["team-04"][0] != "r-a" || kube.Shares(added, []string{"r-a", "r-b"})["team-04"][0] != "r-b" {
		t.Fatal("the lists no longer give team-04 to r-a (old) and r-b (new): choose others")
	}
	workdirs := newWorkspaces(t, ns, names)
	lease := func(id string) []string {
		return []string{"-leader-elect", "-lease-namespace", ns, "-lease-name", "ws", "-identity", id}
	}
	// r-a reads the new list, r-b the old: each prefers the other for
	// team-04.
	replicas := map[string]*companion{"r-a": startReplica(t, writeWorkspacesFile(t, added, workdirs), lease("r-a")...),
		"r-b": startReplica(t, writeWorkspacesFile(t, old, workdirs[:len(old)]), lease("r-b")...)}
	transitions := func() map[string]int32 {
		list, err := acc.client.CoordinationV1().Leases(ns).List(testCtx(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int32{}
		for _, l := range list.Items {
			if n, ok := strings.CutPrefix(l.Name, "ws-"); ok && slices.Contains(names, n) && l.Spec.LeaseTransitions != nil {
				out[n] = *l.Spec.LeaseTransitions
			}
		}
		return out
	}
	judge := newLeaseJudge(t, ns, names)
	defer judge.stop()
	judge.waitFor(t, 90*time.Second, "every workspace held", func(holders map[string]string) bool { return len(holders) == len(names) })
	// Both replicas up for longer than a Lease duration (15 s), when a
	// replica hands a workspace to the one it prefers: the time passing is
	// the scenario, not a condition to poll for.
	time.Sleep(20 * time.Second)
	before := transitions()
	held := judge.holders()
	// Then 40 s in which no workspace is without a holder or changes
	// holder: a check each second over a span that is the scenario itself.
	for range 40 {
		time.Sleep(time.Second)
		if h := judge.holders(); len(h) != len(names) {
			t.Errorf("a workspace without a holder: %v", h)
			break
		}
	}
	after := transitions()
	for _, n := range names {
		if after[n] != before[n] {
			t.Errorf("%s changed holder %d times in 40 s (%s at first): the replicas passed it back and forth", n, after[n]-before[n], held[n])
		}
	}
	for id, c := range replicas {
		if n := c.count("handing the workspace over to the replica the group prefers for it", nil); n > 0 {
			t.Errorf("%s handed %d workspaces over to a replica of another list", id, n)
		}
	}
	t.Logf("holders: %v; transitions %v", held, after)
}
