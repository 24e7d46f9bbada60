// Package kube reads Services, EndpointSlices, Nodes and Pods from the
// Kubernetes API, keeps them in an informer cache for the sync companion,
// and holds its Lease. Both the client (Client.Reader) and the cache are a
// pools.Reader. It is the only package that uses client-go, and it knows
// nothing of Terraform.
package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

// Options bound the time and the retries of every request.
type Options struct {
	// RequestTimeout bounds one attempt of one request, connection included.
	RequestTimeout time.Duration
	// Attempts is how many times a request is tried before its error is given.
	Attempts int
	// Backoff is the wait before the first retry; it doubles for each next one.
	Backoff time.Duration
	// MaxRetryAfter caps the wait that a 429's Retry-After can ask for.
	MaxRetryAfter time.Duration
	// PageSize is the limit of each page of a LIST.
	PageSize int64
	// QPS and Burst set client-go's client-side rate limit, shared by every
	// read of one provider instance.
	QPS   float32
	Burst int
	// UserAgent names the provider in the API server's logs.
	UserAgent string
}

// DefaultOptions: a request gives up after 15 s and is tried 3 times, so a
// read fails in under a minute on a stalled API server. The client-side rate
// limit lets the two requests of 500 reads go at once, and 250 reads a
// second after that: a plan is not slowed by it (client-go's default of 5
// QPS would make 100 reads wait 40 s; bench/README.md, "Findings", has what
// lower limits cost a plan), while a runaway loop still is. API Priority and
// Fairness protects the server either way.
func DefaultOptions() Options {
	return Options{
		RequestTimeout: 15 * time.Second,
		Attempts:       3,
		Backoff:        500 * time.Millisecond,
		MaxRetryAfter:  10 * time.Second,
		PageSize:       250,
		QPS:            500,
		Burst:          1000,
		UserAgent:      "terraform-provider-k8s",
	}
}

// maxRelists bounds how often a LIST starts over when its continue token
// expires between pages.
const maxRelists = 3

// maxPages stops a LIST from an API server that never ends it.
const maxPages = 10000

// Client reads Services, EndpointSlices and Nodes. It is safe for
// concurrent use; one is shared by all reads of a provider instance.
type Client struct {
	core      *rest.RESTClient
	discovery *rest.RESTClient
	// watcher serves WATCH requests, which last as long as the caller's
	// context allows rather than one RequestTimeout.
	watcher *rest.RESTClient
	opts    Options
	// base is the configuration every client above was made from; the
	// informers of a Cache make their own from it.
	base *rest.Config
}

// The scheme holds only the API groups used (and Leases for the sync
// companion), which keeps the provider binary and its start-up small
// compared with client-go's full clientset.
var codecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(discoveryv1.AddToScheme(scheme))
	// Leases, for the sync companion's leader election (lease.go).
	utilruntime.Must(coordinationv1.AddToScheme(scheme))
	return serializer.NewCodecFactory(scheme)
}()

// NewClient makes a client from cfg; it contacts nothing.
func NewClient(cfg *rest.Config, opts Options) (*Client, error) {
	base := rest.CopyConfig(cfg)
	base.UserAgent = opts.UserAgent
	base.Timeout = opts.RequestTimeout
	base.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(opts.QPS, opts.Burst)
	base.WarningHandler = rest.NoWarnings{}
	base.ContentType = runtime.ContentTypeProtobuf
	base.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	base.NegotiatedSerializer = codecs.WithoutConversion()

	httpClient, err := rest.HTTPClientFor(base)
	if err != nil {
		return nil, fmt.Errorf("build HTTP client: %w", err)
	}
	restClient := func(apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := rest.CopyConfig(base)
		c.APIPath = apiPath
		c.GroupVersion = &gv
		return rest.RESTClientForConfigAndClient(c, httpClient)
	}
	watchConfig := rest.CopyConfig(base)
	watchConfig.Timeout = 0
	watchConfig.APIPath = "/apis"
	watchConfig.GroupVersion = &discoveryv1.SchemeGroupVersion
	watcher, err := rest.RESTClientFor(watchConfig)
	if err != nil {
		return nil, fmt.Errorf("build watch client: %w", err)
	}
	core, err := restClient("/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("build core/v1 client: %w", err)
	}
	discovery, err := restClient("/apis", discoveryv1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("build discovery.k8s.io/v1 client: %w", err)
	}
	return &Client{core: core, discovery: discovery, watcher: watcher, opts: opts, base: base}, nil
}

