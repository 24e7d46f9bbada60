package provider

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// Every rule of the contract, read by the real CLI from a real API server.
// Where Kubernetes can make the case, its controllers write the slices;
// where it cannot (nil conditions, duplicates, FQDN, several addresses), the
// test writes them by hand.

var webLabels = map[string]string{"app": "web"}

func webServiceSpec(namespace string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: webLabels, Ports: ports},
	}
}

// dualStackWebServiceSpec is webServiceSpec on httpPort, dual-stack, with
// families in the order given (the first is the primary).
func dualStackWebServiceSpec(namespace string, families ...corev1.IPFamily) *corev1.Service {
	policy := corev1.IPFamilyPolicyRequireDualStack
	svc := webServiceSpec(namespace, httpPort)
	svc.Spec.IPFamilyPolicy = &policy
	svc.Spec.IPFamilies = families
	return svc
}

func dataSource(namespace string, extra string) string {
	return fmt.Sprintf(`
data "k8s_ready_endpoints" "web" {
  namespace = %q
  service   = "web"
  %s
}
`, namespace, extra)
}

// podEndpoint is a ready endpoint the controller wrote for a pod on the test node.
func podEndpoint(addr string, port int64, family, pod string) knownvalue.Check {
	return podEndpointWith(addr, port, family, pod, true, true, false)
}

// podEndpointWith is podEndpoint with the given conditions.
func podEndpointWith(addr string, port int64, family, pod string, ready, serving, terminating bool) knownvalue.Check {
	fields := endpointFields(addr, port, family, knownvalue.StringExact(pod), knownvalue.StringExact(accNode),
		knownvalue.StringExact(accZone), knownvalue.Null())
	fields["ready"], fields["serving"], fields["terminating"] = knownvalue.Bool(ready), knownvalue.Bool(serving), knownvalue.Bool(terminating)
	return knownvalue.ObjectExact(fields)
}

// bareIPv4 is an IPv4 endpoint that names no pod, node, zone or hostname.
func bareIPv4(addr string, port int64) knownvalue.Check {
	return endpointValue(addr, port, "IPv4", knownvalue.Null(), knownvalue.Null(), knownvalue.Null(), knownvalue.Null())
}

func expectEndpoints(checks ...knownvalue.Check) statecheck.StateCheck {
	return webValue("endpoints", knownvalue.ListExact(checks))
}

func TestAccReadyNotReadyAndTerminatingPods(t *testing.T) {
	c := accCluster(t)
	ns := c.webNamespace(t, webServiceSpec("", httpPort),
		webPod("web-1", true, "10.244.0.11"), webPod("web-2", true, "10.244.0.2"),
		webPod("web-3", false, "10.244.0.3"), webPod("web-4", true, "10.244.0.4"))
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 3, 4))
	// Deleted with a grace period and no kubelet to confirm, web-4 stays
	// terminating: the controller marks it not ready but still serving.
	c.deletePod(t, ns, "web-4", 300)
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 2, 4))

	parallelSteps(t, resource.TestStep{
		Config: c.providerConfig() + dataSource(ns, `port_name = "http"`),
		ConfigStateChecks: []statecheck.StateCheck{
			webValue("id", knownvalue.StringExact(ns+"/web")),
			// The pods' port, not the Service's, in numeric order.
			expectEndpoints(
				podEndpoint("10.244.0.2", 8080, "IPv4", "web-2"),
				podEndpoint("10.244.0.11", 8080, "IPv4", "web-1"),
			),
		},
	})
}

