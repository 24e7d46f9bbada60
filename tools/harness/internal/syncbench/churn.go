package syncbench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigie/terraform-provider-k8s/test/soak"
	"github.com/vigie/terraform-provider-k8s/test/syncproc"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/companionproc"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/stats"
)

// The companion under churn (issue 39): from the write of a pod's Ready
// condition to terraform.tfstate showing the new pool, and the duration of
// the runs, for configurations of N k8s_ready_endpoints (-churn-sizes),
// each kept by a terraform_data of its own, and of one k8s_services fleet
// of the fixture's Services (-churn-fleet) kept by a terraform_data per
// Service (for_each), as the soak's configuration keeps its pools; under
// the soak's churn (test/soak's Long: 10 pool changes a minute spread
// over the pools, and a burst of 50 at once, here in the middle of each
// round) with the soak's settle window (1 s quiet, 5 s max). The pools are
// the fixture's Services of 10 pods (fixture.Create); a change makes one
// pod not ready or ready again (fixture.WriteReady), as a kubelet would,
// and the cluster's EndpointSlice controller publishes it.
//
// For each configuration, -churn-rounds rounds; in each, every build (this
// one, then the baseline's; the order turns each round) runs the same
// churn on the same pools: every pod of the configuration made ready again,
// the configuration applied (so that the companion starts with nothing to
// do), the companion started on it, the churn of the round (the same seed
// for every build), then the wait until every change is in state. The
// judge is the soak's (soak.StatePools, soak.MatchState,
// soak.Resolutions): the state file read as soon as it is written, and
// each change seen when state first shows the pool it made; a change
// never resolved is lost, and reported.

const (
	// churnQuiet and churnSettleMax are the companion's settle window, the
	// soak's (soak.Long).
	churnQuiet     = time.Second
	churnSettleMax = 5 * time.Second
	// churnPoll is how often the judge looks at the state file's time.
	churnPoll = 100 * time.Millisecond
	// churnTargetSize is the number of data sources of the latency
	// targets, churnLargeSize that of the run duration's, against
	// churnTargetSize (issue 39).
	churnTargetSize = 50
	churnLargeSize  = 500
	churnP50Bound   = 2.0 // s
	churnP99Bound   = 4.0 // s
	churnRunRatio   = 1.5
	// churnPort is the pods' port: the pools' members are "IP:port".
	churnPort = 8080
	// resultNoChanges is the result of a run whose plan had nothing to
	// do.
	resultNoChanges = "no_changes"
)

// churnConfig is one configuration under churn: singles data sources
// (each with its terraform_data), or a fleet of fleet Services.
type churnConfig struct {
	singles, fleet int
}

// pools is the number of pools: the fixture's first Services.
func (c churnConfig) pools() int { return max(c.singles, c.fleet) }

func (c churnConfig) name() string {
	if c.fleet > 0 {
		return fmt.Sprintf("churn-fleet-%d", c.fleet)
	}
	return fmt.Sprintf("churn-%d", c.singles)
}

func (c churnConfig) title() string {
	if c.fleet > 0 {
		return fmt.Sprintf("1 `k8s_services` of %d Services", c.fleet)
	}
	return fmt.Sprintf("%d `k8s_ready_endpoints`", c.singles)
}

// key is where state keeps the pool of the fixture's i-th Service: the
// single's terraform_data, or the fleet's instance key.
func (c churnConfig) key(i int) string {
	if c.fleet > 0 {
		return fixture.Namespace + "/" + fixture.ServiceName(i)
	}
	return strings.ReplaceAll(fixture.ServiceName(i), "-", "_")
}

// main is the configuration: the data sources and the terraform_data
// that keep their pools, as the soak's configuration (soak.config).
func (c churnConfig) main() string {
	var b strings.Builder
	b.WriteString(benchrun.ProviderBlock)
	if c.fleet > 0 {
		names := ""
		if c.fleet < fixture.FleetServices {
			quoted := make([]string, c.fleet)
			for i := range quoted {
				quoted[i] = strconv.Quote(fixture.ServiceName(i))
			}
			names = fmt.Sprintf("  names     = [%s]\n", strings.Join(quoted, ", "))
		}
		fmt.Fprintf(&b, "\ndata \"k8s_services\" \"fleet\" {\n  namespace = %q\n%s  port_name = \"http\"\n}\n\nresource \"terraform_data\" \"fleet\" {\n  for_each = data.k8s_services.fleet.services\n  input    = [for e in each.value.endpoints : \"${e.address}:${e.port}\"]\n}\n",
			fixture.Namespace, names)
		return b.String()
	}
	for i := range c.singles {
		name := c.key(i)
		fmt.Fprintf(&b, "\ndata \"k8s_ready_endpoints\" %q {\n  namespace = %q\n  service   = %q\n  port_name = \"http\"\n}\n\nresource \"terraform_data\" %q {\n  input = [for e in data.k8s_ready_endpoints.%s.endpoints : \"${e.address}:${e.port}\"]\n}\n",
			name, fixture.Namespace, fixture.ServiceName(i), name, name)
	}
	return b.String()
}

