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
	// Both paths serve each read, and must agree (bothPaths).
	p := newProtocolProviderOf(t, newBothPaths(t), writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, diags := p.read(t, "k8s_ready_endpoints", tt.args)
			failOnDiagnostics(t, "ReadDataSource", diags)
			checkGolden(t, filepath.Join("testdata", "golden", strings.ReplaceAll(tt.name, " ", "_")+".txt"), goldenText(t, state))
		})
	}
	fleet := newProtocolProviderOf(t, newBothPaths(t), writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": fleetFixture(t).URL}))
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
