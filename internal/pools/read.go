package pools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// Reader is what a pool is read from: the API server (kube.Client.Reader)
// or the sync companion's informer cache (kube.Cache). Each method reads
// one kind of object for one namespace ("" for every namespace, where a
// fleet covers them all), selected as the API selects them. Read and
// FleetRequest.Read call it in the order of a read, so that the data
// sources and the companion make a pool from the same objects the same way.
type Reader interface {
	// Service is the Service namespace/name; an error when there is none.
	Service(ctx context.Context, namespace, name string) (*corev1.Service, error)
	// EndpointSlices are the slices labelled for the Service.
	EndpointSlices(ctx context.Context, namespace, service string) (Slices, error)
	// Services are those of namespace that the label selector matches ("" for all).
	Services(ctx context.Context, namespace, selector string) ([]corev1.Service, error)
	// ServiceEndpointSlices are the slices of namespace labelled for any Service.
	ServiceEndpointSlices(ctx context.Context, namespace string) (Slices, error)
	// Nodes are those that the label selector matches ("" for all).
	Nodes(ctx context.Context, selector string) ([]corev1.Node, error)
	// Pods are those of namespace that the label selector matches ("" for all).
	Pods(ctx context.Context, namespace, selector string) ([]corev1.Pod, error)
}

// PodPager is a Reader that can give the Pods of a namespace page by page
// (the API client; a cache holds them all already). A fleet with health
// checks reads them so, holding one page at a time: each page's checks are
// taken and the page dropped. each is given each page as it comes; restart
// says that the list started over, of another snapshot, so that what each
// made of the pages before is to be dropped.
type PodPager interface {
	PodPages(ctx context.Context, namespace, selector string, each func(pods []corev1.Pod, restart bool)) error
}

// Slices are EndpointSlices as of one resourceVersion, from which a watch
// can go on ("" from a cache, which is current already).
type Slices struct {
	Items           []discoveryv1.EndpointSlice
	ResourceVersion string
}

// Object names what a failed request was reading.
type Object string

// The objects a read asks for, in its order.
const (
	ServiceObject               Object = "service"
	EndpointSlicesObject        Object = "endpointslices"
	ServicesObject              Object = "services"
	ServiceEndpointSlicesObject Object = "service endpointslices"
	NodesObject                 Object = "nodes"
	PodsObject                  Object = "pods"
)

// ReadError is a request to the cluster that failed: the Reader's error
// (which names the object), and what was being read, so that each caller
// gives its own text for it.
type ReadError struct {
	Object Object
	// Namespace is where it was read ("" for all, and for Nodes); Name is
	// the Service's name for ServiceObject and EndpointSlicesObject.
	Namespace, Name string
	Err             error
}

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// ServiceGone is the read error of err when it says that the Service read
// does not exist (NotFound); nil otherwise.
func ServiceGone(err error) *ReadError {
	var read *ReadError
	if errors.As(err, &read) && read.Object == ServiceObject && apierrors.IsNotFound(read.Err) {
		return read
	}
	return nil
}

// RuleError is a pool the objects cannot give: the rules of package
// endpoints refused them (a port that is not there, a Service without a
// nodePort).
type RuleError struct{ Err error }

func (e *RuleError) Error() string { return e.Err.Error() }
func (e *RuleError) Unwrap() error { return e.Err }

// ShortError is a pool with fewer ready endpoints than min_ready, after
// the wait if the read waited.
type ShortError struct {
	Namespace, Service string
	// Ready and Draining are the pool's counts; MinReady the guard.
	Ready, Draining, MinReady int
	Waited                    bool
	// WaitErr is what ended the wait when it was not its time running out.
	WaitErr error
}

func (e *ShortError) Error() string {
	return fmt.Sprintf("service %s/%s has %d ready endpoint(s), fewer than min_ready = %d", e.Namespace, e.Service, e.Ready, e.MinReady)
}

