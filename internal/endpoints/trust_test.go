package endpoints

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func managedBy(manager string) sliceOpt {
	return func(s *discoveryv1.EndpointSlice) { s.Labels[discoveryv1.LabelManagedBy] = manager }
}

func unmanaged(s *discoveryv1.EndpointSlice) { delete(s.Labels, discoveryv1.LabelManagedBy) }

func withSelector(s *corev1.Service) *corev1.Service {
	s.Spec.Selector = map[string]string{"app": svc}
	return s
}

func TestWhoseSlicesCount(t *testing.T) {
	http := svcPort("http", 80, intstr.FromString("http"))
	mirrored := "endpointslicemirroring-controller.k8s.io"
	tests := []struct {
		name    string
		service *corev1.Service
		slices  []discoveryv1.EndpointSlice
		trusted []string
		want    []string
		leftOut []LeftOutSlice
	}{
		{
			name:    "a slice of the EndpointSlice controller for a Service with a selector is read",
			service: withSelector(service(http)),
			slices:  []discoveryv1.EndpointSlice{slice("web-a", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), eps(ep("10.0.0.1")))},
			want:    []string{"10.0.0.1"},
		},
		{
			name:    "a hand-written slice for a Service with a selector is left out and reported",
			service: withSelector(service(http)),
			slices: []discoveryv1.EndpointSlice{
				slice("web-a", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), eps(ep("10.0.0.1"))),
				slice("web-evil", discoveryv1.AddressTypeIPv4, managedBy("someone"), ports(slicePort("http", 8080)), eps(ep("203.0.113.9"))),
			},
			want:    []string{"10.0.0.1"},
			leftOut: []LeftOutSlice{{Namespace: ns, Name: "web-evil", Manager: "someone"}},
		},
		{
			name:    "a slice without the managed-by label for a Service with a selector is left out and reported",
			service: withSelector(service(http)),
			slices:  []discoveryv1.EndpointSlice{slice("web-x", discoveryv1.AddressTypeIPv4, unmanaged, ports(slicePort("http", 8080)), eps(ep("203.0.113.9")))},
			want:    []string{},
			leftOut: []LeftOutSlice{{Namespace: ns, Name: "web-x"}},
		},
		{
			name:    "a slice of a trusted manager is read",
			service: withSelector(service(http)),
			slices:  []discoveryv1.EndpointSlice{slice("web-mesh", discoveryv1.AddressTypeIPv4, managedBy("mesh.example.com"), ports(slicePort("http", 8080)), eps(ep("10.0.0.2")))},
			trusted: []string{"other.example.com", "mesh.example.com"},
			want:    []string{"10.0.0.2"},
		},
		{
			name:    "trusting a manager does not trust a slice without the label",
			service: withSelector(service(http)),
			slices:  []discoveryv1.EndpointSlice{slice("web-x", discoveryv1.AddressTypeIPv4, unmanaged, ports(slicePort("http", 8080)), eps(ep("10.0.0.3")))},
			trusted: []string{"mesh.example.com"},
			want:    []string{},
			leftOut: []LeftOutSlice{{Namespace: ns, Name: "web-x"}},
		},
		{
			name:    "the mirroring controller's slice of a Service with a selector is left out",
			service: withSelector(service(http)),
			slices:  []discoveryv1.EndpointSlice{slice("web-m", discoveryv1.AddressTypeIPv4, managedBy(mirrored), ports(slicePort("http", 8080)), eps(ep("10.0.0.4")))},
			want:    []string{},
			leftOut: []LeftOutSlice{{Namespace: ns, Name: "web-m", Manager: mirrored}},
		},
		{
			name:    "a selectorless Service reads all its slices, whoever manages them",
			service: service(http),
			slices: []discoveryv1.EndpointSlice{
				slice("web-hand", discoveryv1.AddressTypeIPv4, managedBy("someone"), ports(slicePort("http", 8080)), eps(ep("10.0.0.5"))),
				slice("web-bare", discoveryv1.AddressTypeIPv4, unmanaged, ports(slicePort("http", 8080)), eps(ep("10.0.0.6"))),
				slice("web-m", discoveryv1.AddressTypeIPv4, managedBy(mirrored), ports(slicePort("http", 8080)), eps(ep("10.0.0.7"))),
			},
			want: []string{"10.0.0.5", "10.0.0.6", "10.0.0.7"},
		},
		{
			name:    "a slice of another Service is neither read nor reported",
			service: withSelector(service(http)),
			slices:  []discoveryv1.EndpointSlice{slice("api-x", discoveryv1.AddressTypeIPv4, labelledFor("api"), ports(slicePort("http", 8080)), eps(ep("10.0.0.8")))},
			want:    []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Pool(tt.service, tt.slices, Query{TrustedSliceManagers: tt.trusted})
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, e := range res.Endpoints {
				got = append(got, e.Address)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("addresses = %v, want %v", got, tt.want)
			}
			if !reflect.DeepEqual(res.LeftOut, tt.leftOut) {
				t.Errorf("left out = %+v, want %+v", res.LeftOut, tt.leftOut)
			}
		})
	}
}

func TestANodePoolCountsOnlyTheTrustedSlices(t *testing.T) {
	s := withSelector(service(corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}))
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	node := corev1.Node{}
	node.Name = "node-a"
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	onNode := ep("10.0.0.1")
	onNode.NodeName = &node.Name
	hand := slice("web-hand", discoveryv1.AddressTypeIPv4, managedBy("someone"), ports(slicePort("http", 8080)), eps(onNode))
	res, err := Nodes(s, []discoveryv1.EndpointSlice{hand}, []corev1.Node{node}, Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Endpoints) != 0 || len(res.LeftOut) != 1 {
		t.Errorf("a Local node pool of an untrusted slice's endpoint = %+v, left out %+v; want no node, the slice left out", res.Endpoints, res.LeftOut)
	}
	res, err = Nodes(s, []discoveryv1.EndpointSlice{hand}, []corev1.Node{node}, Query{TrustedSliceManagers: []string{"someone"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Endpoints) != 1 || len(res.LeftOut) != 0 {
		t.Errorf("trusting its manager: %+v, left out %+v; want node-a", res.Endpoints, res.LeftOut)
	}
}
