package syncbench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/procstat"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/stats"
)

// workspacesTargetRows are the rows of the targets table: one replica's
// RSS against the single processes' sum, its watches, and the runs a
// minute of each number of replicas against one's.
func workspacesTargetRows(res *workspacesResults) []string {
	if res == nil {
		return nil
	}
	var rows []string
	row := func(format string, args ...any) { rows = append(rows, fmt.Sprintf(format, args...)) }
	if one, each := res.one, res.each; one != nil && each != nil && each.peakRSS > 0 {
		ratio := one.peakRSS / each.peakRSS
		row("| many workspaces: peak RSS (VmHWM) of one replica of %d workspaces / the sum of %d single-workspace processes | %.1f MiB / %.1f MiB = %.3f× | ≤ %.1f× | %s |",
			res.count, each.processes, one.peakRSS, each.peakRSS, ratio, wsRSSRatio, stats.Verdict(ratio, wsRSSRatio, "×"))
		verdict := "**pass**"
		if !onePerKind(one.watches.open) {
			verdict = "**miss**"
		}
		row("| many workspaces: watches the one replica of %d holds open on the API server at the idle window's end (audit log), by kind and namespace | %s | one per kind per namespace | %s |",
			res.count, one.watches.describe(one.watches.open), verdict)
	}
	first := res.firstStage()
	for _, st := range res.stages {
		if st == first || first == nil || first.applied == 0 {
			continue
		}
		ratio := st.perMinute() / first.perMinute()
		bound := wsLinear * float64(st.replicas)
		row("| many workspaces: applied runs a minute under churn, %d replicas / 1 (`-max-concurrent-runs 1` each) | %.1f / %.1f = %.2f× | ≥ %.1f× (near-linear: %.1f × replicas) | %s |",
			st.replicas, st.perMinute(), first.perMinute(), ratio, bound, wsLinear, scalingVerdict(ratio, bound, st, res.cores))
	}
	return rows
}

// firstStage is the stage of one replica; nil when none was measured.
func (res *workspacesResults) firstStage() *replicaStage {
	if res == nil || len(res.stages) == 0 || res.stages[0].replicas != 1 {
		return nil
	}
	return res.stages[0]
}

// scalingVerdict judges ratio against bound (at least), and names the
// CPU's saturation as the cause of a miss when the machine was busy.
func scalingVerdict(ratio, bound float64, st *replicaStage, cores int) string {
	if ratio >= bound {
		return fmt.Sprintf("**pass** (%.0f %% over)", (ratio-bound)/bound*100)
	}
	miss := fmt.Sprintf("**miss** by %.2f× (%.0f %% under)", bound-ratio, (bound-ratio)/bound*100)
	if st.saturated() {
		miss += fmt.Sprintf(": the CPU was saturated, %s", st.cpuText(cores))
	}
	return miss
}

// cpuText says what used the machine's CPU over the stage's window.
func (st *replicaStage) cpuText(cores int) string {
	perCore := func(cpu float64) float64 { return cpu / st.window }
	return fmt.Sprintf("the machine %.0f %% busy over the window (%.2f of %d cores; load %s at its end): the replicas' commands (terraform and its providers) %.2f cores, the replicas %.2f, the control plane %.2f, the harness %.2f, the rest (the machine's other work) %.2f",
		st.busy*100, st.busy*float64(cores), cores, st.load, perCore(st.commandCPU), perCore(st.replicaCPU), perCore(st.controlPlaneCPU), perCore(st.harnessCPU),
		st.busy*float64(cores)-perCore(st.commandCPU+st.replicaCPU+st.controlPlaneCPU+st.harnessCPU))
}