// FleetShortError is a fleet whose guards do not hold, after the wait if
// the read waited: fewer Services than MinServices, or pools (Short) with
// fewer ready endpoints than MinReady.
type FleetShortError struct {
	Services, MinServices int
	Short                 []endpoints.ServicePool
	MinReady              int
	Waited                bool
	WaitErr               error
}

func (e *FleetShortError) Error() string {
	return fmt.Sprintf("the selection has %d Service(s) (min_services = %d), %d short of min_ready = %d",
		e.Services, e.MinServices, len(e.Short), e.MinReady)
}

// ReadOptions are what differs between the reads of a data source and of
// the companion.
type ReadOptions struct {
	// Now is the time of the rules (expiry); time.Now when nil.
	Now func() time.Time
	// WaitForSlices, when set, is called for a pool short of MinReady: it
	// follows the slices from what was read, calling update with each new
	// state until update says the guard holds or ctx ends (the data
	// source's wait, with a WATCH). Nil: no wait.
	WaitForSlices func(ctx context.Context, from Slices, update func([]discoveryv1.EndpointSlice) bool) error
}

func (o ReadOptions) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

// Read is the pool of r from src: the Service, the refusal of a Service
// that cannot give it, its EndpointSlices, the Nodes of a node pool, the
// rules, the min_ready guard (after a wait, if o allows one), then the Pods
// for health checks, read once the guard holds so that the endpoints a wait
// brought have theirs. Its errors are a *ReadError, *RuleError or
// *ShortError; with a *ShortError the result is the pool as it stands.
func (r Request) Read(ctx context.Context, src Reader, o ReadOptions) (endpoints.Result, error) {
	svc, err := src.Service(ctx, r.Namespace, r.Service)
	if err != nil {
		return endpoints.Result{}, &ReadError{Object: ServiceObject, Namespace: r.Namespace, Name: r.Service, Err: err}
	}
	if err := r.CheckService(svc); err != nil {
		return endpoints.Result{}, &RuleError{Err: err}
	}
	list, err := src.EndpointSlices(ctx, r.Namespace, r.Service)
	if err != nil {
		return endpoints.Result{}, &ReadError{Object: EndpointSlicesObject, Namespace: r.Namespace, Name: r.Service, Err: err}
	}
	objects := Objects{Service: svc, EndpointSlices: list.Items}
	if r.Nodes.Enabled {
		if objects.Nodes, err = src.Nodes(ctx, r.Nodes.Selector); err != nil {
			return endpoints.Result{}, &ReadError{Object: NodesObject, Err: err}
		}
	}
	// The guard counts ready endpoints, which health checks do not change:
	// the rules run once, without the Pods, and the Pods' checks are given
	// to that result after the guard holds.
	plain := r
	plain.PodHealthChecks = false
	res, err := plain.Compute(objects, o.now())
	if err != nil {
		return endpoints.Result{}, &RuleError{Err: err}
	}

	var waited bool
	var waitErr error
	if r.Short(res) && o.WaitForSlices != nil {
		waited = true
		waitErr = o.WaitForSlices(ctx, list, func(items []discoveryv1.EndpointSlice) bool {
			objects.EndpointSlices = items
			if next, err := plain.Compute(objects, o.now()); err == nil {
				res = next
			}
			return !r.Short(res)
		})
	}
	if r.Short(res) {
		ready := endpoints.CountReady(res.Endpoints)
		return res, &ShortError{Namespace: r.Namespace, Service: r.Service, Ready: ready, Draining: len(res.Endpoints) - ready,
			MinReady: r.MinReady, Waited: waited, WaitErr: waitErr}
	}
	if !r.ReadsPods() {
		return res, nil
	}
	// A Service without a selector selects no Pod: its endpoints, written
	// by hand, name none the provider could trust to be its own, and no
	// Pod is read for them.
	if len(svc.Spec.Selector) > 0 {
		selector := labels.SelectorFromSet(svc.Spec.Selector).String()
		if objects.Pods, err = src.Pods(ctx, r.Namespace, selector); err != nil {
			return endpoints.Result{}, &ReadError{Object: PodsObject, Namespace: r.Namespace, Err: err}
		}
	}
	if r.Query.ReadinessGate == "" {
		return endpoints.WithPodHealthChecks(res, svc, objects.Pods), nil
	}
	// The pods waiting on the gate join the pool: the rules run again, with
	// the Pods, on the slices the guard passed.
	if res, err = r.Compute(objects, o.now()); err != nil {
		return endpoints.Result{}, &RuleError{Err: err}
	}
	return res, nil
}

