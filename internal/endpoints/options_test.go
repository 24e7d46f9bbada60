package endpoints

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func conds(ready, serving, terminating *bool) epOpt {
	return func(e *discoveryv1.Endpoint) {
		e.Conditions = discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}
	}
}

func inZone(zone string) epOpt { return func(e *discoveryv1.Endpoint) { e.Zone = ptr.To(zone) } }

func annotated(key, value string) sliceOpt {
	return func(s *discoveryv1.EndpointSlice) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[key] = value
	}
}

// draining is a terminating endpoint on 8080 that still serves, as a pod in its grace period.
func draining(addr string) Endpoint {
	return Endpoint{Address: addr, Port: 8080, AddressType: discoveryv1.AddressTypeIPv4, Serving: true, Terminating: true}
}

func zoned(e Endpoint, zone string) Endpoint {
	e.Zone = zone
	return e
}

func TestPoolOptions(t *testing.T) {
	httpSlice := func(name string, opts ...sliceOpt) discoveryv1.EndpointSlice {
		return slice(name, v4Slice, append([]sliceOpt{ports(slicePort("http", 8080))}, opts...)...)
	}
	// A rollout in progress: one pod ready, one draining, one starting, one
	// that stopped serving while terminating.
	rollout := []discoveryv1.EndpointSlice{httpSlice("a", eps(
		ep("10.0.0.1"),
		with(ep("10.0.0.2"), conds(ptr.To(false), ptr.To(true), ptr.To(true))),
		with(ep("10.0.0.3"), conds(ptr.To(false), ptr.To(false), ptr.To(false))),
		with(ep("10.0.0.4"), conds(ptr.To(false), ptr.To(false), ptr.To(true))),
	))}
	onlyDraining := []discoveryv1.EndpointSlice{httpSlice("a", eps(
		with(ep("10.0.0.2"), conds(ptr.To(false), ptr.To(true), ptr.To(true))),
		with(ep("10.0.0.3"), conds(ptr.To(false), ptr.To(false), ptr.To(false))),
	))}

	tests := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		query  Query
		want   []Endpoint
	}{
		{
			name: "missing conditions take the API's defaults: ready, serving, not terminating",
			slices: []discoveryv1.EndpointSlice{httpSlice("a", eps(
				with(ep("10.0.0.1"), conds(nil, nil, nil)),
				with(ep("10.0.0.2"), conds(ptr.To(true), ptr.To(false), nil)),
			))},
			want: []Endpoint{v4("10.0.0.1", 8080), {Address: "10.0.0.2", Port: 8080, AddressType: v4Slice, Ready: true}},
		},
		{
			name: "a terminating endpoint that is not ready and gives no serving condition serves, as kube-proxy reads it",
			slices: []discoveryv1.EndpointSlice{httpSlice("a", eps(
				with(ep("10.0.0.1"), conds(ptr.To(false), nil, ptr.To(true))),
			))},
			query: Query{Terminating: TerminatingInclude},
			want:  []Endpoint{draining("10.0.0.1")},
		},
		{
			name: "fallback gives a terminating endpoint without a serving condition when none is ready",
			slices: []discoveryv1.EndpointSlice{httpSlice("a", eps(
				with(ep("10.0.0.1"), conds(ptr.To(false), nil, ptr.To(true))),
				with(ep("10.0.0.2"), conds(ptr.To(false), ptr.To(false), ptr.To(true))),
			))},
			query: Query{Terminating: TerminatingFallback},
			want:  []Endpoint{draining("10.0.0.1")},
		},
		{
			name: "a starting endpoint without a serving condition is still left out: it is not terminating",
			slices: []discoveryv1.EndpointSlice{httpSlice("a", eps(
				with(ep("10.0.0.1"), conds(ptr.To(false), nil, nil)),
			))},
			query: Query{Terminating: TerminatingInclude},
			want:  []Endpoint{},
		},
		{
			name:   "by default terminating endpoints are left out even when they still serve",
			slices: rollout,
			want:   []Endpoint{v4("10.0.0.1", 8080)},
		},
		{
			name:   "exclude is the default",
			slices: rollout,
			query:  Query{Terminating: TerminatingExclude},
			want:   []Endpoint{v4("10.0.0.1", 8080)},
		},
		{
			name:   "include gives ready and serving terminating endpoints, never starting or not serving ones",
			slices: rollout,
			query:  Query{Terminating: TerminatingInclude},
			want:   []Endpoint{v4("10.0.0.1", 8080), draining("10.0.0.2")},
		},
		{
			name:   "fallback gives only the ready endpoints while there are some",
			slices: rollout,
			query:  Query{Terminating: TerminatingFallback},
			want:   []Endpoint{v4("10.0.0.1", 8080)},
		},
		{
			name:   "fallback gives serving terminating endpoints when none is ready",
			slices: onlyDraining,
			query:  Query{Terminating: TerminatingFallback},
			want:   []Endpoint{draining("10.0.0.2")},
		},
		{
			name:   "without fallback a Service whose pods all terminate gives an empty list",
			slices: onlyDraining,
			want:   []Endpoint{},
		},
		{
			name: "fallback looks at the endpoints left by the zone filter",
			slices: []discoveryv1.EndpointSlice{httpSlice("a", eps(
				with(ep("10.0.0.1"), inZone("zone-b")),
				with(ep("10.0.0.2"), inZone("zone-a"), conds(ptr.To(false), ptr.To(true), ptr.To(true))),
			))},
			query: Query{Terminating: TerminatingFallback, Zones: []string{"zone-a"}},
			want:  []Endpoint{zoned(draining("10.0.0.2"), "zone-a")},
		},
		{
			name: "with include, a copy of an endpoint still ready in a stale slice wins over a terminating one",
			slices: []discoveryv1.EndpointSlice{
				httpSlice("a", eps(with(ep("10.0.0.1"), conds(ptr.To(false), ptr.To(true), ptr.To(true))))),
				httpSlice("b", eps(ep("10.0.0.1"))),
			},
			query: Query{Terminating: TerminatingInclude},
			want:  []Endpoint{v4("10.0.0.1", 8080)},
		},
		{
			name: "an address family keeps only the endpoints of that family",
			slices: []discoveryv1.EndpointSlice{
				httpSlice("v4", eps(ep("10.0.0.1"))),
				slice("v6", v6Slice, ports(slicePort("http", 8080)), eps(ep("fd00::1"))),
			},
			query: Query{AddressType: discoveryv1.AddressTypeIPv6},
			want:  []Endpoint{v6("fd00::1")},
		},
		{
			name: "zones keep only the endpoints in them, and none without a zone",
			slices: []discoveryv1.EndpointSlice{httpSlice("a", eps(
				with(ep("10.0.0.1"), inZone("zone-a")),
				with(ep("10.0.0.2"), inZone("zone-b")),
				with(ep("10.0.0.3"), inZone("zone-c")),
				ep("10.0.0.4"),
			))},
			query: Query{Zones: []string{"zone-c", "zone-a"}},
			want:  []Endpoint{zoned(v4("10.0.0.1", 8080), "zone-a"), zoned(v4("10.0.0.3", 8080), "zone-c")},
		},
		{
			name: "slices whose expiry annotation has passed are left out, as RFC 3339 or Unix seconds",
			slices: []discoveryv1.EndpointSlice{
				httpSlice("expired-rfc3339", annotated("lb.example.com/expires", "2026-11-29T11:59:59Z"), eps(ep("10.0.0.1"))),
				httpSlice("expired-now", annotated("lb.example.com/expires", "2026-11-29T13:00:00+01:00"), eps(ep("10.0.0.2"))),
				httpSlice("expired-unix", annotated("lb.example.com/expires", "1795953599"), eps(ep("10.0.0.3"))),
				httpSlice("fresh-rfc3339", annotated("lb.example.com/expires", "2026-11-29T12:00:01Z"), eps(ep("10.0.0.4"))),
				httpSlice("fresh-unix", annotated("lb.example.com/expires", "1795953601"), eps(ep("10.0.0.5"))),
				httpSlice("no-expiry", eps(ep("10.0.0.6"))),
			},
			query: Query{ExpiryAnnotation: "lb.example.com/expires", Now: now},
			want:  []Endpoint{v4("10.0.0.4", 8080), v4("10.0.0.5", 8080), v4("10.0.0.6", 8080)},
		},
		{
			name: "an expiry annotation is ignored unless asked for",
			slices: []discoveryv1.EndpointSlice{
				httpSlice("expired", annotated("lb.example.com/expires", "2020-01-01T00:00:00Z"), eps(ep("10.0.0.1"))),
			},
			query: Query{Now: now},
			want:  []Endpoint{v4("10.0.0.1", 8080)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.query
			q.PortName, q.DefaultPort = "http", 80
			res, err := Pool(service(http), tt.slices, q)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Endpoints, tt.want) {
				t.Errorf("got  %+v\nwant %+v", res.Endpoints, tt.want)
			}
			if len(res.Warnings) > 0 {
				t.Errorf("unexpected warnings %v", res.Warnings)
			}
		})
	}
}