// churnConfigs are the configurations of the options, in the order they
// run.
func churnConfigs(o Options) []churnConfig {
	var out []churnConfig
	for _, n := range o.churnSizes {
		out = append(out, churnConfig{singles: n})
	}
	if o.churnFleet > 0 {
		out = append(out, churnConfig{fleet: o.churnFleet})
	}
	return out
}

// churnEvent is a moment of the churn: one pool changed, or a burst of
// them at once.
type churnEvent struct {
	at    time.Duration
	burst bool
	pools []int
}

// churnSchedule is a round's churn: perMinute changes a minute, each in a
// pool drawn from pools, from one period after the start until d; and a
// burst of burst changes at d/2 (before the steady change of that moment,
// if any), in distinct pools while there are enough.
func churnSchedule(rng *rand.Rand, pools int, d time.Duration, perMinute, burst int) []churnEvent {
	var events []churnEvent
	if perMinute > 0 {
		period := time.Minute / time.Duration(perMinute)
		for at := period; at < d; at += period {
			events = append(events, churnEvent{at: at, pools: []int{rng.IntN(pools)}})
		}
	}
	if burst > 0 {
		order := rng.Perm(pools)
		picked := make([]int, burst)
		for i := range picked {
			picked[i] = order[i%pools]
		}
		at := d / 2
		i, _ := slices.BinarySearchFunc(events, at, func(e churnEvent, at time.Duration) int { return int(e.at - at) })
		events = slices.Insert(events, i, churnEvent{at: at, burst: true, pools: picked})
	}
	return events
}

// churnFlip is the change to a pool whose pods' readiness is ready: which
// pod, and whether it is made ready. A pool keeps more than half its pods
// ready (every pod of a full pool is ready), so that no change the churn
// makes is one the companion's shrink guard refuses.
func churnFlip(rng *rand.Rand, ready []bool) (pod int, makeReady bool) {
	var up, down []int
	for i, r := range ready {
		if r {
			up = append(up, i)
		} else {
			down = append(down, i)
		}
	}
	floor := len(ready)/2 + 1
	switch {
	case len(down) == 0:
		return up[rng.IntN(len(up))], false
	case len(up) <= floor || rng.IntN(2) == 0:
		return down[rng.IntN(len(down))], true
	default:
		return up[rng.IntN(len(up))], false
	}
}

// churnSeed is the seed of a configuration's round: every build gets the
// same churn.
func churnSeed(name string, round int) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return rand.New(rand.NewPCG(h.Sum64(), uint64(round)))
}

// churnPod is a pod of the fixture as the churn made it.
type churnPod struct {
	name, ip string
	ready    bool
}

// churnPools are the fixture's pools as the churn made them, by Service.
type churnPools [][]churnPod

// members is the pool of Service i: its ready pods' "IP:port", sorted, as
// its terraform_data keeps them.
func (p churnPools) members(i int) []string {
	var out []string
	for _, pod := range p[i] {
		if pod.ready {
			out = append(out, fmt.Sprintf("%s:%d", pod.ip, churnPort))
		}
	}
	slices.Sort(out)
	return out
}

func (p churnPools) readiness(i int) []bool {
	out := make([]bool, len(p[i]))
	for j, pod := range p[i] {
		out[j] = pod.ready
	}
	return out
}

// readChurnPools reads the pods of the fixture's first n Services.
func readChurnPools(ctx context.Context, s *syncBench, n int) (churnPools, error) {
	list, err := s.client.CoreV1().Pods(fixture.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	for i := range n {
		index[fixture.ServiceName(i)] = i
	}
	pools := make(churnPools, n)
	for _, pod := range list.Items {
		i, ok := index[pod.Labels["app"]]
		if !ok {
			continue
		}
		ready := false
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.Status == corev1.ConditionTrue
			}
		}
		pools[i] = append(pools[i], churnPod{name: pod.Name, ip: pod.Status.PodIP, ready: ready})
	}
	for i := range pools {
		if len(pools[i]) == 0 {
			return nil, fmt.Errorf("service %s/%s has no pod", fixture.Namespace, fixture.ServiceName(i))
		}
		slices.SortFunc(pools[i], func(a, b churnPod) int { return strings.Compare(a.name, b.name) })
	}
	return pools, nil
}

