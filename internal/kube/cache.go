package kube

import (
	"bytes"
	"cmp"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unique"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

// A Cache keeps the Services, EndpointSlices, Nodes and Pods that the sync
// companion computes pools from, current with client-go's informers: their
// reflectors list, then watch, relist when a watch's resourceVersion is too
// old (410 Gone), and reconnect with backoff when the API server goes away,
// so no loop of ours decides when the cache is right. Services,
// EndpointSlices and Pods go from the reflector's queue to a store of ours
// (store.go) in place of an informer's indexer, which at a large fleet
// costs about as much as the objects themselves (bench/README.md, "The
// third round of issue 29"); Nodes, few, to an informer's.

// CacheScope is what a Cache watches.
type CacheScope struct {
	// Namespaces whose Services and EndpointSlices are watched; "" among them
	// watches every namespace with one informer of each kind.
	Namespaces []string
	// Nodes watches the cluster's Nodes too, for pools of nodes.
	Nodes bool
	// PodNamespaces are the namespaces whose Pods are watched too, for pod
	// health checks; "" among them watches every namespace.
	PodNamespaces []string
}

// Change names an object that was added, updated or deleted.
type Change struct {
	// Kind is "Service", "EndpointSlice", "Node" or "Pod".
	Kind      string
	Namespace string
	// Service is the Service's name, or the Service an EndpointSlice is
	// labelled for; empty for a Node.
	Service string
	// Name is the object's own name.
	Name string
}

// Cache holds what its informers watch (or, for a snapshot, what one pass
// of LISTs gave). Services, EndpointSlices and Pods are kept packed (see
// packed); its lookups decode them, so they give objects of their own.
type Cache struct {
	services, slices map[string]*store // by namespace; "" for all
	pods             map[string]*store // by namespace; "" for all
	// nodes, few, are kept by a SharedIndexInformer's indexer, trimmed.
	nodes cache.Indexer
	// informers keep the stores current; none for a snapshot.
	informers []informer
	scope     CacheScope
	client    *Client
}

// NewCache makes the informers of scope; onChange is called, from the
// informers' goroutines, for every change they see after Run. It contacts
// nothing.
func (c *Client) NewCache(scope CacheScope, onChange func(Change)) (*Cache, error) {
	watchConfig := rest.CopyConfig(c.base)
	watchConfig.Timeout = 0
	clientFor := func(cfg *rest.Config, apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
		cfg = rest.CopyConfig(cfg)
		cfg.APIPath = apiPath
		cfg.GroupVersion = &gv
		return rest.RESTClientFor(cfg)
	}
	coreWatch, err := clientFor(watchConfig, "/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("build core/v1 watch client: %w", err)
	}
	discoveryWatch, err := clientFor(watchConfig, "/apis", discoveryv1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("build discovery.k8s.io/v1 watch client: %w", err)
	}
	k := newCacheOf(scope, c)
	add := func(of map[string]*store, ns string, list *rest.RESTClient, watchClient *rest.RESTClient, resource, labelSelector string, example runtime.Object) {
		s := newStore()
		of[ns] = s
		k.informers = append(k.informers, newStoreInformer(listWatch(list, watchClient, resource, ns, labelSelector), example, s, onChange))
	}
	for _, ns := range k.namespaces() {
		add(k.services, ns, c.core, coreWatch, "services", "", &corev1.Service{})
		add(k.slices, ns, c.discovery, discoveryWatch, "endpointslices", discoveryv1.LabelServiceName, &discoveryv1.EndpointSlice{})
	}
	for _, ns := range k.podNamespaces() {
		add(k.pods, ns, c.core, coreWatch, "pods", "", &corev1.Pod{})
	}
	if scope.Nodes {
		inf := newNodeInformer(listWatch(c.core, coreWatch, "nodes", "", ""), onChange)
		k.nodes = inf.GetIndexer()
		k.informers = append(k.informers, inf)
	}
	return k, nil
}

func newCacheOf(scope CacheScope, c *Client) *Cache {
	return &Cache{services: map[string]*store{}, slices: map[string]*store{},
		pods: map[string]*store{}, scope: scope, client: c}
}

// namespaces are those of the scope's Services and slices, one informer
// (or LIST) each: [""] when one is every namespace.
func (k *Cache) namespaces() []string { return scopeNamespaces(k.scope.Namespaces) }

func (k *Cache) podNamespaces() []string { return scopeNamespaces(k.scope.PodNamespaces) }

func scopeNamespaces(namespaces []string) []string {
	if slices.Contains(namespaces, "") {
		return []string{""}
	}
	out := slices.Clone(namespaces)
	slices.Sort(out)
	return slices.Compact(out)
}

// Snapshot is a Cache of one pass of LISTs, page by page, of what scope
// covers, with no informer to start or stop: `check`'s view of the cluster,
// as the companion's informers would see it once listed.
func (c *Client) Snapshot(ctx context.Context, scope CacheScope) (*Cache, error) {
	k := newCacheOf(scope, c)
	// The LISTs go out together: check's wall time is theirs, one after
	// the other, otherwise.
	var lists []func(context.Context) ([]any, error)
	for _, ns := range k.namespaces() {
		lists = append(lists,
			func(ctx context.Context) ([]any, error) {
				services, err := c.ListServices(ctx, ns, "")
				return pointers(services.Items), err
			},
			func(ctx context.Context) ([]any, error) {
				list, err := c.ListServiceEndpointSlices(ctx, ns)
				return pointers(list.Items), err
			})
	}
	for _, ns := range k.podNamespaces() {
		lists = append(lists, func(ctx context.Context) ([]any, error) {
			pods, err := c.ListPods(ctx, ns, "")
			return pointers(pods.Items), err
		})
	}
	if scope.Nodes {
		lists = append(lists, func(ctx context.Context) ([]any, error) {
			nodes, err := c.ListNodes(ctx, "")
			return pointers(nodes.Items), err
		})
	}
	found := make([][]any, len(lists))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(snapshotLists)
	for i, list := range lists {
		g.Go(func() error {
			var err error
			found[i], err = list(gctx)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	snapshot, err := cacheOf(scope, slices.Concat(found...))
	if err != nil {
		return nil, err
	}
	snapshot.client = c
	return snapshot, nil
}

// snapshotLists is how many of a snapshot's LISTs go out at once.
const snapshotLists = 4

// CacheOf is a Cache of objects (pointers to Services, EndpointSlices,
// Pods and Nodes) as the informers of scope would keep them once listed,
// with none to run: a snapshot, and what tests of its readers read.
func CacheOf(scope CacheScope, objects ...any) (*Cache, error) {
	return cacheOf(scope, objects)
}

func cacheOf(scope CacheScope, objects []any) (*Cache, error) {
	k := newCacheOf(scope, nil)
	empty := func(of map[string]*store, namespaces []string) {
		for _, ns := range namespaces {
			of[ns] = newStore()
		}
	}
	empty(k.services, k.namespaces())
	empty(k.slices, k.namespaces())
	empty(k.pods, k.podNamespaces())
	if scope.Nodes {
		k.nodes = cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{})
	}
	for _, o := range objects {
		var s *store
		switch t := o.(type) {
		case *corev1.Service:
			s = storeFor(k.services, t.Namespace)
		case *discoveryv1.EndpointSlice:
			s = storeFor(k.slices, t.Namespace)
		case *corev1.Pod:
			s = storeFor(k.pods, t.Namespace)
		case *corev1.Node:
			if k.nodes == nil {
				break
			}
			if err := k.nodes.Add(ptr.To(trimmedNode(t))); err != nil {
				return nil, err
			}
			continue
		}
		if s == nil {
			return nil, fmt.Errorf("a %T is outside the cache's scope", o)
		}
		kept, err := trimForCache(o)
		if err != nil {
			return nil, err
		}
		p, ok := kept.(*packed)
		if !ok {
			return nil, fmt.Errorf("a %T is kept as a %T, not packed", o, kept)
		}
		s.put(p)
	}
	return k, nil
}

// pointers are pointers to the items, as an informer stores them.
func pointers[T any](items []T) []any {
	out := make([]any, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// listWatch lists (in pages, by the reflector) and watches resource in
// namespace ("" for all), with the label selector.
func listWatch(list, watchClient *rest.RESTClient, resource, namespace, labelSelector string) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			options.LabelSelector = labelSelector
			return list.Get().Namespace(namespace).Resource(resource).VersionedParams(&options, metav1.ParameterCodec).Do(ctx).Get()
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.Watch = true
			options.LabelSelector = labelSelector
			return watchClient.Get().Namespace(namespace).Resource(resource).VersionedParams(&options, metav1.ParameterCodec).Watch(ctx)
		},
	}
}

// newNodeInformer is a SharedIndexInformer of the Nodes, kept trimmed.
func newNodeInformer(lw *cache.ListWatch, onChange func(Change)) cache.SharedIndexInformer {
	informer := cache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, cache.Indexers{})
	_ = informer.SetTransform(trimForCache)
	if onChange != nil {
		notify := func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if ch, ok := changeOf(obj); ok {
				onChange(ch)
			}
		}
		_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    notify,
			UpdateFunc: func(_, obj any) { notify(obj) },
			DeleteFunc: notify,
		})
	}
	return informer
}

