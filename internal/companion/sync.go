package companion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
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
	// RetryInitial and RetryMax bound the exponential backoff after a failed
	// run or state read.
	RetryInitial, RetryMax time.Duration
	// MaxShrink is the largest share of a pool's members a run may remove
	// at once (0 < MaxShrink <= 1); AllowEmpty lets a run empty a pool.
	MaxShrink  float64
	AllowEmpty bool
	// GateOpenAfter, when set, is how long a pod may wait for the readiness
	// gate of its pool before the companion opens the gate itself (the
	// fail-safe); 0: never, the rollout waits for the pool to be applied.
	GateOpenAfter time.Duration
	// Allowed, when set, are the addresses a run may change, instead of the
	// resources derived from the configuration.
	Allowed []string
	// Command, when set, replaces the built-in plan and apply (remote
	// execution: HCP Terraform, Atlantis): run with sh -c in Dir.
	Command string
	// CommandRepeat is how long a change delivered to Command waits for
	// state to show it before it is delivered again; 0: never again.
	CommandRepeat time.Duration
	// Refresh is plan's -refresh.
	Refresh bool
	// TargetChanged says a run plans only what the changed pools need
	// (-target); FullPlanInterval is how often a run plans the whole
	// configuration anyway (0: never).
	TargetChanged    bool
	FullPlanInterval time.Duration
	// StateInterval is how often state is read again without any run, to
	// see what someone else applied.
	StateInterval time.Duration
	// StateTimeout bounds one read of state (state pull, through the
	// backend).
	StateTimeout time.Duration
	// Clusters are the -cluster flags: how to connect to the cluster of a
	// provider configuration, instead of what its provider block says.
	Clusters []string
	// DefaultFromFlags says that -kubeconfig or -context were given: they,
	// not the default provider block, say how to connect to its cluster.
	DefaultFromFlags bool
	// Client bounds the requests of the clients made for each cluster.
	Client kube.Options
	// Env is added to the CLI's environment (a workspace's TF_DATA_DIR,
	// its backend's credentials).
	Env []string
}

// DefaultSyncOptions: a 5 s quiet time and a 20 s longest wait (CTS's
// buffer_period defaults), locks waited for 5 minutes, retries from 5 s
// doubling to 5 minutes, at most half a pool removed in one run, a change
// given to -command again after 10 minutes without state showing it, a
// read of state bounded by 2 minutes, runs that plan what the changed pools
// need and the whole configuration every 10 minutes.
func DefaultSyncOptions() SyncOptions {
	return SyncOptions{
		Dir: ".", Terraform: "terraform",
		Quiet: 5 * time.Second, MaxWait: 20 * time.Second,
		LockTimeout: 5 * time.Minute, StopTimeout: 2 * time.Minute,
		RetryInitial: 5 * time.Second, RetryMax: 5 * time.Minute,
		MaxShrink: 0.5, Refresh: true, StateInterval: 5 * time.Minute, TargetChanged: true, FullPlanInterval: 10 * time.Minute,
		CommandRepeat: 10 * time.Minute, StateTimeout: 2 * time.Minute,
	}
}