// churnChange is a change the churn made, as the judge pairs it with
// state, and what it was.
type churnChange struct {
	soak.Change
	pod   string
	ready bool
	burst bool
}

// churnJudge follows a configuration's state file and pairs the churn's
// changes with it, as the soak's judge does. A change is seen at the time
// the state file that shows its pool was written (its modification time;
// the change's own time when the state written before it already showed
// its pool: the change undid one still pending).
type churnJudge struct {
	path string
	mu   sync.Mutex
	// state is each pool as last read, written the time of that read's
	// file.
	state   map[string][]string
	written time.Time
	size    int64
	changes []*churnChange
}

// read reads the state file if it was written since the last read, and
// pairs what changed with the changes; an error when it does not parse
// (being written: the next read takes it).
func (j *churnJudge) read() error {
	before, err := os.Stat(j.path)
	if err != nil {
		return err
	}
	j.mu.Lock()
	unchanged := before.ModTime().Equal(j.written) && before.Size() == j.size
	j.mu.Unlock()
	if unchanged {
		return nil
	}
	raw, err := os.ReadFile(j.path)
	if err != nil {
		return err
	}
	after, err := os.Stat(j.path)
	if err != nil {
		return err
	}
	if !after.ModTime().Equal(before.ModTime()) {
		return errors.New("state file written while read")
	}
	pools, err := soak.StatePools(raw)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.observe(pools, before.ModTime())
	j.written, j.size = before.ModTime(), before.Size()
	return nil
}

// observe takes the pools of a state file written at written.
func (j *churnJudge) observe(pools map[string][]string, written time.Time) {
	if j.state == nil {
		j.state = map[string][]string{}
	}
	for key, members := range pools {
		if prev, ok := j.state[key]; ok && slices.Equal(prev, members) {
			continue
		}
		j.state[key] = members
		soak.MatchState(j.pairs(), key, members, written)
	}
	for _, c := range j.changes {
		if !c.Seen.IsZero() && c.Seen.Before(c.At) {
			c.Seen = c.At
		}
	}
}

// record adds a change, seen at once when state shows its pool already.
func (j *churnJudge) record(c *churnChange) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.changes = append(j.changes, c)
	if members, ok := j.state[c.Key]; ok {
		soak.MatchState(j.pairs(), c.Key, members, c.At)
	}
}

func (j *churnJudge) pairs() []*soak.Change {
	out := make([]*soak.Change, len(j.changes))
	for i, c := range j.changes {
		out[i] = &c.Change
	}
	return out
}

// made is how many changes were recorded.
func (j *churnJudge) made() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.changes)
}

// pending is how many changes are neither seen nor superseded.
func (j *churnJudge) pending() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, c := range j.changes {
		if c.Seen.IsZero() && !c.Superseded {
			n++
		}
	}
	return n
}

// follow reads the state file every churnPoll until ctx ends.
func (j *churnJudge) follow(ctx context.Context) {
	t := time.NewTicker(churnPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = j.read()
		}
	}
}

// churnTally is one build's figures in one configuration, over its
// rounds.
type churnTally struct {
	changes, seen, superseded, undone int
	// latency is, per change seen, the state's writing minus the change's
	// write, s.
	latency []float64
	// toRun is, per change seen, the start of the first run after its
	// write minus the write, s: the part of its latency before a run took
	// it (the settle window, and a run under way).
	toRun []float64
	// lost are the changes never resolved.
	lost []string
	// runs are the companion's runs, by result; durations those of the
	// runs that ended, s; unended the runs under way at the end.
	runs      map[string]int
	durations []float64
	unended   int
	// steady and burst are the latencies of the steady changes and of
	// the bursts' apart, s; burstWrites how long the writes of each burst
	// took, from the first to the last, s.
	steady, burst, burstWrites []float64
	// applies are the untimed applies before each round, s.
	applies []float64
}

// nothingToDo is how many runs had nothing to do.
func (t *churnTally) nothingToDo() int { return t.runs[resultNoChanges] }

func (t *churnTally) runCount() int {
	n := 0
	for _, v := range t.runs {
		n += v
	}
	return n
}