// FleetSnapshot is what the read of a fleet found, by namespace in scope
// ("" when it covers all), each list as of one version.
type FleetSnapshot struct {
	// Services are the selected Services of each namespace.
	Services map[string][]corev1.Service
	Slices   map[string]Slices
	Nodes    []corev1.Node
}

// FleetGuards is how a fleet's guards stand.
type FleetGuards struct {
	Hold bool
	// TooFewServices says that min_services is not met: a wait lists the
	// Services again as slices come, since a new Service gets its slices.
	TooFewServices bool
}

// FleetReadOptions are ReadOptions for a fleet.
type FleetReadOptions struct {
	Now func() time.Time
	// WaitForGuards, when set, is called when a guard fails: it follows the
	// slices (and Services) of snapshot, changing it under its own lock,
	// calling guards after each change until they hold or ctx ends.
	WaitForGuards func(ctx context.Context, snapshot *FleetSnapshot, guards func() FleetGuards) error
}

// Objects are the snapshot as Compute takes it, namespace by namespace in
// the order of the request.
func (r FleetRequest) Objects(s *FleetSnapshot) FleetObjects {
	o := FleetObjects{Nodes: s.Nodes}
	for _, ns := range r.Namespaces {
		o.Services = append(o.Services, s.Services[ns]...)
		o.EndpointSlices = append(o.EndpointSlices, s.Slices[ns].Items...)
	}
	return o
}

// Read is the fleet of r from src: per namespace in scope its Services
// and their EndpointSlices (two requests each), the Nodes of node pools,
// the rules, the guards (after a wait, if o allows one), then the Pods for
// health checks once the guards hold. Its errors are a *ReadError,
// *RuleError or *FleetShortError; with a *FleetShortError the result is
// the fleet as it stands.
func (r FleetRequest) Read(ctx context.Context, src Reader, o FleetReadOptions) (endpoints.FleetResult, error) {
	now := ReadOptions{Now: o.Now}.now
	snapshot := &FleetSnapshot{Services: map[string][]corev1.Service{}, Slices: map[string]Slices{}}
	for _, ns := range r.Namespaces {
		services, err := src.Services(ctx, ns, r.Selector)
		if err != nil {
			return endpoints.FleetResult{}, &ReadError{Object: ServicesObject, Namespace: ns, Err: err}
		}
		snapshot.Services[ns] = r.Selected(services)
		if snapshot.Slices[ns], err = src.ServiceEndpointSlices(ctx, ns); err != nil {
			return endpoints.FleetResult{}, &ReadError{Object: ServiceEndpointSlicesObject, Namespace: ns, Err: err}
		}
	}
	if r.Nodes.Enabled {
		var err error
		if snapshot.Nodes, err = src.Nodes(ctx, r.Nodes.Selector); err != nil {
			return endpoints.FleetResult{}, &ReadError{Object: NodesObject, Err: err}
		}
	}
	// The guards count ready endpoints, which health checks do not change:
	// the rules run once, without the Pods, and the Pods' checks are given
	// to that result after the guards hold.
	plain := r
	plain.PodHealthChecks = false
	res, err := plain.Compute(r.Objects(snapshot), now())
	if err != nil {
		return endpoints.FleetResult{}, &RuleError{Err: err}
	}

	var waited bool
	var waitErr error
	if !r.GuardsHold(res) && o.WaitForGuards != nil {
		waited = true
		waitErr = o.WaitForGuards(ctx, snapshot, func() FleetGuards {
			if next, err := plain.Compute(r.Objects(snapshot), now()); err == nil {
				res = next
			}
			return FleetGuards{Hold: r.GuardsHold(res), TooFewServices: len(res.Pools) < r.MinServices}
		})
	}
	if !r.GuardsHold(res) {
		return res, &FleetShortError{Services: len(res.Pools), MinServices: r.MinServices, Short: r.ShortPools(res),
			MinReady: r.MinReady, Waited: waited, WaitErr: waitErr}
	}
	if !r.ReadsPods() {
		return res, nil
	}
	if r.Query.ReadinessGate != "" {
		if res, err = r.withGatedPods(ctx, src, snapshot, now()); err != nil {
			return endpoints.FleetResult{}, err
		}
	}
	if !r.PodHealthChecks {
		return res, nil
	}
	if pager, ok := src.(PodPager); ok {
		return r.checkPodsByPage(ctx, pager, res)
	}
	var pods []corev1.Pod
	for _, ns := range r.Namespaces {
		got, err := src.Pods(ctx, ns, "")
		if err != nil {
			return endpoints.FleetResult{}, &ReadError{Object: PodsObject, Namespace: ns, Err: err}
		}
		if pods == nil {
			// One namespace (or all at once) is not copied; clipped, so
			// that the next one's append cannot write into the reader's
			// array.
			pods = slices.Clip(got)
		} else {
			pods = append(pods, got...)
		}
	}
	return endpoints.FleetWithPodHealthChecks(res, pods), nil
}

