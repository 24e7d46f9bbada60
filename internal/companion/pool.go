package companion

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/kube"
	"github.com/vigie/terraform-provider-k8s/internal/pools"
	"github.com/vigie/terraform-provider-k8s/internal/provider"
)

// watchedPool is one pool data source instance of state, as the companion
// watches it: what it reads, and how it compares with state.
type watchedPool interface {
	// reads says whether the pool reads the object of ch.
	reads(ch kube.Change) bool
	// addScope adds what the pool reads to scope.
	addScope(scope *kube.CacheScope)
	// evaluate reads the pool from src, as a plan's read would, and
	// compares it with state; what changed since its last evaluation is t
	// (a fleet recomputes only the Services t names).
	evaluate(ctx context.Context, src pools.Reader, now time.Time, t touched) evaluation
	// nextExpiry is the earliest expiry annotation to pass among the
	// slices the pool reads; false when none.
	nextExpiry(ctx context.Context, src pools.Reader, now time.Time) (time.Time, bool)
}

// poolChange is how one pool computed from the cluster differs from state.
type poolChange struct {
	// Name is "" for a k8s_ready_endpoints, "<namespace>/<name>" for a
	// Service of a k8s_services, and "skipped" for its skipped list.
	Name string
	// Before and After are the members ("address:port", IPv6 in brackets,
	// sorted); Added and Removed what changed between them. A change of an
	// endpoint's other attributes (ready, zone, health_check...) changes
	// neither.
	Before, After, Added, Removed []string
	// state and cluster are the digests of the pool in state and as a read
	// would write it now: what makes two changes the same change.
	state, cluster [sha256.Size]byte
}

// membersOnly says whether the change leaves the members as they are.
func (c poolChange) membersOnly() bool { return len(c.Added) == 0 && len(c.Removed) == 0 }

func newPoolChange(name string, state provider.PoolDigest, cluster [sha256.Size]byte, after []string) poolChange {
	before := state.Members()
	return poolChange{Name: name, Before: before, After: after,
		Added: minus(after, before), Removed: minus(before, after),
		state: state.Sum, cluster: cluster}
}

// minus is the sorted members of a not in b (both sorted).
func minus(a, b []string) []string {
	var out []string
	for _, m := range a {
		if _, found := slices.BinarySearch(b, m); !found {
			out = append(out, m)
		}
	}
	return out
}

// evaluation is what the cache gives for one instance, compared with state.
type evaluation struct {
	changes []poolChange
	// unreadable says why a plan's read of the pool would fail (its Service
	// deleted, min_ready not met, a namespace not watched): its pools are
	// not recomputed, and its dependents are left out of runs.
	unreadable string
	// clusterDown says the pool is unreadable because its cluster does not
	// answer, or its informers did not start: it is evaluated whole when
	// the cluster answers again.
	clusterDown bool
	// computed is how many Service pools the evaluation computed.
	computed int
	// leftOut are the slices the pools leave out (endpoints.TrustsSlice).
	leftOut []leftOutSlice
	// gate is the pool's readiness_gate; waiting the pods that wait for it
	// (their endpoints gate_pending).
	gate    corev1.PodConditionType
	waiting []types.NamespacedName
}

// singlePool is a k8s_ready_endpoints of state.
type singlePool struct {
	request pools.Request
	state   provider.PoolDigest
	digest  provider.Digester
}

func (p *singlePool) reads(ch kube.Change) bool {
	switch ch.Kind {
	case "Node":
		return p.request.Nodes.Enabled
	case "Pod":
		return p.request.ReadsPods() && ch.Namespace == p.request.Namespace
	}
	return ch.Namespace == p.request.Namespace && ch.Service == p.request.Service
}

func (p *singlePool) addScope(scope *kube.CacheScope) {
	scope.Namespaces = append(scope.Namespaces, p.request.Namespace)
	scope.Nodes = scope.Nodes || p.request.Nodes.Enabled
	if p.request.ReadsPods() {
		scope.PodNamespaces = append(scope.PodNamespaces, p.request.Namespace)
	}
}

