package endpoints

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestNodeHealthChecks(t *testing.T) {
	nodes := []corev1.Node{node("node-a", "192.168.0.1")}
	slices := []discoveryv1.EndpointSlice{podsOn("s1", podOn("10.0.0.1", "node-a"))}
	withHealthPort := func(s *corev1.Service, port int32) *corev1.Service {
		s.Spec.HealthCheckNodePort = port
		return s
	}
	tests := []struct {
		name    string
		service *corev1.Service
		query   Query
		want    HealthCheck
	}{
		{
			name:    "a Local LoadBalancer Service is checked on its healthCheckNodePort",
			service: withHealthPort(nodePortService(corev1.ServiceTypeLoadBalancer, local, withNodePort(http, 30080)), 31234),
			want:    HealthCheck{Type: HealthCheckHTTP, Port: 31234, Path: "/healthz", Source: HealthSourceHealthCheckNodePort},
		},
		{
			name:    "a Cluster Service is checked on kube-proxy's health port",
			service: nodePortService(corev1.ServiceTypeLoadBalancer, cluster, withNodePort(http, 30080)),
			want:    kubeProxyCheck,
		},
		{
			name:    "kube-proxy's health port can be another",
			service: nodePortService(corev1.ServiceTypeNodePort, cluster, withNodePort(http, 30080)),
			query:   Query{KubeProxyHealthPort: 10299},
			want:    HealthCheck{Type: HealthCheckHTTP, Port: 10299, Path: "/healthz", Source: HealthSourceKubeProxy},
		},
		{
			name:    "a Local NodePort Service has no healthCheckNodePort: kube-proxy's health port",
			service: nodePortService(corev1.ServiceTypeNodePort, local, withNodePort(http, 30080)),
			want:    kubeProxyCheck,
		},
		{
			name:    "a healthCheckNodePort left on a Cluster Service is not used",
			service: withHealthPort(nodePortService(corev1.ServiceTypeLoadBalancer, cluster, withNodePort(http, 30080)), 31234),
			want:    kubeProxyCheck,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Nodes(tt.service, slices, nodes, tt.query)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Endpoints) != 1 {
				t.Fatalf("%d entries, want 1", len(res.Endpoints))
			}
			if got := res.Endpoints[0].HealthCheck; got == nil || *got != tt.want {
				t.Errorf("health check %+v, want %+v", got, tt.want)
			}
		})
	}
}

// probedPod is pod p of namespace shop, labelled app=web, with the given
// containers.
func probedPod(name string, containers ...corev1.Container) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: containers}}
}

// container serves the given ports (named "p<port>") with a readinessProbe.
func container(probe *corev1.Probe, ports ...int32) corev1.Container {
	c := corev1.Container{Name: "c", ReadinessProbe: probe}
	for _, p := range ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "http", ContainerPort: p})
	}
	return c
}

func httpProbe(path string, port intstr.IntOrString, scheme corev1.URIScheme) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: port, Scheme: scheme}}}
}

