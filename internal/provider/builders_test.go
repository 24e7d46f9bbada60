package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// The builders of the tests: objects of the cluster, fixtures of the stand-in
// API server, configuration values and the values expected in state, in one
// place for every test of the package.

// Objects of the cluster.

func webService(namespace string, ports ...corev1.ServicePort) corev1.Service {
	return corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: ports},
	}
}

// webSlice is an IPv4 slice of Service default/web whose port http is 8080,
// as the EndpointSlice controller writes it.
func webSlice(name string, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: endpoints.EndpointSliceController}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints:   eps,
	}
}

func readyPod(addr, pod, node, zone string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{addr},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: pod},
		NodeName:   ptr.To(node),
		Zone:       ptr.To(zone),
	}
}

var httpPort = corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}

// standInNode is a Ready node in zone with an InternalIP and, when given, an
// ExternalIP.
func standInNode(name, zone, internalIP, externalIP string, lbls map[string]string) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: internalIP}},
		},
	}
	if externalIP != "" {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: externalIP})
	}
	for k, v := range lbls {
		n.Labels[k] = v
	}
	return n
}

// nodePortWeb is Service default/web of type NodePort, port http 80 to 8080
// on node port 30080, with the given policy.
func nodePortWeb(policy corev1.ServiceExternalTrafficPolicy) corev1.Service {
	svc := webService("default", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080})
	svc.Spec.Type, svc.Spec.ExternalTrafficPolicy = corev1.ServiceTypeNodePort, policy
	return svc
}

// manyEndpoints is a Service of namespace default with one port, http, and n
// endpoints in slices of 100 that use every case the rules know: IPv4 and
// IPv6 slices; missing, true and false conditions, draining and gone
// endpoints; missing pod, node, zone and hostname; an endpoint repeated in the
// next slice with fewer facts; slices without a port number; several
// addresses; a trigger time. Everything derives from the index, so the
// fixture is the same on every run and every Go version.
func manyEndpoints(service string, n int) (corev1.Service, []discoveryv1.EndpointSlice) {
	svc := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: service},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("web")}}},
	}
	const perSlice = 100
	var out []discoveryv1.EndpointSlice
	for s := 0; s*perSlice < n; s++ {
		family := discoveryv1.AddressTypeIPv4
		if s%4 == 3 {
			family = discoveryv1.AddressTypeIPv6
		}
		slice := discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "default",
				Name:      fmt.Sprintf("%s-%03d", service, s),
				Labels:    map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: endpoints.EndpointSliceController},
			},
			AddressType: family,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8000 + s%3))}},
		}
		switch s % 5 {
		case 2:
			slice.Ports[0].Port = nil // the endpoints get default_port
		case 4:
			slice.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": fmt.Sprintf("2026-11-%02dT10:%02d:00Z", 1+s%28, s%60)}
		}
		for i := s * perSlice; i < (s+1)*perSlice && i < n; i++ {
			slice.Endpoints = append(slice.Endpoints, manyEndpoint(family, i))
		}
		// The first ten endpoints of the previous slice of the same family,
		// as the controller leaves them while it moves endpoints: one copy
		// with fewer facts.
		if prev := previousOfFamily(s); prev >= 0 {
			for i := prev * perSlice; i < prev*perSlice+10 && i < n; i++ {
				ep := manyEndpoint(family, i)
				ep.Hostname, ep.Zone = nil, nil
				slice.Endpoints = append(slice.Endpoints, ep)
			}
		}
		out = append(out, slice)
	}
	return svc, out
}

// previousOfFamily is the slice before s of the same address family (every
// fourth slice is IPv6), or -1.
func previousOfFamily(s int) int {
	switch s % 4 {
	case 3:
		return s - 4
	case 0:
		return s - 2
	default:
		return s - 1
	}
}