// syncer is the companion: the pools of state, the cache of the cluster,
// and the loop (Run) that feeds what they show to the machine of its
// decisions and carries those out. The loop is the only goroutine that
// decides; the informers only mark what changed.
type syncer struct {
	opts    SyncOptions
	cli     *cli
	runner  *runner
	log     *slog.Logger
	metrics *metrics
	clock   clock.WithTicker

	// client is the cluster of the default provider configuration as the
	// flags say (-kubeconfig, -context, else the loader's default), and of
	// the configuration -provider-alias serves; it holds the Lease.
	client *kube.Client
	// flags are the connections the -cluster flags give, by key.
	flags map[string]connection
	// clusters are those the state's pools read, by key (instance.cluster),
	// on the hub the workspaces share; probing says Run asks them whether
	// they answer.
	clusters map[string]*cluster
	hub      *hub
	probing  bool
	// started says the first state read and caches are done: later, a
	// cache that cannot start leaves its pools unreadable.
	started bool

	instances []instance
	evals     []evaluation
	// undecodable are the pools of state this version cannot read.
	undecodable map[string]string
	// leftOut are the slices the pools leave out (noteLeftOut), by
	// "namespace/name", with the data source that first left each out.
	leftOut map[string]string
	// backend is the working directory's backend type, for logs and metrics.
	backend string
	// stateErr is why the last state read failed; nil when it did not.
	// /healthz names it from the first read on (under mu).
	stateErr error
	// stateID is the state last read, whole.
	stateID stateID

	mu    sync.Mutex
	dirty map[int]*touched
	all   bool
	kick  chan struct{}
	// health is what /healthz says, written by the loop.
	health []string

	// configFiles identify the configuration's files, for the view.
	configFiles configFiles

	// checkOnly is set by check, which reads no configuration.
	checkOnly bool

	// slots, when set, bound the runs of the replica's workspaces at
	// once.
	slots chan struct{}
	// gate orders a run's start and a hand-over of the workspace: busy
	// says a run is under way, handedOver that the workspace is being
	// handed over, and no run starts any more.
	gate       sync.Mutex
	busy       bool
	handedOver bool
}

func newSyncer(opts SyncOptions, client *kube.Client, h *hub, log *slog.Logger) (*syncer, error) {
	c := &cli{path: opts.Terraform, dir: opts.Dir, lockTimeout: opts.LockTimeout, stopTimeout: opts.StopTimeout, stateTimeout: opts.StateTimeout, env: append([]string{"TF_IN_AUTOMATION=1"}, opts.Env...)}
	s := &syncer{
		opts: opts,
		cli:  c,
		runner: &runner{tf: c, refresh: opts.Refresh, targetChanged: opts.TargetChanged, command: opts.Command,
			terraformPath: opts.Terraform, log: log},
		client:   client,
		flags:    map[string]connection{},
		clusters: map[string]*cluster{},
		hub:      h,
		log:      log,
		metrics:  newMetrics(prometheus.NewRegistry()),
		clock:    clock.RealClock{},
		dirty:    map[int]*touched{},
		kick:     make(chan struct{}, 1),
		backend:  backendOf(opts.Dir, opts.Env),
	}
	for _, v := range opts.Clusters {
		key, conn, err := parseClusterFlag(v)
		if err != nil {
			return nil, err
		}
		if prev, twice := s.flags[key]; twice {
			return nil, fmt.Errorf("%s and %s both say how to connect to %s: give one", prev.source, conn.source, clusterName(key))
		}
		s.flags[key] = conn
	}
	if opts.Alias != "" && len(s.flags) > 0 {
		return nil, errors.New("-provider-alias serves one provider configuration, connected by -kubeconfig and -context: give it or -cluster, not both")
	}
	s.metrics.now = func() time.Time { return s.clock.Now() }
	return s, nil
}