// GetService reads one Service. Its error starts with
// "get service NAMESPACE/NAME: " and wraps the API error.
func (c *Client) GetService(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	svc := &corev1.Service{}
	err := c.withRetries(ctx, func(ctx context.Context) error {
		return c.core.Get().MaxRetries(0).Namespace(namespace).Resource("services").Name(name).Do(ctx).Into(svc)
	})
	if err != nil {
		return nil, fmt.Errorf("get service %s/%s: %w", namespace, name, err)
	}
	return svc, nil
}

// SliceList is EndpointSlices as of one resourceVersion: pools.Slices, the
// form in which package pools reads them from the API or the cache.
type SliceList = pools.Slices

// ListEndpointSlices reads every EndpointSlice labelled for the Service, page
// by page. A list is given whole or not at all: an error on any page fails it,
// and an expired continue token starts it over, since pages of two snapshots
// cannot be mixed. Its error starts with
// "list endpointslices of service NAMESPACE/NAME: ".
func (c *Client) ListEndpointSlices(ctx context.Context, namespace, service string) (SliceList, error) {
	list, err := c.listEndpointSlices(ctx, namespace, service)
	if err != nil {
		return SliceList{}, fmt.Errorf("list endpointslices of service %s/%s: %w", namespace, service, err)
	}
	return list, nil
}

func serviceSelector(service string) string {
	return labels.Set{discoveryv1.LabelServiceName: service}.String()
}

func (c *Client) listEndpointSlices(ctx context.Context, namespace, service string) (SliceList, error) {
	return c.listSlices(ctx, namespace, serviceSelector(service))
}

func (c *Client) listSlices(ctx context.Context, namespace, selector string) (SliceList, error) {
	items, rv, err := listAll(ctx, c, selector, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, []discoveryv1.EndpointSlice, error) {
		page := &discoveryv1.EndpointSliceList{}
		err := pageRequest(c.discovery.Get(), namespace, "endpointslices", opts).Do(ctx).Into(page)
		return page, page.Items, err
	})
	return SliceList{Items: items, ResourceVersion: rv}, err
}

// ServiceList is Services as of one resourceVersion.
type ServiceList struct {
	Items           []corev1.Service
	ResourceVersion string
}

// ListServices reads the Services of a namespace (every namespace when it is
// empty) that match the label selector (all when it is empty), page by page,
// whole or not at all. Its error starts with "list services in namespace
// NAMESPACE: " or "list services in all namespaces: ".
func (c *Client) ListServices(ctx context.Context, namespace, selector string) (ServiceList, error) {
	items, rv, err := listAll(ctx, c, selector, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, []corev1.Service, error) {
		page := &corev1.ServiceList{}
		err := pageRequest(c.core.Get(), namespace, "services", opts).Do(ctx).Into(page)
		return page, page.Items, err
	})
	if err != nil {
		return ServiceList{}, fmt.Errorf("list services in %s: %w", Scope(namespace), err)
	}
	return ServiceList{Items: items, ResourceVersion: rv}, nil
}

// ListServiceEndpointSlices reads every EndpointSlice of a namespace (every
// namespace when it is empty) that is labelled for a Service, page by page,
// whole or not at all. Its error starts with "list endpointslices in
// namespace NAMESPACE: " or "list endpointslices in all namespaces: ".
func (c *Client) ListServiceEndpointSlices(ctx context.Context, namespace string) (SliceList, error) {
	list, err := c.listSlices(ctx, namespace, discoveryv1.LabelServiceName)
	if err != nil {
		return SliceList{}, fmt.Errorf("list endpointslices in %s: %w", Scope(namespace), err)
	}
	return list, nil
}

// NodeList is Nodes as of one resourceVersion, each trimmed to what a node
// pool needs.
type NodeList struct {
	Items           []corev1.Node
	ResourceVersion string
}