func TestAccDualStackServiceGivesEachPodOncePerFamily(t *testing.T) {
	c := accCluster(t)
	ns := c.webNamespace(t, dualStackWebServiceSpec("", corev1.IPv6Protocol, corev1.IPv4Protocol),
		webPod("web-a", true, "10.244.1.2", "fd00:10:244::2"), webPod("web-b", true, "10.244.1.1", "fd00:10:244::1"))
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 2, 2), endpointCount(discoveryv1.AddressTypeIPv6, 2, 2))

	parallelSteps(t, resource.TestStep{
		Config: c.providerConfig() + dataSource(ns, ""),
		ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(
			podEndpoint("10.244.1.1", 8080, "IPv4", "web-b"),
			podEndpoint("10.244.1.2", 8080, "IPv4", "web-a"),
			podEndpoint("fd00:10:244::1", 8080, "IPv6", "web-b"),
			podEndpoint("fd00:10:244::2", 8080, "IPv6", "web-a"),
		)},
	})
}

func TestAccScaledToZeroIsAnEmptyList(t *testing.T) {
	c, ns := oneReadyPod(t, "10.244.3.1")

	parallelSteps(t,
		c.readsOnePod(ns, "", "10.244.3.1"),
		resource.TestStep{
			PreConfig: func() {
				c.deletePod(t, ns, "web-1", 0)
				c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 0, 0))
			},
			Config:            c.providerConfig() + dataSource(ns, ""),
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints()},
		},
	)
}

func TestAccNamedTargetPortResolvesPerPod(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	c.createService(t, webServiceSpec(ns,
		corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("web")},
		corev1.ServicePort{Name: "metrics", Port: 9100, TargetPort: intstr.FromInt32(9100)},
	))
	// In the middle of a rollout the container port named "web" moved:
	// Kubernetes writes one slice per port set.
	c.runPod(t, ns, podSpec{name: "web-old", labels: webLabels, ips: []string{"10.244.4.1"}, ready: true, ports: map[string]int32{"web": 8080}})
	c.runPod(t, ns, podSpec{name: "web-new", labels: webLabels, ips: []string{"10.244.4.2"}, ready: true, ports: map[string]int32{"web": 8081}})
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 2, 2))

	parallelSteps(t,
		resource.TestStep{
			Config: c.providerConfig() + dataSource(ns, `port_name = "http"`),
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(
				podEndpoint("10.244.4.1", 8080, "IPv4", "web-old"),
				podEndpoint("10.244.4.2", 8081, "IPv4", "web-new"),
			)},
		},
		resource.TestStep{
			Config: c.providerConfig() + dataSource(ns, `port_name = "metrics"`),
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(
				podEndpoint("10.244.4.1", 9100, "IPv4", "web-old"),
				podEndpoint("10.244.4.2", 9100, "IPv4", "web-new"),
			)},
		},
		resource.TestStep{
			// Several ports and no port_name: default_port.
			Config: c.providerConfig() + dataSource(ns, `default_port = 7000`),
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(
				podEndpoint("10.244.4.1", 7000, "IPv4", "web-old"),
				podEndpoint("10.244.4.2", 7000, "IPv4", "web-new"),
			)},
		},
		resource.TestStep{
			Config:      c.providerConfig() + dataSource(ns, `port_name = "grpc"`),
			ExpectError: phrase("Port Not Found", `ports named "http", "metrics"`, fmt.Sprintf("port grpc not found in service %s/web", ns)),
		},
	)
}

func TestAccPublishNotReadyAddressesGivesEveryPod(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	svc := webServiceSpec(ns, httpPort)
	svc.Spec.PublishNotReadyAddresses = true
	c.createService(t, svc)
	c.runPods(t, ns, webPod("web-starting", false, "10.244.5.1"))
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 1, 1))

	parallelSteps(t, resource.TestStep{
		Config: c.providerConfig() + dataSource(ns, ""),
		// Ready because the Service asks for it, though the pod does not serve yet.
		ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(podEndpointWith("10.244.5.1", 8080, "IPv4", "web-starting", true, false, false))},
	})
}