// permanentError is a state the companion cannot work from, whatever it
// waits for: no state, no pool in it, a format it does not read.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// loadState reads the state and the configuration, and (re)starts the cache
// when what must be watched changed. A failure of the CLI (a backend out of
// reach) is an error to retry; what retrying cannot cure is a
// *permanentError.
func (s *syncer) loadState(ctx context.Context) error {
	served := everyCluster
	if s.opts.Alias != "" {
		served = s.opts.Alias
	}
	var found statePools
	var readErr error
	err := s.cli.statePull(ctx, func(r io.Reader) error {
		found, readErr = readStatePools(ctx, r, served, s.stateID)
		return readErr
	})
	if errors.Is(err, errNoState) || waitingCannotCure(err) || readErr != nil && errors.Is(err, readErr) {
		return &permanentError{err}
	}
	if err != nil {
		return err
	}
	if found.same {
		// The state last read: its pools and their evaluations stand; the
		// configuration may have changed.
		return s.readConfiguration(s.instances)
	}
	for _, a := range found.ignored {
		s.log.Info("not watched: another provider configuration", "data_source", a, "served_alias", aliasName(s.opts.Alias))
	}
	for _, address := range slices.Sorted(maps.Keys(found.undecodable)) {
		if s.undecodable[address] != found.undecodable[address] {
			s.log.Warn("not watched: this provider version cannot read the pool in state", "data_source", address,
				"reason", found.undecodable[address])
		}
	}
	s.undecodable = found.undecodable
	if len(found.found) == 0 {
		configuration := "any k8s provider configuration"
		if s.opts.Alias != "" {
			configuration = "provider configuration " + aliasName(s.opts.Alias)
		}
		return &permanentError{fmt.Errorf("the state of %s has no k8s_ready_endpoints or k8s_services of %s that this version reads: nothing to watch",
			s.opts.Dir, configuration)}
	}
	if err := s.readConfiguration(found.found); err != nil {
		return err
	}
	scopes := map[string]kube.CacheScope{}
	for _, in := range found.found {
		scope := scopes[in.cluster]
		in.watched.addScope(&scope)
		scopes[in.cluster] = scope
	}
	if err := s.connect(slices.Sorted(maps.Keys(scopes))); err != nil {
		return &permanentError{err}
	}
	s.mu.Lock()
	s.instances, s.all = found.found, true
	s.mu.Unlock()
	s.stateID = found.id
	s.metrics.poolsWatched.Set(float64(len(found.found)))
	for key, scope := range scopes {
		cl := s.clusters[key]
		s.metrics.clusterPools.WithLabelValues(cl.name).Set(float64(countOf(found.found, key)))
		if err := s.watch(ctx, cl, normalScope(scope)); err != nil {
			s.stateID = stateID{}
			return err
		}
	}
	return nil
}

// readConfiguration sets which resources a run may change: those -allow
// names, else those of the configuration that use the pools of instances.
func (s *syncer) readConfiguration(instances []instance) error {
	if len(s.opts.Allowed) > 0 {
		s.runner.filter = poolChangeFilter{allowed: s.opts.Allowed}
		return nil
	}
	if s.opts.Command != "" || s.checkOnly {
		return nil
	}
	g, err := readConfiguration(s.opts.Dir)
	if err != nil {
		return &permanentError{err}
	}
	for _, f := range g.skipped {
		s.log.Warn("not read for dependencies (JSON syntax): name its resources with -allow if they use pools", "file", f)
	}
	var watched []string
	for _, in := range instances {
		watched = append(watched, in.resource)
	}
	s.runner.filter = newPoolChangeFilter(g, watched)
	return nil
}

// watch asks the informers of cl to cover scope. Informers that cannot
// start are an error at the first start; later the informers of the old
// scope go on: the pools they cover stay current, those outside are
// unreadable until the next read.
func (s *syncer) watch(ctx context.Context, cl *cluster, scope kube.CacheScope) error {
	if cl.watching && sameScope(scope, cl.scope) {
		cl.scopeErr = nil
		return nil
	}
	err := s.startCache(ctx, cl, scope)
	if err == nil {
		cl.scope, cl.scopeErr, cl.watching = scope, nil, true
		s.log.Info("watching", "cluster", cl.name, "namespaces", describeNamespaces(scope.Namespaces), "nodes", scope.Nodes,
			"pods", describeNamespaces(scope.PodNamespaces))
		return nil
	}
	if !cl.watching && !s.started {
		return &permanentError{fmt.Errorf("%s: %w", cl.describe(), err)}
	}
	cl.scopeErr = err
	s.metrics.scopeFailures.Inc()
	s.log.Warn("the informers of the new scope did not start: the pools outside the old one are not recomputed",
		"cluster", cl.name, "namespaces", describeNamespaces(scope.Namespaces), "error", err.Error())
	return nil
}

func countOf(instances []instance, cluster string) int {
	n := 0
	for _, in := range instances {
		if in.cluster == cluster {
			n++
		}
	}
	return n
}