// ReadService is the part of the fleet of r that the Service
// namespace/name gives, read as Read reads it but for that Service alone:
// the Service, whether the fleet selects it (its labels, its name), its
// EndpointSlices, the Nodes of node pools, the rules, then the Pods it
// selects. The result holds its pool, its skip, or nothing when the fleet
// does not select it. The guards are the caller's, over every Service: the
// sync companion recomputes the Service that changed, not the fleet. Its
// errors are a *ReadError (the Service's own when it is gone) or a
// *RuleError.
func (r FleetRequest) ReadService(ctx context.Context, src Reader, namespace, name string, now time.Time) (endpoints.FleetResult, error) {
	nodes := func() ([]corev1.Node, error) { return src.Nodes(ctx, r.Nodes.Selector) }
	return r.readService(ctx, src, namespace, name, nodes, now)
}

// ServiceNamer is a Reader that can name the Services of a namespace ("" for
// every one it holds) that a label selector matches without decoding them:
// the companion's cache, which keeps them encoded.
type ServiceNamer interface {
	ServiceNames(ctx context.Context, namespace, selector string) ([]types.NamespacedName, error)
}

// ReadEach is the fleet of r read Service by Service, each as ReadService
// reads it (the Nodes of node pools read once), given to each with its
// result as it comes: what a read of the fleet holds at once is one
// Service's objects, not the fleet's. The Services are those the label
// selector matches in each namespace in scope (by name, from a
// ServiceNamer; else listed); one deleted meanwhile is left out. The guards
// are the caller's. Its errors are those of ReadService, or a *ReadError of
// the Services or the Nodes.
func (r FleetRequest) ReadEach(ctx context.Context, src Reader, now time.Time, each func(service types.NamespacedName, res endpoints.FleetResult)) error {
	var names []types.NamespacedName
	for _, ns := range r.Namespaces {
		found, err := serviceNames(ctx, src, ns, r.Selector)
		if err != nil {
			return &ReadError{Object: ServicesObject, Namespace: ns, Err: err}
		}
		names = append(names, found...)
	}
	var nodes []corev1.Node
	if r.Nodes.Enabled {
		var err error
		if nodes, err = src.Nodes(ctx, r.Nodes.Selector); err != nil {
			return &ReadError{Object: NodesObject, Err: err}
		}
	}
	readNodes := func() ([]corev1.Node, error) { return nodes, nil }
	for _, n := range names {
		res, err := r.readService(ctx, src, n.Namespace, n.Name, readNodes, now)
		if ServiceGone(err) != nil {
			continue
		}
		if err != nil {
			return err
		}
		each(n, res)
	}
	return nil
}

