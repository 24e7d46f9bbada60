package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

func TestNodeArgumentsAreValidatedBeforeAnyClusterIsContacted(t *testing.T) {
	tests := []refusedConfig{
		{"an unknown target", `target = "vms"`, phrase("Attribute target value must be one of", `"pods"`, `"nodes"`, `"vms"`)},
		{"an address type that is not a node IP", `
  target            = "nodes"
  node_address_type = "Hostname"`, phrase("Attribute node_address_type value must be one of", `"InternalIP"`, `"ExternalIP"`)},
		{"a node selector that does not parse", `
  target        = "nodes"
  node_selector = "pool in (edge"`, phrase("Attribute node_selector must be a Kubernetes label selector")},
		{"a node selector for a pool of pods", `node_selector = "pool=edge"`,
			phrase("Node Argument Without Node Target", `node_selector chooses among nodes, and the pool is of pods: target is "pods"`)},
		{"a node address type with target pods", `
  target            = "pods"
  node_address_type = "ExternalIP"`, phrase("Node Argument Without Node Target", "node_address_type", `Set target = "nodes"`)},
		{"kube-proxy's health port for a pool of pods", `kube_proxy_health_port = 10299`,
			phrase("Node Argument Without Node Target", "kube_proxy_health_port is where nodes are health-checked")},
		{"kube-proxy's health port out of range", `
  target                 = "nodes"
  kube_proxy_health_port = 70000`, phrase("Attribute kube_proxy_health_port value must be between 1 and 65535")},
		{"pod health checks for a pool of nodes", `
  target            = "nodes"
  pod_health_checks = true`, phrase("Pod Argument With Node Target", "Node entries always carry their health check")},
	}
	for name, dataSource := range map[string]string{
		"k8s_ready_endpoints": `data "k8s_ready_endpoints" "web" {` + "\n  service = \"web\"",
		"k8s_services":        `data "k8s_services" "all" {`,
	} {
		t.Run(name, func(t *testing.T) {
			expectRefused(t, tests, func(args string) string {
				return unconfiguredProvider + dataSource + "\n  " + args + "\n}\n"
			})
		})
	}
}

func TestReadyEndpointsGivesNodesWithTheirLocalEndpoints(t *testing.T) {
	local := nodesFixture(t, corev1.ServiceExternalTrafficPolicyLocal)
	cluster := nodesFixture(t, corev1.ServiceExternalTrafficPolicyCluster)
	read := func(api *standInAPIServer, args string) string {
		return api.config(t, `
data "k8s_ready_endpoints" "web" {
  service = "web"
  target  = "nodes"
  `) + args + `
}`
	}
	unitSteps(t,
		// Local: only the nodes that run a pod, each with its count.
		endpointsStep(read(local, ""),
			nodeValue("192.168.0.1", "node-a", "zone-a", 2),
			nodeValue("192.168.0.2", "node-b", "zone-b", 1),
		),
		// Cluster: every eligible node; the excluded one is not.
		endpointsStep(read(cluster, ""),
			nodeValue("192.168.0.1", "node-a", "zone-a", 2),
			nodeValue("192.168.0.2", "node-b", "zone-b", 1),
			nodeValue("192.168.0.3", "node-c", "zone-a", 0),
		),
		endpointsStep(read(cluster, `node_selector = "pool=batch"`),
			nodeValue("192.168.0.3", "node-c", "zone-a", 0),
		),
		// node-c has no ExternalIP.
		endpointsStep(read(cluster, `node_address_type = "ExternalIP"`),
			nodeValue("203.0.113.1", "node-a", "zone-a", 2),
			nodeValue("203.0.113.2", "node-b", "zone-b", 1),
		),
	)
}

// A read of nodes makes three requests: the Service, its slices, the nodes.
func TestNodePoolReadMakesThreeRequests(t *testing.T) {
	api := nodesFixture(t, corev1.ServiceExternalTrafficPolicyLocal)
	p := newProtocolProvider(t, writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
	before := api.requests()
	_, diags := p.read(t, "k8s_ready_endpoints", map[string]tftypes.Value{
		"service": tftypes.NewValue(tftypes.String, "web"),
		"target":  tftypes.NewValue(tftypes.String, "nodes"),
	})
	failOnDiagnostics(t, "read nodes", diags)
	if got := api.requests() - before; got != 3 {
		t.Errorf("%d requests for one read of nodes, want 3", got)
	}
	before = api.requests()
	_, diags = p.read(t, "k8s_ready_endpoints", map[string]tftypes.Value{"service": tftypes.NewValue(tftypes.String, "web")})
	failOnDiagnostics(t, "read pods", diags)
	if got := api.requests() - before; got != 2 {
		t.Errorf("%d requests for one read of pods, want 2: no LIST of nodes", got)
	}
}

func TestNodePoolErrorsCarryTheDocumentedTexts(t *testing.T) {
	twoPorts := nodePortWeb(corev1.ServiceExternalTrafficPolicyCluster)
	twoPorts.Spec.Ports = append(twoPorts.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), NodePort: 30443})
	noNodePorts := nodePortWeb(corev1.ServiceExternalTrafficPolicyCluster)
	noNodePorts.Spec.Type = corev1.ServiceTypeLoadBalancer
	noNodePorts.Spec.Ports[0].NodePort = 0
	tests := []struct {
		name         string
		service      corev1.Service
		forbidden    string
		args         string
		want         *regexp.Regexp
		wantRequests int
	}{
		{name: "a ClusterIP Service", service: webService("default", httpPort),
			want: phrase("Service Port Without NodePort", `port "http" of Service default/web`, "type ClusterIP",
				"Make the Service of type NodePort or LoadBalancer", `use target = "pods"`,
				"port http of service default/web has no nodePort"),
			wantRequests: 1},
		{name: "a LoadBalancer Service that allocates no node ports", service: noNodePorts,
			want:         phrase("Service Port Without NodePort", "type LoadBalancer", "allocateLoadBalancerNodePorts: false"),
			wantRequests: 1},
		{name: "a Service of two ports without port_name", service: twoPorts,
			want:         phrase("No Port Chosen For Nodes", "Service default/web", "has 2 ports", "set port_name"),
			wantRequests: 1},
		{name: "an identity that may not list nodes", service: nodePortWeb(""), forbidden: "nodes",
			want: phrase("Permission Denied Listing Nodes", "`list` on `nodes`", "ClusterRole", "ClusterRoleBinding",
				"list nodes: nodes is forbidden"),
			wantRequests: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newStandInAPIServer(t)
			api.addService(tt.service)
			api.forbidden = tt.forbidden
			p := newProtocolProvider(t, writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
			before := api.requests()
			_, diags := p.read(t, "k8s_ready_endpoints", map[string]tftypes.Value{
				"service": tftypes.NewValue(tftypes.String, "web"),
				"target":  tftypes.NewValue(tftypes.String, "nodes"),
			})
			if len(diags) != 1 {
				t.Fatalf("%d diagnostics, want one: %v", len(diags), diags)
			}
			if text := diags[0].Summary + "\n" + diags[0].Detail; !tt.want.MatchString(text) {
				t.Errorf("diagnostic\n%s\ndoes not match %s", text, tt.want)
			}
			if got := api.requests() - before; got != tt.wantRequests {
				t.Errorf("%d requests, want %d", got, tt.wantRequests)
			}
		})
	}
}