// waitingCannotCure says whether the CLI's error is one that waiting does not
// cure at start: a working directory not initialised for its backend (init
// not run, or run for another backend), or a backend that refuses the
// identity what it asks (its RBAC: a Role missing the rule for the state's
// Secret or Lease, a database role without the grant), which the companion
// names, with the rule to add, and exits on, as for its own RBAC. A backend
// that refuses the credentials themselves (a token or password not valid,
// as until a rotated Secret reaches the pod) is waited for as one out of
// reach: the next read runs the CLI again, which reads its files again.
func waitingCannotCure(err error) bool {
	var exit *cliExit
	if !errors.As(err, &exit) {
		return false
	}
	text := strings.ToLower(exit.Error())
	for _, refusal := range []string{"backend initialization required", "required plugins are not installed",
		"forbidden", "permission denied"} {
		if strings.Contains(text, refusal) {
			return true
		}
	}
	return false
}

// readState is loadState, its failure logged and counted; permanent says
// that waiting cannot cure it. The first read that succeeds marks the
// companion started: later, a cache that cannot start leaves its pools
// unreadable.
func (s *syncer) readState(ctx context.Context) (permanent bool, err error) {
	err = s.loadState(ctx)
	if ctx.Err() == nil {
		// /healthz names the failure at once, before any pool is
		// recomputed: at start, none is until a read succeeds.
		s.mu.Lock()
		s.stateErr = err
		s.mu.Unlock()
	}
	if err != nil && ctx.Err() == nil {
		s.metrics.stateReadFailures.WithLabelValues(s.backend).Inc()
		s.log.Warn("reading state failed", "backend", s.backend, "error", err.Error())
	}
	var perm *permanentError
	if err == nil {
		s.started = true
	}
	return errors.As(err, &perm), err
}

func aliasName(alias string) string {
	if alias == "" {
		return "k8s (default)"
	}
	return "k8s." + alias
}

func normalScope(scope kube.CacheScope) kube.CacheScope {
	slices.Sort(scope.Namespaces)
	scope.Namespaces = slices.Compact(scope.Namespaces)
	slices.Sort(scope.PodNamespaces)
	scope.PodNamespaces = slices.Compact(scope.PodNamespaces)
	return scope
}

func sameScope(a, b kube.CacheScope) bool {
	return a.Nodes == b.Nodes && slices.Equal(a.Namespaces, b.Namespaces) && slices.Equal(a.PodNamespaces, b.PodNamespaces)
}

// startCache has the hub's informers of cl cover scope (check: one pass of
// LISTs of it).
func (s *syncer) startCache(ctx context.Context, cl *cluster, scope kube.CacheScope) error {
	if s.checkOnly {
		return s.snapshot(ctx, cl, scope)
	}
	return s.hub.watch(cl, scope)
}

// snapshot is check's cache of cl: one pass of paged LISTs of scope, no
// informer to start. A LIST refused is said as the companion's probe says
// it, with the RBAC rule to add.
func (s *syncer) snapshot(ctx context.Context, cl *cluster, scope kube.CacheScope) error {
	snapshot, err := cl.client.Snapshot(ctx, scope)
	if apierrors.IsForbidden(err) {
		if probe, perr := cl.client.NewCache(scope, nil); perr == nil {
			if named := probe.Probe(ctx); named != nil {
				return named
			}
		}
	}
	if err != nil {
		return err
	}
	cl.snapshot = snapshot
	return nil
}

// stopCaches takes the workspace off the hub's clusters: the last one to
// leave a cluster stops its informers and probe.
func (s *syncer) stopCaches() {
	for _, cl := range s.clusters {
		s.hub.leave(cl)
	}
}

func describeNamespaces(namespaces []string) string {
	if slices.Contains(namespaces, "") {
		return "all"
	}
	return strings.Join(namespaces, ",")
}

// changed is the informers' handler of the cluster of key: it marks the
// instances that read the object and wakes the loop.
func (s *syncer) changed(key string, ch kube.Change) {
	s.mu.Lock()
	// While every instance is to be recomputed (after a read of state,
	// and so through the informers' first listing), a change adds nothing
	// to mark: the recompute reads the cache, which has the change.
	for i, in := range s.instances {
		if !s.all && in.cluster == key && in.watched.reads(ch) {
			t := s.dirty[i]
			if t == nil {
				t = &touched{}
				s.dirty[i] = t
			}
			t.touch(ch)
		}
	}
	s.mu.Unlock()
	s.wake()
}

