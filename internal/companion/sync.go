package companion

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/kube"
	"github.com/vigie/terraform-provider-k8s/internal/pools"
	"github.com/vigie/terraform-provider-k8s/internal/provider"
)

// SyncOptions are the settings of `sync` (and of `check`, which uses a part).
type SyncOptions struct {
	// Dir is the configuration's working directory, initialized.
	Dir string
	// Terraform is the CLI: terraform or tofu, a name on PATH or a path.
	Terraform string
	// Alias is the k8s provider configuration served: "" for the default.
	Alias string
	// Quiet is the settle window's minimum quiet time, MaxWait its longest
	// wait from the first change: like Consul-Terraform-Sync's buffer_period.
	Quiet, MaxWait time.Duration
	// LockTimeout is how long plan and apply wait for a held state lock.
	LockTimeout time.Duration
	// StopTimeout bounds the wait for a running command after SIGINT.
	StopTimeout time.Duration
	// RetryInitial and RetryMax bound the exponential backoff after a failed run.
	RetryInitial, RetryMax time.Duration
	// MaxShrink is the largest share of a pool's members a run may remove
	// at once (0 < MaxShrink <= 1); AllowEmpty lets a run empty a pool.
	MaxShrink  float64
	AllowEmpty bool
	// Allowed, when set, are the addresses a run may change, instead of the
	// resources derived from the configuration.
	Allowed []string
	// Command, when set, replaces the built-in plan and apply (remote
	// execution: HCP Terraform, Atlantis): run with sh -c in Dir.
	Command string
	// Refresh is plan's -refresh.
	Refresh bool
	// StateInterval is how often state is read again without any run, to
	// see what someone else applied.
	StateInterval time.Duration
}

// DefaultSyncOptions: a 5 s quiet time and a 20 s longest wait (CTS's
// buffer_period defaults), locks waited for 5 minutes, retries from 5 s
// doubling to 5 minutes, at most half a pool removed in one run.
func DefaultSyncOptions() SyncOptions {
	return SyncOptions{
		Dir: ".", Terraform: "terraform",
		Quiet: 5 * time.Second, MaxWait: 20 * time.Second,
		LockTimeout: 5 * time.Minute, StopTimeout: 2 * time.Minute,
		RetryInitial: 5 * time.Second, RetryMax: 5 * time.Minute,
		MaxShrink: 0.5, Refresh: true, StateInterval: 5 * time.Minute,
	}
}

// syncer is the companion's state: the pools of state, the cache of the
// cluster, and the decisions made from both. Its loop (run) is the only
// goroutine that decides; the informers only mark what changed.
type syncer struct {
	opts    SyncOptions
	cli     *cli
	client  *kube.Client
	log     *slog.Logger
	metrics *metrics
	filter  poolChangeFilter

	instances []instance
	cache     *kube.Cache
	stopCache context.CancelFunc
	scope     kube.CacheScope

	mu    sync.Mutex
	dirty map[int]bool
	all   bool
	kick  chan struct{}

	// checkOnly is set by check, which reads no configuration.
	checkOnly bool

	// now is time.Now, replaced by tests of the rules of the loop.
	now func() time.Time
}

// evaluation is what the cache gives for one instance, compared with state.
type evaluation struct {
	changes []provider.PoolChange
	// err says why a plan would fail (a Service gone, a guard): no run.
	err error
}

func newSyncer(opts SyncOptions, client *kube.Client, log *slog.Logger) *syncer {
	return &syncer{
		opts:    opts,
		cli:     &cli{path: opts.Terraform, dir: opts.Dir, lockTimeout: opts.LockTimeout, stopTimeout: opts.StopTimeout, env: []string{"TF_IN_AUTOMATION=1"}},
		client:  client,
		log:     log,
		metrics: newMetrics(),
		dirty:   map[int]bool{},
		kick:    make(chan struct{}, 1),
		now:     time.Now,
	}
}

