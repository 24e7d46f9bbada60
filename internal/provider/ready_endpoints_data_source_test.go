package provider

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestReadyEndpointsArgumentsAreValidatedBeforeAnyClusterIsContacted(t *testing.T) {
	tests := []refusedConfig{
		{"an empty service", `service = ""`, phrase("Attribute service must be a DNS-1123 label", "it is empty")},
		{"a service with capitals", `service = "Web"`, phrase("Attribute service must be a DNS-1123 label", `"Web"`)},
		{"a service longer than 63 characters", fmt.Sprintf("service = %q", "a123456789b123456789c123456789d123456789e123456789f123456789g1234"),
			phrase("Attribute service must be a DNS-1123 label", "no more than 63")},
		{"a namespace with an underscore", `
  service   = "web"
  namespace = "my_shop"`, phrase("Attribute namespace must be a DNS-1123 label", `"my_shop"`)},
		{"an empty namespace", `
  service   = "web"
  namespace = ""`, phrase("Attribute namespace must be a DNS-1123 label", "it is empty")},
		{"a port name that starts with a dash", `
  service   = "web"
  port_name = "-http"`, phrase("Attribute port_name must be a DNS-1123 label", `"-http"`)},
		{"port 0", `
  service      = "web"
  default_port = 0`, phrase("Attribute default_port value must be between 1 and 65535, got: 0")},
		{"port 65536", `
  service      = "web"
  default_port = 65536`, phrase("Attribute default_port value must be between 1 and 65535, got: 65536")},
		{"an unknown terminating policy", `
  service               = "web"
  terminating_endpoints = "drain"`, phrase("Attribute terminating_endpoints value must be one of", `"exclude"`, `"fallback"`, `"include"`, `"drain"`)},
		{"an address type that is not an IP family", `
  service      = "web"
  address_type = "FQDN"`, phrase("Attribute address_type value must be one of", `"IPv4"`, `"IPv6"`, `"FQDN"`)},
		{"an empty set of zones", `
  service = "web"
  zones   = []`, phrase("Attribute zones set must contain at least 1 elements")},
		{"an empty zone", `
  service = "web"
  zones   = [""]`, phrase("zones", "string length must be at least 1")},
		{"a negative min_ready", `
  service   = "web"
  min_ready = -1`, phrase("Attribute min_ready value must be at least 0, got: -1")},
		{"an expiry annotation that is not an annotation name", `
  service           = "web"
  expiry_annotation = "not a name"`, phrase("Attribute expiry_annotation must be a Kubernetes annotation name", `"not a name"`)},
		{"a read timeout that is not a duration", `
  service = "web"
  timeouts {
    read = "soon"
  }`, phrase("Invalid Attribute Value Time Duration", `"soon" must be a string containing a sequence of decimal numbers`)},
	}
	expectRefused(t, tests, func(args string) string {
		return unconfiguredProvider + "data \"k8s_ready_endpoints\" \"web\" {\n  " + args + "\n}"
	})
}

func TestReadyEndpointsReadsTheServiceThroughTheAPI(t *testing.T) {
	api := newStandInAPIServer(t)
	api.addService(webService("default", httpPort))
	notReady := readyPod("10.0.0.3", "web-3", "node-a", "zone-a")
	notReady.Conditions.Ready = ptr.To(false)
	api.addSlices(
		webSlice("web-b",
			readyPod("10.0.0.10", "web-10", "node-b", "zone-b"), notReady),
		webSlice("web-a",
			readyPod("10.0.0.9", "web-9", "node-a", "zone-a"),
			discoveryv1.Endpoint{Addresses: []string{"10.0.0.10"}}), // a copy with less detail
	)
	standInTest(t, api, webRead(`port_name = "http"`),
		webValue("id", knownvalue.StringExact("default/web")),
		webValue("namespace", knownvalue.StringExact("default")),
		webValue("default_port", knownvalue.Int64Exact(80)),
		webValue("endpoints", knownvalue.ListExact([]knownvalue.Check{
			endpointValue("10.0.0.9", 8080, "IPv4", knownvalue.StringExact("web-9"), knownvalue.StringExact("node-a"), knownvalue.StringExact("zone-a"), knownvalue.Null()),
			endpointValue("10.0.0.10", 8080, "IPv4", knownvalue.StringExact("web-10"), knownvalue.StringExact("node-b"), knownvalue.StringExact("zone-b"), knownvalue.Null()),
		})),
	)
}

