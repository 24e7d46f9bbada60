package soak

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestTheJudgeReadsAPoolFromItsSlicesApartFromTheProvidersRules(t *testing.T) {
	endpoint := func(ready *bool, addrs ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	slice := func(family discoveryv1.AddressType, port *int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		sl := &discoveryv1.EndpointSlice{AddressType: family, Endpoints: eps}
		if port != nil {
			sl.Ports = []discoveryv1.EndpointPort{{Port: port}}
		}
		return sl
	}
	for _, tt := range []struct {
		name string
		list []*discoveryv1.EndpointSlice
		want []string
	}{
		{"ready and unset ready are members, not ready is not",
			[]*discoveryv1.EndpointSlice{slice(discoveryv1.AddressTypeIPv4, ptr.To[int32](8080),
				endpoint(ptr.To(true), "10.0.0.2"), endpoint(nil, "10.0.0.1"), endpoint(ptr.To(false), "10.0.0.3"))},
			[]string{"10.0.0.1:8080", "10.0.0.2:8080"}},
		{"an endpoint in two slices is one member",
			[]*discoveryv1.EndpointSlice{
				slice(discoveryv1.AddressTypeIPv4, ptr.To[int32](8080), endpoint(ptr.To(true), "10.0.0.1")),
				slice(discoveryv1.AddressTypeIPv4, ptr.To[int32](8080), endpoint(ptr.To(true), "10.0.0.1"))},
			[]string{"10.0.0.1:8080"}},
		{"IPv6 slices and slices without a port are left out",
			[]*discoveryv1.EndpointSlice{
				slice(discoveryv1.AddressTypeIPv6, ptr.To[int32](8080), endpoint(ptr.To(true), "fd00::1")),
				slice(discoveryv1.AddressTypeIPv4, nil, endpoint(ptr.To(true), "10.0.0.9"))},
			nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := sliceMembers(tt.list); !slices.Equal(got, tt.want) {
				t.Errorf("sliceMembers = %v, want %v", got, tt.want)
			}
		})
	}
}
