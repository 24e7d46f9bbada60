package companion

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// The workspaces of one companion share their clusters: the hub keeps one
// client, one set of informers and one probe per cluster, by how the
// companion connects to it, for every workspace whose pools read it. The
// informers watch the union of what the workspaces ask (each namespace
// once, whichever workspaces read it), and tell every workspace of each
// change; a workspace decides, from its own pools, whether the change is
// one of its. With one workspace, the hub is that workspace's clusters.

// hub is the clusters the workspaces share.
type hub struct {
	// ctx bounds the informers and probes: the process's, not one
	// workspace's, whose Lease may move.
	ctx   context.Context
	clock clock.WithTicker
	log   *slog.Logger

	mu       sync.Mutex
	clusters map[string]*sharedCluster
}

func newHub(ctx context.Context, clk clock.WithTicker, log *slog.Logger) *hub {
	return &hub{ctx: ctx, clock: clk, log: log, clusters: map[string]*sharedCluster{}}
}

// sharedCluster is one cluster as the hub keeps it.
type sharedCluster struct {
	id     string
	client *kube.Client

	// start serializes the starts of informers.
	start sync.Mutex

	mu sync.Mutex
	// cache is the running informers, of scope; stopCache ends them.
	cache     *kube.Cache
	scope     kube.CacheScope
	stopCache context.CancelFunc
	// users are the workspaces' clusters on it, with what each asks to
	// watch; told is a copy of their list that the informers' handler
	// reads without a lock or an allocation per change.
	users map[*cluster]kube.CacheScope
	told  atomic.Pointer[[]*cluster]
	// down says why the cluster does not answer its probe; "" when it
	// does. stopProbe ends the probe, once one runs.
	down      string
	stopProbe context.CancelFunc
}

// join gives cl the hub's cluster of id, made with connect when the hub has
// none yet.
func (h *hub) join(cl *cluster, id string, connect func() (*kube.Client, error)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	sh := h.clusters[id]
	if sh == nil {
		client, err := connect()
		if err != nil {
			return err
		}
		sh = &sharedCluster{id: id, client: client, users: map[*cluster]kube.CacheScope{}}
		h.clusters[id] = sh
	}
	sh.mu.Lock()
	sh.users[cl] = kube.CacheScope{}
	sh.tellAll()
	sh.mu.Unlock()
	cl.shared, cl.client = sh, sh.client
	return nil
}

// leave takes cl off its cluster: the last workspace to leave stops its
// informers and probe.
func (h *hub) leave(cl *cluster) {
	sh := cl.shared
	if sh == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	sh.mu.Lock()
	delete(sh.users, cl)
	sh.tellAll()
	last := len(sh.users) == 0
	if last {
		if sh.stopCache != nil {
			sh.stopCache()
		}
		if sh.stopProbe != nil {
			sh.stopProbe()
		}
		sh.cache, sh.stopCache, sh.stopProbe = nil, nil, nil
	}
	sh.mu.Unlock()
	if last {
		delete(h.clusters, sh.id)
	}
}

// watch asks the informers of cl's cluster to cover scope: when the
// union of what its workspaces ask changes, informers of the new union
// start, and those of the old stop once the new ones have listed. A scope
// that cannot start (RBAC missing in a new namespace) leaves the old
// informers, and what cl asked before, as they were.
//
// What each workspace asks is recorded before it waits for the start of
// another's informers, so that workspaces that start together are covered
// by one start, not one each.
func (h *hub) watch(cl *cluster, scope kube.CacheScope) error {
	sh := cl.shared
	sh.mu.Lock()
	before := sh.users[cl]
	sh.users[cl] = scope
	sh.mu.Unlock()
	sh.start.Lock()
	defer sh.start.Unlock()
	sh.mu.Lock()
	union := normalScope(unionOf(slices.Collect(maps.Values(sh.users))))
	// One workspace's informers follow its scope, narrower too; shared
	// ones are started again only to cover more (a workspace that left
	// does not restart the others').
	running := sh.cache != nil && (sameScope(union, sh.scope) || len(sh.users) > 1 && covers(sh.scope, union))
	sh.mu.Unlock()
	if running {
		return nil
	}
	cache, stop, err := h.startCache(sh, union)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if err != nil {
		if sameScope(sh.users[cl], scope) {
			sh.users[cl] = before
		}
		return err
	}
	if sh.stopCache != nil {
		sh.stopCache()
	}
	sh.cache, sh.stopCache, sh.scope = cache, stop, union
	for u := range sh.users {
		if u != cl && u.resync != nil {
			// The changes between the old informers' last and the new
			// ones' list told nobody: the others recompute every pool.
			u.resync()
		}
	}
	h.log.Debug("informers listed", "cluster", sh.id, "namespaces", describeNamespaces(union.Namespaces), "nodes", union.Nodes,
		"pods", describeNamespaces(union.PodNamespaces), "workspaces", len(sh.users))
	return nil
}

