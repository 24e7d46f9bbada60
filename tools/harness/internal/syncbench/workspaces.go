package syncbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigie/terraform-provider-k8s/test/soak"
	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/companionproc"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/procstat"
)

// Many workspaces over one cluster (issue 40, item 5; -sync-parts
// workspaces): N working directories, each one k8s_ready_endpoints of a
// fixture Service kept by a terraform_data (state in the local backend),
// applied once. Then, on the same cluster:
//
//   - one replica, `sync -workspaces FILE` of all N, against N processes
//     `sync -chdir DIR`, one per workspace: each set started, waited for
//     (every `watching` line, then its CPU quiet), then idle for
//     -workspaces-idle: the watches it holds open on the API server (from
//     the audit log), its peak RSS (VmHWM, summed over the N processes) and
//     its CPU over the idle window (/proc);
//   - applied runs a minute with each number of replicas of
//     -workspaces-replicas (`-leader-elect`, one lease group per number,
//     `-max-concurrent-runs 1`), under a churn that keeps every workspace
//     changing: a pod of each Service flipped again as soon as a run has
//     applied its last flip, for -workspaces-churn once every workspace's
//     Lease is held and every replica holds some; with the machine's CPU
//     over the same window, to say when the CPU and not the replicas
//     bound the runs.
//
// bench/README.md says what each figure means.

const (
	// wsPrefix names the workspaces (ws-000, ...) and their directories.
	wsPrefix = "ws"
	// wsQuiet and wsSettleMax are every companion's settle window, the
	// soak's and the churn's.
	wsQuiet     = time.Second
	wsSettleMax = 5 * time.Second
	// wsLeaseNamespace holds the replicas' Leases.
	wsLeaseNamespace = "bench-workspaces"
	// wsSyncAgent is the user agent of the companion's requests
	// (internal/companion/cli.go).
	wsSyncAgent = "terraform-provider-k8s-sync"
	// wsStateKey is where state keeps a workspace's pool: its
	// terraform_data's name.
	wsStateKey = "pool"
	// wsRSSRatio bounds one replica's peak RSS over the sum of the single
	// processes' (issue 40).
	wsRSSRatio = 0.1
	// wsLinear is the share of linear scaling that "near-linear" asks:
	// k replicas give at least wsLinear x k times the runs of one.
	wsLinear = 0.8
	// wsSaturated is the machine's busy share from which the CPU, not the
	// replicas, bounds the runs.
	wsSaturated = 0.9
	// wsStable is how long the Leases' holders must stay the same before
	// the churn starts: a Lease duration (15 s) and two retry periods, the
	// time a replica the group prefers takes to be handed its share.
	wsStable = 20 * time.Second
)

// workspacesOptions are the flags of the part.
type workspacesOptions struct {
	count    int
	idle     time.Duration
	churn    time.Duration
	replicas sizeList
	wait     time.Duration
}

func (o *workspacesOptions) register(flags *flag.FlagSet) {
	flags.IntVar(&o.count, "workspaces-count", 100, "many workspaces: the working directories, each one k8s_ready_endpoints of a fixture Service kept by a terraform_data (1 to 500)")
	flags.DurationVar(&o.idle, "workspaces-idle", time.Minute, "many workspaces: the idle window of one replica of every workspace, and of one process per workspace")
	flags.DurationVar(&o.churn, "workspaces-churn", 3*time.Minute, "many workspaces: the churn over which runs a minute are counted, at each number of replicas")
	o.replicas = sizeList{1, 2, 3}
	flags.Var(&o.replicas, "workspaces-replicas", "many workspaces: the numbers of replicas whose runs a minute are counted, ascending, from 1 (\"\": none)")
	flags.DurationVar(&o.wait, "workspaces-wait", 10*time.Minute, "many workspaces: the longest wait for the processes' `watching` lines and quiet CPU, for the Leases to be shared out, and for the runs of the churn's last changes")
}