// tally adds a round's changes to t: seen (latency), superseded, undone
// (seen at the change: state already showed its pool) or lost.
func (t *churnTally) tally(changes []*churnChange) {
	pairs := make([]*soak.Change, len(changes))
	for i, c := range changes {
		pairs[i] = &c.Change
	}
	resolved := soak.Resolutions(pairs)
	for _, c := range changes {
		t.changes++
		_, ok := resolved[&c.Change]
		switch {
		case !ok:
			what := "not ready"
			if c.ready {
				what = "ready"
			}
			t.lost = append(t.lost, fmt.Sprintf("%s: pod %s made %s at %s (want %d members)", c.Key, c.pod, what, c.At.UTC().Format("15:04:05.000"), len(c.Want)))
		case c.Superseded:
			t.superseded++
		case c.Seen.Equal(c.At):
			t.undone++
		default:
			t.seen++
			lat := c.Seen.Sub(c.At).Seconds()
			t.latency = append(t.latency, lat)
			if c.burst {
				t.burst = append(t.burst, lat)
			} else {
				t.steady = append(t.steady, lat)
			}
		}
	}
}

// runSpan is one run of the companion, from its log.
type runSpan struct {
	start, end time.Time
	result     string
}

// pairRuns pairs the companion's "run started" and "run ended" lines: one
// run at a time, so the n-th end is the n-th start's. A start without its
// end is a run under way (end zero).
func pairRuns(started, ended []syncproc.Event) []runSpan {
	out := make([]runSpan, len(started))
	for i, e := range started {
		out[i].start = e.Time
		if i < len(ended) {
			out[i].end, out[i].result = ended[i].Time, ended[i].Str("result")
		}
	}
	return out
}

// untilRun is, for each change seen (neither superseded nor undone), the
// start of the first run of runs (in the order they started) that started
// after its write, minus the write, s.
func untilRun(changes []*churnChange, runs []runSpan) []float64 {
	var out []float64
	for _, c := range changes {
		if c.Seen.IsZero() || c.Superseded || c.Seen.Equal(c.At) {
			continue
		}
		if i := nextRun(runs, c.At); i < len(runs) && !runs[i].start.After(c.Seen) {
			out = append(out, runs[i].start.Sub(c.At).Seconds())
		}
	}
	return out
}

// nextRun is the index of the first run of runs (in the order they
// started) that started after at; len(runs) when none did.
func nextRun(runs []runSpan, at time.Time) int {
	return sort.Search(len(runs), func(k int) bool { return runs[k].start.After(at) })
}

// traceChanges writes, for each change, what became of it: when the
// first run after its write started and ended, and when state showed it.
func traceChanges(w io.Writer, changes []*churnChange, runs []runSpan) {
	for n, c := range changes {
		what := "not ready"
		if c.ready {
			what = "ready"
		}
		line := fmt.Sprintf("    change %d, %s (pod %s made %s)", n+1, c.Key, c.pod, what)
		if i := nextRun(runs, c.At); i < len(runs) {
			line += fmt.Sprintf(": next run started +%.2f s", runs[i].start.Sub(c.At).Seconds())
			if !runs[i].end.IsZero() {
				line += fmt.Sprintf(", ended +%.2f s", runs[i].end.Sub(c.At).Seconds())
			}
		}
		switch {
		case c.Superseded:
			line += "; superseded"
		case c.Seen.IsZero():
			line += "; lost"
		case c.Seen.Equal(c.At):
			line += "; undone"
		default:
			line += fmt.Sprintf("; in state +%.2f s", c.Seen.Sub(c.At).Seconds())
		}
		fmt.Fprintln(w, line)
	}
}

// addRuns adds a round's runs to t.
func (t *churnTally) addRuns(runs []runSpan) {
	if t.runs == nil {
		t.runs = map[string]int{}
	}
	for _, r := range runs {
		if r.end.IsZero() {
			t.unended++
			continue
		}
		t.runs[r.result]++
		t.durations = append(t.durations, r.end.Sub(r.start).Seconds())
	}
}

// churnPoint is a configuration: each build's tally.
type churnPoint struct {
	config        churnConfig
	current, base *churnTally
}

// churnResults is the part's results.
type churnResults struct {
	rounds            int
	duration, wait    time.Duration
	perMinute, burst  int
	baseline, current string
	points            []*churnPoint
}

