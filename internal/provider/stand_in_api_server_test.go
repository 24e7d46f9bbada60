package provider

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// standInAPIServer answers the requests a read makes, from objects held in
// memory, over real HTTP. It lets the framework tests exercise the whole read
// path; the acceptance tests do the same against a real kube-apiserver.
type standInAPIServer struct {
	*httptest.Server

	mu       sync.Mutex
	services map[string]corev1.Service // by "namespace/name"
	slices   []discoveryv1.EndpointSlice
	nodes    []corev1.Node
	pods     []corev1.Pod
	// forbidden makes requests for this resource ("services",
	// "endpointslices" or "nodes") fail as RBAC would.
	forbidden string
	// seen counts requests; authorization is the last Authorization header.
	seen          int
	authorization string
}

func (s *standInAPIServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

func (s *standInAPIServer) lastAuthorization() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authorization
}

func newStandInAPIServer(t testing.TB) *standInAPIServer {
	s := &standInAPIServer{services: map[string]corev1.Service{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// config is a provider block of the cluster this server stands in for (the
// context stand-in), then the data sources given.
func (s *standInAPIServer) config(t *testing.T, dataSources string) string {
	t.Helper()
	return clusterConfig(t, map[string]string{"stand-in": s.URL}) + dataSources
}

func (s *standInAPIServer) addService(svc corev1.Service) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.services[svc.Namespace+"/"+svc.Name] = svc
}

func (s *standInAPIServer) addSlices(slices ...discoveryv1.EndpointSlice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slices = append(s.slices, slices...)
}

func (s *standInAPIServer) addPods(pods ...corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods = append(s.pods, pods...)
}

func (s *standInAPIServer) addNodes(nodes ...corev1.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes = append(s.nodes, nodes...)
}

func (s *standInAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query().Get("watch"); q == "true" || q == "1" {
		s.watchNothing(w, r)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen++
	s.authorization = r.Header.Get("Authorization")
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	selector, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	ns := namespaceOf(parts)
	switch {
	// /api/v1/namespaces/NS/services/NAME
	case len(parts) == 6 && parts[0] == "api" && parts[4] == "services":
		gr := schema.GroupResource{Resource: "services"}
		if s.refused(w, gr, parts[5]) {
			return
		}
		svc, ok := s.services[ns+"/"+parts[5]]
		if !ok {
			writeStatus(w, apierrors.NewNotFound(gr, parts[5]))
			return
		}
		svc.APIVersion, svc.Kind = "v1", "Service"
		writeJSON(w, svc)
	// /api/v1/namespaces/NS/services or /api/v1/services
	case parts[0] == "api" && (len(parts) == 5 && parts[4] == "services" || len(parts) == 3 && parts[2] == "services"):
		if s.refused(w, schema.GroupResource{Resource: "services"}, "") {
			return
		}
		list := corev1.ServiceList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceList"}}
		for _, key := range slices.Sorted(maps.Keys(s.services)) {
			svc := s.services[key]
			if (ns == "" || svc.Namespace == ns) && selector.Matches(labels.Set(svc.Labels)) {
				list.Items = append(list.Items, svc)
			}
		}
		writeJSON(w, list)
	// /apis/discovery.k8s.io/v1/namespaces/NS/endpointslices or /apis/discovery.k8s.io/v1/endpointslices
	case parts[0] == "apis" && parts[1] == "discovery.k8s.io" && (len(parts) == 6 && parts[5] == "endpointslices" || len(parts) == 4 && parts[3] == "endpointslices"):
		if !s.refused(w, schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "") {
			writeJSON(w, discoveryv1.EndpointSliceList{
				TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSliceList"},
				Items:    selected(s.slices, ns, selector, func(sl discoveryv1.EndpointSlice) metav1.ObjectMeta { return sl.ObjectMeta }),
			})
		}
	// /api/v1/namespaces/NS/pods or /api/v1/pods
	case parts[0] == "api" && (len(parts) == 5 && parts[4] == "pods" || len(parts) == 3 && parts[2] == "pods"):
		if !s.refused(w, schema.GroupResource{Resource: "pods"}, "") {
			writeJSON(w, corev1.PodList{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
				Items:    selected(s.pods, ns, selector, func(p corev1.Pod) metav1.ObjectMeta { return p.ObjectMeta }),
			})
		}
	// /api/v1/nodes
	case len(parts) == 3 && parts[0] == "api" && parts[2] == "nodes":
		if s.refused(w, schema.GroupResource{Resource: "nodes"}, "") {
			return
		}
		list := corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}}
		for _, n := range s.nodes {
			if selector.Matches(labels.Set(n.Labels)) {
				list.Items = append(list.Items, n)
			}
		}
		writeJSON(w, list)
	default:
		http.NotFound(w, r)
	}
}

// namespaceOf is the namespace a path names (.../namespaces/NS/...), ""
// for the whole cluster.
func namespaceOf(parts []string) string {
	if i := slices.Index(parts, "namespaces"); i >= 0 && i+1 < len(parts) {
		return parts[i+1]
	}
	return ""
}

// refused answers as the API server does when the tester may not touch gr
// (forbidden), and says whether it did.
func (s *standInAPIServer) refused(w http.ResponseWriter, gr schema.GroupResource, name string) bool {
	if s.forbidden != gr.Resource {
		return false
	}
	writeStatus(w, apierrors.NewForbidden(gr, name, errTesterMayNot))
	return true
}

// watchNothing answers a WATCH as an API server does while nothing changes:
// the stream opens and stays open, without an event, until the client goes
// away (a read waiting for min_ready ends at its timeout).
func (s *standInAPIServer) watchNothing(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.seen++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	<-r.Context().Done()
}

var errTesterMayNot = forbiddenReason("User \"tester\" cannot do this")

type forbiddenReason string

func (f forbiddenReason) Error() string { return string(f) }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.APIVersion, st.Kind = "v1", "Status"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

// selected are the items in namespace ns ("" for all) whose labels
// selector matches, in their order.
func selected[T any](items []T, ns string, selector labels.Selector, meta func(T) metav1.ObjectMeta) []T {
	var out []T
	for _, item := range items {
		if m := meta(item); (ns == "" || m.Namespace == ns) && selector.Matches(labels.Set(m.Labels)) {
			out = append(out, item)
		}
	}
	return out
}
