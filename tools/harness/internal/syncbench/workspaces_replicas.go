package syncbench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigie/terraform-provider-k8s/test/syncproc"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/companionproc"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/procstat"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/stats"
)

// replicaStage is the churn at one number of replicas.
type replicaStage struct {
	replicas int
	// sharedOut is from the replicas' start to the Leases shared out and
	// unchanged for wsStable, s; shares are the workspaces each replica
	// held then.
	sharedOut float64
	shares    []int
	// handOvers are the Leases whose holder changed during the churn.
	handOvers int
	// window is the churn's, s; flips the pod changes made in it, pending
	// those no applied run had taken when it closed.
	window         float64
	flips, pending int
	// applied are the runs that ended `applied` within the window, every
	// replica's, perReplica each one's; other the other results; durations
	// the applied runs' from the decision to run (the `run started` line,
	// before the wait for a slot) to their end, slotTimes from the moment
	// they had their replica's slot to their end, s.
	applied    int
	perReplica []int
	other      map[string]int
	durations  []float64
	slotTimes  []float64
	// busy is the share of the machine's cores busy over the window; load
	// the load average at its end; replicaCPU, commandCPU and
	// controlPlaneCPU the CPU over it of the replicas, of the commands
	// they ran and waited for (terraform plan, apply, state pull and
	// their providers), of the control plane (kube-apiserver, etcd, the
	// controller manager) and of the harness itself, s.
	busy                                                float64
	load                                                string
	replicaCPU, commandCPU, controlPlaneCPU, harnessCPU float64
	// quietTimeout says that the replicas were not quiet before the churn
	// (a run under way or lines logged) within the wait; "" when they were.
	quietTimeout string
}

// perMinute is the applied runs a minute.
func (st *replicaStage) perMinute() float64 {
	if st.window <= 0 {
		return 0
	}
	return float64(st.applied) / (st.window / 60)
}

// saturated says whether the CPU was busy enough to bound the runs.
func (st *replicaStage) saturated() bool { return st.busy >= wsSaturated }

// replicaStage starts k replicas of every workspace of file, waits until
// they share the workspaces out, keeps every workspace changing for the
// churn's window, counts the runs, stops them, and leaves the pods as
// state has them.
func (s *syncBench) replicaStage(ctx context.Context, file string, names, dirs []string, pools churnPools, k int) (*replicaStage, error) {
	o := s.b.opts.workspaces
	st := &replicaStage{replicas: k, other: map[string]int{}}
	// A lease group per number of replicas: nothing of the stage before.
	group := fmt.Sprintf("wsbench-%d", k)
	ids := make([]string, k)
	procs := make([]*companionproc.Proc, 0, k)
	defer func() { haltAll(procs) }()
	started := time.Now()
	for i := range k {
		ids[i] = fmt.Sprintf("replica-%d", i+1)
		c, err := s.startSync(ctx, []string{"-workspaces", file}, "-leader-elect", "-lease-namespace", wsLeaseNamespace,
			"-lease-name", group, "-identity", ids[i], "-max-concurrent-runs", "1")
		if err != nil {
			return nil, err
		}
		procs = append(procs, c)
	}
	holders, err := s.waitSharedOut(ctx, group, names, ids, procs, o.wait)
	if err != nil {
		return nil, err
	}
	st.sharedOut, st.shares = time.Since(started).Seconds(), shares(holders, ids)
	fmt.Fprintf(benchrun.Log, "  shared out after %.1f s: %v workspaces each\n", st.sharedOut, st.shares)
	quiet, cancel := context.WithTimeout(ctx, o.wait)
	for _, c := range procs {
		if err := c.Idle(quiet, wsSettleMax+time.Second); err != nil && st.quietTimeout == "" {
			st.quietTimeout = err.Error()
			fmt.Fprintf(benchrun.Log, "  not quiet before the churn: %v\n", err)
		}
	}
	cancel()

	before, err := sampleStage(procs, s.b.Cluster.PIDs())
	if err != nil {
		return nil, err
	}
	from := time.Now()
	if err := s.churnWorkspaces(ctx, st, procs, group, names, pools, holders, from.Add(o.churn)); err != nil {
		return nil, err
	}
	to := time.Now()
	after, err := sampleStage(procs, s.b.Cluster.PIDs())
	if err != nil {
		return nil, err
	}
	st.window = to.Sub(from).Seconds()
	st.load = benchrun.LoadAverage()
	st.busy = before.machine.BusyShare(after.machine)
	st.replicaCPU = after.replicas.Self() - before.replicas.Self()
	st.commandCPU = after.replicas.Children() - before.replicas.Children()
	st.controlPlaneCPU = float64(after.controlPlane-before.controlPlane) / procstat.ClockTicks
	st.harnessCPU = after.harness.Self() - before.harness.Self()
	for _, c := range procs {
		t := tallyRuns(c.Events("run ended", nil), from, to)
		st.perReplica = append(st.perReplica, t.applied)
		st.applied += t.applied
		st.durations = append(st.durations, t.durations...)
		st.slotTimes = append(st.slotTimes, t.slotTimes...)
		for result, n := range t.other {
			st.other[result] += n
		}
	}
	fmt.Fprintf(benchrun.Log, "  %d applied runs in %.0f s (%.1f a minute; by replica %v), run p50 %.2f s from the decision, %.2f s in its slot; %d pod changes, %d not applied at the end; machine %.0f %% busy, load %s\n",
		st.applied, st.window, st.perMinute(), st.perReplica, stats.Percentile(st.durations, 50), stats.Percentile(st.slotTimes, 50), st.flips, st.pending, st.busy*100, st.load)
	haltAll(procs)
	procs = nil
	return st, s.matchState(ctx, dirs, pools)
}

