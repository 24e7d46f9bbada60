package endpoints

import (
	"cmp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Health checks: between two plans, a load balancer takes a dead member out
// of its pool only if it checks it. Each member carries the check that
// Kubernetes itself uses for it, so that the load balancer asks exactly what
// the cluster asks.

// HealthCheck is how a load balancer checks one member of a pool.
type HealthCheck struct {
	// Type is HealthCheckHTTP, HealthCheckHTTPS, HealthCheckTCP or
	// HealthCheckGRPC.
	Type string
	// Port is the port to check on the member's address.
	Port int32
	// Path is the HTTP path; empty for TCP and gRPC.
	Path string
	// Source says where the check comes from: HealthSourceReadinessProbe,
	// HealthSourceHealthCheckNodePort or HealthSourceKubeProxy.
	Source string
}

// Health check types.
const (
	HealthCheckHTTP  = "http"
	HealthCheckHTTPS = "https"
	HealthCheckTCP   = "tcp"
	HealthCheckGRPC  = "grpc"
)

// Where a health check comes from.
const (
	// HealthSourceReadinessProbe is the readinessProbe of the pod's
	// container that serves the endpoint's port: what the kubelet checks.
	HealthSourceReadinessProbe = "readinessProbe"
	// HealthSourceHealthCheckNodePort is the Service's healthCheckNodePort
	// (externalTrafficPolicy Local): kube-proxy answers 200 on /healthz only
	// on nodes that run a ready endpoint of the Service.
	HealthSourceHealthCheckNodePort = "healthCheckNodePort"
	// HealthSourceKubeProxy is kube-proxy's own health server, which since
	// Kubernetes 1.28 fails on nodes being deleted or tainted
	// ToBeDeletedByClusterAutoscaler (KEP-3836).
	HealthSourceKubeProxy = "kube-proxy"
)

// DefaultKubeProxyHealthPort is kube-proxy's --healthz-bind-address port.
const DefaultKubeProxyHealthPort int32 = 10256

// healthzPath is the path of kube-proxy's health checks, both the node's and
// a Service's healthCheckNodePort.
const healthzPath = "/healthz"

// nodeHealthCheck is the check of every node of svc's node pool: the
// Service's healthCheckNodePort for externalTrafficPolicy Local (what cloud
// load balancers use, through the service controller), else kube-proxy's
// health port (q.KubeProxyHealthPort, or DefaultKubeProxyHealthPort).
func nodeHealthCheck(svc *corev1.Service, q Query) *HealthCheck {
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && svc.Spec.HealthCheckNodePort > 0 {
		return &HealthCheck{Type: HealthCheckHTTP, Port: svc.Spec.HealthCheckNodePort, Path: healthzPath, Source: HealthSourceHealthCheckNodePort}
	}
	return &HealthCheck{Type: HealthCheckHTTP, Port: cmp.Or(q.KubeProxyHealthPort, DefaultKubeProxyHealthPort), Path: healthzPath, Source: HealthSourceKubeProxy}
}

// WithPodHealthChecks is res, the pool of svc, with each endpoint's
// HealthCheck set from its pod's readinessProbe, among the pods that svc's
// selector selects in its namespace (a Service without a selector selects
// none). An endpoint keeps no check when its slice names no pod, when that
// pod is not among them, or when the probe cannot be asked from outside the
// pod (see podHealthCheck). It never modifies pods; res's endpoints are
// copied.
func WithPodHealthChecks(res Result, svc *corev1.Service, pods []corev1.Pod) Result {
	return withPodHealthChecks(res, selectedPod(svc, podsByName(pods)))
}

// FleetWithPodHealthChecks is WithPodHealthChecks for every pool of res, the
// pods being those of every namespace the fleet covers. Its cost grows with
// the endpoints and the pods, not with their product.
func FleetWithPodHealthChecks(res FleetResult, pods []corev1.Pod) FleetResult {
	checks := NewFleetPodChecks(res)
	checks.Add(pods)
	return checks.Result()
}

// FleetPodChecks gives the pools of a fleet their pods' health checks as
// FleetWithPodHealthChecks does, from pods given in any number of parts (the
// pages of a LIST), so that no part need be kept once added: what a fleet
// reads from the API holds one page of Pods at a time rather than all of
// them. Its result is FleetWithPodHealthChecks's for the pods added, in the
// order added (a later pod of the same namespace and name replaces an
// earlier one, as there).
type FleetPodChecks struct {
	res FleetResult
	// byPod are the endpoints that name each pod, by namespace then name.
	byPod map[string]map[string][]podEndpoint
}

// podEndpoint is endpoint j of pool i, whose Service selects by selector.
type podEndpoint struct {
	i, j     int
	selector labels.Selector
}

// NewFleetPodChecks starts the checks of res, whose endpoints it copies: no
// endpoint has a check until its pod is added.
func NewFleetPodChecks(res FleetResult) *FleetPodChecks {
	c := &FleetPodChecks{byPod: map[string]map[string][]podEndpoint{}}
	out := make([]ServicePool, len(res.Pools))
	for i, p := range res.Pools {
		out[i] = p
		if len(p.Endpoints) == 0 {
			continue
		}
		eps := make([]Endpoint, len(p.Endpoints))
		copy(eps, p.Endpoints)
		out[i].Endpoints = eps
		// A Service without a selector selects no pod: its endpoints keep none.
		var selector labels.Selector
		if len(p.Service.Spec.Selector) > 0 {
			selector = labels.SelectorFromSet(p.Service.Spec.Selector)
		}
		for j := range eps {
			eps[j].HealthCheck = nil
			if eps[j].Pod == "" || selector == nil {
				continue
			}
			byName := c.byPod[p.Service.Namespace]
			if byName == nil {
				byName = map[string][]podEndpoint{}
				c.byPod[p.Service.Namespace] = byName
			}
			byName[eps[j].Pod] = append(byName[eps[j].Pod], podEndpoint{i: i, j: j, selector: selector})
		}
	}
	res.Pools = out
	c.res = res
	return c
}

// Add gives the endpoints that name one of pods its check (none when the
// pod's Service does not select it, or its probe gives none). It keeps
// nothing of pods.
func (c *FleetPodChecks) Add(pods []corev1.Pod) {
	for k := range pods {
		pod := &pods[k]
		for _, e := range c.byPod[pod.Namespace][pod.Name] {
			ep := &c.res.Pools[e.i].Endpoints[e.j]
			ep.HealthCheck = nil
			if e.selector.Matches(labels.Set(pod.Labels)) {
				ep.HealthCheck = podHealthCheck(pod, ep.Port)
			}
		}
	}
}

// Forget takes back the checks of the pods of namespace ("" for every
// namespace) added so far, as if none had been (a LIST of them that starts
// over).
func (c *FleetPodChecks) Forget(namespace string) {
	for ns, byName := range c.byPod {
		if namespace != "" && ns != namespace {
			continue
		}
		for _, eps := range byName {
			for _, e := range eps {
				c.res.Pools[e.i].Endpoints[e.j].HealthCheck = nil
			}
		}
	}
}

// Result is the fleet with the checks of the pods added.
func (c *FleetPodChecks) Result() FleetResult { return c.res }

// selectedPod looks up, by name, a pod that svc selects.
func selectedPod(svc *corev1.Service, byNamespace map[string]map[string]*corev1.Pod) func(name string) *corev1.Pod {
	if len(svc.Spec.Selector) == 0 {
		return func(string) *corev1.Pod { return nil }
	}
	byName, selector := byNamespace[svc.Namespace], labels.SelectorFromSet(svc.Spec.Selector)
	return func(name string) *corev1.Pod {
		if pod := byName[name]; pod != nil && selector.Matches(labels.Set(pod.Labels)) {
			return pod
		}
		return nil
	}
}

// podsByName indexes pods by namespace, then name.
func podsByName(pods []corev1.Pod) map[string]map[string]*corev1.Pod {
	out := map[string]map[string]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if out[p.Namespace] == nil {
			out[p.Namespace] = map[string]*corev1.Pod{}
		}
		out[p.Namespace][p.Name] = p
	}
	return out
}