// ListNodes reads the Nodes that match the label selector (all when it is
// empty), page by page, whole or not at all. Nodes are cluster-scoped, so
// this needs `list` on `nodes` cluster-wide. Each page is trimmed as it comes
// (see trimNode): a Node's image list alone can weigh tens of kilobytes. Its
// error starts with "list nodes: ".
func (c *Client) ListNodes(ctx context.Context, selector string) (NodeList, error) {
	items, rv, err := listAll(ctx, c, selector, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, []corev1.Node, error) {
		page := &corev1.NodeList{}
		err := pageRequest(c.core.Get(), "", "nodes", opts).Do(ctx).Into(page)
		for i := range page.Items {
			page.Items[i] = trimNode(&page.Items[i])
		}
		return page, page.Items, err
	})
	if err != nil {
		return NodeList{}, fmt.Errorf("list nodes: %w", err)
	}
	return NodeList{Items: items, ResourceVersion: rv}, nil
}

// PodList is Pods as of one resourceVersion, each trimmed to what a health
// check needs.
type PodList struct {
	Items           []corev1.Pod
	ResourceVersion string
}

// ListPods reads the Pods of a namespace (every namespace when it is empty)
// that match the label selector (all when it is empty), page by page, whole
// or not at all, each trimmed as it comes (see TrimPod). Its error starts
// with "list pods in namespace NAMESPACE: " or "list pods in all namespaces: ".
func (c *Client) ListPods(ctx context.Context, namespace, selector string) (PodList, error) {
	items, rv, err := listAll(ctx, c, selector, c.podPage(namespace))
	if err != nil {
		return PodList{}, fmt.Errorf("list pods in %s: %w", Scope(namespace), err)
	}
	return PodList{Items: items, ResourceVersion: rv}, nil
}

// PodPages is ListPods giving each page's Pods, trimmed, to each as the page
// comes, and keeping none: a reader of every Pod of a namespace holds one
// page at a time. restart is set when the list started over (an expired
// continue token), from then on of another snapshot: what each made of the
// pages before must be dropped. Its errors are ListPods's.
func (c *Client) PodPages(ctx context.Context, namespace, selector string, each func(pods []corev1.Pod, restart bool)) error {
	started := false
	_, err := listPages(ctx, c, selector, c.podPage(namespace), func(pods []corev1.Pod, _ runtime.Object, first bool) {
		each(pods, first && started)
		started = true
	})
	if err != nil {
		return fmt.Errorf("list pods in %s: %w", Scope(namespace), err)
	}
	return nil
}

// podPage asks for one page of the Pods of namespace, each trimmed as it
// comes: decoded straight into what TrimPod keeps when the answer is
// protobuf (podproto.go), else decoded whole and trimmed.
func (c *Client) podPage(namespace string) func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, []corev1.Pod, error) {
	return func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, []corev1.Pod, error) {
		result := pageRequest(c.core.Get(), namespace, "pods", opts).Do(ctx)
		// Error, not Raw's error: it is the API's Status when the body has one.
		if err := result.Error(); err != nil {
			return &corev1.PodList{}, nil, err
		}
		body, _ := result.Raw()
		if list, pods, ok, err := decodeTrimmedPods(body); ok {
			return &corev1.PodList{ListMeta: list}, pods, err
		}
		page := &corev1.PodList{}
		err := result.Into(page)
		for i := range page.Items {
			page.Items[i] = TrimPod(&page.Items[i])
		}
		return page, page.Items, err
	}
}

// TrimPod keeps of a Pod what a health check and a readiness gate read: its
// name, namespace, labels, UID and deletion time, each container's name,
// ports and readinessProbe, its readiness gates, and the type and status of
// each condition. The rest of a pod's status, its volumes and environment
// are most of its size and change often.
func TrimPod(p *corev1.Pod) corev1.Pod {
	out := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels,
		ResourceVersion: p.ResourceVersion, UID: p.UID, DeletionTimestamp: p.DeletionTimestamp}}
	out.Spec.Containers = make([]corev1.Container, len(p.Spec.Containers))
	for i, c := range p.Spec.Containers {
		out.Spec.Containers[i] = corev1.Container{Name: c.Name, Ports: c.Ports, ReadinessProbe: c.ReadinessProbe}
	}
	out.Spec.ReadinessGates = p.Spec.ReadinessGates
	out.Status.Conditions = trimConditions(p.Status.Conditions)
	return out
}

// trimConditions keeps of a Pod's conditions what the readiness gate
// rules read (endpoints.ReadyButForGate): each one's type and status.
func trimConditions(conditions []corev1.PodCondition) []corev1.PodCondition {
	if len(conditions) == 0 {
		return nil
	}
	out := make([]corev1.PodCondition, len(conditions))
	for i, c := range conditions {
		out[i] = corev1.PodCondition{Type: c.Type, Status: c.Status}
	}
	return out
}

