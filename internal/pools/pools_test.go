package pools

import (
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// Builders keep each case down to what it is about.

func service(name string, typ corev1.ServiceType, nodePort int32) corev1.Service {
	return corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, TargetPort: intstr.FromString("http"), NodePort: nodePort, Protocol: corev1.ProtocolTCP,
		}}},
	}
}

// slice is an EndpointSlice of service, as the EndpointSlice controller
// writes it.
func slice(service string, addresses ...string) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: service + "-abc",
			Labels: map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: endpoints.EndpointSliceController},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}},
	}
	for _, a := range addresses {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: ptr.To("node-a")})
	}
	return s
}

func node(name, ip string) corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		},
	}
}

func addresses(eps []endpoints.Endpoint) []string {
	out := []string{}
	for _, e := range eps {
		out = append(out, e.Address)
	}
	return out
}

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestRequestCompute(t *testing.T) {
	web := service("web", corev1.ServiceTypeNodePort, 30080)
	clusterIP := service("web", corev1.ServiceTypeClusterIP, 0)
	pods := Request{Namespace: "shop", Service: "web", Query: endpoints.Query{PortName: "http"}}
	nodes := pods
	nodes.Nodes = NodeTarget{Enabled: true}
	nodes.Query.NodeAddressType = corev1.NodeInternalIP
	tests := []struct {
		name    string
		request Request
		objects Objects
		want    []string
		wantErr bool
	}{
		{
			name: "a pod pool is the ready pods of the slices", request: pods,
			objects: Objects{Service: &web, EndpointSlices: []discoveryv1.EndpointSlice{slice("web", "10.0.0.2", "10.0.0.1")}},
			want:    []string{"10.0.0.1", "10.0.0.2"},
		},
		{
			name: "a node pool is the nodes that run them", request: nodes,
			objects: Objects{
				Service: &web, EndpointSlices: []discoveryv1.EndpointSlice{slice("web", "10.0.0.1")},
				Nodes: []corev1.Node{node("node-a", "192.0.2.1")},
			},
			want: []string{"192.0.2.1"},
		},
		{
			name: "a node pool of a Service without a nodePort is an error", request: nodes,
			objects: Objects{Service: &clusterIP}, wantErr: true,
		},
		{
			name: "a Service without the named port is an error", request: Request{Query: endpoints.Query{PortName: "grpc"}},
			objects: Objects{Service: &web}, wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.request.Compute(tt.objects, now)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Compute gave %v, want an error", res.Endpoints)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := addresses(res.Endpoints); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("addresses = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCheckServiceRefusesOnlyWhatThePoolCannotUse(t *testing.T) {
	clusterIP := service("web", corev1.ServiceTypeClusterIP, 0)
	pods := Request{Query: endpoints.Query{PortName: "http"}}
	if err := pods.CheckService(&clusterIP); err != nil {
		t.Errorf("a pod pool of a ClusterIP Service: %v", err)
	}
	nodes := pods
	nodes.Nodes.Enabled = true
	var noNodePort *endpoints.NoNodePortError
	if err := nodes.CheckService(&clusterIP); err == nil {
		t.Error("a node pool of a ClusterIP Service was not refused")
	} else if !errors.As(err, &noNodePort) {
		t.Errorf("error %v is not a NoNodePortError", err)
	}
}

func TestFleetCompute(t *testing.T) {
	web, api, blog := service("web", corev1.ServiceTypeClusterIP, 0), service("api", corev1.ServiceTypeClusterIP, 0), service("blog", corev1.ServiceTypeClusterIP, 0)
	objects := FleetObjects{
		Services:       []corev1.Service{web, api, blog},
		EndpointSlices: []discoveryv1.EndpointSlice{slice("web", "10.0.0.1"), slice("api", "10.0.0.2", "10.0.0.3")},
	}
	tests := []struct {
		name       string
		request    FleetRequest
		wantPools  []string
		guardsHold bool
	}{
		{
			name:      "every Service the selector gave, sorted",
			request:   FleetRequest{Namespaces: []string{"shop"}, Query: endpoints.Query{PortName: "http"}},
			wantPools: []string{"api", "blog", "web"}, guardsHold: true,
		},
		{
			name:      "names keep only those Services",
			request:   FleetRequest{Namespaces: []string{"shop"}, Names: []string{"web", "nope"}, Query: endpoints.Query{PortName: "http"}},
			wantPools: []string{"web"}, guardsHold: true,
		},
		{
			name:      "min_ready fails on the Service with no endpoint",
			request:   FleetRequest{Namespaces: []string{"shop"}, MinReady: 1, Query: endpoints.Query{PortName: "http"}},
			wantPools: []string{"api", "blog", "web"}, guardsHold: false,
		},
		{
			name:      "min_services fails when names leave fewer",
			request:   FleetRequest{Namespaces: []string{"shop"}, Names: []string{"web"}, MinServices: 2, Query: endpoints.Query{PortName: "http"}},
			wantPools: []string{"web"}, guardsHold: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.request.Compute(objects, now)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range res.Pools {
				got = append(got, p.Service.Name)
			}
			if !reflect.DeepEqual(got, tt.wantPools) {
				t.Errorf("pools = %v, want %v", got, tt.wantPools)
			}
			if hold := tt.request.GuardsHold(res); hold != tt.guardsHold {
				t.Errorf("GuardsHold = %v, want %v", hold, tt.guardsHold)
			}
		})
	}
}

func TestAllNamespacesIsTheOneEmptyNamespace(t *testing.T) {
	for _, tt := range []struct {
		namespaces []string
		want       bool
	}{{[]string{""}, true}, {[]string{"shop"}, false}, {[]string{"a", "b"}, false}, {nil, false}} {
		if got := (FleetRequest{Namespaces: tt.namespaces}).AllNamespaces(); got != tt.want {
			t.Errorf("AllNamespaces(%q) = %v, want %v", tt.namespaces, got, tt.want)
		}
	}
}