// check checks the part's flags.
func (o *workspacesOptions) check() error {
	switch {
	case o.count < 1 || o.count > fixture.FleetServices:
		return fmt.Errorf("-workspaces-count %d: 1 to %d, the fixture's Services", o.count, fixture.FleetServices)
	case o.idle <= 0:
		return fmt.Errorf("-workspaces-idle %s: more than 0", o.idle)
	case len(o.replicas) > 0 && o.replicas[0] != 1:
		return fmt.Errorf("-workspaces-replicas %s: the first is 1, the runs of one replica that the others are compared with", o.replicas.String())
	case len(o.replicas) > 0 && o.churn <= 0:
		return fmt.Errorf("-workspaces-churn %s: more than 0", o.churn)
	case o.wait <= 0:
		return fmt.Errorf("-workspaces-wait %s: more than 0", o.wait)
	}
	return nil
}

// workspacesResults are the part's figures.
type workspacesResults struct {
	count, pods int
	// apply is the wall time of the first applies, s, workers how many
	// ran at once.
	apply   float64
	workers int
	idle    time.Duration
	// one is the replica of every workspace, each the processes of one
	// workspace each.
	one, each *companionSet
	churn     time.Duration
	stages    []*replicaStage
	cores     int
}

// companionSet is companions started together and measured as one.
type companionSet struct {
	processes int
	// watching is from the start to the last `watching` line, settled to
	// the CPU quiet, s; startCPU the CPU until then, own and of the
	// commands waited for (terraform state pull), s.
	watching, settled       float64
	startCPU, startChildCPU float64
	// idle is the idle window, s; idleCPU and idleChildCPU the CPU over it.
	idle, idleCPU, idleChildCPU float64
	// peakRSS is the sum of every process's VmHWM at the idle window's
	// end, largestRSS the largest one's, MiB.
	peakRSS, largestRSS float64
	// watches are the requests of the set in the audit log, from just
	// before its start to the end of the idle window.
	watches watchCount
	// runs are the runs started (none is wanted: nothing changed).
	runs int
}

// workspaceName is the i-th workspace's name.
func workspaceName(i int) string { return fmt.Sprintf("%s-%03d", wsPrefix, i) }

// workspaceMain is the i-th workspace's configuration: the pool of the
// fixture's i-th Service, kept by terraform_data.pool.
func workspaceMain(i int) string {
	return benchrun.ProviderBlock + fmt.Sprintf(
		"\ndata \"k8s_ready_endpoints\" \"pool\" {\n  namespace = %q\n  service   = %q\n  port_name = \"http\"\n}\n\nresource \"terraform_data\" %q {\n  input = [for e in data.k8s_ready_endpoints.pool.endpoints : \"${e.address}:${e.port}\"]\n}\n",
		fixture.Namespace, fixture.ServiceName(i), wsStateKey)
}

// workspacesFile is the -workspaces file of dirs, the i-th named
// workspaceName(i).
func workspacesFile(dirs []string) string {
	var b strings.Builder
	b.WriteString("workspaces:\n")
	for i, dir := range dirs {
		fmt.Fprintf(&b, "  - name: %s\n    dir: %s\n", workspaceName(i), strconv.Quote(dir))
	}
	return b.String()
}