// trimNode keeps of a Node what the node pool rules read: its name, labels
// and deletion time, its taints, its Ready condition and its IP addresses.
func trimNode(n *corev1.Node) corev1.Node {
	out := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, DeletionTimestamp: n.DeletionTimestamp}}
	for _, t := range n.Spec.Taints {
		out.Spec.Taints = append(out.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: cond.Type, Status: cond.Status}}
		}
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			out.Status.Addresses = append(out.Status.Addresses, a)
		}
	}
	return out
}

// Scope names a namespace, or every namespace when it is empty, in errors.
func Scope(namespace string) string {
	if namespace == "" {
		return "all namespaces"
	}
	return "namespace " + namespace
}

// pageRequest is one page of a LIST of resource in namespace (all when
// empty), as the pager asks for it.
func pageRequest(req *rest.Request, namespace, resource string, opts metav1.ListOptions) *rest.Request {
	req = req.MaxRetries(0).Namespace(namespace).Resource(resource).Param("limit", strconv.FormatInt(opts.Limit, 10))
	if opts.LabelSelector != "" {
		req = req.Param("labelSelector", opts.LabelSelector)
	}
	if opts.Continue != "" {
		req = req.Param("continue", opts.Continue)
	}
	return req
}

// errTooManyPages stops a LIST from an API server that never ends it.
var errTooManyPages = fmt.Errorf("more than %d pages; the API server keeps returning continue tokens", maxPages)

// listAll reads a LIST of the objects that selector picks with client-go's
// pager, each page bounded and retried by withRetries. fetch asks for one
// page and gives it with its items. A list is given whole or not at all: an
// error on any page fails it, and an expired continue token starts it over,
// since pages of two snapshots cannot be mixed. It never returns a nil slice
// without an error.
//
// The items of each page are moved into one slice as the page arrives, and
// the page goes on to the pager without them: the pager's own list of
// pointers into every page would keep each page's array of whole objects
// (a Pod's struct is large even with every field empty; bench/README.md,
// "2026-12-02, commit ed929e8") until the end of the list, and the slice
// made from it would be one more copy.
func listAll[T any](ctx context.Context, c *Client, selector string,
	fetch func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, []T, error),
) ([]T, string, error) {
	var items []T // of the pages so far
	rv, err := listPages(ctx, c, selector, fetch, func(got []T, page runtime.Object, first bool) {
		if first {
			items = nil // the list starts (over)
		}
		items = appendPage(items, got, page)
	})
	if err != nil {
		return nil, "", err
	}
	if items == nil {
		items = []T{}
	}
	return items, rv, nil
}

// listPages is listAll giving each page's items to each as the page comes,
// first set on the first page of the list and of each start over (whatever
// each kept of the pages before is then of another snapshot); it gives the
// list's resourceVersion. The page is not kept.
func listPages[T any](ctx context.Context, c *Client, selector string,
	fetch func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, []T, error),
	each func(items []T, page runtime.Object, first bool),
) (string, error) {
	var (
		pages     int
		continued bool // whether the last page asked for was a continued one
	)
	lister := &pager.ListPager{
		PageSize: c.opts.PageSize,
		// On an expired token the pager would fall back to one LIST without
		// a limit, the unbounded answer that paging is there to avoid: the
		// list starts over page by page instead (below), maxRelists times.
		FullListIfExpired: false,
		PageFn: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if pages == maxPages {
				return nil, errTooManyPages
			}
			pages++
			continued = opts.Continue != ""
			var (
				page runtime.Object
				got  []T
			)
			err := c.withRetries(ctx, func(ctx context.Context) error {
				var err error
				page, got, err = fetch(ctx, opts)
				return err
			})
			if err != nil {
				return page, err
			}
			each(got, page, !continued)
			return page, meta.SetList(page, nil)
		},
	}
	for relists := 0; ; relists++ {
		got, _, err := lister.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if continued && apierrors.IsResourceExpired(err) && relists < maxRelists {
			continue
		}
		if err != nil {
			return "", err
		}
		list, err := meta.ListAccessor(got)
		if err != nil {
			return "", err
		}
		return list.GetResourceVersion(), nil
	}
}