func TestAnUnreadableExpiryKeepsTheSliceWithAWarningNamingIt(t *testing.T) {
	in := []discoveryv1.EndpointSlice{
		slice("web-abc", v4Slice, ports(slicePort("http", 8080)), annotated("lb.example.com/expires", "tomorrow"), eps(ep("10.0.0.1"))),
	}
	res, err := Pool(service(http), in, Query{PortName: "http", DefaultPort: 80, ExpiryAnnotation: "lb.example.com/expires", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Endpoints, []Endpoint{v4("10.0.0.1", 8080)}) {
		t.Errorf("endpoints = %+v, want the slice kept", res.Endpoints)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "EndpointSlice shop/web-abc") ||
		!strings.Contains(res.Warnings[0], `"tomorrow"`) {
		t.Errorf("warnings = %q, want one naming the slice and the value", res.Warnings)
	}
}

func TestLastChangeTriggerTimeIsTheLatestOfTheServicesSlices(t *testing.T) {
	trigger := func(v string) sliceOpt { return annotated(LastChangeTriggerTimeAnnotation, v) }
	tests := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   time.Time
	}{
		{"none has one", []discoveryv1.EndpointSlice{slice("a", v4Slice)}, time.Time{}},
		{"the latest wins, fractions of seconds included", []discoveryv1.EndpointSlice{
			slice("a", v4Slice, trigger("2026-11-29T10:00:00.5Z")),
			slice("b", v6Slice, trigger("2026-11-29T10:00:00.7Z")),
			slice("c", v4Slice, trigger("not a time")),
		}, time.Date(2026, 11, 29, 10, 0, 0, 700000000, time.UTC)},
		{"slices of another Service do not count", []discoveryv1.EndpointSlice{
			slice("a", v4Slice, trigger("2026-11-29T10:00:00Z")),
			slice("b", v4Slice, labelledFor("api"), trigger("2026-11-29T11:00:00Z")),
		}, time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Pool(service(http), tt.slices, Query{DefaultPort: 80})
			if err != nil {
				t.Fatal(err)
			}
			if !res.LastChangeTriggerTime.Equal(tt.want) {
				t.Errorf("got %v, want %v", res.LastChangeTriggerTime, tt.want)
			}
		})
	}
}