// workspaces is the part.
func (s *syncBench) workspaces(ctx context.Context, r *Results) error {
	o := s.b.opts.workspaces
	n := o.count
	res := &workspacesResults{count: n, idle: o.idle, churn: o.churn, cores: runtime.NumCPU(), workers: 2 * runtime.NumCPU()}
	r.workspaces = res
	pools, err := readChurnPools(ctx, s, n)
	if err != nil {
		return err
	}
	res.pods = len(pools[0])
	if err := readyAll(ctx, s, n, pools); err != nil {
		return err
	}
	dirs := make([]string, n)
	for i := range n {
		if dirs[i], err = s.b.Config(filepath.Join("workspaces", workspaceName(i)), workspaceMain(i)); err != nil {
			return err
		}
	}
	file := filepath.Join(s.b.DirOf("workspaces"), "workspaces.yaml")
	if err := os.WriteFile(file, []byte(workspacesFile(dirs)), 0o644); err != nil {
		return err
	}
	s.b.Say("many workspaces: %d configurations applied, %d at once", n, res.workers)
	start := time.Now()
	if err := bounded(ctx, n, res.workers, func(ctx context.Context, i int) error { return s.Apply(ctx, dirs[i]) }); err != nil {
		return err
	}
	res.apply = time.Since(start).Seconds()
	for i := range n {
		if err := wantStatePool(dirs[i], pools.members(i)); err != nil {
			return fmt.Errorf("after the apply, %s: %w", workspaceName(i), err)
		}
	}
	fmt.Fprintf(benchrun.Log, "  applied in %.1f s\n", res.apply)

	s.b.Say("many workspaces: one replica of all %d, %s idle", n, o.idle)
	if res.one, err = s.companionSet(ctx, [][]string{{"-workspaces", file}}, n); err != nil {
		return fmt.Errorf("one replica of %d workspaces: %w", n, err)
	}
	s.b.Say("many workspaces: %d processes of one workspace each, %s idle", n, o.idle)
	each := make([][]string, n)
	for i := range n {
		each[i] = []string{"-chdir", dirs[i]}
	}
	if res.each, err = s.companionSet(ctx, each, 1); err != nil {
		return fmt.Errorf("%d processes of one workspace each: %w", n, err)
	}

	if len(o.replicas) == 0 {
		return nil
	}
	if _, err := s.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wsLeaseNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	names := make([]string, n)
	for i := range names {
		names[i] = workspaceName(i)
	}
	for _, k := range o.replicas {
		s.b.Say("many workspaces: %d replica(s) under churn for %s", k, o.churn)
		st, err := s.replicaStage(ctx, file, names, dirs, pools, k)
		if err != nil {
			return fmt.Errorf("%d replica(s): %w", k, err)
		}
		res.stages = append(res.stages, st)
	}
	return nil
}

// readyAll makes every pod of the fixture's first n Services ready, and
// waits until the EndpointSlice controller has published them.
func readyAll(ctx context.Context, s *syncBench, n int, pools churnPools) error {
	var again []int
	for i := range n {
		changed := false
		for j := range pools[i] {
			if pools[i][j].ready {
				continue
			}
			if _, err := fixture.WriteReady(ctx, s.client, fixture.Namespace, pools[i][j].name, true); err != nil {
				return err
			}
			pools[i][j].ready, changed = true, true
		}
		if changed {
			again = append(again, i)
		}
	}
	return waitPublished(ctx, s, again, pools)
}

// waitPublished waits until the slices of each of services show its
// pods as pools has them.
func waitPublished(ctx context.Context, s *syncBench, services []int, pools churnPools) error {
	return fixture.Parallel(ctx, len(services), func(ctx context.Context, k int) error {
		i := services[k]
		return testcluster.WaitForSlices(ctx, s.client, fixture.Namespace, fixture.ServiceName(i), 2*time.Minute,
			testcluster.EndpointCount(discoveryv1.AddressTypeIPv4, len(pools.members(i)), len(pools[i])))
	})
}

// wantStatePool checks that the state of dir keeps members.
func wantStatePool(dir string, members []string) error {
	got, err := statePool(dir)
	if err != nil {
		return err
	}
	if !slices.Equal(got, members) {
		return fmt.Errorf("the pool in state is %v, want %v", got, members)
	}
	return nil
}

// statePool is the pool that dir's state keeps, sorted.
func statePool(dir string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		return nil, err
	}
	pools, err := soak.StatePools(raw)
	if err != nil {
		return nil, err
	}
	members, ok := pools[wsStateKey]
	if !ok {
		return nil, fmt.Errorf("no terraform_data.%s in %s's state", wsStateKey, dir)
	}
	return members, nil
}