func (p *singlePool) evaluate(ctx context.Context, src pools.Reader, now time.Time, _ touched) evaluation {
	res, err := p.request.Read(ctx, src, pools.ReadOptions{Now: func() time.Time { return now }})
	if err != nil {
		return evaluation{unreadable: unreadableText(err), computed: 1}
	}
	sum := p.digest.Pool(res)
	e := evaluation{computed: 1, leftOut: leftOutOf(p.request.Namespace+"/"+p.request.Service, res.LeftOut),
		gate: p.request.Query.ReadinessGate, waiting: waitingPods(p.request.Namespace, res.Endpoints)}
	if sum != p.state.Sum {
		e.changes = []poolChange{newPoolChange("", p.state, sum, provider.Members(res.Endpoints))}
	}
	return e
}

func (p *singlePool) nextExpiry(ctx context.Context, src pools.Reader, now time.Time) (time.Time, bool) {
	if p.request.Query.ExpiryAnnotation == "" {
		return time.Time{}, false
	}
	list, err := src.EndpointSlices(ctx, p.request.Namespace, p.request.Service)
	if err != nil {
		return time.Time{}, false
	}
	return endpoints.NextExpiry(list.Items, p.request.Query.ExpiryAnnotation, now)
}

// touched is what changed of one watched pool since its last evaluation.
type touched struct {
	// all: anything but a Service or its slices (a Node, a Pod), a state
	// read, an expiry; the whole pool is recomputed.
	all bool
	// services are the Services changed, "namespace/name".
	services map[string]bool
}

// touch adds ch to t.
func (t *touched) touch(ch kube.Change) {
	if t.all {
		return
	}
	if (ch.Kind != "Service" && ch.Kind != "EndpointSlice") || ch.Service == "" {
		t.all = true
		return
	}
	if t.services == nil {
		t.services = map[string]bool{}
	}
	t.services[ch.Namespace+"/"+ch.Service] = true
}

var everything = touched{all: true}

// fleetPool is a k8s_services of state. It keeps what each Service of its
// last evaluation gave, so that a change of one Service recomputes that
// Service's pool alone, not the fleet (pools.FleetRequest.ReadService).
type fleetPool struct {
	request pools.FleetRequest
	state   *provider.StatePool
	digest  provider.Digester

	// of are the Services of the fleet as last computed: of[i] what the
	// Service of the state's pool i gave (provider.StatePool.StateIndex),
	// extra by "namespace/name" those state has no pool of. of is nil
	// until a whole evaluation succeeds. (A map by name of its own, a key
	// and an entry a Service, was among what a large fleet held at the
	// start; bench/README.md, "The fourth round of issue 29". of is 8
	// bytes a Service.)
	of    []fleetService
	extra map[string]fleetService
	// changed are the pools that differ from state, by name (a Service of
	// state gone from the fleet among them); short those with fewer ready
	// endpoints than min_ready; pools how many Services give a pool.
	changed map[string]poolChange
	short   map[string]bool
	pools   int
	// skipped are the Services skipped, by name.
	skipped map[string]endpoints.SkippedService
	// leftOut are the slices left out of the pools, by Service name (of
	// those that leave out any).
	leftOut map[string][]leftOutSlice
	// waiting are the pods that wait for the readiness gate, by Service
	// name (of those that have any).
	waiting map[string][]types.NamespacedName
}

// fleetService is what one Service gave the fleet: nothing, a pool (and
// its ready count; its change, if it differs from state, is in changed),
// or a skip (in skipped).
type fleetService struct {
	ready int32
	gave  gave
}

type gave uint8

const (
	gaveNothing gave = iota
	gavePool
	gaveSkip
)

// record is what the Service name gave the last evaluation.
func (p *fleetPool) record(name string) fleetService {
	if i, ok := p.state.StateIndex(name); ok {
		return p.of[i]
	}
	return p.extra[name]
}

// keep records what the Service name gives now.
func (p *fleetPool) keep(name string, now fleetService) {
	switch i, ok := p.state.StateIndex(name); {
	case ok:
		p.of[i] = now
	case now.gave == gaveNothing:
		delete(p.extra, name)
	default:
		p.extra[name] = now
	}
}

func (p *fleetPool) reads(ch kube.Change) bool {
	switch ch.Kind {
	case "Node":
		return p.request.Nodes.Enabled
	case "Pod":
		if !p.request.ReadsPods() {
			return false
		}
	}
	return p.request.AllNamespaces() || slices.Contains(p.request.Namespaces, ch.Namespace)
}

func (p *fleetPool) addScope(scope *kube.CacheScope) {
	scope.Namespaces = append(scope.Namespaces, p.request.Namespaces...)
	scope.Nodes = scope.Nodes || p.request.Nodes.Enabled
	if p.request.ReadsPods() {
		scope.PodNamespaces = append(scope.PodNamespaces, p.request.Namespaces...)
	}
}