func TestPodHealthChecks(t *testing.T) {
	oneEndpoint := []discoveryv1.EndpointSlice{slice("s1", v4Slice, ports(slicePort("http", 8080)), eps(with(ep("10.0.0.1"), pod("web-1"))))}
	tests := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		pods   []corev1.Pod
		want   *HealthCheck
	}{
		{
			name: "an httpGet probe on a named port is checked on that port's number",
			pods: []corev1.Pod{probedPod("web-1", container(httpProbe("/ready", intstr.FromString("http"), ""), 8080))},
			want: &HealthCheck{Type: HealthCheckHTTP, Port: 8080, Path: "/ready", Source: HealthSourceReadinessProbe},
		},
		{
			name: "an httpGet probe on another port than the traffic's is checked there",
			pods: []corev1.Pod{probedPod("web-1", container(httpProbe("/ready", intstr.FromInt32(9090), corev1.URISchemeHTTP), 8080))},
			want: &HealthCheck{Type: HealthCheckHTTP, Port: 9090, Path: "/ready", Source: HealthSourceReadinessProbe},
		},
		{
			name: "an HTTPS probe is an https check, and an empty path is /, as the kubelet asks",
			pods: []corev1.Pod{probedPod("web-1", container(httpProbe("", intstr.FromInt32(8443), corev1.URISchemeHTTPS), 8080))},
			want: &HealthCheck{Type: HealthCheckHTTPS, Port: 8443, Path: "/", Source: HealthSourceReadinessProbe},
		},
		{
			name: "a tcpSocket probe is a tcp check without a path",
			pods: []corev1.Pod{probedPod("web-1", container(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}}, 8080))},
			want: &HealthCheck{Type: HealthCheckTCP, Port: 8080, Source: HealthSourceReadinessProbe},
		},
		{
			name: "a grpc probe is a grpc check",
			pods: []corev1.Pod{probedPod("web-1", container(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				GRPC: &corev1.GRPCAction{Port: 9000}}}, 8080))},
			want: &HealthCheck{Type: HealthCheckGRPC, Port: 9000, Source: HealthSourceReadinessProbe},
		},
		{
			name: "an exec probe cannot be asked from outside the pod: no check",
			pods: []corev1.Pod{probedPod("web-1", container(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				Exec: &corev1.ExecAction{Command: []string{"true"}}}}, 8080))},
		},
		{
			name: "a probe of another host than the pod is not the pod's check",
			pods: []corev1.Pod{probedPod("web-1", container(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Host: "example.test", Port: intstr.FromInt32(8080)}}}, 8080))},
		},
		{
			name: "a probe on a port name the container does not have gives no check",
			pods: []corev1.Pod{probedPod("web-1", container(httpProbe("/", intstr.FromString("admin"), ""), 8080))},
		},
		{
			name: "a container without a readinessProbe gives no check",
			pods: []corev1.Pod{probedPod("web-1", container(nil, 8080))},
		},
		{
			name: "the container that declares the endpoint's port is the one whose probe is used",
			pods: []corev1.Pod{probedPod("web-1",
				container(httpProbe("/sidecar", intstr.FromInt32(15020), ""), 15001),
				container(httpProbe("/app", intstr.FromInt32(8080), ""), 8080))},
			want: &HealthCheck{Type: HealthCheckHTTP, Port: 8080, Path: "/app", Source: HealthSourceReadinessProbe},
		},
		{
			name: "when no container declares the port, the only probed container is used",
			pods: []corev1.Pod{probedPod("web-1", container(nil), container(httpProbe("/ready", intstr.FromInt32(8080), "")))},
			want: &HealthCheck{Type: HealthCheckHTTP, Port: 8080, Path: "/ready", Source: HealthSourceReadinessProbe},
		},
		{
			name: "when no container declares the port and several are probed, no check",
			pods: []corev1.Pod{probedPod("web-1",
				container(httpProbe("/a", intstr.FromInt32(8081), "")), container(httpProbe("/b", intstr.FromInt32(8082), "")))},
		},
		{
			name: "an endpoint whose pod is gone has no check",
			pods: []corev1.Pod{probedPod("web-2", container(httpProbe("/ready", intstr.FromInt32(8080), ""), 8080))},
		},
		{
			name: "a pod of the same name in another namespace is not the endpoint's",
			pods: func() []corev1.Pod {
				p := probedPod("web-1", container(httpProbe("/ready", intstr.FromInt32(8080), ""), 8080))
				p.Namespace = "other"
				return []corev1.Pod{p}
			}(),
		},
		{
			name: "a pod of that name that the Service does not select is not the endpoint's",
			pods: func() []corev1.Pod {
				p := probedPod("web-1", container(httpProbe("/ready", intstr.FromInt32(8080), ""), 8080))
				p.Labels = map[string]string{"app": "other"}
				return []corev1.Pod{p}
			}(),
		},
		{
			name:   "an endpoint whose slice names no pod has no check",
			slices: []discoveryv1.EndpointSlice{slice("s1", v4Slice, ports(slicePort("http", 8080)), eps(ep("10.0.0.1")))},
			pods:   []corev1.Pod{probedPod("", container(httpProbe("/ready", intstr.FromInt32(8080), ""), 8080))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.slices
			if s == nil {
				s = oneEndpoint
			}
			svc := service(http)
			svc.Spec.Selector = map[string]string{"app": "web"}
			res, err := Pool(svc, s, Query{PortName: "http"})
			if err != nil {
				t.Fatal(err)
			}
			before := make([]corev1.Pod, len(tt.pods))
			for i := range tt.pods {
				before[i] = *tt.pods[i].DeepCopy()
			}
			checked := WithPodHealthChecks(res, svc, tt.pods)
			if len(checked.Endpoints) != 1 {
				t.Fatalf("%d endpoints, want 1", len(checked.Endpoints))
			}
			if got := checked.Endpoints[0].HealthCheck; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("health check %+v, want %+v", got, tt.want)
			}
			if res.Endpoints[0].HealthCheck != nil {
				t.Error("the result given was modified")
			}
			if !reflect.DeepEqual(before, tt.pods) {
				t.Error("the pods were modified")
			}
		})
	}
}

