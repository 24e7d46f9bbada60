package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// BenchmarkReadDataSource is the provider's own cost of one read, as
// Terraform asks for it (ReadDataSource with a msgpack configuration, the
// state encoded back), against the stand-in API server over loopback HTTP:
// decoding the configuration, the two requests, the rules, the state. The
// CLI, gRPC and process start are not in it; make bench measures those.
func BenchmarkReadDataSource(b *testing.B) {
	for _, n := range []int{10, 100, 5000} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			b.Setenv("HOME", b.TempDir())
			api := newStandInAPIServer(b)
			svc, slices := manyEndpoints("big", n)
			api.addService(svc)
			api.addSlices(slices...)
			p := newProtocolProvider(b, writeKubeconfig(b, b.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
			args := map[string]tftypes.Value{
				"service":               tftypes.NewValue(tftypes.String, "big"),
				"terminating_endpoints": tftypes.NewValue(tftypes.String, "include"),
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_, diags := p.read(b, "k8s_ready_endpoints", args)
				failOnDiagnostics(b, "ReadDataSource", diags)
			}
		})
	}
}