// churn measures every configuration of the options.
func (s *syncBench) churn(ctx context.Context, r *Results) error {
	o := s.b.opts
	res := &churnResults{rounds: o.churnRounds, duration: o.churnDuration, wait: o.churnWait, perMinute: o.churnRate, burst: o.churnBurst}
	r.churn = res
	if r.baseline != nil {
		res.baseline = r.baseline.commit
		res.current = s.b.CommitOf(ctx)
	}
	configs := churnConfigs(o)
	most := 0
	for _, c := range configs {
		if c.pools() > fixture.FleetServices {
			return fmt.Errorf("%s: the fixture has %d Services", c.title(), fixture.FleetServices)
		}
		most = max(most, c.pools())
	}
	pools, err := readChurnPools(ctx, s, most)
	if err != nil {
		return err
	}
	builds := s.builds(r)
	for _, cfg := range configs {
		p := &churnPoint{config: cfg, current: &churnTally{}}
		if len(builds) > 1 {
			p.base = &churnTally{}
		}
		res.points = append(res.points, p)
		dirs := make([]string, len(builds))
		for i := range builds {
			name := cfg.name()
			if i > 0 {
				name += "-baseline"
			}
			if dirs[i], err = s.b.Config(name, cfg.main()); err != nil {
				return err
			}
		}
		for round := range o.churnRounds {
			for k := range builds {
				// The order turns each round: this build first, then the
				// baseline first.
				i := (k + round) % len(builds)
				tally := p.current
				if i > 0 {
					tally = p.base
				}
				s.b.Say("companion under churn: %s, round %d of %d, %s", cfg.title(), round+1, o.churnRounds, builds[i].label())
				if err := builds[i].churnRound(ctx, cfg, dirs[i], round, pools, tally); err != nil {
					return fmt.Errorf("%s, round %d, %s: %w", cfg.title(), round+1, builds[i].label(), err)
				}
			}
		}
	}
	return nil
}

// churnRound is one build's round of cfg in dir.
func (s *syncBench) churnRound(ctx context.Context, cfg churnConfig, dir string, round int, pools churnPools, t *churnTally) error {
	o := s.b.opts
	if err := readyAll(ctx, s, cfg.pools(), pools); err != nil {
		return err
	}
	start := time.Now()
	if err := s.Apply(ctx, dir); err != nil {
		return err
	}
	t.applies = append(t.applies, time.Since(start).Seconds())
	j := &churnJudge{path: filepath.Join(dir, "terraform.tfstate")}
	if err := j.read(); err != nil {
		return fmt.Errorf("the state of the apply: %w", err)
	}
	for i := range cfg.pools() {
		if got, want := j.state[cfg.key(i)], pools.members(i); !slices.Equal(got, want) {
			return fmt.Errorf("after the apply, pool %s is %v in state, want %v", cfg.key(i), got, want)
		}
	}
	fmt.Fprintf(benchrun.Log, "  applied in %.1f s; every pod ready\n", t.applies[len(t.applies)-1])
	c, err := s.startCompanion(ctx, dir, "-settle-quiet", churnQuiet.String(), "-settle-max", churnSettleMax.String())
	if err != nil {
		return err
	}
	defer c.Halt()
	if _, err := c.WaitNth(ctx, "watching", 1, 2*time.Minute); err != nil {
		return err
	}
	// Its first comparison of every pool with state: nothing to do.
	time.Sleep(2 * time.Second)
	follow, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { j.follow(follow) })
	defer func() {
		stop()
		wg.Wait()
	}()

	rng := churnSeed(cfg.name(), round)
	events := churnSchedule(rng, cfg.pools(), o.churnDuration, o.churnRate, o.churnBurst)
	begin := time.Now()
	for _, e := range events {
		select {
		case <-time.After(time.Until(begin.Add(e.at))):
		case <-ctx.Done():
			return ctx.Err()
		}
		first := time.Now()
		for _, i := range e.pools {
			pod, ready := churnFlip(rng, pools.readiness(i))
			written, err := fixture.WriteReady(ctx, s.client, fixture.Namespace, pools[i][pod].name, ready)
			if err != nil {
				return err
			}
			pools[i][pod].ready = ready
			j.record(&churnChange{Change: soak.Change{At: written, Key: cfg.key(i), Want: pools.members(i)}, pod: pools[i][pod].name, ready: ready, burst: e.burst})
		}
		if e.burst {
			t.burstWrites = append(t.burstWrites, time.Since(first).Seconds())
		}
	}
	fmt.Fprintf(benchrun.Log, "  %d changes made over %.0f s; waiting for state\n", j.made(), time.Since(begin).Seconds())
	if err := s.churnSettle(ctx, c, j, o.churnWait); err != nil {
		return err
	}
	stop()
	wg.Wait()
	_ = j.read()
	j.mu.Lock()
	changes := slices.Clone(j.changes)
	j.mu.Unlock()
	before := len(t.latency)
	t.tally(changes)
	runs := pairRuns(c.Events("run started", nil), c.Events("run ended", nil))
	t.addRuns(runs)
	traceChanges(benchrun.Log, changes, runs)
	toRun := untilRun(changes, runs)
	t.toRun = append(t.toRun, toRun...)
	results := map[string]int{}
	var durations []float64
	for _, r := range runs {
		results[r.result]++
		if !r.end.IsZero() {
			durations = append(durations, r.end.Sub(r.start).Seconds())
		}
	}
	latency := t.latency[before:]
	fmt.Fprintf(benchrun.Log, "  latency p50 %.2f s, p99 %.2f s, max %.2f s over %d changes seen (write → next run started p50 %.2f s); %d runs %v, p50 %.2f s; %d pending at the end\n",
		stats.Percentile(latency, 50), stats.Percentile(latency, 99), stats.Percentile(latency, 100), len(latency), stats.Percentile(toRun, 50),
		len(runs), results, stats.Percentile(durations, 50), j.pending())
	return nil
}