// workspacesSection is the part's paragraphs and tables.
func workspacesSection(res *workspacesResults) string {
	if res == nil {
		return ""
	}
	b := &benchrun.Section{}
	b.Para("Many workspaces over one cluster (issue 40, `-sync-parts workspaces`): %d working directories, each a configuration of one `k8s_ready_endpoints` of the fixture's Service `svc-NNN` (namespace `%s`, %d ready pods each, made ready by the fake kubelet) kept by a `terraform_data`, state in the local backend, applied once, %d applies at once (%.1f s in all). Every companion ran this build with `-settle-quiet %s -settle-max %s` and the other flags' defaults (`-memory-limit-mib 128`, `-state-interval 5m`), `-listen 127.0.0.1:0`.",
		res.count, fixture.Namespace, res.pods, res.workers, res.apply, wsQuiet, wsSettleMax)
	if res.one != nil && res.each != nil {
		b.Para("One replica, `sync -workspaces FILE` of all %d (no Lease), then %d processes `sync -chdir DIR`, one per workspace, each set started at once on the same cluster, alone: waited for until every `watching` line (one per workspace) was logged, then until the set's CPU went quiet (own and its commands' together at most a tick, and a tick for each ten processes, in 2 s), then idle for %s with nothing changing. CPU is the kernel's accounting of the processes (/proc/PID/stat: own, and the commands they ran and waited for: `terraform state pull`); peak RSS is VmHWM at the idle window's end, summed over the processes. Watches and lists are the API server's audit log's requests with the companion's user agent (`%s`) from just before the set's start to the idle window's end: a watch is opened at its `ResponseStarted` event and still open when no `ResponseComplete` of its audit ID follows; this counts each request, where the API server's metrics (`apiserver_longrunning_requests`, `apiserver_registered_watchers`) count every client's watches together, the controller manager's among them.",
			res.count, res.each.processes, res.idle, wsSyncAgent)
		b.Table(fmt.Sprintf("| measurement | one replica of %d workspaces | %d single-workspace processes | one / the processes |", res.count, res.each.processes), "|---|---:|---:|---:|")
		one, each := res.one, res.each
		ratio := func(a, b float64) string {
			if b == 0 {
				return "—"
			}
			return fmt.Sprintf("%.3f×", a/b)
		}
		b.Line("| start → every `watching` line, s | %.1f | %.1f | %s |", one.watching, each.watching, ratio(one.watching, each.watching))
		b.Line("| start → CPU quiet, s | %.1f | %.1f | %s |", one.settled, each.settled, ratio(one.settled, each.settled))
		b.Line("| CPU of the start: own + commands (`terraform state pull`), s | %.2f + %.2f | %.2f + %.2f | %s |", one.startCPU, one.startChildCPU, each.startCPU, each.startChildCPU,
			ratio(one.startCPU+one.startChildCPU, each.startCPU+each.startChildCPU))
		b.Line("| peak RSS (VmHWM), MiB: the process; the sum of the processes | %.1f | %.1f | %s |", one.peakRSS, each.peakRSS, ratio(one.peakRSS, each.peakRSS))
		b.Line("| the largest process's VmHWM, MiB | %.1f | %.1f | |", one.largestRSS, each.largestRSS)
		idleRatio := ratio(one.idleCPU+one.idleChildCPU, each.idleCPU+each.idleChildCPU)
		if one.idleCPU+one.idleChildCPU == 0 && each.idleCPU+each.idleChildCPU > 0 {
			// Less than the clock tick the kernel counts in.
			idleRatio = fmt.Sprintf("< %.3f×", 1.0/procstat.ClockTicks/(each.idleCPU+each.idleChildCPU))
		}
		b.Line("| idle CPU over %.0f s, %% of a core (a clock tick is %.3f %%): own + commands | %.3f + %.3f | %.3f + %.3f | %s |", one.idle, pct(1.0/procstat.ClockTicks, one.idle),
			pct(one.idleCPU, one.idle), pct(one.idleChildCPU, one.idle), pct(each.idleCPU, each.idle), pct(each.idleChildCPU, each.idle), idleRatio)
		b.Line("| watches open at the idle window's end | %d (%s) | %d (%s) | %s |", one.watches.total(one.watches.open), one.watches.describe(one.watches.open),
			each.watches.total(each.watches.open), each.watches.describe(each.watches.open), ratio(float64(one.watches.total(one.watches.open)), float64(each.watches.total(each.watches.open))))
		b.Line("| watches opened from the start to the idle window's end (of them, lists streamed: `sendInitialEvents=true`) | %d (%d) | %d (%d) | |",
			one.watches.total(one.watches.opened), one.watches.streamed, each.watches.total(each.watches.opened), each.watches.streamed)
		b.Line("| lists, same | %d (%s) | %d (%s) | |", one.watches.total(one.watches.lists), one.watches.describe(one.watches.lists),
			each.watches.total(each.watches.lists), each.watches.describe(each.watches.lists))
		b.Line("| runs started (nothing changed: none expected) | %d | %d | |", one.runs, each.runs)
		b.Line("")
	}
	if len(res.stages) > 0 {
		b.Para("Runs a minute: for each number of replicas, that many `sync -workspaces FILE -leader-elect -lease-namespace %s -lease-name wsbench-K -identity replica-I -max-concurrent-runs 1` (one run at a time each; a lease group of their own for each K), started together; once every workspace's Lease (`wsbench-K-ws-NNN`) was held, each replica held some, and the holders had not changed for %s (the time a replica the group prefers takes to be handed its share), and every replica was quiet (no run under way, no line for %s), a churn of %s that keeps every workspace changing: the last pod of each workspace's Service made not ready or ready again, in turn, as soon as a run of that workspace that started after its previous flip has ended `applied` (from the replicas' JSON logs: a run's start, the decision to run, is its `run ended` line's time minus its `duration` and its `queued`, the wait for the replica's slot, which the duration leaves out), so that each workspace has a change waiting at every moment. A run's time in its slot is from the later of that decision and the end of the replica's run before it (the slot is given in the order asked) to its end. Applied runs are the `run ended` lines with `result` `applied` whose time is within the churn's window, every replica's. After the window the replicas were stopped (SIGTERM) and each churned pod set back to what its workspace's state keeps, so that the next number of replicas starts with nothing to do. \"Near-linear\" is read here as at least %.1f × K times the runs of one replica. CPU over the window: /proc/stat for the machine (%d cores, shared with other work), /proc/PID/stat for the replicas, the commands they waited for (terraform plan, apply and state pull, with their providers), the control plane and the harness itself (which makes the changes and reads the logs).",
			wsLeaseNamespace, wsStable, wsSettleMax+time.Second, res.churn, wsLinear, res.cores)
		b.Table("| replicas | Leases shared out after, s | workspaces held by each | pod changes | applied runs (by replica) | runs a minute | / 1 replica | run from the decision p50, p90, s | run in its slot p50, p90, s | other results | changes not applied at the end | Lease hand-overs during the churn | machine busy, % | load at the end | replicas' CPU, cores | their commands' CPU, cores | commands' CPU per applied run, s | control plane CPU, cores | harness CPU, cores |",
			"|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
		first := res.firstStage()
		for _, st := range res.stages {
			scale := "—"
			if first != nil && first.applied > 0 {
				scale = fmt.Sprintf("%.2f×", st.perMinute()/first.perMinute())
			}
			perRun := 0.0
			if st.applied > 0 {
				perRun = st.commandCPU / float64(st.applied)
			}
			b.Line("| %d | %.1f | %s | %d | %d (%s) | %.1f | %s | %.2f, %.2f | %.2f, %.2f | %s | %d | %d | %.0f | %s | %.2f | %.2f | %.2f | %.2f | %.2f |",
				st.replicas, st.sharedOut, joinInts(st.shares), st.flips, st.applied, joinInts(st.perReplica), st.perMinute(), scale,
				stats.Percentile(st.durations, 50), stats.Percentile(st.durations, 90), stats.Percentile(st.slotTimes, 50), stats.Percentile(st.slotTimes, 90),
				resultsText(st.other), st.pending, st.handOvers, st.busy*100, st.load, st.replicaCPU/st.window, st.commandCPU/st.window, perRun,
				st.controlPlaneCPU/st.window, st.harnessCPU/st.window)
		}
		b.Line("")
		for _, st := range res.stages {
			if st.saturated() {
				b.Para("%d replica(s): the CPU was saturated, %s.", st.replicas, st.cpuText(res.cores))
			}
			if st.quietTimeout != "" {
				b.Para("%d replica(s): not quiet before the churn within the wait (%s); the churn started anyway.", st.replicas, firstLine(st.quietTimeout))
			}
		}
	}
	return b.String()
}

// pct is cpu over wall in per cent of a core.
func pct(cpu, wall float64) float64 {
	if wall <= 0 {
		return 0
	}
	return cpu / wall * 100
}

func joinInts(v []int) string {
	out := make([]string, len(v))
	for i, n := range v {
		out[i] = fmt.Sprint(n)
	}
	return strings.Join(out, ", ")
}

// resultsText is the runs by result, "—" when none.
func resultsText(results map[string]int) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(results)) {
		out = append(out, fmt.Sprintf("%s %d", k, results[k]))
	}
	if len(out) == 0 {
		return "—"
	}
	return strings.Join(out, ", ")
}
