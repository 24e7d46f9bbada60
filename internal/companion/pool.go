package companion

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
	// compares it with state.
	evaluate(ctx context.Context, src pools.Reader, now time.Time) evaluation
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
	return poolChange{Name: name, Before: state.Members, After: after,
		Added: minus(after, state.Members), Removed: minus(state.Members, after),
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

func (p *singlePool) evaluate(ctx context.Context, src pools.Reader, now time.Time) evaluation {
	res, err := p.request.Read(ctx, src, pools.ReadOptions{Now: func() time.Time { return now }})
	if err != nil {
		return evaluation{unreadable: unreadableText(err)}
	}
	sum := p.digest.Pool(res)
	if sum == p.state.Sum {
		return evaluation{}
	}
	return evaluation{changes: []poolChange{newPoolChange("", p.state, sum, provider.Members(res.Endpoints))}}
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

// fleetPool is a k8s_services of state.
type fleetPool struct {
	request pools.FleetRequest
	state   *provider.StatePool
	digest  provider.Digester
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

func (p *fleetPool) evaluate(ctx context.Context, src pools.Reader, now time.Time) evaluation {
	res, err := p.request.Read(ctx, src, pools.FleetReadOptions{Now: func() time.Time { return now }})
	if err != nil {
		return evaluation{unreadable: unreadableText(err)}
	}
	var changes []poolChange
	seen := make(map[string]bool, len(res.Pools))
	for _, pool := range res.Pools {
		name := pool.Service.Namespace + "/" + pool.Service.Name
		seen[name] = true
		sum := p.digest.ServicePool(pool)
		inState, ok := p.state.State(name)
		if ok && sum == inState.Sum {
			continue
		}
		changes = append(changes, newPoolChange(name, inState, sum, provider.Members(pool.Endpoints)))
	}
	for _, name := range p.state.StateNames() {
		if !seen[name] {
			inState, _ := p.state.State(name)
			changes = append(changes, newPoolChange(name, inState, [sha256.Size]byte{}, nil))
		}
	}
	slices.SortFunc(changes, func(a, b poolChange) int { return strings.Compare(a.Name, b.Name) })
	if sum := p.digest.Skipped(res.Skipped); sum != p.state.SkippedSum() {
		changes = append(changes, poolChange{Name: "skipped", state: p.state.SkippedSum(), cluster: sum})
	}
	return evaluation{changes: changes}
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
	var read *pools.ReadError
	var notWatched *kube.NotWatchedError
	var short *pools.ShortError
	var fleetShort *pools.FleetShortError
	switch {
	case errors.As(err, &notWatched):
		return fmt.Sprintf("%v (the informers of that scope did not start): not recomputed", err)
	case errors.As(err, &read) && read.Object == pools.ServiceObject && apierrors.IsNotFound(read.Err):
		return fmt.Sprintf("service %s/%s not found: a plan would fail", read.Namespace, read.Name)
	case errors.As(err, &short):
		return fmt.Sprintf("service %s/%s has %d ready endpoint(s), fewer than min_ready = %d: a plan would fail",
			short.Namespace, short.Service, short.Ready, short.MinReady)
	case errors.As(err, &fleetShort):
		return fmt.Sprintf("the selection has %d Service(s), %d short of min_ready: a plan would fail its guards",
			fleetShort.Services, len(fleetShort.Short))
	}
	return err.Error() + ": a plan would fail"
}
