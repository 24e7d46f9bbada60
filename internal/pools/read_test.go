package pools

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// reader is a Reader over fixed objects that records what it was asked,
// and fails the reads named in fail.
type reader struct {
	services []corev1.Service
	slices   []discoveryv1.EndpointSlice
	nodes    []corev1.Node
	pods     []corev1.Pod
	fail     map[Object]error
	asked    []string
}

func (r *reader) ask(o Object, args ...string) error {
	r.asked = append(r.asked, fmt.Sprint(append([]string{string(o)}, args...)))
	return r.fail[o]
}

func (r *reader) Service(_ context.Context, namespace, name string) (*corev1.Service, error) {
	if err := r.ask(ServiceObject, namespace, name); err != nil {
		return nil, err
	}
	for _, s := range r.services {
		if s.Namespace == namespace && s.Name == name {
			return &s, nil
		}
	}
	return nil, errors.New("not found")
}

func (r *reader) EndpointSlices(_ context.Context, namespace, service string) (Slices, error) {
	if err := r.ask(EndpointSlicesObject, namespace, service); err != nil {
		return Slices{}, err
	}
	var out []discoveryv1.EndpointSlice
	for _, s := range r.slices {
		if s.Namespace == namespace && s.Labels[discoveryv1.LabelServiceName] == service {
			out = append(out, s)
		}
	}
	return Slices{Items: out, ResourceVersion: "7"}, nil
}

func (r *reader) Services(_ context.Context, namespace, selector string) ([]corev1.Service, error) {
	return r.services, r.ask(ServicesObject, namespace, selector)
}

func (r *reader) ServiceEndpointSlices(_ context.Context, namespace string) (Slices, error) {
	return Slices{Items: r.slices}, r.ask(ServiceEndpointSlicesObject, namespace)
}

func (r *reader) Nodes(_ context.Context, selector string) ([]corev1.Node, error) {
	return r.nodes, r.ask(NodesObject, selector)
}

func (r *reader) Pods(_ context.Context, namespace, selector string) ([]corev1.Pod, error) {
	return r.pods, r.ask(PodsObject, namespace, selector)
}

func selecting(s corev1.Service) corev1.Service {
	s.Spec.Selector = map[string]string{"app": s.Name}
	return s
}

var errRefused = errors.New("the API server said no")