// appendPage adds a page's items to those of the pages before it. A first
// page that does not end the list is copied into a slice sized for the
// whole list when the API server says how many items remain.
func appendPage[T any](items, got []T, page runtime.Object) []T {
	if items != nil {
		return append(items, got...)
	}
	if list, err := meta.ListAccessor(page); err == nil && list.GetContinue() != "" {
		if remaining := list.GetRemainingItemCount(); remaining != nil && *remaining > 0 && *remaining < maxPresized {
			return append(make([]T, 0, len(got)+int(*remaining)), got...)
		}
	}
	return got
}

// maxPresized bounds the slice made from the count of items that an API
// server says remain.
const maxPresized = 1 << 20

// TimeoutError is a request attempt that got no answer within its bound.
type TimeoutError struct {
	After time.Duration
	Err   error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("the API server did not answer within %s: %v", e.After, e.Err)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// withRetries runs one request, each attempt bounded by RequestTimeout,
// retrying what may pass (429, 5xx, a dropped or refused connection, a
// timeout) up to Attempts times in all. The waits are a wait.Backoff from
// Backoff, doubling, except after a 429 or 5xx that says how long to wait
// (Retry-After, capped by MaxRetryAfter). retry.OnError is not used: its
// wait ignores the context and knows no Retry-After.
func (c *Client) withRetries(ctx context.Context, do func(context.Context) error) error {
	first := retrier{client: c, do: do, backoff: wait.Backoff{Duration: c.opts.Backoff, Factor: 2, Steps: c.opts.Attempts}}
	// The first attempt runs outside wait's loop, whose timer and closures
	// a request answered at once never needs.
	if done, err := first.try(ctx); done || err != nil {
		return err
	}
	r := first
	err := wait.DelayFunc(r.delay).Until(ctx, false, true, r.try)
	if err != nil && r.lastErr != nil {
		// The context ended while waiting to retry: the request's own error
		// says more than the context's alone.
		return fmt.Errorf("%w (while waiting to retry: %w)", r.lastErr, err)
	}
	return err
}

// retrier is the state of one request's attempts.
type retrier struct {
	client     *Client
	do         func(context.Context) error
	backoff    wait.Backoff
	attempts   int
	retryAfter time.Duration // asked for by the last answer, 0 if none
	lastErr    error         // the error of the attempt being waited on, nil while one runs
}

// try is one attempt, as a wait condition: done, or the error that ends the
// request, or neither, to try again.
func (r *retrier) try(ctx context.Context) (bool, error) {
	r.attempts, r.lastErr, r.retryAfter = r.attempts+1, nil, 0
	err := r.client.attempt(ctx, r.do)
	switch {
	case err == nil:
		return true, nil
	case !isStall(err) && !isTransient(err):
		return false, err
	case r.attempts >= r.client.opts.Attempts:
		return false, fmt.Errorf("gave up after %d attempts: %w", r.attempts, err)
	}
	if seconds, ok := apierrors.SuggestsClientDelay(err); ok && seconds > 0 {
		r.retryAfter = min(time.Duration(seconds)*time.Second, r.client.opts.MaxRetryAfter)
	}
	r.lastErr = err
	return false, nil
}

// delay is the wait before the next attempt. The backoff steps on even when
// Retry-After decides the wait, so that the waits after it still double.
func (r *retrier) delay() time.Duration {
	d := r.backoff.Step()
	if r.retryAfter > 0 {
		d = r.retryAfter
	}
	return d
}

// attempt runs do once within RequestTimeout; an attempt that got no answer
// in time, while the caller still waits, gives a *TimeoutError.
func (c *Client) attempt(ctx context.Context, do func(context.Context) error) error {
	attemptCtx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	err := do(attemptCtx)
	if err != nil && ctx.Err() == nil && (errors.Is(attemptCtx.Err(), context.DeadlineExceeded) || isTimeout(err)) {
		return &TimeoutError{After: c.opts.RequestTimeout, Err: err}
	}
	return err
}

// isTransient tells the errors that a retry may cure from those it cannot
// (not found, forbidden, unauthorized, a bad certificate).
func isTransient(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == 429 || code >= 500
	}
	// A body cut short arrives wrapped by client-go, which IsProbableEOF
	// does not look through.
	return utilnet.IsConnectionReset(err) || utilnet.IsConnectionRefused(err) ||
		utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// isStall tells an attempt that got no answer in time.
func isStall(err error) bool {
	var timeout *TimeoutError
	return errors.As(err, &timeout)
}

func isTimeout(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}