// startCache starts informers of scope on sh, which tell each of its
// workspaces of every change, and waits for them to list.
func (h *hub) startCache(sh *sharedCluster, scope kube.CacheScope) (*kube.Cache, context.CancelFunc, error) {
	cache, err := sh.client.NewCache(scope, func(ch kube.Change) {
		if told := sh.told.Load(); told != nil {
			for _, u := range *told {
				u.changed(ch)
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	probeCtx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	if err := cache.Probe(probeCtx); err != nil {
		return nil, nil, err
	}
	cacheCtx, stop := context.WithCancel(h.ctx)
	cache.Run(cacheCtx)
	syncCtx, cancelSync := context.WithTimeout(h.ctx, 2*time.Minute)
	defer cancelSync()
	if !cache.WaitForSync(syncCtx) {
		stop()
		return nil, nil, fmt.Errorf("the informers did not list %v within 2 minutes", scope.Namespaces)
	}
	return cache, stop, nil
}

// covers says whether the informers of scope watch all that of wants.
func covers(scope, wants kube.CacheScope) bool {
	in := func(have, want []string) bool {
		return slices.Contains(have, "") || !slices.ContainsFunc(want, func(ns string) bool { return !slices.Contains(have, ns) })
	}
	return (scope.Nodes || !wants.Nodes) && in(scope.Namespaces, wants.Namespaces) && in(scope.PodNamespaces, wants.PodNamespaces)
}

// unionOf is a scope that covers each of scopes.
func unionOf(scopes []kube.CacheScope) kube.CacheScope {
	var u kube.CacheScope
	for _, s := range scopes {
		u.Namespaces = append(u.Namespaces, s.Namespaces...)
		u.PodNamespaces = append(u.PodNamespaces, s.PodNamespaces...)
		u.Nodes = u.Nodes || s.Nodes
	}
	// One informer of every namespace covers the namespaces of each.
	if slices.Contains(u.Namespaces, "") {
		u.Namespaces = []string{""}
	}
	if slices.Contains(u.PodNamespaces, "") {
		u.PodNamespaces = []string{""}
	}
	return u
}

// tellAll makes the list of the workspaces the handler tells; sh.mu is
// held.
func (sh *sharedCluster) tellAll() {
	var told []*cluster
	for u := range sh.users {
		if u.changed != nil {
			told = append(told, u)
		}
	}
	sh.told.Store(&told)
}

// currentCache is the informers cl's pools read now; nil before they
// first listed.
func (sh *sharedCluster) currentCache() *kube.Cache {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.cache
}

// probe asks sh, from now on, whether it answers, and tells its workspaces
// when that changes; one probe a cluster, however many workspaces read it.
func (h *hub) probe(sh *sharedCluster) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.stopProbe != nil {
		return
	}
	ctx, stop := context.WithCancel(h.ctx)
	sh.stopProbe = stop
	go h.probeCluster(ctx, sh)
}

func (h *hub) probeCluster(ctx context.Context, sh *sharedCluster) {
	ticker := h.clock.NewTicker(probeInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		pingCtx, cancel := context.WithTimeout(ctx, probeInterval)
		err := sh.client.Ping(pingCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		down := ""
		if err != nil {
			down = err.Error()
		}
		sh.mu.Lock()
		changed := (sh.down == "") != (down == "")
		sh.down = down
		users := slices.Collect(maps.Keys(sh.users))
		sh.mu.Unlock()
		if !changed {
			continue
		}
		for _, u := range users {
			if u.answers != nil {
				u.answers(down)
			}
		}
	}
}

// downReason is why sh does not answer, "" when it does.
func (sh *sharedCluster) downReason() string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.down
}