// serviceNames are the Services of namespace that selector matches, by
// name.
func serviceNames(ctx context.Context, src Reader, namespace, selector string) ([]types.NamespacedName, error) {
	if namer, ok := src.(ServiceNamer); ok {
		return namer.ServiceNames(ctx, namespace, selector)
	}
	services, err := src.Services(ctx, namespace, selector)
	if err != nil {
		return nil, err
	}
	names := make([]types.NamespacedName, len(services))
	for i := range services {
		names[i] = types.NamespacedName{Namespace: services[i].Namespace, Name: services[i].Name}
	}
	return names, nil
}

// readService is ReadService with the Nodes read by nodes.
func (r FleetRequest) readService(ctx context.Context, src Reader, namespace, name string, nodes func() ([]corev1.Node, error), now time.Time) (endpoints.FleetResult, error) {
	none := endpoints.FleetResult{Pools: []endpoints.ServicePool{}, Skipped: []endpoints.SkippedService{}}
	svc, err := src.Service(ctx, namespace, name)
	if err != nil {
		return none, &ReadError{Object: ServiceObject, Namespace: namespace, Name: name, Err: err}
	}
	selector, err := labels.Parse(r.Selector)
	if err != nil {
		return none, &RuleError{Err: fmt.Errorf("label selector %q: %w", r.Selector, err)}
	}
	if !selector.Matches(labels.Set(svc.Labels)) || len(r.Selected([]corev1.Service{*svc})) == 0 {
		return none, nil
	}
	list, err := src.EndpointSlices(ctx, namespace, name)
	if err != nil {
		return none, &ReadError{Object: EndpointSlicesObject, Namespace: namespace, Name: name, Err: err}
	}
	objects := FleetObjects{Services: []corev1.Service{*svc}, EndpointSlices: list.Items}
	if r.Nodes.Enabled {
		if objects.Nodes, err = nodes(); err != nil {
			return none, &ReadError{Object: NodesObject, Err: err}
		}
	}
	if r.ReadsPods() && len(svc.Spec.Selector) > 0 {
		// The Pods the Service selects are those the fleet's health checks
		// would find for it among all of the namespace's.
		if objects.Pods, err = src.Pods(ctx, namespace, labels.SelectorFromSet(svc.Spec.Selector).String()); err != nil {
			return none, &ReadError{Object: PodsObject, Namespace: namespace, Err: err}
		}
	}
	res, err := r.Compute(objects, now)
	if err != nil {
		return none, &RuleError{Err: err}
	}
	return res, nil
}

// checkPodsByPage is the end of Read for a PodPager: res, the fleet
// without health checks, its endpoints given the health checks of their
// pods page by page (endpoints.FleetPodChecks), which is what Compute
// gives with every Pod of the request's namespaces, without holding them
// all.
func (r FleetRequest) checkPodsByPage(ctx context.Context, src PodPager, res endpoints.FleetResult) (endpoints.FleetResult, error) {
	checks := endpoints.NewFleetPodChecks(res)
	for _, ns := range r.Namespaces {
		err := src.PodPages(ctx, ns, "", func(pods []corev1.Pod, restart bool) {
			if restart {
				checks.Forget(ns)
			}
			checks.Add(pods)
		})
		if err != nil {
			return endpoints.FleetResult{}, &ReadError{Object: PodsObject, Namespace: ns, Err: err}
		}
	}
	return checks.Result(), nil
}
