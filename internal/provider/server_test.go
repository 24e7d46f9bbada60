package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// directReads must give, for every read, the state and the diagnostics the
// framework gives: the same bytes of state, the same summaries, details,
// severities and attribute paths.
func TestDirectReadsGiveWhatTheFrameworkGives(t *testing.T) {
	api := fleetFixture(t)
	svc, slices := manyEndpoints("big", 2000)
	api.addService(svc)
	api.addSlices(slices...)
	kubeconfig := writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL})
	direct := newProtocolProviderOf(t, NewServer("test"), kubeconfig)
	framework := newProtocolProviderOf(t, providerserver.NewProtocol6WithError(New("test")()), kubeconfig)
	if _, ok := direct.server.(*directReads); !ok {
		t.Fatalf("NewServer gives a %T, not the direct reads", direct.server)
	}
	tests := []struct {
		name, typeName string
		args           map[string]tftypes.Value
	}{
		{"a Service with 2,000 endpoints", "k8s_ready_endpoints", map[string]tftypes.Value{"service": tfString("big")}},
		{"draining endpoints and a default port", "k8s_ready_endpoints", map[string]tftypes.Value{
			"service": tfString("big"), "terminating_endpoints": tfString("include"), "default_port": tfNumber(9000)}},
		{"a port the Service does not have", "k8s_ready_endpoints", map[string]tftypes.Value{"service": tfString("big"), "port_name": tfString("grpc")}},
		{"a Service that does not exist", "k8s_ready_endpoints", map[string]tftypes.Value{"namespace": tfString("shop"), "service": tfString("nope")}},
		{"too few endpoints", "k8s_ready_endpoints", map[string]tftypes.Value{"namespace": tfString("shop"), "service": tfString("api"), "min_ready": tfNumber(3)}},
		{"a fleet of two namespaces", "k8s_services", map[string]tftypes.Value{"namespaces": stringSet("shop", "blog"), "port_name": tfString("http")}},
		{"a fleet of every namespace with a selector", "k8s_services", map[string]tftypes.Value{"all_namespaces": tftypes.NewValue(tftypes.Bool, true), "label_selector": tfString("tier=front")}},
		{"a fleet short of its guards", "k8s_services", map[string]tftypes.Value{"namespace": tfString("shop"), "min_services": tfNumber(9), "min_ready": tfNumber(2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotState, gotDiags := direct.read(t, tt.typeName, tt.args)
			wantState, wantDiags := framework.read(t, tt.typeName, tt.args)
			if got, want := describeDiagnostics(gotDiags), describeDiagnostics(wantDiags); got != want {
				t.Errorf("diagnostics\n got  %s\n want %s", got, want)
			}
			if hasError(wantDiags) {
				return
			}
			if !gotState.Equal(wantState) {
				t.Errorf("the direct read's state differs from the framework's:\n%s", firstDifference(goldenText(t, gotState), goldenText(t, wantState)))
			}
		})
	}
}

func describeDiagnostics(diags []*tfprotov6.Diagnostic) string {
	out := ""
	for _, d := range diags {
		out += fmt.Sprintf("[%v %q %q %v] ", d.Severity, d.Summary, d.Detail, d.Attribute)
	}
	return out
}

func hasError(diags []*tfprotov6.Diagnostic) bool {
	for _, d := range diags {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			return true
		}
	}
	return false
}