func TestARead(t *testing.T) {
	web := selecting(service("web", corev1.ServiceTypeClusterIP, 0))
	pods := Request{Namespace: "shop", Service: "web", Query: endpoints.Query{PortName: "http"}}
	withChecks := pods
	withChecks.PodHealthChecks = true
	guarded := pods
	guarded.MinReady = 2
	for _, tc := range []struct {
		name    string
		request Request
		reader  reader
		asked   []string
		want    []string
		err     any
		object  Object
	}{
		{name: "reads the Service, then its slices", request: pods,
			reader: reader{services: []corev1.Service{web}, slices: []discoveryv1.EndpointSlice{slice("web", "10.0.0.1")}},
			asked:  []string{"[service shop web]", "[endpointslices shop web]"}, want: []string{"10.0.0.1"}},
		{name: "reads the Pods the Service selects, last, for health checks", request: withChecks,
			reader: reader{services: []corev1.Service{web}, slices: []discoveryv1.EndpointSlice{slice("web", "10.0.0.1")}},
			asked:  []string{"[service shop web]", "[endpointslices shop web]", "[pods shop app=web]"}, want: []string{"10.0.0.1"}},
		{name: "reads no Pods for a Service without a selector", request: withChecks,
			reader: reader{services: []corev1.Service{service("web", corev1.ServiceTypeClusterIP, 0)},
				slices: []discoveryv1.EndpointSlice{slice("web", "10.0.0.1")}},
			asked: []string{"[service shop web]", "[endpointslices shop web]"}, want: []string{"10.0.0.1"}},
		{name: "a Service that cannot be read is a read error of the Service", request: pods,
			reader: reader{fail: map[Object]error{ServiceObject: errRefused}},
			asked:  []string{"[service shop web]"}, err: &ReadError{}, object: ServiceObject},
		{name: "slices that cannot be listed are a read error of the slices", request: pods,
			reader: reader{services: []corev1.Service{web}, fail: map[Object]error{EndpointSlicesObject: errRefused}},
			asked:  []string{"[service shop web]", "[endpointslices shop web]"}, err: &ReadError{}, object: EndpointSlicesObject},
		{name: "a port the Service lacks is a rule error", request: Request{Namespace: "shop", Service: "web", Query: endpoints.Query{PortName: "grpc"}},
			reader: reader{services: []corev1.Service{web}},
			asked:  []string{"[service shop web]", "[endpointslices shop web]"}, err: &RuleError{}},
		{name: "a node pool of a Service without a nodePort is refused before its slices are read",
			request: Request{Namespace: "shop", Service: "web", Query: endpoints.Query{PortName: "http"}, Nodes: NodeTarget{Enabled: true}},
			reader:  reader{services: []corev1.Service{web}},
			asked:   []string{"[service shop web]"}, err: &RuleError{}},
		{name: "a pool short of min_ready is a short error, and no Pods are read", request: func() Request {
			r := guarded
			r.PodHealthChecks = true
			return r
		}(),
			reader: reader{services: []corev1.Service{web}, slices: []discoveryv1.EndpointSlice{slice("web", "10.0.0.1")}},
			asked:  []string{"[service shop web]", "[endpointslices shop web]"}, want: []string{"10.0.0.1"}, err: &ShortError{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.reader
			res, err := tc.request.Read(context.Background(), &src, ReadOptions{})
			if !reflect.DeepEqual(src.asked, tc.asked) {
				t.Errorf("asked %v, want %v", src.asked, tc.asked)
			}
			if tc.err == nil && err != nil {
				t.Fatalf("error %v", err)
			}
			if tc.err != nil && reflect.TypeOf(err) != reflect.TypeOf(tc.err) {
				t.Fatalf("error %T (%v), want %T", err, err, tc.err)
			}
			var read *ReadError
			if errors.As(err, &read) && read.Object != tc.object {
				t.Errorf("read error of %s, want %s", read.Object, tc.object)
			}
			if tc.want != nil && !reflect.DeepEqual(addresses(res.Endpoints), tc.want) {
				t.Errorf("endpoints %v, want %v", addresses(res.Endpoints), tc.want)
			}
		})
	}
}