// wake tells the loop that pools are marked.
func (s *syncer) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// view recomputes the instances marked dirty (all after a state read, or
// when every is set) from the cache, and gives the pools as they compare
// with state; it reports them in /healthz and the gauges.
func (s *syncer) view(ctx context.Context, every bool) view {
	v := s.recompute(ctx, every)
	s.report(v)
	return v
}

func (s *syncer) recompute(ctx context.Context, every bool) view {
	s.mu.Lock()
	all, dirty := s.all || every, s.dirty
	s.all, s.dirty = false, map[int]*touched{}
	instances := s.instances
	s.mu.Unlock()
	if len(s.evals) != len(instances) {
		all = true
		s.evals = make([]evaluation, len(instances))
	}
	now := s.clock.Now()
	// The configuration as it is now: a run's plan is of the files as they
	// are when it starts, and a change set held for one version of them is
	// tried again for the next.
	v := view{changes: map[string][]poolChange{}, unreadable: map[string]cause{}, config: s.configFiles.version(s.opts.Dir)}
	for i, in := range instances {
		cl := s.clusters[in.cluster]
		if reason := cl.unreachable(); reason != "" {
			s.evals[i] = evaluation{unreadable: reason, clusterDown: true}
		} else if !cl.watching {
			s.evals[i] = evaluation{unreadable: fmt.Sprintf("cluster %s: its informers did not start (%v): not recomputed", cl.name, cl.scopeErr), clusterDown: true}
		} else if t := touchedOf(all || s.evals[i].clusterDown, dirty[i]); t != nil {
			s.evals[i] = in.watched.evaluate(ctx, cl.cache(), now, *t)
			s.metrics.poolsComputed.Add(float64(s.evals[i].computed))
		}
		switch e := s.evals[i]; {
		case e.clusterDown:
			v.unreadable[in.address] = cause{kind: causeClusterDown, text: e.unreadable}
		case e.unreadable != "":
			v.unreadable[in.address] = cause{kind: causeReadFails, text: e.unreadable}
		case len(e.changes) > 0:
			v.changes[in.address] = e.changes
		}
	}
	s.noteLeftOut(instances)
	s.noteGates(ctx, instances, now)
	v.expiry = s.nextExpiry(ctx)
	return v
}

// touchedOf is what an instance must be evaluated for: everything when
// whole, else what changed of it (nil: nothing).
func touchedOf(whole bool, changed *touched) *touched {
	if whole {
		return &everything
	}
	return changed
}