// packed is a Service, an EndpointSlice or a Pod as the cache keeps it:
// what its key, indexes, selectors and change notices read, and the rest as
// its protobuf encoding, which each lookup decodes. A typed EndpointSlice
// of 10 endpoints is a few kilobytes of small allocations; packed, its
// bytes and one struct (bench/README.md has the figures).
type packed struct {
	kind packedKind
	// deflated says that data is compressed (a slice of many endpoints
	// repeats its node, zone and pod names).
	deflated bool
	// namespace is interned: a namespace's objects share its name.
	namespace unique.Handle[string]
	name      string
	// key is, of an EndpointSlice, the Service it is labelled for; of a
	// Service or a Pod, its labels for selectors (packedLabels): one
	// string rather than a map of strings.
	key string
	// data is the encoding, in a string: its header is 8 bytes shorter
	// than a slice's, which makes a packed object 64 bytes.
	data string
}

// service is the Service an EndpointSlice is labelled for.
func (p *packed) service() string {
	if p.kind != packedSlice {
		return ""
	}
	return p.key
}

// labels are a Service's or a Pod's labels, for selectors.
func (p *packed) labels() labels.Labels {
	if p.kind == packedSlice {
		return packedLabels("")
	}
	return packedLabels(p.key)
}

type packedKind uint8

