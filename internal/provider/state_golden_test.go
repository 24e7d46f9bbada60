package provider

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden/ from the current code")

// The state of a read is pinned, byte for byte, by golden files written by an
// earlier version of the state builder: a faster builder must give the same
// endpoints, order, nulls and attributes. Regenerate them (go test -run
// TestReadStateIsStable -update-golden) only for a change of the contract,
// and say so in the commit.
func TestReadStateIsStable(t *testing.T) {
	tests := []struct {
		name string
		args map[string]tftypes.Value
	}{
		{"two thousand endpoints with the defaults", map[string]tftypes.Value{
			"service": tftypes.NewValue(tftypes.String, "big"),
		}},
		{"two thousand endpoints with draining ones included and a default port", map[string]tftypes.Value{
			"service":               tftypes.NewValue(tftypes.String, "big"),
			"port_name":             tftypes.NewValue(tftypes.String, "http"),
			"default_port":          tftypes.NewValue(tftypes.Number, 9000),
			"terminating_endpoints": tftypes.NewValue(tftypes.String, "include"),
		}},
		{"two thousand endpoints of IPv6 in two zones with at least one", map[string]tftypes.Value{
			"service":      tftypes.NewValue(tftypes.String, "big"),
			"address_type": tftypes.NewValue(tftypes.String, "IPv6"),
			"zones":        tftypes.NewValue(tftypes.Set{ElementType: tftypes.String}, []tftypes.Value{tftypes.NewValue(tftypes.String, "zone-b"), tftypes.NewValue(tftypes.String, "zone-c")}),
			"min_ready":    tftypes.NewValue(tftypes.Number, 1),
		}},
	}
	api := newStandInAPIServer(t)
	svc, slices := manyEndpoints("big", 2000)
	api.addService(svc)
	api.addSlices(slices...)
	p := newProtocolProvider(t, writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, diags := p.read(t, "k8s_ready_endpoints", tt.args)
			failOnDiagnostics(t, "ReadDataSource", diags)
			checkGolden(t, filepath.Join("testdata", "golden", strings.ReplaceAll(tt.name, " ", "_")+".txt"), goldenText(t, state))
		})
	}
	fleet := newProtocolProvider(t, writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": fleetFixture(t).URL}))
	for _, tt := range []struct {
		name string
		args map[string]tftypes.Value
	}{
		{"a fleet of two namespaces", map[string]tftypes.Value{"namespaces": stringSet("shop", "blog"), "port_name": tfString("http")}},
		{"a fleet of every namespace with draining endpoints", map[string]tftypes.Value{
			"all_namespaces": tftypes.NewValue(tftypes.Bool, true), "terminating_endpoints": tfString("include"), "min_services": tfNumber(1)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state, diags := fleet.read(t, "k8s_services", tt.args)
			failOnDiagnostics(t, "ReadDataSource", diags)
			checkGolden(t, filepath.Join("testdata", "golden", strings.ReplaceAll(tt.name, " ", "_")+".txt"), goldenText(t, state))
		})
	}
}

// checkGolden compares got with the golden file at path, which
// -update-golden rewrites first.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with -update-golden)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the state differs from %s:\n%s", path, firstDifference(got, want))
	}
}

// goldenText renders a state one attribute a line, sorted, and a list
// attribute one element a line, so that a difference points at an endpoint.
func goldenText(t *testing.T, state tftypes.Value) []byte {
	t.Helper()
	var attrs map[string]tftypes.Value
	if err := state.As(&attrs); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range attrs {
			if !yield(k) {
				return
			}
		}
	}) {
		v := attrs[name]
		var elems []tftypes.Value
		if v.Type().Is(tftypes.List{}) && !v.IsNull() && v.As(&elems) == nil {
			fmt.Fprintf(&b, "%s: [%d]\n", name, len(elems))
			for _, e := range elems {
				fmt.Fprintf(&b, "  %s\n", compactJSON(t, e))
			}
			continue
		}
		fmt.Fprintf(&b, "%s: %s\n", name, compactJSON(t, v))
	}
	return b.Bytes()
}