func TestNextExpiryIsTheEarliestToCome(t *testing.T) {
	const annotation = "example.com/expires"
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	expiring := func(name, value string) discoveryv1.EndpointSlice {
		s := slice(name, discoveryv1.AddressTypeIPv4)
		s.Annotations = map[string]string{annotation: value}
		return s
	}
	tests := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   time.Time
	}{
		{name: "no annotation, no expiry", slices: []discoveryv1.EndpointSlice{slice("a", discoveryv1.AddressTypeIPv4)}},
		{name: "one already past is not to come", slices: []discoveryv1.EndpointSlice{expiring("a", "2026-12-01T11:00:00Z")}},
		{name: "an unreadable value is not to come", slices: []discoveryv1.EndpointSlice{expiring("a", "soon")}},
		{
			name:   "the earliest of RFC 3339 and Unix seconds",
			slices: []discoveryv1.EndpointSlice{expiring("a", "2026-12-01T13:00:00Z"), expiring("b", strconv.FormatInt(now.Add(90*time.Second).Unix(), 10))},
			want:   now.Add(90 * time.Second),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := NextExpiry(tt.slices, annotation, now)
			if ok != !tt.want.IsZero() || !got.Equal(tt.want) {
				t.Errorf("NextExpiry = %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
}

// The guards count what takes new connections: under every
// terminating_endpoints policy, draining pods may be in the pool but are
// never counted.
func TestCountReadyCountsReadyEndpointsOnlyUnderEveryPolicy(t *testing.T) {
	httpSlice := func(e ...discoveryv1.Endpoint) []discoveryv1.EndpointSlice {
		return []discoveryv1.EndpointSlice{slice("a", v4Slice, ports(slicePort("http", 8080)), eps(e...))}
	}
	drainingEp := func(addr string) discoveryv1.Endpoint {
		return with(ep(addr), conds(ptr.To(false), ptr.To(true), ptr.To(true)))
	}
	oneReadyTwoDraining := httpSlice(ep("10.0.0.1"), drainingEp("10.0.0.2"), drainingEp("10.0.0.3"))
	twoDraining := httpSlice(drainingEp("10.0.0.2"), drainingEp("10.0.0.3"))
	tests := []struct {
		policy          TerminatingPolicy
		slices          []discoveryv1.EndpointSlice
		inPool, counted int
	}{
		{TerminatingExclude, oneReadyTwoDraining, 1, 1},
		{TerminatingFallback, oneReadyTwoDraining, 1, 1},
		{TerminatingInclude, oneReadyTwoDraining, 3, 1},
		{TerminatingExclude, twoDraining, 0, 0},
		{TerminatingFallback, twoDraining, 2, 0},
		{TerminatingInclude, twoDraining, 2, 0},
	}
	for _, tt := range tests {
		res, err := Pool(service(http), tt.slices, Query{PortName: "http", Terminating: tt.policy})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Endpoints) != tt.inPool || CountReady(res.Endpoints) != tt.counted {
			t.Errorf("%s, %d endpoints: pool of %d, %d counted; want %d, %d counted",
				tt.policy, len(tt.slices[0].Endpoints), len(res.Endpoints), CountReady(res.Endpoints), tt.inPool, tt.counted)
		}
	}
}