const (
	packedService packedKind = iota + 1
	packedSlice
	packedPod
)

// GetObjectMeta gives the informer's queue the key it reads: packed is a
// metav1.ObjectMetaAccessor for meta.Accessor.
func (p *packed) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: p.namespace.Value(), Name: p.name}
}

// protoObject is a pointer to a Kubernetes type with its protobuf codec.
type protoObject[T any] interface {
	*T
	metav1.Object
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// pack is trimmed, an object as the cache keeps it, packed: its protobuf
// encoding, deflated when that pays (with the dictionary of its kind).
func pack(kind packedKind, trimmed interface {
	metav1.Object
	Marshal() ([]byte, error)
}, key string,
) (*packed, error) {
	p := &packed{kind: kind, namespace: unique.Make(trimmed.GetNamespace()), name: trimmed.GetName(), key: key}
	data, err := trimmed.Marshal()
	if err != nil {
		return nil, fmt.Errorf("pack %s/%s: %w", p.namespace.Value(), p.name, err)
	}
	if len(data) >= deflateFrom {
		if small := dictionaries[kind].deflate(data); len(small) < len(data)*3/4 {
			p.data, p.deflated = small, true
			return p, nil
		}
	}
	p.data = string(data)
	return p, nil
}

func unpack[T any, P protoObject[T]](p *packed) (T, error) {
	var out T
	buf, ok := inflaters.Get().(*inflater)
	if !ok {
		buf = &inflater{}
	}
	defer inflaters.Put(buf)
	data, err := buf.bytesOf(p)
	if err != nil {
		return out, fmt.Errorf("unpack %s/%s from the cache: %w", p.namespace.Value(), p.name, err)
	}
	// Unmarshal copies what it keeps: buf's bytes are free to reuse.
	if err := P(&out).Unmarshal(data); err != nil {
		return out, fmt.Errorf("unpack %s/%s from the cache: %w", p.namespace.Value(), p.name, err)
	}
	return out, nil
}

// deflateFrom is the size from which an encoding is compressed.
const deflateFrom = 32

// A dictionary is what the packed objects of one kind are deflated with:
// the encoding of the first object of that kind packed by this process,
// as its cluster names things (its namespaces, node and zone names, label
// keys, ports) and as protobuf lays the kind out. Against it an object of
// a few hundred bytes deflates to a fraction, where deflated alone it
// would hardly shrink (bench/README.md has the figures). It never changes
// once set, so that equal objects pack to equal bytes (samePacked).
type dictionary struct {
	dict    atomic.Pointer[[]byte]
	writers sync.Pool
}

// dictionaries are those of each packedKind.
var dictionaries [packedPod + 1]dictionary

// maxDictionary bounds a dictionary (flate reaches 32 kB back).
const maxDictionary = 4 << 10

// deflateLevel is flate's level: its fastest, BestSpeed, ignores a
// dictionary.
const deflateLevel = 2

// get is the dictionary, nil until the first object of its kind.
func (d *dictionary) get() []byte {
	if dict := d.dict.Load(); dict != nil {
		return *dict
	}
	return nil
}

// deflate is data compressed against the dictionary (made of data when it
// is the first), with a pooled writer.
func (d *dictionary) deflate(data []byte) string {
	if d.dict.Load() == nil {
		first := bytes.Clone(data[:min(len(data), maxDictionary)])
		d.dict.CompareAndSwap(nil, &first)
	}
	w, ok := d.writers.Get().(*flate.Writer)
	if !ok {
		w, _ = flate.NewWriterDict(nil, deflateLevel, d.get())
	}
	defer d.writers.Put(w)
	var out bytes.Buffer
	out.Grow(len(data) / 2)
	w.Reset(&out)
	_, _ = w.Write(data)
	_ = w.Close()
	return out.String()
}

// inflater gives packed data as bytes, decompressed when it is deflated,
// in a buffer of its own, reused.
type inflater struct {
	r   io.ReadCloser
	src strings.Reader
	out bytes.Buffer
}

var inflaters sync.Pool

func (f *inflater) bytesOf(p *packed) ([]byte, error) {
	f.out.Reset()
	if !p.deflated {
		f.out.WriteString(p.data)
		return f.out.Bytes(), nil
	}
	f.src.Reset(p.data)
	dict := dictionaries[p.kind].get()
	if resetter, ok := f.r.(flate.Resetter); ok {
		if err := resetter.Reset(&f.src, dict); err != nil {
			return nil, err
		}
	} else {
		f.r = flate.NewReaderDict(&f.src, dict)
	}
	if _, err := f.out.ReadFrom(f.r); err != nil {
		return nil, err
	}
	return f.out.Bytes(), nil
}

// trimForCache is what the cache keeps of obj, trimmed to what the rules
// and the state writers read: a Service, a slice or a Pod packed, a Node
// (few) trimmed. Of a Service it keeps its name, labels, annotations (but
// kubectl's copy of the whole object), spec and status; of a slice its
// name, Service and manager labels, annotations, address type, ports and, of each
// endpoint, what package endpoints reads (a targetRef's kind and name); of
// a Pod what TrimPod keeps. It is the informers' transform, and so
// idempotent, as a transform must be: a packed object is given back as it
// is; a snapshot keeps the same.
func trimForCache(obj any) (any, error) {
	switch o := obj.(type) {
	case *packed:
		return o, nil
	case *corev1.Service:
		trimmed := trimService(o)
		return pack(packedService, &trimmed, packLabels(o.Labels))
	case *discoveryv1.EndpointSlice:
		trimmed := trimSlice(o)
		return pack(packedSlice, &trimmed, o.Labels[discoveryv1.LabelServiceName])
	case *corev1.Pod:
		trimmed := TrimPod(o)
		// What changes with every status update: the cache compares
		// what it keeps of a Pod to say whether it changed (samePacked).
		trimmed.ResourceVersion = ""
		return pack(packedPod, &trimmed, packLabels(trimmed.Labels))
	case *corev1.Node:
		return ptr.To(trimmedNode(o)), nil
	}
	return obj, nil
}

// trimmedNode is what the cache keeps of a Node: trimNode's, and its
// resourceVersion.
func trimmedNode(n *corev1.Node) corev1.Node {
	trimmed := trimNode(n)
	trimmed.ResourceVersion = n.ResourceVersion
	return trimmed
}

// trimService keeps of a Service what the rules and its state read.
func trimService(o *corev1.Service) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, Labels: o.Labels,
		Annotations: withoutLastApplied(o.Annotations)}, Spec: o.Spec, Status: o.Status}
}