// churnSettle waits, at most wait, until every change is in state (or
// superseded), then until the companion has no run under way and starts
// none for a settle window and a second.
func (s *syncBench) churnSettle(ctx context.Context, c *companionproc.Proc, j *churnJudge, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	idleSince := time.Time{}
	for time.Now().Before(deadline) {
		running := c.Seen("run started") != c.Seen("run ended")
		switch {
		case j.pending() > 0 || running:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = time.Now()
		case time.Since(idleSince) > churnSettleMax+time.Second:
			return nil
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-c.Done():
			return fmt.Errorf("the companion exited (code %d):\n%s", c.ExitCode(), lastLines(c.Log(), 20))
		default:
		}
	}
	fmt.Fprintf(benchrun.Log, "  after %s: %d change(s) not in state, a run under way: %v\n", wait, j.pending(), c.Seen("run started") != c.Seen("run ended"))
	return nil
}

// churnFigures are the columns of the churn's table, each of a tally.
var churnFigures = []struct {
	title  string
	format string
	value  func(*churnTally) float64
}{
	{"latency p50, s", "%.2f", func(t *churnTally) float64 { return stats.Percentile(t.latency, 50) }},
	{"latency p99, s", "%.2f", func(t *churnTally) float64 { return stats.Percentile(t.latency, 99) }},
	{"latency max, s", "%.2f", func(t *churnTally) float64 { return stats.Percentile(t.latency, 100) }},
	{"of which write → next run started, p50, s", "%.2f", func(t *churnTally) float64 { return stats.Percentile(t.toRun, 50) }},
	{"run p50, s", "%.2f", func(t *churnTally) float64 { return stats.Percentile(t.durations, 50) }},
	{"run p99, s", "%.2f", func(t *churnTally) float64 { return stats.Percentile(t.durations, 99) }},
	{"run max, s", "%.2f", func(t *churnTally) float64 { return stats.Percentile(t.durations, 100) }},
	{"runs", "%.0f", func(t *churnTally) float64 { return float64(t.runCount()) }},
}

// churnPointAt is the configuration of n single data sources, or nil.
func (res *churnResults) churnPointAt(n int) *churnPoint {
	if res == nil {
		return nil
	}
	for _, p := range res.points {
		if p.config.singles == n {
			return p
		}
	}
	return nil
}