// churnWorkspaces flips the readiness of the last pod of each workspace's
// Service whose previous flip a run has applied (at once for those with
// none), in turn, until end; it counts the flips, the Leases that changed
// holder and the flips not applied at the end into st.
func (s *syncBench) churnWorkspaces(ctx context.Context, st *replicaStage, procs []*companionproc.Proc, group string, names []string, pools churnPools, holders map[string]string, end time.Time) error {
	flipped := map[string]time.Time{}
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	polled := time.Now()
	for time.Now().Before(end) {
		taken := takenFlips(endedRuns(procs), flipped)
		for i, name := range names {
			if _, ok := flipped[name]; ok && !taken[name] {
				continue
			}
			if !time.Now().Before(end) {
				break
			}
			pod := &pools[i][len(pools[i])-1]
			written, err := fixture.WriteReady(ctx, s.client, fixture.Namespace, pod.name, !pod.ready)
			if err != nil {
				return err
			}
			pod.ready = !pod.ready
			flipped[name] = written
			st.flips++
		}
		if time.Since(polled) >= time.Second {
			polled = time.Now()
			if now, err := s.leaseHolders(ctx, group, names); err == nil {
				st.handOvers += holderChanges(holders, now)
				holders = now
			}
		}
		for _, c := range procs {
			select {
			case <-c.Done():
				return fmt.Errorf("a replica exited (code %d) during the churn:\n%s", c.ExitCode(), lastLines(c.Log(), 20))
			default:
			}
		}
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	taken := takenFlips(endedRuns(procs), flipped)
	for name := range flipped {
		if !taken[name] {
			st.pending++
		}
	}
	return nil
}

// endedRuns are the `run ended` lines of every replica.
func endedRuns(procs []*companionproc.Proc) []syncproc.Event {
	var out []syncproc.Event
	for _, c := range procs {
		out = append(out, c.Events("run ended", nil)...)
	}
	return out
}

// runStart is when the run of a `run ended` line was decided: its time
// minus its duration and, when it waited for the replica's slot, minus
// that wait (`queued`, which the duration leaves out).
func runStart(e syncproc.Event) (time.Time, bool) {
	d, err := time.ParseDuration(e.Str("duration"))
	if err != nil {
		return time.Time{}, false
	}
	if q := e.Str("queued"); q != "" {
		queued, err := time.ParseDuration(q)
		if err != nil {
			return time.Time{}, false
		}
		d += queued
	}
	return e.Time.Add(-d), true
}

// takenFlips says, for each workspace flipped (at the time of its last
// flip), whether a run of it that started after the flip has ended
// `applied`: state has taken the flip.
func takenFlips(ended []syncproc.Event, flipped map[string]time.Time) map[string]bool {
	taken := map[string]bool{}
	for _, e := range ended {
		name := e.Str("workspace")
		at, ok := flipped[name]
		if !ok || e.Str("result") != "applied" {
			continue
		}
		if start, ok := runStart(e); ok && start.After(at) {
			taken[name] = true
		}
	}
	return taken
}

// runTally is the runs of a log that ended within a window.
type runTally struct {
	applied int
	other   map[string]int
	// durations and slotTimes are the applied runs', s: from the decision
	// to run, and from the moment they had the slot.
	durations, slotTimes []float64
}

// tallyRuns counts the `run ended` lines of ended, one replica's whose
// runs are one at a time (-max-concurrent-runs 1), whose time is in
// [from, to): applied (with their durations) and the other results. A
// run's tallied duration counts from the decision to run (runStart), and
// so includes its wait for the replica's slot: its time in the slot is
// from the later of its decision and the end of the run before it (the
// slot is given in the order asked, a channel's) to its end.
func tallyRuns(ended []syncproc.Event, from, to time.Time) runTally {
	t := runTally{other: map[string]int{}}
	ended = slices.Clone(ended)
	slices.SortStableFunc(ended, func(a, b syncproc.Event) int { return a.Time.Compare(b.Time) })
	var previous time.Time
	for _, e := range ended {
		start, known := runStart(e)
		slotFrom := start
		if previous.After(slotFrom) {
			slotFrom = previous
		}
		previous = e.Time
		if e.Time.Before(from) || !e.Time.Before(to) {
			continue
		}
		result := e.Str("result")
		if result != "applied" {
			t.other[result]++
			continue
		}
		t.applied++
		if known {
			t.durations = append(t.durations, e.Time.Sub(start).Seconds())
			t.slotTimes = append(t.slotTimes, e.Time.Sub(slotFrom).Seconds())
		}
	}
	return t
}

// stageSample is the CPU that a stage's window is measured with.
type stageSample struct {
	machine  procstat.Machine
	replicas procstat.Stat
	// controlPlane is its processes' user and system CPU, clock ticks.
	controlPlane int64
	harness      procstat.Stat
}

func sampleStage(procs []*companionproc.Proc, controlPlane map[string]int) (stageSample, error) {
	var out stageSample
	pids := make([]int, len(procs))
	for i, c := range procs {
		pids[i] = c.Pid()
	}
	var err error
	if out.replicas, err = sumStats(pids); err != nil {
		return out, err
	}
	for _, pid := range controlPlane {
		if st, err := procstat.Read(pid); err == nil {
			out.controlPlane += st.Utime + st.Stime
		}
	}
	if out.harness, err = procstat.Read(os.Getpid()); err != nil {
		return out, err
	}
	out.machine, err = procstat.ReadMachine()
	return out, err
}

// leaseHolders are the holders of the workspaces' Leases of group, by
// workspace; a workspace whose Lease is missing or free is not in it.
func (s *syncBench) leaseHolders(ctx context.Context, group string, names []string) (map[string]string, error) {
	list, err := s.client.CoordinationV1().Leases(wsLeaseNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return holdersOf(list.Items, group, names), nil
}

// holdersOf are the holders of names' Leases (group-NAME) among leases.
func holdersOf(leases []coordinationv1.Lease, group string, names []string) map[string]string {
	byName := map[string]string{}
	for _, l := range leases {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			byName[l.Name] = *l.Spec.HolderIdentity
		}
	}
	out := map[string]string{}
	for _, name := range names {
		if h, ok := byName[group+"-"+name]; ok {
			out[name] = h
		}
	}
	return out
}

// sharedOut says whether every workspace of names is held, each by one of
// ids, and every one of ids holds some.
func sharedOut(holders map[string]string, names, ids []string) bool {
	held := map[string]bool{}
	for _, name := range names {
		h, ok := holders[name]
		if !ok || !slices.Contains(ids, h) {
			return false
		}
		held[h] = true
	}
	return len(held) == len(ids)
}

// shares are how many workspaces each of ids holds.
func shares(holders map[string]string, ids []string) []int {
	out := make([]int, len(ids))
	for _, h := range holders {
		if i := slices.Index(ids, h); i >= 0 {
			out[i]++
		}
	}
	return out
}

// holderChanges is how many workspaces have another holder (or none, or
// one where they had none) in now than in before.
func holderChanges(before, now map[string]string) int {
	n := 0
	for name, h := range now {
		if before[name] != h {
			n++
		}
	}
	for name := range before {
		if _, ok := now[name]; !ok {
			n++
		}
	}
	return n
}

// waitSharedOut waits, at most timeout, until the replicas ids have shared
// the Leases of names out and their holders have stayed the same for
// wsStable, and gives the holders.
func (s *syncBench) waitSharedOut(ctx context.Context, group string, names, ids []string, procs []*companionproc.Proc, timeout time.Duration) (map[string]string, error) {
	deadline := time.Now().Add(timeout)
	var last map[string]string
	var since time.Time
	for {
		holders, err := s.leaseHolders(ctx, group, names)
		switch {
		case err != nil || !sharedOut(holders, names, ids):
			last = nil
		case !maps.Equal(holders, last):
			last, since = holders, time.Now()
		case time.Since(since) >= wsStable:
			return holders, nil
		}
		if time.Now().After(deadline) {
			lastErr := "none"
			if err != nil {
				lastErr = err.Error()
			}
			return nil, fmt.Errorf("the Leases of %d workspaces not shared out among %d replica(s) (every one held, each replica holding some, unchanged for %s) within %s: %d held, by replica %v (the last listing's error: %s)",
				len(names), len(ids), wsStable, timeout, len(holders), shares(holders, ids), lastErr)
		}
		for _, c := range procs {
			select {
			case <-c.Done():
				return nil, fmt.Errorf("a replica exited (code %d) before the Leases were shared out:\n%s", c.ExitCode(), lastLines(c.Log(), 20))
			default:
			}
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// matchState makes the last pod of each workspace's Service ready or not
// as the workspace's state has it (the churn flips no other), so that
// the next stage starts with nothing to do, and checks that every state
// then keeps its Service's pool.
func (s *syncBench) matchState(ctx context.Context, dirs []string, pools churnPools) error {
	var changed []int
	for i, dir := range dirs {
		members, err := statePool(dir)
		if err != nil {
			return fmt.Errorf("%s: %w", workspaceName(i), err)
		}
		pod := &pools[i][len(pools[i])-1]
		if want := slices.Contains(members, fmt.Sprintf("%s:%d", pod.ip, churnPort)); want != pod.ready {
			if _, err := fixture.WriteReady(ctx, s.client, fixture.Namespace, pod.name, want); err != nil {
				return err
			}
			pod.ready = want
			changed = append(changed, i)
		}
		if got := pools.members(i); !slices.Equal(members, got) {
			return fmt.Errorf("%s: state keeps %v, its Service's pool is %v (beyond the pod the churn flips)", workspaceName(i), members, got)
		}
	}
	fmt.Fprintf(benchrun.Log, "  %d pod(s) set back to what state keeps\n", len(changed))
	return waitPublished(ctx, s, changed, pools)
}
