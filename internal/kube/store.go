package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// store is what one informer of Services, EndpointSlices or Pods (or one
// of a snapshot's LISTs) gives the cache: its packed objects by namespace
// and name, and an EndpointSlice by its Service too. It stands where an
// informer's indexer would: the informer's reflector lists, watches and
// relists as in any informer, into client-go's RealFIFO, whose deltas
// apply gives the store. The indexer kept each object's
// key as a string of its own, and an index set per namespace and per group
// of Services over those keys, which at a large fleet held about as much as
// the packed objects themselves (bench/README.md, "The third round of issue
// 29"). Here an object's key is its own name, in a map of its namespace.
type store struct {
	mu sync.RWMutex
	// of are the objects of each namespace.
	of map[string]*namespaceStore
}

type namespaceStore struct {
	byName map[string]*packed
	// byService is a slice of each Service, by the Service's name, and
	// more the others of a Service that has several: most have one, and an
	// entry of a map of slices costs more than one of a map of pointers
	// (bench/README.md, "The third round of issue 29").
	byService map[string]*packed
	more      map[string][]*packed
}

func newStore() *store { return &store{of: map[string]*namespaceStore{}} }

// put keeps p in place of the object of its namespace and name, which it
// gives (nil when there was none).
func (s *store) put(p *packed) *packed {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.of[p.namespace.Value()]
	if ns == nil {
		ns = &namespaceStore{byName: map[string]*packed{}}
		if p.kind == packedSlice {
			ns.byService, ns.more = map[string]*packed{}, map[string][]*packed{}
		}
		s.of[p.namespace.Value()] = ns
	}
	old := ns.byName[p.name]
	ns.byName[p.name] = p
	ns.unlinkSlice(old)
	if service := p.service(); service != "" {
		if _, ok := ns.byService[service]; ok {
			ns.more[service] = append(ns.more[service], p)
		} else {
			ns.byService[service] = p
		}
	}
	return old
}

// remove drops the object namespace/name, which it gives (nil when there
// was none).
func (s *store) remove(namespace, name string) *packed {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.of[namespace]
	if ns == nil {
		return nil
	}
	old := ns.byName[name]
	if old == nil {
		return nil
	}
	delete(ns.byName, name)
	ns.unlinkSlice(old)
	if len(ns.byName) == 0 {
		delete(s.of, namespace)
	}
	return old
}

// unlinkSlice takes old, a slice, out of its Service's.
func (ns *namespaceStore) unlinkSlice(old *packed) {
	if old == nil || old.service() == "" {
		return
	}
	service := old.service()
	more := ns.more[service]
	if ns.byService[service] == old {
		if len(more) == 0 {
			delete(ns.byService, service)
			return
		}
		ns.byService[service], more = more[0], more[1:]
	} else {
		more = slices.DeleteFunc(more, func(p *packed) bool { return p == old })
	}
	if len(more) == 0 {
		delete(ns.more, service)
		return
	}
	ns.more[service] = more
}

// get is the object namespace/name, nil when there is none.
func (s *store) get(namespace, name string) *packed {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ns := s.of[namespace]; ns != nil {
		return ns.byName[name]
	}
	return nil
}

// list are the objects of namespace, "" for all of them, in no order.
func (s *store) list(namespace string) []*packed {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if namespace != "" {
		if ns := s.of[namespace]; ns != nil {
			return slices.Collect(maps.Values(ns.byName))
		}
		return nil
	}
	var out []*packed
	for _, ns := range s.of {
		out = slices.AppendSeq(out, maps.Values(ns.byName))
	}
	return out
}

// slicesOf are the slices labelled for the Service namespace/service, in
// no order.
func (s *store) slicesOf(namespace, service string) []*packed {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ns := s.of[namespace]; ns != nil {
		if first, ok := ns.byService[service]; ok {
			return append([]*packed{first}, ns.more[service]...)
		}
	}
	return nil
}

// apply applies what the informer's queue popped (deltas, from oldest to
// newest), as client-go's informers apply them to their indexer, and
// calls changed for each object that changed in what the cache keeps.
func (s *store) apply(popped any, changed func(old, obj *packed)) error {
	deltas, ok := popped.(cache.Deltas)
	if !ok {
		return fmt.Errorf("the informer's queue gave a %T, not Deltas", popped)
	}
	for _, d := range deltas {
		switch d.Type {
		case cache.ReplacedAll:
			info, ok := d.Object.(cache.ReplacedAllInfo)
			if !ok {
				return fmt.Errorf("the informer's queue gave a %T for a list, not ReplacedAllInfo", d.Object)
			}
			if err := s.replace(info.Objects, changed); err != nil {
				return err
			}
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			p, ok := d.Object.(*packed)
			if !ok {
				return fmt.Errorf("the informer's queue gave a %T, not a packed object", d.Object)
			}
			old := s.put(p)
			changed(old, p)
		case cache.Deleted:
			p, _ := d.Object.(*packed)
			namespace, name := "", ""
			if tomb, ok := d.Object.(cache.DeletedFinalStateUnknown); ok {
				p, _ = tomb.Obj.(*packed)
				var err error
				if namespace, name, err = cache.SplitMetaNamespaceKey(tomb.Key); err != nil {
					return fmt.Errorf("delete %v from the cache: %w", tomb.Key, err)
				}
			} else if p != nil {
				namespace, name = p.namespace.Value(), p.name
			}
			old := s.remove(namespace, name)
			if old == nil {
				old = p
			}
			if old != nil {
				changed(nil, old)
			}
		}
		// SyncAll and Bookmark: no resync period is set, and bookmarks
		// are not asked for.
	}
	return nil
}

