package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// BenchmarkReadDataSource is the provider's own cost of one read, as
// Terraform asks for it (ReadDataSource with a msgpack configuration, the
// state encoded back), against the stand-in API server over loopback HTTP:
// decoding the configuration, the two requests, the rules, the state. The
// CLI, gRPC and process start are not in it; make bench measures those.
//
// paths=framework is the same read with the direct path off
// (K8S_TF_DIRECT_READS=0): what direct.go saves per read.
func BenchmarkReadDataSource(b *testing.B) {
	for _, c := range []struct {
		n     int
		paths string
	}{{10, "direct"}, {100, "direct"}, {5000, "direct"}, {10, "framework"}, {5000, "framework"}} {
		name := fmt.Sprintf("endpoints=%d", c.n)
		if c.paths != "direct" {
			name += ",paths=" + c.paths
		}
		n := c.n
		b.Run(name, func(b *testing.B) {
			b.Setenv("HOME", b.TempDir())
			if c.paths == "framework" {
				b.Setenv(envDirectReads, "0")
			}
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

// BenchmarkValidateDataResourceConfig is the provider's cost of one
// validation of a data source's configuration, as Terraform asks for it
// twice per data source in a plan, through the direct validation and
// through the framework's, for comparison.
func BenchmarkValidateDataResourceConfig(b *testing.B) {
	ctx := context.Background()
	for _, server := range []struct {
		name      string
		newServer func() (tfprotov6.ProviderServer, error)
	}{
		{"direct", NewServer("bench")},
		{"framework", providerserver.NewProtocol6WithError(New("bench")())},
	} {
		b.Run(server.name, func(b *testing.B) {
			p := unconfiguredServer(b, server.newServer)
			req := &tfprotov6.ValidateDataResourceConfigRequest{
				TypeName: "k8s_ready_endpoints",
				Config: dynamicValue(b, configValue(p.schemas["k8s_ready_endpoints"], map[string]tftypes.Value{
					"service":   tftypes.NewValue(tftypes.String, "api"),
					"namespace": tftypes.NewValue(tftypes.String, "shop"),
					"port_name": tftypes.NewValue(tftypes.String, "http"),
				})),
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := p.server.ValidateDataResourceConfig(ctx, req)
				if err != nil || len(resp.Diagnostics) != 0 {
					b.Fatalf("%v %v", err, resp.Diagnostics)
				}
			}
		})
	}
}

// BenchmarkGetConfig is the cost of reading a data source's arguments into
// its model, by getConfig and by the framework's own GetAttribute for each
// field: what config_values.go saves per read.
func BenchmarkGetConfig(b *testing.B) {
	ctx := context.Background()
	var resp datasource.SchemaResponse
	newReadyEndpointsDataSource().Schema(ctx, datasource.SchemaRequest{}, &resp)
	config := tfsdk.Config{Schema: resp.Schema, Raw: configValue(resp.Schema.Type().TerraformType(ctx), map[string]tftypes.Value{
		"service": tfString("api"), "namespace": tfString("shop"), "port_name": tfString("http"),
		"terminating_endpoints": tfString("include"), "zones": stringSet("a", "b"),
	})}
	for _, read := range []struct {
		name string
		get  func(context.Context, tfsdk.Config, any) diag.Diagnostics
	}{{"getConfig", getConfig}, {"framework", frameworkGetAttributes}} {
		b.Run(read.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var m readyEndpointsModel
				if diags := read.get(ctx, config, &m); diags.HasError() {
					b.Fatal(diags)
				}
			}
		})
	}
}

// BenchmarkReadFleet is one read of k8s_services over 500 Services of 10
// ready endpoints each, as make bench's fleet read, in process; checks is
// the same with pod_health_checks: each Service selects its 10 pods, each
// with an HTTP readinessProbe.
func BenchmarkReadFleet(b *testing.B) {
	for _, checks := range []bool{false, true} {
		b.Run(fmt.Sprintf("pod_health_checks=%t", checks), func(b *testing.B) { benchmarkReadFleet(b, checks) })
	}
}

func benchmarkReadFleet(b *testing.B, checks bool) {
	b.Setenv("HOME", b.TempDir())
	api := newStandInAPIServer(b)
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/ready", Port: intstr.FromString("http")}}}
	for i := range 500 {
		name := fmt.Sprintf("svc-%d", i)
		svc := webService("bench", httpPort)
		svc.Name = name
		if checks {
			svc.Spec.Selector = map[string]string{"app": name}
		}
		api.addService(svc)
		slice := webSlice(name + "-a")
		slice.Namespace, slice.Labels = "bench", map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: endpoints.EndpointSliceController}
		for j := range 10 {
			pod := fmt.Sprintf("%s-%d", name, j)
			slice.Endpoints = append(slice.Endpoints, readyPod(fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j), pod, "node-a", "zone-a"))
			if checks {
				api.addPods(corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: pod, Labels: svc.Spec.Selector},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", ReadinessProbe: probe,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}})
			}
		}
		api.addSlices(slice)
	}
	p := newProtocolProvider(b, writeKubeconfig(b, b.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
	args := map[string]tftypes.Value{"namespace": tfString("bench"), "port_name": tfString("http")}
	if checks {
		args["pod_health_checks"] = tftypes.NewValue(tftypes.Bool, true)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, diags := p.read(b, "k8s_services", args)
		failOnDiagnostics(b, "ReadDataSource", diags)
	}
}