func compactJSON(t *testing.T, v tftypes.Value) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, stateJSON(t, v)); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func firstDifference(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got:  %s\n want: %s", i+1, gl, wl)
		}
	}
	return "(no line differs)"
}

// manyEndpoints is a Service of namespace default with one port, http, and n
// endpoints in slices of 100 that use every case the rules know: IPv4 and
// IPv6 slices; missing, true and false conditions, draining and gone
// endpoints; missing pod, node, zone and hostname; an endpoint repeated in the
// next slice with fewer facts; slices without a port number; several
// addresses; a trigger time. Everything derives from the index, so the
// fixture is the same on every run and every Go version.
func manyEndpoints(service string, n int) (corev1.Service, []discoveryv1.EndpointSlice) {
	svc := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: service},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("web")}}},
	}
	const perSlice = 100
	var out []discoveryv1.EndpointSlice
	for s := 0; s*perSlice < n; s++ {
		family := discoveryv1.AddressTypeIPv4
		if s%4 == 3 {
			family = discoveryv1.AddressTypeIPv6
		}
		slice := discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "default",
				Name:      fmt.Sprintf("%s-%03d", service, s),
				Labels:    map[string]string{discoveryv1.LabelServiceName: service},
			},
			AddressType: family,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8000 + s%3))}},
		}
		switch s % 5 {
		case 2:
			slice.Ports[0].Port = nil // the endpoints get default_port
		case 4:
			slice.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": fmt.Sprintf("2026-11-%02dT10:%02d:00Z", 1+s%28, s%60)}
		}
		for i := s * perSlice; i < (s+1)*perSlice && i < n; i++ {
			slice.Endpoints = append(slice.Endpoints, manyEndpoint(family, i))
		}
		// The first ten endpoints of the previous slice of the same family,
		// as the controller leaves them while it moves endpoints: one copy
		// with fewer facts.
		if prev := previousOfFamily(s); prev >= 0 {
			for i := prev * perSlice; i < prev*perSlice+10 && i < n; i++ {
				ep := manyEndpoint(family, i)
				ep.Hostname, ep.Zone = nil, nil
				slice.Endpoints = append(slice.Endpoints, ep)
			}
		}
		out = append(out, slice)
	}
	return svc, out
}

// previousOfFamily is the slice before s of the same address family (every
// fourth slice is IPv6), or -1.
func previousOfFamily(s int) int {
	switch s % 4 {
	case 3:
		return s - 4
	case 0:
		return s - 2
	default:
		return s - 1
	}
}

func manyEndpoint(family discoveryv1.AddressType, i int) discoveryv1.Endpoint {
	addr := fmt.Sprintf("10.%d.%d.%d", (i*7)%250, (i*13)%256, i%256)
	if family == discoveryv1.AddressTypeIPv6 {
		addr = fmt.Sprintf("fd00:%x::%x", (i*7)%4096, i)
	}
	ep := discoveryv1.Endpoint{Addresses: []string{addr}}
	if i%11 == 0 {
		ep.Addresses = append(ep.Addresses, "192.0.2.1")
	}
	switch i % 6 {
	case 0: // no conditions at all: ready
	case 1, 2:
		ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)}
	case 3: // draining
		ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
	case 4: // gone
		ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(false), Terminating: ptr(true)}
	case 5: // starting
		ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr(false)}
	}
	if i%7 != 0 {
		ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("pod-%d", i)}
	}
	if i%5 != 0 {
		ep.NodeName = ptr(fmt.Sprintf("node-%d", i%17))
	}
	if i%9 != 0 {
		ep.Zone = ptr("zone-" + string(rune('a'+i%3)))
	}
	if i%4 == 0 {
		ep.Hostname = ptr(fmt.Sprintf("host-%d", i))
	}
	return ep
}