func TestAccSelectorlessServiceMirroredFromEndpoints(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	c.createService(t, selectorlessWebService(ns, 9090))
	endpoints := &corev1.Endpoints{ //nolint:staticcheck // a hand-managed Endpoints object is the case under test
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Subsets: []corev1.EndpointSubset{{ //nolint:staticcheck // idem
			Addresses:         []corev1.EndpointAddress{{IP: "192.0.2.11"}, {IP: "192.0.2.10"}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "192.0.2.12"}},
			Ports:             []corev1.EndpointPort{{Name: "http", Port: 9090}}, //nolint:staticcheck // idem
		}},
	}
	if _, err := c.client.CoreV1().Endpoints(ns).Create(c.ctx(t), endpoints, metav1.CreateOptions{}); err != nil { //nolint:staticcheck // idem
		t.Fatal(err)
	}
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 2, 3))

	parallelSteps(t, resource.TestStep{
		Config: c.providerConfig() + dataSource(ns, `port_name = "http"`),
		ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(
			bareIPv4("192.0.2.10", 9090),
			bareIPv4("192.0.2.11", 9090),
		)},
	})
}

func TestAccHandWrittenSlices(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	c.createService(t, selectorlessWebService(ns, 8080))
	httpPort := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}}
	slice := func(name, service string, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
				discoveryv1.LabelServiceName: service,
				discoveryv1.LabelManagedBy:   "tf-acc-tests",
			}},
			AddressType: family,
			Ports:       ports,
			Endpoints:   eps,
		}
		if _, err := c.client.DiscoveryV1().EndpointSlices(ns).Create(c.ctx(t), s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create slice %s: %v", name, err)
		}
	}
	ep := func(ready *bool, addrs ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	slice("web-a", "web", discoveryv1.AddressTypeIPv4, httpPort,
		ep(nil, "10.0.9.1"),                       // no ready condition: ready
		ep(ptr.To(true), "10.0.9.2"),              // also in web-b
		ep(ptr.To(true), "10.0.9.3", "10.0.9.30"), // several addresses: the first
	)
	slice("web-b", "web", discoveryv1.AddressTypeIPv4, httpPort,
		ep(ptr.To(true), "10.0.9.2"),
		ep(ptr.To(false), "10.0.9.4"),
	)
	slice("web-fqdn", "web", discoveryv1.AddressTypeFQDN, httpPort, ep(ptr.To(true), "db.example.com"))
	slice("api-a", "api", discoveryv1.AddressTypeIPv4, httpPort, ep(ptr.To(true), "10.0.9.5"))
	slice("web-no-ports", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{}, ep(ptr.To(true), "10.0.9.6"))
	slice("web-no-number", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{{Name: ptr.To("http")}}, ep(ptr.To(true), "10.0.9.7"))
	slice("web-other-port", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{{Name: ptr.To("admin"), Port: ptr.To[int32](9000)}}, ep(ptr.To(true), "10.0.9.8"))

	parallelSteps(t, resource.TestStep{
		Config: c.providerConfig() + dataSource(ns, "port_name = \"http\"\n  default_port = 8000"),
		ConfigStateChecks: []statecheck.StateCheck{
			webValue("last_change_trigger_time", knownvalue.Null()),
			expectEndpoints(
				bareIPv4("10.0.9.1", 8080),
				bareIPv4("10.0.9.2", 8080),
				bareIPv4("10.0.9.3", 8080),
				bareIPv4("10.0.9.6", 8000),
				bareIPv4("10.0.9.7", 8000),
			),
		},
	})
}

// TestAccManySlicesAreReadWhole gives the Service more EndpointSlices than
// one page of the LIST holds, so the read must follow the API server's
// continue tokens to give every endpoint.
func TestAccManySlicesAreReadWhole(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	const slices = 600 // more than two pages of kube.DefaultOptions().PageSize
	if kube.DefaultOptions().PageSize*2 >= slices {
		t.Fatalf("%d slices fit in two pages of %d: the test would not follow continue tokens", slices, kube.DefaultOptions().PageSize)
	}
	want := c.manySlices(t, ns, slices)

	parallelSteps(t, resource.TestStep{
		Config:            c.providerConfig() + dataSource(ns, ""),
		ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(want...)},
	})
}