// k8s_services reads the nodes once for every Service, and gives each
// Service what k8s_ready_endpoints gives it in node mode.
func TestServicesGiveNodePoolsFromOneListOfNodes(t *testing.T) {
	api := nodesFixture(t, corev1.ServiceExternalTrafficPolicyLocal)
	api2 := nodePortWeb(corev1.ServiceExternalTrafficPolicyCluster)
	api2.Name = "api"
	api2.Spec.Ports[0].NodePort = 30081
	api.addService(api2)
	internal := webService("default", httpPort)
	internal.Name = "internal"
	api.addService(internal)
	apiSlice := webSlice("api-a", readyPod("10.244.2.1", "api-1", "node-b", "zone-b"))
	apiSlice.Labels = map[string]string{discoveryv1.LabelServiceName: "api", discoveryv1.LabelManagedBy: endpoints.EndpointSliceController}
	api.addSlices(apiSlice)

	p := newProtocolProvider(t, writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
	args := map[string]tftypes.Value{
		"target":    tftypes.NewValue(tftypes.String, "nodes"),
		"port_name": tftypes.NewValue(tftypes.String, "http"),
	}
	before := api.requests()
	fleet, diags := p.read(t, "k8s_services", args)
	failOnDiagnostics(t, "read k8s_services", diags)
	if got := api.requests() - before; got != 3 {
		t.Errorf("%d requests, want 3: Services, EndpointSlices, Nodes", got)
	}
	var attrs, services map[string]tftypes.Value
	if err := fleet.As(&attrs); err != nil {
		t.Fatal(err)
	}
	if err := attrs["services"].As(&services); err != nil {
		t.Fatal(err)
	}
	if len(services) != 2 {
		t.Fatalf("services = %s, want default/web and default/api", attrs["services"])
	}
	var skipped []tftypes.Value
	if err := attrs["skipped"].As(&skipped); err != nil {
		t.Fatal(err)
	}
	skippedType := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"namespace": tftypes.String, "name": tftypes.String, "reason": tftypes.String}}
	wantSkipped := tftypes.NewValue(skippedType, map[string]tftypes.Value{
		"namespace": tftypes.NewValue(tftypes.String, "default"),
		"name":      tftypes.NewValue(tftypes.String, "internal"),
		"reason": tftypes.NewValue(tftypes.String, "port http of service default/internal has no nodePort (the Service is of type ClusterIP): "+
			"a node pool needs a NodePort or LoadBalancer Service that allocates node ports"),
	})
	if len(skipped) != 1 || !skipped[0].Equal(wantSkipped) {
		t.Errorf("skipped = %s, want %s", attrs["skipped"], wantSkipped)
	}
	for _, name := range []string{"web", "api"} {
		alone, diags := p.read(t, "k8s_ready_endpoints", map[string]tftypes.Value{
			"service":   tftypes.NewValue(tftypes.String, name),
			"target":    tftypes.NewValue(tftypes.String, "nodes"),
			"port_name": tftypes.NewValue(tftypes.String, "http"),
		})
		failOnDiagnostics(t, "read k8s_ready_endpoints", diags)
		var aloneAttrs, svcAttrs map[string]tftypes.Value
		if err := alone.As(&aloneAttrs); err != nil {
			t.Fatal(err)
		}
		if err := services["default/"+name].As(&svcAttrs); err != nil {
			t.Fatal(err)
		}
		if !svcAttrs["endpoints"].Equal(aloneAttrs["endpoints"]) {
			t.Errorf("%s: the fleet gives\n %s\nk8s_ready_endpoints gives\n %s", name, svcAttrs["endpoints"], aloneAttrs["endpoints"])
		}
	}
	// web is Local: node-a (2 pods) and node-b (1); api is Cluster on 30081.
	var web map[string]tftypes.Value
	_ = services["default/web"].As(&web)
	var webEndpoints []tftypes.Value
	_ = web["endpoints"].As(&webEndpoints)
	if len(webEndpoints) != 2 {
		t.Errorf("web has %d node entries, want 2 (Local)", len(webEndpoints))
	}
}
