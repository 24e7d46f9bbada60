package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

// A Cache keeps the Services, EndpointSlices, Nodes and Pods that the sync
// companion computes pools from, current with client-go's informers: their
// reflectors list, then watch, relist when a watch's resourceVersion is too
// old (410 Gone), and reconnect with backoff when the API server goes away,
// so no loop of ours decides when the cache is right.

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

// Cache holds what its informers watch. Its lookups give copies that the
// rules may read but never change.
type Cache struct {
	services, slices map[string]cache.SharedIndexInformer // by namespace; "" for all
	pods             map[string]cache.SharedIndexInformer // by namespace; "" for all
	nodes            cache.SharedIndexInformer
	scope            CacheScope
	client           *Client
}

const byService = "service"

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
	k := &Cache{services: map[string]cache.SharedIndexInformer{}, slices: map[string]cache.SharedIndexInformer{},
		pods: map[string]cache.SharedIndexInformer{}, scope: scope, client: c}
	namespaces := scope.Namespaces
	if slices.Contains(namespaces, "") {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		if _, ok := k.services[ns]; ok {
			continue
		}
		k.services[ns] = newInformer(c.core, coreWatch, "services", ns, "", &corev1.Service{},
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, onChange)
		k.slices[ns] = newInformer(c.discovery, discoveryWatch, "endpointslices", ns, discoveryv1.LabelServiceName, &discoveryv1.EndpointSlice{},
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, byService: sliceServiceIndex}, onChange)
	}
	podNamespaces := scope.PodNamespaces
	if slices.Contains(podNamespaces, "") {
		podNamespaces = []string{""}
	}
	for _, ns := range podNamespaces {
		if _, ok := k.pods[ns]; !ok {
			k.pods[ns] = newInformer(c.core, coreWatch, "pods", ns, "", &corev1.Pod{},
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, onChange)
		}
	}
	if scope.Nodes {
		k.nodes = newInformer(c.core, coreWatch, "nodes", "", "", &corev1.Node{}, cache.Indexers{}, onChange)
	}
	return k, nil
}

func newInformer(list, watchClient *rest.RESTClient, resource, namespace, labelSelector string, example runtime.Object,
	indexers cache.Indexers, onChange func(Change),
) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
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
	informer := cache.NewSharedIndexInformer(lw, example, 0, indexers)
	// Keep only what the rules read: managedFields and kubectl's copy of
	// the whole object would double what a large fleet holds.
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
			AddFunc: notify,
			UpdateFunc: func(old, obj any) {
				// A Pod's status changes all its life; what the cache keeps of
				// it (trimPod) seldom does.
				if samePod(old, obj) {
					return
				}
				// A slice relabelled for another Service changes both, as
				// the endpointslice controller sees it: the old one loses
				// its endpoints.
				if was, ok := relabelled(old, obj); ok {
					onChange(was)
				}
				notify(obj)
			},
			DeleteFunc: notify,
		})
	}
	return informer
}

func trimForCache(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		o.ManagedFields = nil
		delete(o.Annotations, lastAppliedAnnotation)
	case *discoveryv1.EndpointSlice:
		o.ManagedFields = nil
		delete(o.Annotations, lastAppliedAnnotation)
	case *corev1.Node:
		trimmed := trimNode(o)
		trimmed.ResourceVersion = o.ResourceVersion
		return &trimmed, nil
	case *corev1.Pod:
		trimmed := TrimPod(o)
		return &trimmed, nil
	}
	return obj, nil
}

// samePod says whether old and obj are Pods equal in what the cache keeps,
// but for their resourceVersion.
func samePod(old, obj any) bool {
	a, ok := old.(*corev1.Pod)
	b, ok2 := obj.(*corev1.Pod)
	if !ok || !ok2 {
		return false
	}
	return maps.Equal(a.Labels, b.Labels) && apiequality.Semantic.DeepEqual(a.Spec, b.Spec)
}

// relabelled is the change of old's Service when an update moved an
// EndpointSlice from it to another.
func relabelled(old, obj any) (Change, bool) {
	a, ok := old.(*discoveryv1.EndpointSlice)
	b, ok2 := obj.(*discoveryv1.EndpointSlice)
	if !ok || !ok2 || a.Labels[discoveryv1.LabelServiceName] == b.Labels[discoveryv1.LabelServiceName] {
		return Change{}, false
	}
	return changeOf(a)
}

// lastAppliedAnnotation is kubectl's copy of the whole object.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

func changeOf(obj any) (Change, bool) {
	switch o := obj.(type) {
	case *corev1.Service:
		return Change{Kind: "Service", Namespace: o.Namespace, Service: o.Name, Name: o.Name}, true
	case *discoveryv1.EndpointSlice:
		return Change{Kind: "EndpointSlice", Namespace: o.Namespace, Service: o.Labels[discoveryv1.LabelServiceName], Name: o.Name}, true
	case *corev1.Node:
		return Change{Kind: "Node", Name: o.Name}, true
	case *corev1.Pod:
		return Change{Kind: "Pod", Namespace: o.Namespace, Name: o.Name}, true
	}
	return Change{}, false
}