func (p *fleetPool) evaluate(ctx context.Context, src pools.Reader, now time.Time, t touched) evaluation {
	e := p.update(ctx, src, now, t)
	if e.unreadable != "" {
		p.of = nil
	}
	return e
}

func (p *fleetPool) update(ctx context.Context, src pools.Reader, now time.Time, t touched) evaluation {
	computed := 0
	if p.of == nil || t.all {
		n, reason := p.recompute(ctx, src, now)
		if reason != "" {
			return evaluation{unreadable: reason, computed: n}
		}
		computed = n
	} else {
		for _, name := range slices.Sorted(maps.Keys(t.services)) {
			namespace, service, _ := strings.Cut(name, "/")
			res, err := p.request.ReadService(ctx, src, namespace, service, now)
			switch {
			case pools.ServiceGone(err) != nil:
				p.set(name, fleetService{})
			case err != nil:
				// What the whole read says of it (a rule refused, the
				// cache not watching): as a plan's read would fail.
				e := p.update(ctx, src, now, everything)
				e.computed += computed
				return e
			default:
				computed++
				p.setResult(name, res)
			}
		}
	}
	if p.pools < p.request.MinServices || len(p.short) > 0 {
		short := &pools.FleetShortError{Services: p.pools, MinServices: p.request.MinServices,
			Short: make([]endpoints.ServicePool, len(p.short)), MinReady: p.request.MinReady}
		return evaluation{unreadable: unreadableText(short), computed: computed}
	}
	changes := make([]poolChange, 0, len(p.changed)+1)
	for _, name := range slices.Sorted(maps.Keys(p.changed)) {
		changes = append(changes, p.changed[name])
	}
	var skipped []endpoints.SkippedService
	for _, name := range slices.Sorted(maps.Keys(p.skipped)) {
		skipped = append(skipped, p.skipped[name])
	}
	if sum := p.digest.Skipped(skipped); sum != p.state.SkippedSum() {
		changes = append(changes, poolChange{Name: "skipped", state: p.state.SkippedSum(), cluster: sum})
	}
	if len(changes) == 0 {
		changes = nil
	}
	e := evaluation{changes: changes, computed: computed, leftOut: p.allLeftOut(), gate: p.request.Query.ReadinessGate}
	for _, name := range slices.Sorted(maps.Keys(p.waiting)) {
		e.waiting = append(e.waiting, p.waiting[name]...)
	}
	return e
}

// recompute reads the whole fleet, as a plan's read would, and keeps what
// each Service gives; it says how many Service pools it computed, and why
// the read would fail, "" when it would not. It reads Service by Service
// (pools.FleetRequest.ReadEach), so that what it holds at once is one
// Service's objects decoded from the cache, not the fleet's; but a fleet
// with pod health checks is read whole, as each Service's Pods would
// otherwise be picked among all of the namespace's once per Service.
func (p *fleetPool) recompute(ctx context.Context, src pools.Reader, now time.Time) (int, string) {
	p.of, p.extra = make([]fleetService, p.state.StatePools()), map[string]fleetService{}
	p.changed, p.short, p.pools = map[string]poolChange{}, map[string]bool{}, 0
	p.skipped, p.leftOut = map[string]endpoints.SkippedService{}, map[string][]leftOutSlice{}
	p.waiting = map[string][]types.NamespacedName{}
	computed := 0
	if p.request.ReadsPods() {
		res, err := p.request.Read(ctx, src, pools.FleetReadOptions{Now: func() time.Time { return now }})
		if err != nil {
			var short *pools.FleetShortError
			if errors.As(err, &short) {
				return len(res.Pools) + len(res.Skipped), unreadableText(err)
			}
			return 0, unreadableText(err)
		}
		p.setResult("", res)
		computed = len(res.Pools) + len(res.Skipped)
	} else {
		err := p.request.ReadEach(ctx, src, now, func(svc types.NamespacedName, res endpoints.FleetResult) {
			computed += len(res.Pools) + len(res.Skipped)
			p.setResult(svc.String(), res)
		})
		if err != nil {
			return computed, unreadableText(err)
		}
	}
	// A pool of state that no Service gave is gone. (Marking every pool
	// of state gone first, as a whole read once did, held a change for
	// each, and left the map of changes the size of the fleet.)
	for i, s := range p.of {
		if s.gave == gaveNothing {
			p.set(p.state.StateName(i), fleetService{})
		}
	}
	return computed, ""
}