func TestFleetPodHealthChecksComeFromThePodsEachServiceSelects(t *testing.T) {
	selecting := func(namespace, name string) corev1.Service {
		s := namedService(namespace, name, http)
		s.Spec.Selector = map[string]string{"app": "web"}
		return s
	}
	// c/web has no selector: its hand-written slice names a pod it does not select.
	services := []corev1.Service{selecting("a", "web"), selecting("b", "web"), namedService("c", "web", http)}
	inNS := func(namespace string, e discoveryv1.Endpoint) discoveryv1.Endpoint {
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: "web-1"}
		return e
	}
	slices := []discoveryv1.EndpointSlice{
		fleetSlice("a", "web", "a1", inNS("a", ep("10.0.0.1"))),
		fleetSlice("b", "web", "b1", inNS("b", ep("10.0.0.2"))),
		fleetSlice("c", "web", "c1", inNS("c", ep("10.0.0.3"))),
	}
	res, err := Fleet(services, slices, Query{PortName: "http"})
	if err != nil {
		t.Fatal(err)
	}
	podIn := func(namespace, path string) corev1.Pod {
		p := probedPod("web-1", container(httpProbe(path, intstr.FromInt32(8080), ""), 8080))
		p.Namespace, p.Labels = namespace, map[string]string{"app": "web"}
		return p
	}
	// b/web's endpoint names a pod that b/web does not select.
	unselected := podIn("b", "/other")
	unselected.Labels = map[string]string{"app": "other"}
	checked := FleetWithPodHealthChecks(res, []corev1.Pod{unselected, podIn("a", "/a"), podIn("c", "/c")})
	for _, p := range checked.Pools {
		hc := p.Endpoints[0].HealthCheck
		if p.Service.Namespace != "a" {
			if hc != nil {
				t.Errorf("%s: health check %+v from a pod the Service does not select, want none", p.Service.Namespace, hc)
			}
			continue
		}
		if hc == nil || hc.Path != "/a" {
			t.Errorf("a: health check %+v, want path /a", hc)
		}
	}
	for _, p := range res.Pools {
		if p.Endpoints[0].HealthCheck != nil {
			t.Error("the fleet given was modified")
		}
	}
}

func TestFleetPodChecksAddedPageByPageAreThoseOfTheWholeList(t *testing.T) {
	services := make([]corev1.Service, 0, 3)
	var endpointSlices []discoveryv1.EndpointSlice
	var pods []corev1.Pod
	for _, namespace := range []string{"a", "b", "c"} {
		s := namedService(namespace, "web", http)
		s.Spec.Selector = map[string]string{"app": "web"}
		services = append(services, s)
		var endpoints []discoveryv1.Endpoint
		for i := range 4 {
			name := fmt.Sprintf("web-%d", i)
			e := ep(fmt.Sprintf("10.0.%d.%d", len(services), i))
			e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: name}
			endpoints = append(endpoints, e)
			p := probedPod(name, container(httpProbe("/"+namespace+name, intstr.FromInt32(8080), ""), 8080))
			p.Namespace = namespace
			if i == 3 {
				p.Labels = map[string]string{"app": "other"} // not selected
			}
			pods = append(pods, p)
		}
		endpointSlices = append(endpointSlices, fleetSlice(namespace, "web", namespace+"1", endpoints...))
	}
	res, err := Fleet(services, endpointSlices, Query{PortName: "http"})
	if err != nil {
		t.Fatal(err)
	}
	whole := FleetWithPodHealthChecks(res, pods)
	// a/web-1 deleted between two LISTs
	gone := append(append([]corev1.Pod{}, pods[:1]...), pods[2:]...)
	for _, tt := range []struct {
		name  string
		pages func(c *FleetPodChecks)
		want  FleetResult
	}{
		{"in pages of five", func(c *FleetPodChecks) {
			for i := 0; i < len(pods); i += 5 {
				c.Add(pods[i:min(i+5, len(pods))])
			}
		}, whole},
		{"one pod at a time", func(c *FleetPodChecks) {
			for i := range pods {
				c.Add(pods[i : i+1])
			}
		}, whole},
		{"a namespace's list started over: its first pages forgotten", func(c *FleetPodChecks) {
			c.Add(pods[:4])
			c.Add(pods[4:6])
			c.Forget("b")
			c.Add(pods[4:])
		}, whole},
		{"every namespace's list started over", func(c *FleetPodChecks) {
			c.Add(gone)
			c.Forget("")
			c.Add(pods)
		}, whole},
		{"started over without a pod that is gone: that pod's check goes too", func(c *FleetPodChecks) {
			c.Add(pods[:2])
			c.Forget("a")
			c.Add(gone)
		}, FleetWithPodHealthChecks(res, gone)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewFleetPodChecks(res)
			tt.pages(c)
			if got := c.Result(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	checked := 0
	for _, p := range whole.Pools {
		for _, e := range p.Endpoints {
			if e.HealthCheck != nil {
				checked++
			}
		}
	}
	if checked != 9 {
		t.Errorf("%d endpoints checked, want the 9 whose pods are selected", checked)
	}
	if a1 := FleetWithPodHealthChecks(res, gone).Pools[0].Endpoints[1]; a1.HealthCheck != nil {
		t.Errorf("a/web-1 gone: check %+v, want none", a1.HealthCheck)
	}
}