func sliceServiceIndex(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	return []string{s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]}, nil
}

// Run runs the informers until ctx ends.
func (k *Cache) Run(ctx context.Context) {
	for _, inf := range k.informers() {
		go inf.RunWithContext(ctx)
	}
}

// WaitForSync waits until every informer has listed once; false when ctx
// ended first.
func (k *Cache) WaitForSync(ctx context.Context) bool {
	var synced []cache.InformerSynced
	for _, inf := range k.informers() {
		synced = append(synced, inf.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

func (k *Cache) informers() []cache.SharedIndexInformer {
	var out []cache.SharedIndexInformer
	for _, ns := range slices.Sorted(maps.Keys(k.services)) {
		out = append(out, k.services[ns], k.slices[ns])
	}
	for _, ns := range slices.Sorted(maps.Keys(k.pods)) {
		out = append(out, k.pods[ns])
	}
	if k.nodes != nil {
		out = append(out, k.nodes)
	}
	return out
}

// informerFor is the informer of a namespace's objects, nil when the
// namespace is not watched.
func (k *Cache) informerFor(of map[string]cache.SharedIndexInformer, namespace string) cache.SharedIndexInformer {
	if inf, ok := of[""]; ok {
		return inf
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

// lookup is the objects of the namespace's informer in of ("" for every
// watched namespace), by the namespace index, as T.
func lookup[T any](of map[string]cache.SharedIndexInformer, resource, namespace string) ([]*T, error) {
	var objs []any
	switch inf, all := of[""]; {
	case all:
		objs = inf.GetStore().List()
		if namespace != "" {
			objs, _ = inf.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
		}
	case namespace == "":
		for _, ns := range slices.Sorted(maps.Keys(of)) {
			objs = append(objs, of[ns].GetStore().List()...)
		}
	default:
		inf, ok := of[namespace]
		if !ok {
			return nil, &NotWatchedError{Resource: resource, Namespace: namespace}
		}
		objs = inf.GetStore().List()
	}
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(*T); ok {
			out = append(out, t)
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
	inf := k.informerFor(k.services, namespace)
	if inf == nil {
		return nil, &NotWatchedError{Resource: "services", Namespace: namespace}
	}
	obj, ok, err := inf.GetStore().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	svc, isService := obj.(*corev1.Service)
	if !ok || !isService {
		return nil, fmt.Errorf("service %s/%s: %w", namespace, name, apierrors.NewNotFound(corev1.Resource("services"), name))
	}
	copied := *svc
	return &copied, nil
}

// EndpointSlices are the slices labelled for the Service namespace/service.
func (k *Cache) EndpointSlices(_ context.Context, namespace, service string) (pools.Slices, error) {
	inf := k.informerFor(k.slices, namespace)
	if inf == nil {
		return pools.Slices{}, &NotWatchedError{Resource: "endpointslices", Namespace: namespace}
	}
	objs, err := inf.GetIndexer().ByIndex(byService, namespace+"/"+service)
	if err != nil {
		return pools.Slices{}, err
	}
	var found []*discoveryv1.EndpointSlice
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			found = append(found, s)
		}
	}
	return pools.Slices{Items: sortedSlices(found)}, nil
}

// Services are the Services of namespace ("" for every watched one) that
// the label selector matches.
func (k *Cache) Services(_ context.Context, namespace, selector string) ([]corev1.Service, error) {
	sel, err := parseSelector(selector)
	if err != nil {
		return nil, err
	}
	found, err := lookup[corev1.Service](k.services, "services", namespace)
	if err != nil {
		return nil, err
	}
	out := make([]corev1.Service, 0, len(found))
	for _, s := range found {
		if sel.Matches(labels.Set(s.Labels)) {
			out = append(out, *s)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Service) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}

// ServiceEndpointSlices are the slices of namespace ("" for every watched
// one) labelled for a Service.
func (k *Cache) ServiceEndpointSlices(_ context.Context, namespace string) (pools.Slices, error) {
	found, err := lookup[discoveryv1.EndpointSlice](k.slices, "endpointslices", namespace)
	if err != nil {
		return pools.Slices{}, err
	}
	return pools.Slices{Items: sortedSlices(found)}, nil
}

func sortedSlices(found []*discoveryv1.EndpointSlice) []discoveryv1.EndpointSlice {
	out := make([]discoveryv1.EndpointSlice, 0, len(found))
	for _, s := range found {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b discoveryv1.EndpointSlice) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
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
	objs := k.nodes.GetStore().List()
	out := make([]corev1.Node, 0, len(objs))
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok && sel.Matches(labels.Set(n.Labels)) {
			out = append(out, *n)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Pods are the Pods of namespace ("" for every watched one) that the label
// selector matches, sorted by namespace and name.
func (k *Cache) Pods(_ context.Context, namespace, selector string) ([]corev1.Pod, error) {
	sel, err := parseSelector(selector)
	if err != nil {
		return nil, err
	}
	found, err := lookup[corev1.Pod](k.pods, "pods", namespace)
	if err != nil {
		return nil, err
	}
	out := make([]corev1.Pod, 0, len(found))
	for _, p := range found {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, *p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out, nil
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