// bounded runs do(0) ... do(n-1), at most workers at once, and gives the
// first error (the calls not started then are skipped).
func bounded(ctx context.Context, n, workers int, do func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	slots := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := do(ctx, i); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// startSync starts `sync` with where (-workspaces FILE or -chdir DIR), the
// bench's settle window and extra flags.
func (s *syncBench) startSync(ctx context.Context, where []string, extra ...string) (*companionproc.Proc, error) {
	argv := append([]string{s.b.Provider, "sync"}, where...)
	argv = append(argv, "-terraform", s.Terraform, "-kubeconfig", s.b.Cluster.Kubeconfig(), "-log-format", "json", "-listen", "127.0.0.1:0",
		"-settle-quiet", wsQuiet.String(), "-settle-max", wsSettleMax.String(), "-stop-timeout", "30s")
	return companionproc.Start(ctx, append(argv, extra...), s.Env)
}

// companionSet starts a companion for each of wheres at once, waits for
// each one's watching lines (watching of them each), then for their CPU
// to go quiet, and measures them over the idle window.
func (s *syncBench) companionSet(ctx context.Context, wheres [][]string, watching int) (*companionSet, error) {
	o := s.b.opts.workspaces
	audit := filepath.Join(s.b.Cluster.Dir, testcluster.AuditLog)
	auditFrom := fileSize(audit)
	set := &companionSet{processes: len(wheres)}
	started := time.Now()
	procs := make([]*companionproc.Proc, 0, len(wheres))
	defer func() { haltAll(procs) }()
	for _, where := range wheres {
		c, err := s.startSync(ctx, where)
		if err != nil {
			return nil, err
		}
		procs = append(procs, c)
	}
	deadline := time.Now().Add(o.wait)
	for _, c := range procs {
		if _, err := c.WaitNth(ctx, "watching", watching, time.Until(deadline)); err != nil {
			return nil, fmt.Errorf("%w\n(of %d processes, %d have logged every `watching` line)", err, len(procs), countWatching(procs, watching))
		}
	}
	set.watching = time.Since(started).Seconds()
	pids := make([]int, len(procs))
	for i, c := range procs {
		pids[i] = c.Pid()
	}
	// Quiet: the processes' CPU together grows by at most a tick, and a
	// tick for each ten processes, in 2 s.
	before, settled, err := settleCPUs(ctx, pids, 2*time.Second, int64(1+len(pids)/10), time.Until(deadline))
	if err != nil {
		return nil, err
	}
	set.settled = settled.Sub(started).Seconds()
	set.startCPU, set.startChildCPU = before.Self(), before.Children()
	fmt.Fprintf(benchrun.Log, "  %d process(es): every `watching` after %.1f s, CPU quiet after %.1f s (CPU %.1f s, its commands %.1f s); now idle for %s\n",
		len(procs), set.watching, set.settled, set.startCPU, set.startChildCPU, o.idle)
	idleStart := time.Now()
	select {
	case <-time.After(o.idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	after, err := sumStats(pids)
	if err != nil {
		return nil, err
	}
	set.idle = time.Since(idleStart).Seconds()
	set.idleCPU, set.idleChildCPU = after.Self()-before.Self(), after.Children()-before.Children()
	for _, pid := range pids {
		rss, err := peakRSS(pid)
		if err != nil {
			return nil, err
		}
		set.peakRSS += rss
		set.largestRSS = max(set.largestRSS, rss)
	}
	for _, c := range procs {
		set.runs += c.Seen("run started")
	}
	f, err := os.Open(audit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(auditFrom, io.SeekStart); err != nil {
		return nil, err
	}
	if set.watches, err = countWatches(f, wsSyncAgent); err != nil {
		return nil, err
	}
	fmt.Fprintf(benchrun.Log, "  idle CPU %.2f s + %.2f s (commands) over %.1f s; peak RSS %.1f MiB (largest %.1f); watches open %s; runs %d\n",
		set.idleCPU, set.idleChildCPU, set.idle, set.peakRSS, set.largestRSS, set.watches.describe(set.watches.open), set.runs)
	return set, nil
}

// countWatching is how many of procs have logged n `watching` lines.
func countWatching(procs []*companionproc.Proc, n int) int {
	k := 0
	for _, c := range procs {
		if c.Seen("watching") >= n {
			k++
		}
	}
	return k
}

// haltAll stops every process at once and waits for them.
func haltAll(procs []*companionproc.Proc) {
	var wg sync.WaitGroup
	for _, c := range procs {
		wg.Go(c.Halt)
	}
	wg.Wait()
}

// sumStats is the CPU of pids together.
func sumStats(pids []int) (procstat.Stat, error) {
	var sum procstat.Stat
	for _, pid := range pids {
		st, err := procstat.Read(pid)
		if err != nil {
			return procstat.Stat{}, err
		}
		sum.Utime += st.Utime
		sum.Stime += st.Stime
		sum.Cutime += st.Cutime
		sum.Cstime += st.Cstime
	}
	return sum, nil
}

// settleCPUs is settleCPU of pids together.
func settleCPUs(ctx context.Context, pids []int, window time.Duration, ticks int64, timeout time.Duration) (procstat.Stat, time.Time, error) {
	deadline := time.Now().Add(timeout)
	prev, err := sumStats(pids)
	if err != nil {
		return procstat.Stat{}, time.Time{}, err
	}
	for {
		select {
		case <-time.After(window):
		case <-ctx.Done():
			return procstat.Stat{}, time.Time{}, ctx.Err()
		}
		now, err := sumStats(pids)
		if err != nil {
			return procstat.Stat{}, time.Time{}, err
		}
		if now.Total()-prev.Total() <= ticks {
			return now, time.Now(), nil
		}
		if time.Now().After(deadline) {
			return procstat.Stat{}, time.Time{}, fmt.Errorf("%w within %s", errNotSettled, timeout)
		}
		prev = now
	}
}

// fileSize is the size of path, 0 when it cannot be read.
func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// watchKey is a kind of object in a namespace ("" for cluster-wide).
type watchKey struct{ resource, namespace string }

func (k watchKey) String() string {
	if k.namespace == "" {
		return k.resource + " (every namespace)"
	}
	return k.resource + " in " + k.namespace
}

// watchCount is what an audit log says of one user agent's watches and
// lists, by kind and namespace: the watches opened (their
// ResponseStarted events), those still open at the log's end (opened, no
// ResponseComplete of the same audit ID yet) and the lists; streamed is
// how many of the watches opened began with the current objects
// (sendInitialEvents=true: client-go's informers list so).
type watchCount struct {
	opened, open, lists map[watchKey]int
	streamed            int
}

// countWatches reads audit events (one JSON object a line, the API
// server's log backend) of the user agents that start with agent.
func countWatches(r io.Reader, agent string) (watchCount, error) {
	c := watchCount{opened: map[watchKey]int{}, open: map[watchKey]int{}, lists: map[watchKey]int{}}
	openIDs := map[string]watchKey{}
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var e struct {
			AuditID    string `json:"auditID"`
			Stage      string `json:"stage"`
			RequestURI string `json:"requestURI"`
			Verb       string `json:"verb"`
			UserAgent  string `json:"userAgent"`
			ObjectRef  *struct {
				Resource  string `json:"resource"`
				Namespace string `json:"namespace"`
			} `json:"objectRef"`
		}
		if json.Unmarshal(scanner.Bytes(), &e) != nil || !strings.HasPrefix(e.UserAgent, agent) || e.ObjectRef == nil {
			continue
		}
		key := watchKey{e.ObjectRef.Resource, e.ObjectRef.Namespace}
		switch {
		case e.Verb == "watch" && e.Stage == "ResponseStarted":
			c.opened[key]++
			openIDs[e.AuditID] = key
			if strings.Contains(e.RequestURI, "sendInitialEvents=true") {
				c.streamed++
			}
		case e.Verb == "watch" && e.Stage == "ResponseComplete":
			delete(openIDs, e.AuditID)
		case e.Verb == "list" && e.Stage == "ResponseComplete":
			c.lists[key]++
		}
	}
	for _, key := range openIDs {
		c.open[key]++
	}
	return c, scanner.Err()
}

// total is the sum of counts.
func (c watchCount) total(counts map[watchKey]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}

// describe is counts as "services in bench 1, endpointslices in bench 1",
// by kind and namespace; "none" when empty.
func (c watchCount) describe(counts map[watchKey]int) string {
	keys := make([]watchKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b watchKey) int { return strings.Compare(a.String(), b.String()) })
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s: %d", k, counts[k]))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// onePerKind says whether counts has one for each kind and namespace it
// names, and names at least one.
func onePerKind(counts map[watchKey]int) bool {
	for _, v := range counts {
		if v != 1 {
			return false
		}
	}
	return len(counts) > 0
}