func TestReadyEndpointsPodHealthChecksAreTheirReadinessProbes(t *testing.T) {
	api := newStandInAPIServer(t)
	svc := webService("default", httpPort)
	svc.Spec.Selector = map[string]string{"app": "web"}
	api.addService(svc)
	api.addSlices(webSlice("web-a", readyPod("10.0.0.9", "web-9", "node-a", "zone-a"), readyPod("10.0.0.10", "web-10", "node-b", "zone-b")))
	pod := func(name string, labels map[string]string, probe *corev1.Probe) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", ReadinessProbe: probe,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}
	}
	api.addPods(
		pod("web-9", svc.Spec.Selector, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/ready", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTPS}}}),
		// A pod of that name that the Service does not select is not web-10.
		pod("web-10", map[string]string{"app": "other"}, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}),
	)
	at := func(i int) tfjsonpath.Path {
		return tfjsonpath.New("endpoints").AtSliceIndex(i).AtMapKey("health_check")
	}
	standInTest(t, api, webRead(`port_name = "http"`, `pod_health_checks = true`),
		statecheck.ExpectKnownValue("data.k8s_ready_endpoints.web", at(0), knownvalue.ObjectExact(map[string]knownvalue.Check{
			"type": knownvalue.StringExact("https"), "port": knownvalue.Int64Exact(8080),
			"path": knownvalue.StringExact("/ready"), "source": knownvalue.StringExact("readinessProbe"),
		})),
		statecheck.ExpectKnownValue("data.k8s_ready_endpoints.web", at(1), knownvalue.Null()),
	)
}

func TestReadyEndpointsWithNothingReadyIsAnEmptyListNotNull(t *testing.T) {
	api := newStandInAPIServer(t)
	api.addService(webService("shop", httpPort))
	standInTest(t, api, webRead(`namespace = "shop"`),
		webValue("id", knownvalue.StringExact("shop/web")),
		webValue("endpoints", knownvalue.ListExact([]knownvalue.Check{})),
	)
}

func TestReadyEndpointsErrorsCarryTheDocumentedTexts(t *testing.T) {
	tests := []struct {
		name      string
		forbidden string
		noService bool
		args      string
		want      *regexp.Regexp
	}{
		{name: "a Service that does not exist", noService: true,
			want: phrase("Service Not Found", "The Service doesn't exist in namespace shop", `get service shop/web: services "web" not found`)},
		{name: "an identity that may not get the Service", forbidden: "services",
			want: phrase("Permission Denied Reading Service", "Role", "get service shop/web: services \"web\" is forbidden")},
		{name: "an identity that may not list EndpointSlices", forbidden: "endpointslices",
			want: phrase("Permission Denied Listing EndpointSlices", "the second rule of the Role", "list endpointslices of service shop/web: endpointslices.discovery.k8s.io is forbidden")},
		{name: "a port name the Service does not have", args: `port_name = "https"`,
			want: phrase("Port Not Found", `The Service has ports named "http"`, "port https not found in service shop/web")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newStandInAPIServer(t)
			if !tt.noService {
				api.addService(webService("shop", httpPort))
			}
			api.forbidden = tt.forbidden
			unitSteps(t, resource.TestStep{
				Config: api.config(t, `
data "k8s_ready_endpoints" "web" {
  namespace = "shop"
  service   = "web"
  `) + tt.args + `
}`,
				ExpectError: tt.want,
			})
		})
	}
}