// trimSlice keeps of an EndpointSlice what the rules read: of its labels,
// the Service's name and the manager's (endpoints.TrustsSlice).
func trimSlice(s *discoveryv1.EndpointSlice) discoveryv1.EndpointSlice {
	var labels map[string]string
	for _, key := range []string{discoveryv1.LabelServiceName, discoveryv1.LabelManagedBy} {
		if value, ok := s.Labels[key]; ok {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[key] = value
		}
	}
	out := discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: labels, Annotations: withoutLastApplied(s.Annotations)},
		AddressType: s.AddressType, Ports: s.Ports, Endpoints: make([]discoveryv1.Endpoint, len(s.Endpoints)),
	}
	for i, e := range s.Endpoints {
		e.Hints, e.DeprecatedTopology = nil, nil
		if e.TargetRef != nil {
			e.TargetRef = &corev1.ObjectReference{Kind: e.TargetRef.Kind, Name: e.TargetRef.Name}
		}
		out.Endpoints[i] = e
	}
	return out
}

// withoutLastApplied is annotations without kubectl's copy of the object.
func withoutLastApplied(annotations map[string]string) map[string]string {
	if _, ok := annotations[lastAppliedAnnotation]; !ok {
		return annotations
	}
	out := maps.Clone(annotations)
	delete(out, lastAppliedAnnotation)
	return out
}