// nextExpiry is the earliest expiry annotation to pass among the pools that
// use one; zero when none.
func (s *syncer) nextExpiry(ctx context.Context) time.Time {
	now := s.clock.Now()
	var next time.Time
	for _, in := range s.instances {
		cache := s.clusters[in.cluster].cache()
		if cache == nil {
			continue
		}
		if t, ok := in.watched.nextExpiry(ctx, cache, now); ok && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if s.opts.GateOpenAfter > 0 {
		if t := s.metrics.gates.next(s.opts.GateOpenAfter); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// Run is the companion, until ctx ends: see docs/guides/sync.md. What it
// does is decided by the machine (machine.go); the loop carries it out.
func (s *syncer) Run(ctx context.Context) error {
	defer s.stopCaches()
	l := &loop{world: s, machine: newMachine(s.machineOptions()), clock: s.clock, kick: s.kick, runs: make(chan runFacts, 1),
		ranFor: func(d time.Duration) { s.metrics.runDuration.Observe(d.Seconds()) }}
	return l.run(ctx)
}

func (s *syncer) machineOptions() machineOptions {
	return machineOptions{Quiet: s.opts.Quiet, MaxWait: s.opts.MaxWait, RetryInitial: s.opts.RetryInitial, RetryMax: s.opts.RetryMax,
		Guard: shrinkGuard{MaxShrink: s.opts.MaxShrink, AllowEmpty: s.opts.AllowEmpty}, CommandRepeat: s.opts.CommandRepeat,
		StateInterval: s.opts.StateInterval, StopTimeout: s.opts.StopTimeout, FullPlanInterval: s.fullPlanInterval()}
}

// fullPlanInterval is how often a run plans the whole configuration: never
// when every run does (targeting off, -allow) or -command decides.
func (s *syncer) fullPlanInterval() time.Duration {
	if !s.opts.TargetChanged || s.opts.Command != "" || len(s.opts.Allowed) > 0 {
		return 0
	}
	return s.opts.FullPlanInterval
}

// run makes one run, once the replica has a slot for it; busy from then
// (a workspace that waits for a slot can be handed over).
func (s *syncer) run(ctx context.Context, r runRequest) runFacts {
	var queued time.Duration
	if s.slots != nil {
		asked := s.clock.Now()
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-ctx.Done():
			return runFacts{err: errStopped, queued: s.clock.Since(asked)}
		}
		queued = s.clock.Since(asked)
	}
	if !s.begin() {
		// The workspace is being handed over: the run does not start.
		return runFacts{err: errStopped, queued: queued}
	}
	defer s.end()
	o := s.runner.run(ctx, r)
	o.queued = queued
	return o
}

// begin marks a run under way, unless the workspace is being handed over.
func (s *syncer) begin() bool {
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.handedOver {
		return false
	}
	s.busy = true
	return true
}

// end marks the run over.
func (s *syncer) end() {
	s.gate.Lock()
	defer s.gate.Unlock()
	s.busy = false
}

// handOver hands the workspace over (handOver ends its loop) unless a run
// is under way: a run's start and a hand-over exclude each other, so a run
// that starts is never interrupted by one, and none starts after one.
func (s *syncer) handOver(handOver func()) bool {
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.busy {
		return false
	}
	s.handedOver = true
	handOver()
	return true
}

// startProbes asks every cluster, now and later ones, whether it answers.
func (s *syncer) startProbes(context.Context) { s.probe() }

// report writes what /healthz and the gauges say of v.
func (s *syncer) report(v view) {
	s.metrics.poolsUnreadable.Set(float64(len(v.unreadable)))
	s.metrics.poolsDiffering.Set(float64(len(v.changes)))
	var lines []string
	for _, address := range slices.Sorted(maps.Keys(v.unreadable)) {
		lines = append(lines, "unreadable "+address+": "+v.unreadable[address].text)
	}
	for _, address := range slices.Sorted(maps.Keys(s.undecodable)) {
		lines = append(lines, "not watched "+address+": "+s.undecodable[address])
	}
	for _, key := range slices.Sorted(maps.Keys(s.clusters)) {
		cl := s.clusters[key]
		if cl.scopeErr != nil {
			lines = append(lines, "informers of "+cl.name+": "+cl.scopeErr.Error())
		}
		if reason := cl.unreachable(); reason != "" {
			lines = append(lines, reason)
		}
	}
	s.mu.Lock()
	s.health = lines
	s.mu.Unlock()
}

// healthLines are what is degraded, a line each, for /healthz.
func (s *syncer) healthLines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := slices.Clone(s.health)
	if s.stateErr != nil {
		lines = append(lines, "state: the last read failed (backend "+s.backend+"): "+oneLine(s.stateErr.Error(), 400))
	}
	return lines
}

// oneLine is text on one line, its runs of blanks one space, at most n
// bytes of it.
func oneLine(text string, n int) string {
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > n {
		text = strings.ToValidUTF8(text[:n], "") + "..."
	}
	return text
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// backendOf is the backend type of the initialized working directory dir
// (from its .terraform/terraform.tfstate, where init records it): "local"
// when it records none.
func backendOf(dir string, env []string) string {
	data := dataDir(env)
	if data == "" {
		data = ".terraform"
	}
	if !filepath.IsAbs(data) {
		data = filepath.Join(dir, data)
	}
	raw, err := os.ReadFile(filepath.Join(data, "terraform.tfstate"))
	if err != nil {
		return "local"
	}
	var st struct {
		Backend *struct {
			Type string `json:"type"`
		} `json:"backend"`
	}
	if json.Unmarshal(raw, &st) != nil || st.Backend == nil || st.Backend.Type == "" {
		return "local"
	}
	return st.Backend.Type
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