// churnTargetRows are the rows of the targets table: the latency at 50
// data sources, the run duration at 500 against 50, nothing lost and no
// run for nothing.
func churnTargetRows(res *churnResults) []string {
	if res == nil || len(res.points) == 0 {
		return nil
	}
	var rows []string
	row := func(format string, args ...any) { rows = append(rows, fmt.Sprintf(format, args...)) }
	settle := fmt.Sprintf("settle window %s quiet, %s max", churnQuiet, churnSettleMax)
	if p := res.churnPointAt(churnTargetSize); p != nil && len(p.current.latency) > 0 {
		t := p.current
		p50, p99 := stats.Percentile(t.latency, 50), stats.Percentile(t.latency, 99)
		row("| companion under churn, %s (%s): pod Ready written → state showing the pool, p50 of %d changes | %.2f s | ≤ %.1f s | %s |",
			p.config.title(), settle, len(t.latency), p50, churnP50Bound, stats.Verdict(p50, churnP50Bound, " s"))
		row("| the same, p99 (nearest rank) | %.2f s | ≤ %.1f s | %s |", p99, churnP99Bound, stats.Verdict(p99, churnP99Bound, " s"))
	} else {
		row("| companion under churn at %d `k8s_ready_endpoints`: change → state latency p50, p99 | not measured (-churn-sizes) | ≤ %.1f s, ≤ %.1f s | |", churnTargetSize, churnP50Bound, churnP99Bound)
	}
	small, large := res.churnPointAt(churnTargetSize), res.churnPointAt(churnLargeSize)
	if small != nil && large != nil && len(small.current.durations) > 0 && len(large.current.durations) > 0 {
		a, b := stats.Percentile(large.current.durations, 50), stats.Percentile(small.current.durations, 50)
		ratio := a / b
		row("| companion under churn: run duration p50 at %d `k8s_ready_endpoints` / at %d | %.2f s / %.2f s = %.2f× | ≤ %.1f× | %s |",
			churnLargeSize, churnTargetSize, a, b, ratio, churnRunRatio, stats.Verdict(ratio, churnRunRatio, "×"))
	} else {
		row("| companion under churn: run duration p50 at %d `k8s_ready_endpoints` / at %d | not measured (-churn-sizes) | ≤ %.1f× | |", churnLargeSize, churnTargetSize, churnRunRatio)
	}
	lost, nothing, changes, runs := 0, 0, 0, 0
	for _, p := range res.points {
		lost += len(p.current.lost)
		nothing += p.current.nothingToDo()
		changes += p.current.changes
		runs += p.current.runCount()
	}
	row("| companion under churn: changes lost (not in state when a round ended, %s after its churn), every configuration | %d of %d | 0 | %s |", res.wait, lost, changes, zeroVerdict(lost))
	row("| companion under churn: runs with nothing to do (`no_changes`), every configuration | %d of %d | 0 | %s |", nothing, runs, zeroVerdict(nothing))
	return rows
}

func zeroVerdict(n int) string {
	if n == 0 {
		return "**pass**"
	}
	return fmt.Sprintf("**miss** by %d", n)
}

// churnSection is the paragraph, the table of every configuration and
// build and their ratios, and the lost changes.
func churnSection(res *churnResults) string {
	if res == nil || len(res.points) == 0 {
		return ""
	}
	b := &benchrun.Section{}
	builds := "this build alone"
	if res.baseline != "" {
		builds = fmt.Sprintf("this build (%s) and the baseline's (%s) in turn, this build first in odd rounds and the baseline first in even ones, each on a directory, state and companion of its own", res.current, res.baseline)
	}
	b.Para("The companion under churn: for each configuration, %d round(s) of %s of churn, %s. A round: every pod of the configuration's Services made ready again, the configuration applied, the companion started (`-settle-quiet %s -settle-max %s`, it plans and applies), then the soak's churn: %d pool changes a minute, each a pod of a pool drawn at random made not ready or ready again (a pool keeps more than half its pods ready), and a burst of %d changes in distinct pools at once in the middle of the round; the same draw for every build of a round. Then the wait, %s at most, for every change to be in state: a change not in state when it ends is lost, and named below. Latency is from the write of the pod's Ready condition to the writing of the terraform.tfstate that first shows the pool it made (the judge of test/soak, on the file's modification time); of which, the wait for the next run to start after the write (the settle window, or a run under way); run durations are from the companion's `run started` and `run ended` lines. Superseded: a later change of the pool was in state first; undone: the change brought its pool back to what state showed. Percentiles are nearest-rank.",
		res.rounds, res.duration, builds, churnQuiet, churnSettleMax, res.perMinute, res.burst, res.wait)
	head := "| configuration | build | changes | seen | superseded | undone | lost |"
	align := "|---|---|---:|---:|---:|---:|---:|"
	for _, f := range churnFigures {
		head += " " + f.title + " |"
		align += "---:|"
	}
	head += " runs with nothing to do | other results | applies before the rounds, s |"
	align += "---:|---|---:|"
	b.Table(head, align)
	for _, p := range res.points {
		sides := []struct {
			name string
			t    *churnTally
		}{{"this build", p.current}}
		if p.base != nil {
			sides = append(sides, struct {
				name string
				t    *churnTally
			}{"baseline " + res.baseline, p.base})
		}
		for _, side := range sides {
			t := side.t
			line := fmt.Sprintf("| %s | %s | %d | %d | %d | %d | %d |", p.config.title(), side.name, t.changes, t.seen, t.superseded, t.undone, len(t.lost))
			for _, f := range churnFigures {
				line += " " + churnFigure(t, f.format, f.value) + " |"
			}
			line += fmt.Sprintf(" %d | %s | %s |", t.nothingToDo(), otherResults(t), stats.MinMax(t.applies, "%.1f"))
			b.Line("%s", line)
		}
		if p.base != nil {
			line := fmt.Sprintf("| %s | this build / baseline | %s | | | | |", p.config.title(), ratioText(float64(p.current.changes), float64(p.base.changes)))
			for _, f := range churnFigures {
				line += " " + ratioText(f.value(p.current), f.value(p.base)) + " |"
			}
			line += " | | |"
			b.Line("%s", line)
		}
	}
	b.Line("")
	if res.burst > 0 {
		b.Para("The steady changes and the bursts' apart (a burst's changes are written one after the other, and its first ones wait for the last's quiet time):")
		b.Table("| configuration | build | steady changes seen | their latency p50, s | p99, s | burst changes seen | their latency p50, s | p99, s | a burst's writes took, s |",
			"|---|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, p := range res.points {
			for _, side := range []struct {
				name string
				t    *churnTally
			}{{"this build", p.current}, {"baseline " + res.baseline, p.base}} {
				if t := side.t; t != nil {
					b.Line("| %s | %s | %d | %s | %s | %d | %s | %s | %s |", p.config.title(), side.name,
						len(t.steady), churnPercentile(t.steady, 50), churnPercentile(t.steady, 99),
						len(t.burst), churnPercentile(t.burst, 50), churnPercentile(t.burst, 99), stats.MinMax(t.burstWrites, "%.1f"))
				}
			}
		}
		b.Line("")
	}
	for _, p := range res.points {
		for _, side := range []struct {
			name string
			t    *churnTally
		}{{"this build", p.current}, {"the baseline", p.base}} {
			if side.t == nil {
				continue
			}
			if len(side.t.lost) > 0 {
				b.Para("Lost (not in state when the round ended), %s, %s (%d): %s.", p.config.title(), side.name, len(side.t.lost), strings.Join(side.t.lost, "; "))
			}
			if side.t.unended > 0 {
				b.Para("%s, %s: %d run(s) still under way when the round ended (not in the durations).", p.config.title(), side.name, side.t.unended)
			}
		}
	}
	return b.String()
}