// samePacked says whether old and obj are packed objects equal in what the
// cache keeps: a Pod's status changes all its life; what the cache keeps
// of it seldom does.
func samePacked(a, b *packed) bool {
	return a.kind == packedPod && b.kind == packedPod && a.deflated == b.deflated && a.data == b.data
}

// relabelled is the change of old's Service when an update moved an
// EndpointSlice from it to another.
func relabelled(a, b *packed) (Change, bool) {
	if a.kind != packedSlice || a.service() == b.service() {
		return Change{}, false
	}
	return changeOf(a)
}

// lastAppliedAnnotation is kubectl's copy of the whole object.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

func changeOf(obj any) (Change, bool) {
	switch o := obj.(type) {
	case *packed:
		switch o.kind {
		case packedService:
			return Change{Kind: "Service", Namespace: o.namespace.Value(), Service: o.name, Name: o.name}, true
		case packedSlice:
			return Change{Kind: "EndpointSlice", Namespace: o.namespace.Value(), Service: o.service(), Name: o.name}, true
		case packedPod:
			return Change{Kind: "Pod", Namespace: o.namespace.Value(), Name: o.name}, true
		}
	case *corev1.Node:
		return Change{Kind: "Node", Name: o.Name}, true
	}
	return Change{}, false
}

// Run runs the informers until ctx ends.
func (k *Cache) Run(ctx context.Context) {
	for _, inf := range k.informers {
		go inf.RunWithContext(ctx)
	}
}