func TestAReadShortOfMinReadyWaitsForTheSlicesAndReadsFromWhatTheyBecome(t *testing.T) {
	web := selecting(service("web", corev1.ServiceTypeClusterIP, 0))
	r := Request{Namespace: "shop", Service: "web", Query: endpoints.Query{PortName: "http"}, MinReady: 2, PodHealthChecks: true}
	src := &reader{services: []corev1.Service{web}, slices: []discoveryv1.EndpointSlice{slice("web", "10.0.0.1")}}
	var from string
	res, err := r.Read(context.Background(), src, ReadOptions{WaitForSlices: func(_ context.Context, list Slices, update func([]discoveryv1.EndpointSlice) bool) error {
		from = list.ResourceVersion
		if update([]discoveryv1.EndpointSlice{slice("web", "10.0.0.1")}) {
			t.Error("the guard holds with one endpoint")
		}
		if !update([]discoveryv1.EndpointSlice{slice("web", "10.0.0.1", "10.0.0.2")}) {
			t.Error("the guard does not hold with two endpoints")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if from != "7" {
		t.Errorf("the wait went on from version %q, want the list's, 7", from)
	}
	if got := addresses(res.Endpoints); !reflect.DeepEqual(got, []string{"10.0.0.1", "10.0.0.2"}) {
		t.Errorf("endpoints %v, want both", got)
	}
	if last := src.asked[len(src.asked)-1]; last != "[pods shop app=web]" {
		t.Errorf("last asked %s, want the Pods once the guard held", last)
	}
}

func TestAFleetReadsEachNamespaceThenThePods(t *testing.T) {
	web, api := service("web", corev1.ServiceTypeClusterIP, 0), service("api", corev1.ServiceTypeClusterIP, 0)
	src := &reader{services: []corev1.Service{web, api}, slices: []discoveryv1.EndpointSlice{slice("web", "10.0.0.1"), slice("api", "10.0.1.1")}}
	r := FleetRequest{Namespaces: []string{"shop"}, Selector: "lb=x", Names: []string{"web"}, Query: endpoints.Query{PortName: "http"}, PodHealthChecks: true}
	res, err := r.Read(context.Background(), src, FleetReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[services shop lb=x]", "[service endpointslices shop]", "[pods shop ]"}
	if !reflect.DeepEqual(src.asked, want) {
		t.Errorf("asked %v, want %v", src.asked, want)
	}
	if len(res.Pools) != 1 || res.Pools[0].Service.Name != "web" {
		t.Errorf("pools %+v, want web alone (names)", res.Pools)
	}
	src = &reader{fail: map[Object]error{ServiceEndpointSlicesObject: errRefused}}
	_, err = r.Read(context.Background(), src, FleetReadOptions{})
	var read *ReadError
	if !errors.As(err, &read) || read.Object != ServiceEndpointSlicesObject || read.Namespace != "shop" || !errors.Is(err, errRefused) {
		t.Errorf("error %v, want a read error of the slices of shop wrapping the API's", err)
	}
	r.MinServices = 2
	src = &reader{services: []corev1.Service{web}, slices: []discoveryv1.EndpointSlice{slice("web", "10.0.0.1")}}
	_, err = r.Read(context.Background(), src, FleetReadOptions{})
	var short *FleetShortError
	if !errors.As(err, &short) || short.Services != 1 || short.MinServices != 2 {
		t.Errorf("error %v, want a fleet short of min_services", err)
	}
}

// aFleetOfFive is a reader of five Services, web and api selected, batch
// selected but skipped (no port named http), other not labelled for the
// fleet, admin not among its names; and the whole fleet's read of them.
func aFleetOfFive(t *testing.T, now time.Time) (*reader, FleetRequest, endpoints.FleetResult) {
	t.Helper()
	labelled := func(s corev1.Service, lb string) corev1.Service {
		s.Labels = map[string]string{"lb": lb}
		return s
	}
	web := labelled(selecting(service("web", corev1.ServiceTypeClusterIP, 0)), "x")
	api := labelled(service("api", corev1.ServiceTypeClusterIP, 0), "x")
	noPort := labelled(service("batch", corev1.ServiceTypeClusterIP, 0), "x")
	noPort.Spec.Ports[0].Name = "grpc"
	other := labelled(service("other", corev1.ServiceTypeClusterIP, 0), "y")
	unnamed := labelled(service("admin", corev1.ServiceTypeClusterIP, 0), "x")
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0", Labels: map[string]string{"app": "web"}}}
	src := &reader{services: []corev1.Service{web, api, noPort, other, unnamed},
		slices: []discoveryv1.EndpointSlice{slice("web", "10.0.0.1"), slice("api", "10.0.1.1"), slice("batch", "10.0.2.1"),
			slice("other", "10.0.3.1"), slice("admin", "10.0.4.1")},
		pods: []corev1.Pod{pod}}
	r := FleetRequest{Namespaces: []string{"shop"}, Selector: "lb=x", Names: []string{"web", "api", "batch", "other"},
		Query: endpoints.Query{PortName: "http"}, PodHealthChecks: true}
	whole, err := r.Read(context.Background(), &reader{services: []corev1.Service{web, api, noPort}, slices: src.slices, pods: src.pods},
		FleetReadOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Pools) != 2 || len(whole.Skipped) != 1 {
		t.Fatalf("the fleet %+v is not web and api with batch skipped: the test proves nothing", whole)
	}
	return src, r, whole
}

// Each Service of a fleet read alone gives what the read of the whole
// fleet gives for it: its pool, its skip, or nothing when the fleet does
// not select it (by label or by name) or when it is gone.
func TestAServiceOfAFleetReadAloneIsWhatTheFleetGivesForIt(t *testing.T) {
	now := time.Unix(2e9, 0)
	src, r, whole := aFleetOfFive(t, now)
	alone := endpoints.FleetResult{Pools: []endpoints.ServicePool{}, Skipped: []endpoints.SkippedService{}}
	for _, name := range []string{"admin", "api", "batch", "other", "web"} {
		one, err := r.ReadService(context.Background(), src, "shop", name, now)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		alone.Pools = append(alone.Pools, one.Pools...)
		alone.Skipped = append(alone.Skipped, one.Skipped...)
	}
	if !reflect.DeepEqual(alone, whole) {
		t.Errorf("read one by one:\n%+v\nthe fleet read:\n%+v", alone, whole)
	}
	_, err := r.ReadService(context.Background(), &reader{}, "shop", "gone", now)
	var read *ReadError
	if !errors.As(err, &read) || read.Object != ServiceObject || read.Name != "gone" {
		t.Errorf("a Service gone: %v, want a read error of that Service", err)
	}
}

// namingReader is a reader that names its Services (a ServiceNamer), one
// of them gone when read.
type namingReader struct {
	*reader
	names []types.NamespacedName
}

func (r *namingReader) ServiceNames(_ context.Context, namespace, selector string) ([]types.NamespacedName, error) {
	return r.names, r.ask("names", namespace, selector)
}

func (r *namingReader) Service(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	if name == "gone" {
		return nil, apierrors.NewNotFound(corev1.Resource("services"), name)
	}
	return r.reader.Service(ctx, namespace, name)
}

// A fleet read Service by Service gives each Service what the whole read
// gives it, from the Services listed or named (a cache names them without
// decoding them), with the Nodes of node pools read once, a Service gone
// since it was named left out, and a failed read of the slices an error.
func TestAFleetReadServiceByServiceGivesWhatTheWholeReadGives(t *testing.T) {
	now := time.Unix(2e9, 0)
	src, r, whole := aFleetOfFive(t, now)
	var names []types.NamespacedName
	for _, s := range src.services {
		names = append(names, types.NamespacedName{Namespace: "shop", Name: s.Name})
	}
	named := &namingReader{reader: &reader{services: src.services, slices: src.slices, pods: src.pods},
		names: append(names, types.NamespacedName{Namespace: "shop", Name: "gone"})}
	for _, tc := range []struct {
		name   string
		src    Reader
		reader *reader
		first  string
	}{
		{"listed", src, src, "[services shop lb=x]"},
		{"named", named, named.reader, "[names shop lb=x]"},
	} {
		tc.reader.asked = nil
		each := endpoints.FleetResult{Pools: []endpoints.ServicePool{}, Skipped: []endpoints.SkippedService{}}
		err := r.ReadEach(context.Background(), tc.src, now, func(svc types.NamespacedName, res endpoints.FleetResult) {
			for _, p := range res.Pools {
				if p.Service.Name != svc.Name {
					t.Errorf("%s: %s gave the pool of %s", tc.name, svc, p.Service.Name)
				}
			}
			for _, s := range res.Skipped {
				if s.Name != svc.Name {
					t.Errorf("%s: %s gave the skip of %s", tc.name, svc, s.Name)
				}
			}
			each.Pools = append(each.Pools, res.Pools...)
			each.Skipped = append(each.Skipped, res.Skipped...)
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		slices.SortFunc(each.Pools, func(a, b endpoints.ServicePool) int { return strings.Compare(a.Service.Name, b.Service.Name) })
		if !reflect.DeepEqual(each, whole) {
			t.Errorf("%s, read Service by Service:\n%+v\nthe fleet read:\n%+v", tc.name, each, whole)
		}
		if len(tc.reader.asked) == 0 || tc.reader.asked[0] != tc.first || slices.Contains(tc.reader.asked[1:], tc.first) {
			t.Errorf("%s: asked %v, want %s once, first", tc.name, tc.reader.asked, tc.first)
		}
	}

	nodes := r
	nodes.Nodes.Enabled, nodes.PodHealthChecks = true, false
	src.asked = nil
	if err := nodes.ReadEach(context.Background(), src, now, func(types.NamespacedName, endpoints.FleetResult) {}); err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(src.asked, "[nodes"); n != 1 {
		t.Errorf("node pools of %d Services asked for the Nodes %d times, want once: %v", len(src.services), n, src.asked)
	}

	src.fail = map[Object]error{EndpointSlicesObject: errRefused}
	err := r.ReadEach(context.Background(), src, now, func(types.NamespacedName, endpoints.FleetResult) {})
	var read *ReadError
	if !errors.As(err, &read) || read.Object != EndpointSlicesObject || !errors.Is(err, errRefused) {
		t.Errorf("error %v, want a read error of a Service's slices wrapping the API's", err)
	}
}

func countPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// pagingReader is a reader that gives the Pods page by page (a PodPager),
// one Pod a page, starting the list over once after restartAfter pages
// when it is set.
type pagingReader struct {
	*reader
	restartAfter int
	pages        int
}

func (r *pagingReader) PodPages(_ context.Context, namespace, selector string, each func([]corev1.Pod, bool)) error {
	if err := r.ask(PodsObject, namespace, selector); err != nil {
		return err
	}
	if r.restartAfter > 0 {
		for i := range min(r.restartAfter, len(r.pods)) {
			r.pages++
			each(r.pods[i:i+1], false)
		}
	}
	for i := range r.pods {
		r.pages++
		each(r.pods[i:i+1], r.restartAfter > 0 && i == 0)
	}
	return nil
}

func TestAFleetReadPageByPageGivesWhatTheWholeListGives(t *testing.T) {
	var services []corev1.Service
	var slices []discoveryv1.EndpointSlice
	var pods []corev1.Pod
	for _, name := range []string{"web", "api"} {
		services = append(services, selecting(service(name, corev1.ServiceTypeClusterIP, 0)))
		s := slice(name, "10.0.0.1", "10.0.0.2")
		for i := range s.Endpoints {
			pod := fmt.Sprintf("%s-%d", name, i)
			s.Endpoints[i].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: pod}
			probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080 + int32(i))}}}
			pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: pod, Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", ReadinessProbe: probe, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}})
		}
		slices = append(slices, s)
	}
	r := FleetRequest{Namespaces: []string{"shop"}, Query: endpoints.Query{PortName: "http"}, PodHealthChecks: true}
	now := func() time.Time { return time.Unix(1700000000, 0) }
	whole, err := r.Read(context.Background(), &reader{services: services, slices: slices, pods: pods}, FleetReadOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range whole.Pools {
		for _, e := range p.Endpoints {
			if e.HealthCheck != nil {
				checked++
			}
		}
	}
	if checked != 4 {
		t.Fatalf("%d endpoints with a check from the whole list, want 4", checked)
	}
	for _, restartAfter := range []int{0, 3} {
		t.Run(fmt.Sprintf("started over after %d pages", restartAfter), func(t *testing.T) {
			src := &pagingReader{reader: &reader{services: services, slices: slices, pods: pods}, restartAfter: restartAfter}
			got, err := r.Read(context.Background(), src, FleetReadOptions{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, whole) {
				t.Errorf("page by page:\n%+v\nwhole list:\n%+v", got, whole)
			}
			if want := len(pods) + restartAfter; src.pages != want {
				t.Errorf("%d pages given, want %d", src.pages, want)
			}
		})
	}
	src := &pagingReader{reader: &reader{services: services, slices: slices, fail: map[Object]error{PodsObject: errRefused}}}
	_, err = r.Read(context.Background(), src, FleetReadOptions{Now: now})
	var read *ReadError
	if !errors.As(err, &read) || read.Object != PodsObject || read.Namespace != "shop" || !errors.Is(err, errRefused) {
		t.Errorf("error %v, want a read error of the pods of shop wrapping the API's", err)
	}
}