// replace makes objects, a list or a relist, what the store holds: what
// it held that the list has not is removed, then each object is put. As
// client-go's informers call their handlers for a list, changed is called
// for the removals first, then for the objects in the list's order.
func (s *store) replace(objects []any, changed func(old, obj *packed)) error {
	listed := make([]*packed, len(objects))
	for i, o := range objects {
		p, ok := o.(*packed)
		if !ok {
			return fmt.Errorf("the informer's queue gave a %T in a list, not a packed object", o)
		}
		listed[i] = p
	}
	// The first list finds the store empty: nothing to compare it with.
	if held := s.list(""); len(held) > 0 {
		type key struct {
			namespace unique.Handle[string]
			name      string
		}
		in := make(map[key]bool, len(listed))
		for _, p := range listed {
			in[key{p.namespace, p.name}] = true
		}
		for _, old := range held {
			if !in[key{old.namespace, old.name}] {
				if gone := s.remove(old.namespace.Value(), old.name); gone != nil {
					changed(nil, gone)
				}
			}
		}
	}
	for _, p := range listed {
		changed(s.put(p), p)
	}
	return nil
}

// informer keeps a store current: client-go's reflector lists and watches
// into a RealFIFO, whose deltas the controller's loop applies to the store
// (store.apply), calling onChange for each change after the store has it.
// It is what a SharedIndexInformer is without its indexer and its
// listeners: one handler, called in the loop that applies the changes.
type informer interface {
	RunWithContext(ctx context.Context)
	HasSynced() bool
}

func newStoreInformer(lw cache.ListerWatcher, example runtime.Object, s *store, onChange func(Change)) informer {
	changed := notifier(onChange)
	return cache.New(&cache.Config{
		Queue:         newQueue(fmt.Sprintf("RealFIFO %T", example)),
		ListerWatcher: lw,
		ObjectType:    example,
		Process:       func(popped any, _ bool) error { return s.apply(popped, changed) },
	})
}

// newQueue is the queue of an informer of a store: client-go's RealFIFO as
// its own informers make it since 1.36 (AtomicFIFO, UnlockWhileProcessingFIFO).
// A list or relist is one delta of all its objects, which store.replace
// compares with what the store holds. (One delta an object, compared with
// the store's keys by the queue, left the queue's array of a delta for
// each object of the first list behind it once popped, held for good by an
// informer that sees no change; bench/README.md, "The fourth round of
// issue 29".)
func newQueue(name string) *cache.RealFIFO {
	return cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		Name:        name,
		KeyFunction: cache.MetaNamespaceKeyFunc,
		// Keep only what the rules read: managedFields and kubectl's
		// copy of the whole object would double what a large fleet holds.
		Transformer:           trimForCache,
		AtomicEvents:          true,
		UnlockWhileProcessing: true,
	})
}

// notifier is what store.apply calls with each object it keeps (old, obj)
// or drops (old, nil): it calls onChange with the change of what the cache
// keeps, if any.
func notifier(onChange func(Change)) func(old, obj *packed) {
	return func(old, obj *packed) {
		if onChange == nil {
			return
		}
		if old != nil && obj != nil {
			if samePacked(old, obj) {
				return
			}
			// A slice relabelled for another Service changes both, as
			// the endpointslice controller sees it: the old one loses its
			// endpoints.
			if was, ok := relabelled(old, obj); ok {
				onChange(was)
			}
		}
		if obj == nil {
			obj = old
		}
		if ch, ok := changeOf(obj); ok {
			onChange(ch)
		}
	}
}

// The informer's queue reads a packed object's key through its meta.
var _ metav1.ObjectMetaAccessor = (*packed)(nil)

// packedLabels are labels as the cache keeps them: "key\x00value\x00..."
// in key order, in one string (neither a label's key nor its value can
// hold a NUL). A map of labels holds, besides its strings, a table and a
// header of its own (bench/README.md, "The third round of issue 29");
// this, their length and a header.
type packedLabels string

// packLabels packs labels (none: "").
func packLabels(labels map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return b.String()
}

// Lookup is the value of the label key, and whether there is one.
func (l packedLabels) Lookup(key string) (string, bool) {
	rest := string(l)
	for rest != "" {
		k, after, _ := strings.Cut(rest, "\x00")
		v, after, _ := strings.Cut(after, "\x00")
		if k == key {
			return v, true
		}
		rest = after
	}
	return "", false
}

// Has says whether there is a label key.
func (l packedLabels) Has(key string) bool {
	_, ok := l.Lookup(key)
	return ok
}

// Get is the value of the label key, "" when there is none.
func (l packedLabels) Get(key string) string {
	v, _ := l.Lookup(key)
	return v
}