// withPodHealthChecks is res, its endpoints copied, each with the check of
// the pod that podOf gives for its pod name (none for nil).
func withPodHealthChecks(res Result, podOf func(name string) *corev1.Pod) Result {
	if len(res.Endpoints) == 0 {
		return res
	}
	out := make([]Endpoint, len(res.Endpoints))
	copy(out, res.Endpoints)
	for i := range out {
		out[i].HealthCheck = nil
		if out[i].Pod == "" {
			continue
		}
		if pod := podOf(out[i].Pod); pod != nil {
			out[i].HealthCheck = podHealthCheck(pod, out[i].Port)
		}
	}
	res.Endpoints = out
	return res
}

// podHealthCheck is the readinessProbe of the container of pod that serves
// port, as a load balancer can ask it of the pod's address: the container
// that declares port among its ports, or else the only container with a
// readinessProbe. There is none when no container is found, when it has no
// readinessProbe, when the probe runs a command (exec: nothing outside the
// pod can run it), when it asks another host than the pod (httpGet.host), or
// when its port names no port of the container (the kubelet's probe fails
// too, so the pod is never ready).
func podHealthCheck(pod *corev1.Pod, port int32) *HealthCheck {
	c := servingContainer(pod.Spec.Containers, port)
	if c == nil || c.ReadinessProbe == nil {
		return nil
	}
	h := c.ReadinessProbe.ProbeHandler
	switch {
	case h.HTTPGet != nil:
		n, ok := probePort(c, h.HTTPGet.Host, h.HTTPGet.Port)
		if !ok {
			return nil
		}
		typ := HealthCheckHTTP
		if h.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			typ = HealthCheckHTTPS
		}
		// The kubelet asks for "/" when the path is empty.
		return &HealthCheck{Type: typ, Port: n, Path: cmp.Or(h.HTTPGet.Path, "/"), Source: HealthSourceReadinessProbe}
	case h.TCPSocket != nil:
		n, ok := probePort(c, h.TCPSocket.Host, h.TCPSocket.Port)
		if !ok {
			return nil
		}
		return &HealthCheck{Type: HealthCheckTCP, Port: n, Source: HealthSourceReadinessProbe}
	case h.GRPC != nil:
		if h.GRPC.Port < 1 || h.GRPC.Port > 65535 {
			return nil
		}
		return &HealthCheck{Type: HealthCheckGRPC, Port: h.GRPC.Port, Source: HealthSourceReadinessProbe}
	}
	return nil
}

// servingContainer is the container that declares port, or else the only one
// with a readinessProbe.
func servingContainer(containers []corev1.Container, port int32) *corev1.Container {
	var probed *corev1.Container
	probes := 0
	for i := range containers {
		c := &containers[i]
		for _, p := range c.Ports {
			if p.ContainerPort == port {
				return c
			}
		}
		if c.ReadinessProbe != nil {
			probed = c
			probes++
		}
	}
	if probes == 1 {
		return probed
	}
	return nil
}

// probePort is the port of a probe that checks the pod itself (no host of
// its own) on a port of the container (containerPort).
func probePort(c *corev1.Container, host string, port intstr.IntOrString) (int32, bool) {
	if host != "" {
		return 0, false
	}
	return containerPort(c, port)
}

// containerPort resolves a probe's port, a number or the name of one of the
// container's ports, as the kubelet does.
func containerPort(c *corev1.Container, port intstr.IntOrString) (int32, bool) {
	if port.Type == intstr.Int {
		n := port.IntVal
		return n, n >= 1 && n <= 65535
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal && p.ContainerPort >= 1 && p.ContainerPort <= 65535 {
			return p.ContainerPort, true
		}
	}
	return 0, false
}