// churnFigure is a figure of t, or "—" when it has no sample.
func churnFigure(t *churnTally, format string, value func(*churnTally) float64) string {
	v := value(t)
	if math.IsNaN(v) { // no sample
		return "—"
	}
	return fmt.Sprintf(format, v)
}

// churnPercentile is the p-th percentile of v, or "—" when v is empty.
func churnPercentile(v []float64, p float64) string {
	if len(v) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", stats.Percentile(v, p))
}

// ratioText is cur / old, or "—".
func ratioText(cur, old float64) string {
	if old == 0 || math.IsNaN(cur) || math.IsNaN(old) {
		return "—"
	}
	return fmt.Sprintf("%.2f×", cur/old)
}

// otherResults are the runs by result other than applied, "—" when none.
func otherResults(t *churnTally) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(t.runs)) {
		if k != "applied" {
			out = append(out, fmt.Sprintf("%s %d", k, t.runs[k]))
		}
	}
	if len(out) == 0 {
		return "—"
	}
	return strings.Join(out, ", ")
}

// checkChurn checks the churn's flags.
func (o *Options) checkChurn() error {
	switch {
	case len(o.churnSizes) > 0 && o.churnSizes[len(o.churnSizes)-1] > fixture.FleetServices:
		return fmt.Errorf("-churn-sizes %s: at most %d, the fixture's Services", o.churnSizes.String(), fixture.FleetServices)
	case o.churnFleet < 0 || o.churnFleet > fixture.FleetServices:
		return fmt.Errorf("-churn-fleet %d: 0 to %d, the fixture's Services", o.churnFleet, fixture.FleetServices)
	case o.churnRounds < 1:
		return fmt.Errorf("-churn-rounds %d: at least 1", o.churnRounds)
	case o.churnDuration <= 0:
		return fmt.Errorf("-churn-duration %s: more than 0", o.churnDuration)
	case o.churnRate < 0 || o.churnBurst < 0 || o.churnRate == 0 && o.churnBurst == 0:
		return fmt.Errorf("-churn-rate %d, -churn-burst %d: no change", o.churnRate, o.churnBurst)
	}
	return nil
}

// Check checks the flags of the parts selected, before the bench
// prepares anything.
func (o *Options) Check() error {
	if o.parts["churn"] {
		return o.checkChurn()
	}
	return nil
}

// churnTitles names the configurations under churn.
func churnTitles(o Options) string {
	var out []string
	for _, c := range churnConfigs(o) {
		out = append(out, c.title())
	}
	return strings.Join(out, ", ")
}