// loadState reads the state and the configuration, and (re)starts the cache
// when what must be watched changed.
func (s *syncer) loadState(ctx context.Context) error {
	raw, err := s.cli.statePull(ctx)
	if err != nil {
		return err
	}
	found, ignored, _, err := poolsOfState(ctx, raw, s.opts.Alias)
	if err != nil {
		return err
	}
	for _, a := range ignored {
		s.log.Info("not watched: another provider configuration", "data_source", a, "served_alias", aliasName(s.opts.Alias))
	}
	if len(found) == 0 {
		return fmt.Errorf("the state of %s has no k8s_ready_endpoints or k8s_services of provider configuration %s: nothing to watch",
			s.opts.Dir, aliasName(s.opts.Alias))
	}
	if len(s.opts.Allowed) > 0 {
		s.filter = poolChangeFilter{allowed: s.opts.Allowed}
	} else if s.opts.Command == "" && !s.checkOnly {
		g, err := readConfiguration(s.opts.Dir)
		if err != nil {
			return err
		}
		for _, f := range g.skipped {
			s.log.Warn("not read for dependencies (JSON syntax): name its resources with -allow if they use pools", "file", f)
		}
		var watched []string
		for _, in := range found {
			watched = append(watched, withoutKeys(in.resource))
		}
		s.filter = poolChangeFilter{dependent: g.dependents(watched), opaque: g.opaque}
	}
	scope := scopeOf(found)
	s.mu.Lock()
	s.instances = found
	s.all = true
	s.mu.Unlock()
	s.metrics.poolsWatched.Set(float64(len(found)))
	if s.cache == nil || !sameScope(scope, s.scope) {
		if err := s.startCache(ctx, scope); err != nil {
			return err
		}
	}
	return nil
}

func aliasName(alias string) string {
	if alias == "" {
		return "k8s (default)"
	}
	return "k8s." + alias
}

// scopeOf is what the instances read: their namespaces, and Nodes if any
// gives nodes.
func scopeOf(found []instance) kube.CacheScope {
	var scope kube.CacheScope
	for _, in := range found {
		if p := in.pool.Pool; p != nil {
			scope.Namespaces = append(scope.Namespaces, p.Namespace)
			scope.Nodes = scope.Nodes || p.Nodes.Enabled
			if p.ReadsPods() {
				scope.PodNamespaces = append(scope.PodNamespaces, p.Namespace)
			}
		}
		if f := in.pool.Fleet; f != nil {
			scope.Namespaces = append(scope.Namespaces, f.Namespaces...)
			scope.Nodes = scope.Nodes || f.Nodes.Enabled
			if f.ReadsPods() {
				scope.PodNamespaces = append(scope.PodNamespaces, f.Namespaces...)
			}
		}
	}
	slices.Sort(scope.Namespaces)
	scope.Namespaces = slices.Compact(scope.Namespaces)
	slices.Sort(scope.PodNamespaces)
	scope.PodNamespaces = slices.Compact(scope.PodNamespaces)
	return scope
}

func sameScope(a, b kube.CacheScope) bool {
	return a.Nodes == b.Nodes && slices.Equal(a.Namespaces, b.Namespaces) && slices.Equal(a.PodNamespaces, b.PodNamespaces)
}

func (s *syncer) startCache(ctx context.Context, scope kube.CacheScope) error {
	if s.stopCache != nil {
		s.stopCache()
	}
	cache, err := s.client.NewCache(scope, s.changed)
	if err != nil {
		return err
	}
	probeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cache.Probe(probeCtx); err != nil {
		return err
	}
	cacheCtx, stop := context.WithCancel(ctx)
	cache.Run(cacheCtx)
	syncCtx, cancelSync := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelSync()
	if !cache.WaitForSync(syncCtx) {
		stop()
		return fmt.Errorf("the informers did not list %v within 2 minutes", scope.Namespaces)
	}
	s.cache, s.stopCache, s.scope = cache, stop, scope
	s.log.Info("watching", "namespaces", describeNamespaces(scope.Namespaces), "nodes", scope.Nodes,
		"pods", describeNamespaces(scope.PodNamespaces))
	return nil
}

