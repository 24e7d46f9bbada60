package soak

import (
	"cmp"
	"slices"
	"testing"
	"time"

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

func TestWhatTheCompanionCouldSeeOfTheChangesIsEachChangeOfTheSlices(t *testing.T) {
	p, q := pool{namespace: "soak", service: "p"}, pool{namespace: "soak", service: "q"}
	for _, tt := range []struct {
		name            string
		written, events map[pool][]time.Time
		want            []madeChange
	}{
		{"a pod replaced, its removal and the new pod's readiness written apart, is two changes",
			map[pool][]time.Time{p: {at(0)}}, map[pool][]time.Time{p: {at(0.3), at(1.5)}},
			[]madeChange{{at: at(0), sliced: at(0.3)}, {at: at(0), sliced: at(1.5)}}},
		{"an event that no change preceded is not the driver's",
			map[pool][]time.Time{p: {at(5)}}, map[pool][]time.Time{p: {at(1), at(5.2)}},
			[]madeChange{{at: at(5), sliced: at(5.2)}}},
		{"a change that no event followed before the next one of its pool is kept at its write",
			map[pool][]time.Time{p: {at(0.2), at(0)}}, map[pool][]time.Time{p: {at(0.5)}},
			[]madeChange{{at: at(0)}, {at: at(0.2), sliced: at(0.5)}}},
		{"the events of a pool are paired with its own changes only",
			map[pool][]time.Time{p: {at(0)}, q: {at(1)}}, map[pool][]time.Time{p: {at(0.4)}, q: {at(0.9), at(2)}},
			[]madeChange{{at: at(0), sliced: at(0.4)}, {at: at(1), sliced: at(2)}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := shownChanges(tt.written, tt.events)
			order := func(a, b madeChange) int {
				return cmp.Or(a.at.Compare(b.at), a.sliced.Compare(b.sliced))
			}
			slices.SortFunc(got, order)
			if !slices.Equal(got, tt.want) {
				t.Errorf("shownChanges = %v, want %v", got, tt.want)
			}
		})
	}
}