func manyEndpoint(family discoveryv1.AddressType, i int) discoveryv1.Endpoint {
	addr := fmt.Sprintf("10.%d.%d.%d", (i*7)%250, (i*13)%256, i%256)
	if family == discoveryv1.AddressTypeIPv6 {
		addr = fmt.Sprintf("fd00:%x::%x", (i*7)%4096, i)
	}
	ep := discoveryv1.Endpoint{Addresses: []string{addr}}
	if i%11 == 0 {
		ep.Addresses = append(ep.Addresses, "192.0.2.1")
	}
	switch i % 6 {
	case 0: // no conditions at all: ready
	case 1, 2:
		ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
	case 3: // draining
		ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	case 4: // gone
		ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)}
	case 5: // starting
		ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false)}
	}
	if i%7 != 0 {
		ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("pod-%d", i)}
	}
	if i%5 != 0 {
		ep.NodeName = ptr.To(fmt.Sprintf("node-%d", i%17))
	}
	if i%9 != 0 {
		ep.Zone = ptr.To("zone-" + string(rune('a'+i%3)))
	}
	if i%4 == 0 {
		ep.Hostname = ptr.To(fmt.Sprintf("host-%d", i))
	}
	return ep
}

// The stand-in API server with fixtures.

// standInWithOneEndpoint serves Service default/web with one ready endpoint
// at addr, port 8080.
func standInWithOneEndpoint(t *testing.T, addr string) *standInAPIServer {
	api := newStandInAPIServer(t)
	api.addService(webService("default", httpPort))
	api.addSlices(webSlice("web-a", discoveryv1.Endpoint{Addresses: []string{addr}}))
	return api
}

// fleetFixture is two namespaces: shop has web (two ready pods, one draining)
// and api (one pod), both labelled tier=front, and exporter, which has no
// port http; blog has web (one pod, on IPv6).
func fleetFixture(t testing.TB) *standInAPIServer {
	api := newStandInAPIServer(t)
	front := map[string]string{"tier": "front"}
	svc := func(ns, name string, lbls map[string]string, ports ...corev1.ServicePort) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls,
			Annotations: map[string]string{"team": "payments", lastAppliedAnnotation: `{"kind":"Service"}`}},
			Spec: corev1.ServiceSpec{Ports: ports, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}}}
	}
	api.addService(svc("shop", "web", front, httpPort))
	api.addService(svc("shop", "api", front, httpPort))
	api.addService(svc("shop", "exporter", nil, corev1.ServicePort{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090)}))
	api.addService(svc("blog", "web", nil, httpPort))
	slice := func(ns, service, name string, family discoveryv1.AddressType, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		s := webSlice(name, eps...)
		s.Namespace, s.AddressType = ns, family
		s.Labels = map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: endpoints.EndpointSliceController}
		return s
	}
	draining := readyPod("10.0.0.9", "web-9", "node-a", "zone-a")
	draining.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	api.addSlices(
		slice("shop", "web", "web-a", discoveryv1.AddressTypeIPv4,
			readyPod("10.0.0.2", "web-2", "node-b", "zone-b"), readyPod("10.0.0.1", "web-1", "node-a", "zone-a"), draining),
		slice("shop", "api", "api-a", discoveryv1.AddressTypeIPv4, readyPod("10.0.1.1", "api-1", "node-a", "zone-a")),
		slice("shop", "exporter", "exporter-a", discoveryv1.AddressTypeIPv4, readyPod("10.0.2.1", "exporter-1", "node-a", "zone-a")),
		slice("blog", "web", "web-a", discoveryv1.AddressTypeIPv6, readyPod("fd00::1", "blog-1", "node-a", "zone-a")),
	)
	return api
}

// nodesFixture serves default/web (NodePort, the given policy) with two
// pods on node-a and one on node-b, and four nodes: node-a, node-b and
// node-c eligible (node-c labelled pool=batch), node-x excluded by label.
func nodesFixture(t *testing.T, policy corev1.ServiceExternalTrafficPolicy) *standInAPIServer {
	api := newStandInAPIServer(t)
	api.addService(nodePortWeb(policy))
	api.addSlices(webSlice("web-a",
		readyPod("10.244.0.1", "web-1", "node-a", "zone-a"),
		readyPod("10.244.0.2", "web-2", "node-a", "zone-a"),
		readyPod("10.244.1.1", "web-3", "node-b", "zone-b")))
	api.addNodes(
		standInNode("node-c", "zone-a", "192.168.0.3", "", map[string]string{"pool": "batch"}),
		standInNode("node-b", "zone-b", "192.168.0.2", "203.0.113.2", nil),
		standInNode("node-a", "zone-a", "192.168.0.1", "203.0.113.1", nil),
		standInNode("node-x", "zone-a", "192.168.0.9", "", map[string]string{corev1.LabelNodeExcludeBalancers: "true"}),
	)
	return api
}

