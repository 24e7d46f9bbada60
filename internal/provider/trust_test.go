package provider

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

func tfStringList(values ...string) tftypes.Value {
	elements := make([]tftypes.Value, len(values))
	for i, v := range values {
		elements[i] = tfString(v)
	}
	return tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, elements)
}

// managedSlice is webSlice with its managed-by label ("" for none).
func managedSlice(name, manager, addr string) discoveryv1.EndpointSlice {
	s := webSlice(name, discoveryv1.Endpoint{Addresses: []string{addr}})
	s.Labels[discoveryv1.LabelManagedBy] = manager
	if manager == "" {
		delete(s.Labels, discoveryv1.LabelManagedBy)
	}
	return s
}

// The managers a read trusts, from the provider or the data source, are in
// the state it writes; the companion decodes them from it and computes, from
// the same objects, the pool of state: the slices a plan leaves out, it
// leaves out. A slice left out is named in a warning with its manager.
func TestTheTrustedManagersOfAReadAreThoseTheCompanionUses(t *testing.T) {
	api := newStandInAPIServer(t)
	svc := webService("default", httpPort)
	svc.Spec.Selector = map[string]string{"app": "web"}
	api.addService(svc)
	api.addSlices(managedSlice("web-a", endpoints.EndpointSliceController, "10.6.0.1"),
		managedSlice("web-mesh", "mesh.example.com", "10.6.0.2"), managedSlice("web-bare", "", "10.6.0.3"))
	kubeconfig := tfString(writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
	mesh := tfStringList("mesh.example.com")
	tests := []struct {
		name             string
		provider, source tftypes.Value
		trusted          []string
		members          []string
		warned           []string
	}{
		{"by default, only the controller's slices count", tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, nil), tftypes.Value{},
			[]string{}, []string{"10.6.0.1:8080"}, []string{`web-mesh of Service default/web (managed by "mesh.example.com")`, "web-bare of Service default/web (no managed-by label)"}},
		{"the provider's managers are the data sources' default", mesh, tftypes.Value{},
			[]string{"mesh.example.com"}, []string{"10.6.0.1:8080", "10.6.0.2:8080"}, []string{"web-bare"}},
		{"a data source's managers replace the provider's", mesh, tfStringList(),
			[]string{}, []string{"10.6.0.1:8080"}, []string{"web-mesh", "web-bare"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config := map[string]tftypes.Value{"kubeconfig": kubeconfig}
			if !tt.provider.IsNull() {
				config["trusted_slice_managers"] = tt.provider
			}
			p := newProtocolProviderWith(t, NewServer("test"), config)
			args := map[string]tftypes.Value{"service": tfString("web"), "port_name": tfString("http")}
			if tt.source.Type() != nil {
				args["trusted_slice_managers"] = tt.source
			}
			state, diags := p.read(t, ReadyEndpointsType, args)
			failOnDiagnostics(t, "read", diags)
			var warnings []string
			for _, d := range diags {
				if d.Severity == tfprotov6.DiagnosticSeverityWarning && d.Summary == "EndpointSlices Left Out" {
					warnings = append(warnings, d.Detail)
				}
			}
			if len(warnings) != 1 {
				t.Fatalf("%d warnings of slices left out, want 1: %+v", len(warnings), diags)
			}
			for _, w := range tt.warned {
				if !strings.Contains(warnings[0], w) {
					t.Errorf("the warning lacks %q:\n%s", w, warnings[0])
				}
			}
			pool, err := DecodeStatePool(context.Background(), ReadyEndpointsType, stateJSON(t, state))
			if err != nil {
				t.Fatal(err)
			}
			if got := pool.Pool.Query.TrustedSliceManagers; !slices.Equal(got, tt.trusted) {
				t.Errorf("the companion trusts %q, want %q", got, tt.trusted)
			}
			inState, _ := pool.State("")
			if !slices.Equal(inState.Members(), tt.members) {
				t.Errorf("members of state %v, want %v", inState.Members(), tt.members)
			}
			res, err := pool.Pool.Compute(pools.Objects{Service: &svc, EndpointSlices: slices.Clone(api.slices)}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var d Digester
			if d.Pool(res) != inState.Sum {
				t.Errorf("the companion's pool %v differs from state's %v", Members(res.Endpoints), inState.Members())
			}
		})
	}
}