// setResult keeps what res, a read of the Service name ("" for all of
// res), gives.
func (p *fleetPool) setResult(name string, res endpoints.FleetResult) {
	if name != "" && len(res.Pools) == 0 && len(res.Skipped) == 0 {
		p.set(name, fleetService{})
	}
	for i := range res.Pools {
		pool := &res.Pools[i]
		p.setPool(pool.Service.Namespace+"/"+pool.Service.Name, pool)
	}
	for i := range res.Skipped {
		s := res.Skipped[i]
		name := s.Namespace + "/" + s.Name
		p.set(name, fleetService{gave: gaveSkip})
		p.skipped[name] = s
	}
}

func (p *fleetPool) setPool(name string, pool *endpoints.ServicePool) {
	sum := p.digest.ServicePool(*pool)
	p.set(name, fleetService{gave: gavePool, ready: int32(endpoints.CountReady(pool.Endpoints))})
	if len(pool.LeftOut) > 0 {
		if p.leftOut == nil {
			p.leftOut = map[string][]leftOutSlice{}
		}
		p.leftOut[name] = leftOutOf(name, pool.LeftOut)
	}
	if waiting := waitingPods(pool.Service.Namespace, pool.Endpoints); len(waiting) > 0 {
		if p.waiting == nil {
			p.waiting = map[string][]types.NamespacedName{}
		}
		p.waiting[name] = waiting
	}
	if inState, ok := p.state.State(name); !ok || inState.Sum != sum {
		p.changed[name] = newPoolChange(name, inState, sum, provider.Members(pool.Endpoints))
	}
}

// set records what the Service name gives now: a pool, a skip (the caller
// keeps it in skipped) or nothing, and whether it then differs from state
// (a pool's change is recorded by setPool).
func (p *fleetPool) set(name string, now fleetService) {
	if p.record(name).gave == gavePool {
		p.pools--
		delete(p.short, name)
	}
	delete(p.changed, name)
	delete(p.skipped, name)
	delete(p.leftOut, name)
	delete(p.waiting, name)
	p.keep(name, now)
	if now.gave != gavePool {
		if inState, ok := p.state.State(name); ok {
			p.changed[name] = newPoolChange(name, inState, [sha256.Size]byte{}, nil)
		}
		return
	}
	p.pools++
	if int(now.ready) < p.request.MinReady {
		p.short[name] = true
	}
}

func (p *fleetPool) nextExpiry(ctx context.Context, src pools.Reader, now time.Time) (time.Time, bool) {
	if p.request.Query.ExpiryAnnotation == "" {
		return time.Time{}, false
	}
	var all []discoveryv1.EndpointSlice
	for _, ns := range p.request.Namespaces {
		list, err := src.ServiceEndpointSlices(ctx, ns)
		if err != nil {
			return time.Time{}, false
		}
		all = append(all, list.Items...)
	}
	return endpoints.NextExpiry(all, p.request.Query.ExpiryAnnotation, now)
}

// watch is the watched pool of a pool data source of state.
func watch(p *provider.StatePool) watchedPool {
	if p.Pool != nil {
		state, _ := p.State("")
		return &singlePool{request: *p.Pool, state: state}
	}
	return &fleetPool{request: *p.Fleet, state: p}
}

// unreadableText says why a plan's read would fail, as the companion logs
// it: the reader's error with what it means for a plan.
func unreadableText(err error) string {
	var notWatched *kube.NotWatchedError
	var short *pools.ShortError
	var fleetShort *pools.FleetShortError
	switch gone := pools.ServiceGone(err); {
	case errors.As(err, &notWatched):
		return fmt.Sprintf("%v (the informers of that scope did not start): not recomputed", err)
	case gone != nil:
		return fmt.Sprintf("service %s/%s not found: a plan would fail", gone.Namespace, gone.Name)
	case errors.As(err, &short):
		return fmt.Sprintf("service %s/%s has %d ready endpoint(s), fewer than min_ready = %d: a plan would fail",
			short.Namespace, short.Service, short.Ready, short.MinReady)
	case errors.As(err, &fleetShort):
		return fmt.Sprintf("the selection has %d Service(s), %d short of min_ready: a plan would fail its guards",
			fleetShort.Services, len(fleetShort.Short))
	}
	return err.Error() + ": a plan would fail"
}