// Configurations.

// kubeconfigProvider is a provider block that reads with the kubeconfig at path.
func kubeconfigProvider(path string) string {
	return fmt.Sprintf("provider \"k8s\" {\n  kubeconfig = %q\n}\n", path)
}

// clusterConfig points the provider at the stand-in API server.
func clusterConfig(t *testing.T, servers map[string]string) string {
	path := writeKubeconfig(t, t.TempDir(), "kubeconfig", servers)
	return kubeconfigProvider(path)
}

// tfString, tfNumber, stringSet and readTimeouts are configuration values
// of the tests.
// tfString, tfNumber, stringSet and readTimeouts are configuration values
// of the tests.
func tfString(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }

func tfNumber(n int) tftypes.Value { return tftypes.NewValue(tftypes.Number, n) }

// readTimeouts is a timeouts block with read set to read.
func readTimeouts(read tftypes.Value) tftypes.Value {
	return tftypes.NewValue(tftypes.Object{AttributeTypes: map[string]tftypes.Type{"read": tftypes.String}},
		map[string]tftypes.Value{"read": read})
}

func stringSet(values ...string) tftypes.Value {
	elems := make([]tftypes.Value, len(values))
	for i, v := range values {
		elems[i] = tftypes.NewValue(tftypes.String, v)
	}
	return tftypes.NewValue(tftypes.Set{ElementType: tftypes.String}, elems)
}

// Values expected in state.

// endpointValue is a ready endpoint as state holds it.
func endpointValue(addr string, port int64, family string, pod, node, zone, hostname knownvalue.Check) knownvalue.Check {
	return knownvalue.ObjectExact(endpointFields(addr, port, family, pod, node, zone, hostname))
}

func endpointFields(addr string, port int64, family string, pod, node, zone, hostname knownvalue.Check) map[string]knownvalue.Check {
	return map[string]knownvalue.Check{
		"address":      knownvalue.StringExact(addr),
		"port":         knownvalue.Int64Exact(port),
		"address_type": knownvalue.StringExact(family),
		"pod":          pod,
		"node_name":    node,
		"zone":         zone,
		"hostname":     hostname,
		"ready":        knownvalue.Bool(true),
		"serving":      knownvalue.Bool(true),
		"terminating":  knownvalue.Bool(false),
		// Null for a pod endpoint: only a node has local endpoints.
		"local_endpoints": knownvalue.Null(),
		// Null without pod_health_checks.
		"health_check": knownvalue.Null(),
		// False without readiness_gate.
		"gate_pending": knownvalue.Bool(false),
	}
}

// nodeValue is a node entry as state holds it, on port 30080.
func nodeValue(addr, node, zone string, local int64) knownvalue.Check {
	return nodeEntry(addr, 30080, node, zone, local)
}

// nodeEntry is a node entry as state holds it: IPv4, ready and serving, on
// port, checked on kube-proxy's health port; zone "" is a node without a zone
// label.
func nodeEntry(addr string, port int64, node, zone string, local int64) knownvalue.Check {
	return checkedNodeEntry(addr, port, node, zone, local, nodeHealthCheck(10256, "kube-proxy"))
}

// nodeHealthCheck is a node's health_check as state holds it: /healthz on
// port.
func nodeHealthCheck(port int64, source string) knownvalue.Check {
	return knownvalue.ObjectExact(map[string]knownvalue.Check{
		"type": knownvalue.StringExact("http"), "port": knownvalue.Int64Exact(port),
		"path": knownvalue.StringExact("/healthz"), "source": knownvalue.StringExact(source),
	})
}