// WaitForSync waits until every informer has listed once; false when ctx
// ended first.
func (k *Cache) WaitForSync(ctx context.Context) bool {
	synced := make([]cache.InformerSynced, 0, len(k.informers))
	for _, inf := range k.informers {
		synced = append(synced, inf.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// storeFor is the store of a namespace's objects, nil when the namespace
// is not watched.
func storeFor(of map[string]*store, namespace string) *store {
	if s, ok := of[""]; ok {
		return s
	}
	return of[namespace]
}

// NotWatchedError is a lookup of objects the cache does not watch: the
// scope it was made for leaves them out.
type NotWatchedError struct {
	Resource, Namespace string
}

func (e *NotWatchedError) Error() string {
	return fmt.Sprintf("%s in %s are not watched", e.Resource, Scope(e.Namespace))
}

// lookup is the objects of namespace ("" for every watched one) in the
// stores of of.
func lookup(of map[string]*store, resource, namespace string) ([]*packed, error) {
	if s, all := of[""]; all {
		return s.list(namespace), nil
	}
	if namespace == "" {
		var objs []*packed
		for _, s := range of {
			objs = append(objs, s.list("")...)
		}
		return objs, nil
	}
	s, ok := of[namespace]
	if !ok {
		return nil, &NotWatchedError{Resource: resource, Namespace: namespace}
	}
	return s.list(namespace), nil
}

// matching are the objects among objs that sel matches, sorted by
// namespace and name as a LIST gives them.
func matching(objs []*packed, sel labels.Selector) []*packed {
	if !sel.Empty() {
		objs = slices.DeleteFunc(objs, func(p *packed) bool { return !sel.Matches(p.labels()) })
	}
	slices.SortFunc(objs, func(a, b *packed) int {
		return cmp.Or(strings.Compare(a.namespace.Value(), b.namespace.Value()), strings.Compare(a.name, b.name))
	})
	return objs
}

// unpackAll are picked, decoded, in their order.
func unpackAll[T any, P protoObject[T]](picked []*packed) ([]T, error) {
	out := make([]T, len(picked))
	for i, p := range picked {
		var err error
		if out[i], err = unpack[T, P](p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseSelector is a label selector as the API takes it: "" selects all.
func parseSelector(selector string) (labels.Selector, error) {
	if selector == "" {
		return labels.Everything(), nil
	}
	parsed, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", selector, err)
	}
	return parsed, nil
}

// The lookups below make the cache a pools.Reader: what a read of the API
// would give, from memory. They give copies that the rules may read but
// never change, sorted as the API lists them; ctx is not used.

// Service is the Service namespace/name; a NotFound error when there is none.
func (k *Cache) Service(_ context.Context, namespace, name string) (*corev1.Service, error) {
	s := storeFor(k.services, namespace)
	if s == nil {
		return nil, &NotWatchedError{Resource: "services", Namespace: namespace}
	}
	p := s.get(namespace, name)
	if p == nil {
		return nil, fmt.Errorf("service %s/%s: %w", namespace, name, apierrors.NewNotFound(corev1.Resource("services"), name))
	}
	svc, err := unpack[corev1.Service](p)
	return &svc, err
}

// EndpointSlices are the slices labelled for the Service namespace/service.
func (k *Cache) EndpointSlices(_ context.Context, namespace, service string) (pools.Slices, error) {
	s := storeFor(k.slices, namespace)
	if s == nil {
		return pools.Slices{}, &NotWatchedError{Resource: "endpointslices", Namespace: namespace}
	}
	items, err := unpackAll[discoveryv1.EndpointSlice](matching(s.slicesOf(namespace, service), labels.Everything()))
	return pools.Slices{Items: items}, err
}

// Services are the Services of namespace ("" for every watched one) that
// the label selector matches.
func (k *Cache) Services(_ context.Context, namespace, selector string) ([]corev1.Service, error) {
	return lookupMatching[corev1.Service](k.services, "services", namespace, selector)
}

// ServiceNames are the Services of namespace ("" for every watched one)
// that the label selector matches, by name, sorted as the API lists them:
// none is decoded (pools.ServiceNamer).
func (k *Cache) ServiceNames(_ context.Context, namespace, selector string) ([]types.NamespacedName, error) {
	picked, err := lookupPacked(k.services, "services", namespace, selector)
	if err != nil {
		return nil, err
	}
	var names []types.NamespacedName
	for _, p := range picked {
		names = append(names, types.NamespacedName{Namespace: p.namespace.Value(), Name: p.name})
	}
	return names, nil
}

// ServiceEndpointSlices are the slices of namespace ("" for every watched
// one) labelled for a Service.
func (k *Cache) ServiceEndpointSlices(_ context.Context, namespace string) (pools.Slices, error) {
	found, err := lookupMatching[discoveryv1.EndpointSlice](k.slices, "endpointslices", namespace, "")
	return pools.Slices{Items: found}, err
}

// Nodes are the Nodes that the label selector matches.
func (k *Cache) Nodes(_ context.Context, selector string) ([]corev1.Node, error) {
	if k.nodes == nil {
		return nil, &NotWatchedError{Resource: "nodes"}
	}
	sel, err := parseSelector(selector)
	if err != nil {
		return nil, err
	}
	var out []corev1.Node
	for _, o := range k.nodes.List() {
		if n, ok := o.(*corev1.Node); ok && sel.Matches(labels.Set(n.Labels)) {
			out = append(out, *n)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Pods are the Pods of namespace ("" for every watched one) that the label
// selector matches.
func (k *Cache) Pods(_ context.Context, namespace, selector string) ([]corev1.Pod, error) {
	return lookupMatching[corev1.Pod](k.pods, "pods", namespace, selector)
}

func lookupMatching[T any, P protoObject[T]](of map[string]*store, resource, namespace, selector string) ([]T, error) {
	picked, err := lookupPacked(of, resource, namespace, selector)
	if err != nil {
		return nil, err
	}
	return unpackAll[T, P](picked)
}

// lookupPacked are the packed objects of namespace in the stores of of
// that the label selector matches, sorted as matching sorts them.
func lookupPacked(of map[string]*store, resource, namespace, selector string) ([]*packed, error) {
	sel, err := parseSelector(selector)
	if err != nil {
		return nil, err
	}
	found, err := lookup(of, resource, namespace)
	if err != nil {
		return nil, err
	}
	return matching(found, sel), nil
}

// ErrForbidden marks a probe refused by RBAC.
var ErrForbidden = errors.New("forbidden")

// Probe lists and watches each kind of the scope once, bounded by the
// client's request timeout, so that missing RBAC is said at start rather
// than retried for ever by the informers. Its error names the rule to add.
func (k *Cache) Probe(ctx context.Context) error {
	type probe struct {
		client                     *rest.RESTClient
		group, resource, namespace string
	}
	var probes []probe
	for _, ns := range slices.Sorted(maps.Keys(k.services)) {
		probes = append(probes,
			probe{k.client.core, "", "services", ns},
			probe{k.client.discovery, "discovery.k8s.io", "endpointslices", ns})
	}
	for _, ns := range slices.Sorted(maps.Keys(k.pods)) {
		probes = append(probes, probe{k.client.core, "", "pods", ns})
	}
	if k.nodes != nil {
		probes = append(probes, probe{k.client.core, "", "nodes", ""})
	}
	for _, p := range probes {
		for _, verb := range []string{"list", "watch"} {
			req := p.client.Get().Namespace(p.namespace).Resource(p.resource)
			var err error
			if verb == "watch" {
				var w watch.Interface
				w, err = req.Param("watch", "true").Param("timeoutSeconds", "1").Watch(ctx)
				if err == nil {
					w.Stop()
				}
			} else {
				err = req.Param("limit", "1").Do(ctx).Error()
			}
			if err == nil {
				continue
			}
			if apierrors.IsForbidden(err) {
				return fmt.Errorf("%w: %s %s in %s: add the RBAC rule {apiGroups: [%q], resources: [%q], verbs: [\"list\", \"watch\"]} "+
					"(a Role in that namespace, or a ClusterRole for all namespaces and for nodes): %v",
					ErrForbidden, verb, p.resource, Scope(p.namespace), p.group, p.resource, err)
			}
			return fmt.Errorf("%s %s in %s: %w", verb, p.resource, Scope(p.namespace), err)
		}
	}
	return nil
}