func describeNamespaces(namespaces []string) string {
	if slices.Contains(namespaces, "") {
		return "all"
	}
	return strings.Join(namespaces, ",")
}

// changed is the informers' handler: it marks the instances that read the
// object and wakes the loop.
func (s *syncer) changed(ch kube.Change) {
	s.mu.Lock()
	for i, in := range s.instances {
		if reads(in.pool, ch) {
			s.dirty[i] = true
		}
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// reads says whether a pool reads the object of ch.
func reads(p *provider.StatePool, ch kube.Change) bool {
	if r := p.Pool; r != nil {
		switch ch.Kind {
		case "Node":
			return r.Nodes.Enabled
		case "Pod":
			return r.ReadsPods() && ch.Namespace == r.Namespace
		}
		return ch.Namespace == r.Namespace && ch.Service == r.Service
	}
	f := p.Fleet
	switch ch.Kind {
	case "Node":
		return f.Nodes.Enabled
	case "Pod":
		if !f.ReadsPods() {
			return false
		}
	}
	return f.AllNamespaces() || slices.Contains(f.Namespaces, ch.Namespace)
}

// evaluate recomputes the instances marked dirty (all after a state read)
// from the cache; it gives the evaluation of every instance.
func (s *syncer) evaluate(last []evaluation) []evaluation {
	s.mu.Lock()
	all, dirty := s.all, s.dirty
	s.all, s.dirty = false, map[int]bool{}
	instances := s.instances
	s.mu.Unlock()
	if len(last) != len(instances) {
		all = true
	}
	out := make([]evaluation, len(instances))
	now := s.now()
	for i, in := range instances {
		if !all && !dirty[i] {
			out[i] = last[i]
			continue
		}
		out[i] = s.evaluateOne(in, now)
	}
	return out
}

func (s *syncer) evaluateOne(in instance, now time.Time) evaluation {
	if r := in.pool.Pool; r != nil {
		res, err := computePool(s.cache, *r, now)
		if err != nil {
			return evaluation{err: err}
		}
		changes, err := in.pool.ComparePool(res)
		return evaluation{changes: changes, err: err}
	}
	res, err := computeFleet(s.cache, *in.pool.Fleet, now)
	if err != nil {
		return evaluation{err: err}
	}
	changes, err := in.pool.CompareFleet(res)
	return evaluation{changes: changes, err: err}
}

// computePool is what a read of r would give, from the cache: the same
// steps as the data source's read (provider.readPool), on cached objects.
func computePool(c *kube.Cache, r pools.Request, now time.Time) (endpoints.Result, error) {
	svc, ok := c.Service(r.Namespace, r.Service)
	if !ok {
		return endpoints.Result{}, fmt.Errorf("service %s/%s not found: a plan would fail", r.Namespace, r.Service)
	}
	if err := r.CheckService(svc); err != nil {
		return endpoints.Result{}, err
	}
	objects := pools.Objects{Service: svc, EndpointSlices: c.EndpointSlices(r.Namespace, r.Service)}
	if r.Nodes.Enabled {
		objects.Nodes = c.Nodes(r.Query.NodeSelector)
	}
	if r.ReadsPods() && len(svc.Spec.Selector) > 0 {
		objects.Pods = c.Pods(r.Namespace, labels.SelectorFromSet(svc.Spec.Selector))
	}
	res, err := r.Compute(objects, now)
	if err != nil {
		return res, err
	}
	if r.Short(res) {
		return res, fmt.Errorf("service %s/%s has %d ready endpoint(s), fewer than min_ready = %d: a plan would fail", r.Namespace, r.Service, endpoints.CountReady(res.Endpoints), r.MinReady)
	}
	return res, nil
}

// computeFleet is what a read of r would give, from the cache.
func computeFleet(c *kube.Cache, r pools.FleetRequest, now time.Time) (endpoints.FleetResult, error) {
	selector := labels.Everything()
	if r.Selector != "" {
		parsed, err := labels.Parse(r.Selector)
		if err != nil {
			return endpoints.FleetResult{}, fmt.Errorf("label_selector %q: %w", r.Selector, err)
		}
		selector = parsed
	}
	var objects pools.FleetObjects
	for _, ns := range r.Namespaces {
		objects.Services = append(objects.Services, c.Services(ns, selector)...)
		objects.EndpointSlices = append(objects.EndpointSlices, c.ServiceEndpointSlices(ns)...)
		if r.ReadsPods() {
			objects.Pods = append(objects.Pods, c.Pods(ns, labels.Everything())...)
		}
	}
	if r.Nodes.Enabled {
		objects.Nodes = c.Nodes(r.Query.NodeSelector)
	}
	res, err := r.Compute(objects, now)
	if err != nil {
		return res, err
	}
	if !r.GuardsHold(res) {
		return res, fmt.Errorf("the selection has %d Service(s), %d short of min_ready: a plan would fail its guards", len(res.Pools), len(r.ShortPools(res)))
	}
	return res, nil
}

// nextExpiry is the earliest expiry annotation to pass among the pools that
// use one; zero when none.
func (s *syncer) nextExpiry(now time.Time) time.Time {
	s.mu.Lock()
	instances := s.instances
	s.mu.Unlock()
	var next time.Time
	consider := func(slices []discoveryv1.EndpointSlice, annotation string) {
		if t, ok := endpoints.NextExpiry(slices, annotation, now); ok && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, in := range instances {
		if r := in.pool.Pool; r != nil && r.Query.ExpiryAnnotation != "" {
			consider(s.cache.EndpointSlices(r.Namespace, r.Service), r.Query.ExpiryAnnotation)
		}
		if f := in.pool.Fleet; f != nil && f.Query.ExpiryAnnotation != "" {
			for _, ns := range f.Namespaces {
				consider(s.cache.ServiceEndpointSlices(ns), f.Query.ExpiryAnnotation)
			}
		}
	}
	return next
}

// pending is what differs, by instance address, sorted.
type pending struct {
	changes map[string][]provider.PoolChange
	errors  map[string]error
}

func pendingOf(instances []instance, evals []evaluation) pending {
	p := pending{changes: map[string][]provider.PoolChange{}, errors: map[string]error{}}
	for i, e := range evals {
		if i >= len(instances) {
			break
		}
		switch {
		case e.err != nil:
			p.errors[instances[i].address] = e.err
		case len(e.changes) > 0:
			p.changes[instances[i].address] = e.changes
		}
	}
	return p
}

// signature identifies a set of changes, so that one refused is not tried
// again until the cluster changes it.
func (p pending) signature() string {
	b, _ := json.Marshal(p.changes)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// shrinkRefusal says why the shrink guard refuses p, or "".
func (s *syncer) shrinkRefusal(p pending) string {
	var reasons []string
	for _, address := range slices.Sorted(maps.Keys(p.changes)) {
		for _, c := range p.changes[address] {
			name := address
			if c.Name != "" {
				name += "[" + c.Name + "]"
			}
			switch {
			case len(c.Before) > 0 && len(c.After) == 0 && !s.opts.AllowEmpty:
				reasons = append(reasons, fmt.Sprintf("%s would be emptied (%d members to 0; -allow-empty lets it)", name, len(c.Before)))
			case len(c.Before) > 0 && float64(len(c.Removed)) > s.opts.MaxShrink*float64(len(c.Before)):
				reasons = append(reasons, fmt.Sprintf("%s would lose %d of its %d members at once, more than -max-shrink %.2f", name, len(c.Removed), len(c.Before), s.opts.MaxShrink))
			}
		}
	}
	return strings.Join(reasons, "; ")
}

// runResult is the end of one run.
type runResult struct {
	result string
	err    error
	// blocked are the addresses that made a plan not pool-only.
	blocked []string
}

// runOnce plans, checks and applies (or runs the command), once.
func (s *syncer) runOnce(ctx context.Context, p pending) runResult {
	if s.opts.Command != "" {
		return s.runCommand(ctx, p)
	}
	dir, err := os.MkdirTemp("", "k8s-sync-")
	if err != nil {
		return runResult{result: resultFailed, err: err}
	}
	defer os.RemoveAll(dir)
	planFile := filepath.Join(dir, "pools.tfplan")
	changes, err := s.cli.plan(ctx, planFile, s.opts.Refresh)
	if err != nil {
		return runResult{result: resultFailed, err: err}
	}
	if !changes {
		return runResult{result: resultNoChanges}
	}
	changed, err := s.cli.changedAddresses(ctx, planFile)
	if err != nil {
		return runResult{result: resultFailed, err: err}
	}
	var blocked []string
	for _, a := range changed {
		if !s.filter.allows(a) {
			blocked = append(blocked, a)
		}
	}
	if len(blocked) > 0 {
		return runResult{result: resultRefused, blocked: blocked}
	}
	if len(changed) == 0 {
		// Only outputs or data sources: nothing a load balancer sees.
		return runResult{result: resultNoChanges}
	}
	s.log.Info("applying the saved plan", "changes", len(changed), "addresses", strings.Join(changed, ","))
	if err := s.cli.apply(ctx, planFile); err != nil {
		return runResult{result: resultFailed, err: err}
	}
	return runResult{result: resultApplied}
}

// runCommand runs the hook that replaces plan and apply; K8S_SYNC_CHANGES
// holds the changes as JSON, by data source address.
func (s *syncer) runCommand(ctx context.Context, p pending) runResult {
	changes, _ := json.Marshal(p.changes)
	c := *s.cli
	c.path = "sh"
	c.env = append(slices.Clone(c.env), "K8S_SYNC_CHANGES="+string(changes), "K8S_SYNC_TERRAFORM="+s.opts.Terraform)
	if _, err := c.run(ctx, "-c", s.opts.Command); err != nil {
		return runResult{result: resultFailed, err: err}
	}
	return runResult{result: resultApplied}
}

// Run is the companion's loop, until ctx ends: see docs/guides/sync.md.
func (s *syncer) Run(ctx context.Context) error {
	if err := s.loadState(ctx); err != nil {
		return err
	}
	defer func() {
		if s.stopCache != nil {
			s.stopCache()
		}
	}()
	var (
		evals       []evaluation
		windowOpen  bool
		windowStart time.Time
		lastChange  time.Time
		windowSig   string
		refusedSig  string
		reported    = map[string]string{}
		running     bool
		runDone     = make(chan runResult, 1)
		fire        = time.NewTimer(time.Hour)
		expiry      = time.NewTimer(time.Hour)
		statePoll   = time.NewTicker(s.opts.StateInterval)
		backoff     = s.newBackoff()
		retryAt     time.Time
		runStarted  time.Time
		current     pending
	)
	fire.Stop()
	expiry.Stop()
	defer statePoll.Stop()

	schedule := func() {
		now := s.now()
		at := lastChange.Add(s.opts.Quiet)
		if limit := windowStart.Add(s.opts.MaxWait); limit.Before(at) {
			at = limit
		}
		if retryAt.After(at) {
			at = retryAt
		}
		fire.Reset(max(at.Sub(now), 0))
	}
	decide := func() {
		evals = s.evaluate(evals)
		s.mu.Lock()
		instances := s.instances
		s.mu.Unlock()
		current = pendingOf(instances, evals)
		for address, err := range current.errors {
			if reported[address] != err.Error() {
				s.log.Warn("pool not recomputed: no run for it", "data_source", address, "reason", err.Error())
				reported[address] = err.Error()
			}
		}
		for address := range reported {
			if _, ok := current.errors[address]; !ok {
				delete(reported, address)
			}
		}
		if next := s.nextExpiry(s.now()); !next.IsZero() {
			expiry.Reset(max(next.Sub(s.now()), 0) + 10*time.Millisecond)
		}
		if running {
			return
		}
		if len(current.changes) == 0 {
			if windowOpen {
				s.log.Info("pools match state again: no run")
			}
			windowOpen = false
			fire.Stop()
			return
		}
		sig := current.signature()
		if sig == refusedSig {
			return
		}
		if sig == windowSig && windowOpen {
			return
		}
		now := s.now()
		if !windowOpen {
			windowOpen, windowStart = true, now
			s.metrics.drift.Inc()
		}
		windowSig, lastChange = sig, now
		for _, address := range slices.Sorted(maps.Keys(current.changes)) {
			for _, c := range current.changes[address] {
				s.log.Info("pool differs from state", "data_source", address, "pool", c.Name,
					"added", strings.Join(c.Added, ","), "removed", strings.Join(c.Removed, ","))
			}
		}
		schedule()
	}
	decide()

	for {
		select {
		case <-ctx.Done():
			fire.Stop()
			if running {
				s.log.Info("stopping: waiting for the running command, which got SIGINT", "bound", s.opts.StopTimeout.String())
				r := <-runDone
				s.log.Info("run ended", "result", r.result, "duration", s.now().Sub(runStarted).Round(time.Millisecond).String(), "error", errText(r.err))
			}
			return nil
		case <-s.kick:
			decide()
		case <-expiry.C:
			s.mu.Lock()
			s.all = true
			s.mu.Unlock()
			decide()
		case <-statePoll.C:
			if running {
				continue
			}
			if err := s.loadState(ctx); err != nil {
				s.log.Warn("reading state", "error", err.Error())
			}
			decide()
		case <-fire.C:
			if running || len(current.changes) == 0 {
				continue
			}
			if reason := s.shrinkRefusal(current); reason != "" {
				s.log.Warn("run refused by the shrink guard", "reason", reason)
				s.metrics.runs.WithLabelValues(resultShrinkRefused).Inc()
				refusedSig, windowOpen = current.signature(), false
				continue
			}
			running, windowOpen = true, false
			s.metrics.settleDelay.Observe(s.now().Sub(windowStart).Seconds())
			s.log.Info("run started", "data_sources", strings.Join(slices.Sorted(maps.Keys(current.changes)), ","),
				"settled", s.now().Sub(windowStart).Round(time.Millisecond).String())
			runStarted = s.now()
			started, snapshot, sig := runStarted, current, current.signature()
			go func() {
				r := s.runOnce(ctx, snapshot)
				s.metrics.runDuration.Observe(time.Since(started).Seconds())
				runDone <- r
			}()
			windowSig = sig
		case r := <-runDone:
			running = false
			s.metrics.runs.WithLabelValues(r.result).Inc()
			s.metrics.lastRun.SetToCurrentTime()
			s.log.Info("run ended", "result", r.result, "duration", s.now().Sub(runStarted).Round(time.Millisecond).String(), "error", errText(r.err))
			switch r.result {
			case resultFailed:
				wait := backoff.Step()
				retryAt = s.now().Add(wait)
				s.log.Warn("run failed: retrying with backoff", "retry_in", wait.String(), "error", errText(r.err))
			case resultRefused:
				refusedSig = windowSig
				s.log.Warn("run refused: the plan changes more than pools; fix or apply it by hand", "blocked", strings.Join(r.blocked, ","))
			default:
				backoff = s.newBackoff()
				retryAt = time.Time{}
			}
			if ctx.Err() != nil {
				return nil
			}
			if err := s.loadState(ctx); err != nil {
				s.log.Warn("reading state after the run", "error", err.Error())
			}
			windowSig = ""
			if r.result == resultFailed {
				// Retry the same changes: open the window at once.
				windowOpen, windowStart, lastChange = false, time.Time{}, time.Time{}
			}
			decide()
		}
	}
}

func (s *syncer) newBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: s.opts.RetryInitial, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: s.opts.RetryMax}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, errStopped) {
		return "stopped by SIGINT"
	}
	return err.Error()
}