// checkedNodeEntry is nodeEntry with the given health_check.
func checkedNodeEntry(addr string, port int64, node, zone string, local int64, healthCheck knownvalue.Check) knownvalue.Check {
	zoneCheck := knownvalue.Check(knownvalue.Null())
	if zone != "" {
		zoneCheck = knownvalue.StringExact(zone)
	}
	return knownvalue.ObjectExact(map[string]knownvalue.Check{
		"address":         knownvalue.StringExact(addr),
		"port":            knownvalue.Int64Exact(port),
		"address_type":    knownvalue.StringExact("IPv4"),
		"pod":             knownvalue.Null(),
		"node_name":       knownvalue.StringExact(node),
		"zone":            zoneCheck,
		"hostname":        knownvalue.Null(),
		"ready":           knownvalue.Bool(true),
		"serving":         knownvalue.Bool(true),
		"terminating":     knownvalue.Bool(false),
		"local_endpoints": knownvalue.Int64Exact(local),
		"health_check":    healthCheck,
		"gate_pending":    knownvalue.Bool(false),
	})
}

// standInTest plans config (the data sources, after the provider block of
// a cluster that api serves) once as a unit test, and checks its state.
func standInTest(t *testing.T, api *standInAPIServer, config string, checks ...statecheck.StateCheck) {
	t.Helper()
	unitSteps(t, resource.TestStep{
		Config:            api.config(t, config),
		ConfigStateChecks: checks,
	})
}

// endpointsStep is a step that reads config and expects the endpoints of
// k8s_ready_endpoints.web to be exactly those given.
func endpointsStep(config string, endpoints ...knownvalue.Check) resource.TestStep {
	return resource.TestStep{Config: config, ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(endpoints...)}}
}

// webRead is the configuration of k8s_ready_endpoints.web: the Service web
// and the arguments given, one a line.
func webRead(args ...string) string {
	return "\ndata \"k8s_ready_endpoints\" \"web\" {\n  service = \"web\"\n  " + strings.Join(args, "\n  ") + "\n}"
}

// refusedConfig is a case of a configuration the provider refuses: the
// lines it differs by, and the error it must get.
type refusedConfig struct {
	name string
	args string
	want *regexp.Regexp
}

// expectRefused plans each case's configuration (config of its lines) on a
// machine without kubeconfig or credentials, and expects its error.
func expectRefused(t *testing.T, cases []refusedConfig, config func(lines string) string) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			isolateFromMachine(t)
			resource.UnitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: testProviderFactories,
				Steps:                    []resource.TestStep{{Config: config(tt.args), ExpectError: tt.want}},
			})
		})
	}
}

// unconfiguredProvider is a provider block whose kubeconfig does not exist:
// an error about it would mean the provider was configured before the
// arguments were checked.
const unconfiguredProvider = `provider "k8s" { kubeconfig = "/nonexistent/kubeconfig" }` + "\n"

// parallelSteps runs the steps as an acceptance test, parallel to the
// others.
func parallelSteps(t *testing.T, steps ...resource.TestStep) {
	t.Helper()
	resource.ParallelTest(t, resource.TestCase{ProtoV6ProviderFactories: testProviderFactories, Steps: steps})
}

// readsOnePod is the step that reads web in ns (dataSource with args) and
// finds the one pod, web-1 at ip, of webWithOneReadyPod.
func (c *testCluster) readsOnePod(ns, args, ip string) resource.TestStep {
	return resource.TestStep{
		Config:            c.providerConfig() + dataSource(ns, args),
		ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(podEndpoint(ip, 8080, "IPv4", "web-1"))},
	}
}

// oneReadyPod is the acceptance cluster and a new namespace of it with
// webWithOneReadyPod at ip.
func oneReadyPod(t *testing.T, ip string) (*testCluster, string) {
	t.Helper()
	c := accCluster(t)
	ns := c.namespace(t)
	c.webWithOneReadyPod(t, ns, ip)
	return c, ns
}

// unitSteps runs the steps as a unit test.
func unitSteps(t *testing.T, steps ...resource.TestStep) {
	t.Helper()
	resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: testProviderFactories, Steps: steps})
}

// webValue checks the value at the top-level attribute named of
// data.k8s_ready_endpoints.web.
func webValue(attribute string, value knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue("data.k8s_ready_endpoints.web", tfjsonpath.New(attribute), value)
}