func TestAccMissingServiceIsAnError(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	parallelSteps(t, resource.TestStep{
		Config:      c.providerConfig() + dataSource(ns, ""),
		ExpectError: phrase("Service Not Found", "The Service doesn't exist", fmt.Sprintf(`get service %s/web: services "web" not found`, ns)),
	})
}

func TestAccRBAC(t *testing.T) {
	c, ns := oneReadyPod(t, "10.244.6.1")

	documented := c.identity(t, ns, "documented-role", documentedRole)
	noList := c.identity(t, ns, "no-list", documentedRole[:1])
	noGet := c.identity(t, ns, "no-get", documentedRole[1:])
	as := func(kubeconfig string) string {
		return kubeconfigProvider(kubeconfig) + dataSource(ns, "")
	}
	parallelSteps(t,
		resource.TestStep{
			Config:            as(documented),
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(podEndpoint("10.244.6.1", 8080, "IPv4", "web-1"))},
		},
		resource.TestStep{
			Config: as(noList),
			ExpectError: phrase("Permission Denied Listing EndpointSlices", "the second rule of the Role",
				fmt.Sprintf("list endpointslices of service %s/web:", ns), "forbidden"),
		},
		resource.TestStep{
			Config: as(noGet),
			ExpectError: phrase("Permission Denied Reading Service",
				fmt.Sprintf("get service %s/web:", ns), "forbidden"),
		},
	)
}

// TestAccAPIServerGoneFailsWithinItsBound reads through a TCP proxy in front
// of the API server, then stops the proxy: to the provider the API server is
// gone (connections refused), and the read must end in a clear error after
// its bounded retries rather than hang.
func TestAccAPIServerGoneFailsWithinItsBound(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	c.createService(t, webServiceSpec(ns, httpPort))
	proxy := startTCPProxy(t, hostPort(t, c.rest.Host))
	token := c.identityToken(t, ns, "reader", documentedRole)
	viaProxy := c.writeKubeconfig(t, "reader", &clientcmdapi.AuthInfo{Token: token}, "https://"+proxy.addr())
	config := kubeconfigProvider(viaProxy) + dataSource(ns, "")

	parallelSteps(t,
		resource.TestStep{Config: config, ConfigStateChecks: []statecheck.StateCheck{expectEndpoints()}},
		resource.TestStep{
			PreConfig:   proxy.stop,
			Config:      config,
			ExpectError: phrase("Unable to Read Service", "could not be reached", fmt.Sprintf("get service %s/web: gave up after 3 attempts", ns), "connection refused"),
		},
	)
}

// tcpProxy forwards connections to the API server until it is stopped.
type tcpProxy struct {
	listener net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	once     sync.Once
}

func startTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{listener: l}
	t.Cleanup(p.stop)
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
	return p
}

func (p *tcpProxy) addr() string { return p.listener.Addr().String() }

// stop closes the listening socket and every open connection, so new
// connections are refused, as when an API server process is gone.
func (p *tcpProxy) stop() {
	p.once.Do(func() {
		_ = p.listener.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
}

// TestAccStoppedAPIServerFailsWithinItsBound stops the local kube-apiserver
// process and reads: the read must fail, clearly and within its bound. The
// API server is started again afterwards. Not parallel: parallel tests wait
// until it is done.
func TestAccStoppedAPIServerFailsWithinItsBound(t *testing.T) {
	c := accCluster(t)
	local := localCluster(t)
	local.StopAPIServer()
	defer func() {
		if err := local.StartAPIServer(context.Background()); err != nil {
			t.Fatalf("start kube-apiserver again: %v", err)
		}
	}()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviderFactories,
		Steps: []resource.TestStep{{
			Config:      c.providerConfig() + dataSource("default", ""),
			ExpectError: phrase("Unable to Read Service", "could not be reached", "get service default/web: gave up after 3 attempts", "connection refused"),
		}},
	})
}
