package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// The reasons of skipped that the k8s_services page quotes are the ones the
// rules give.
func TestSkippedReasonsAreTheDocumentedTexts(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "templates", "data-sources", "services.md.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	web := func(kind corev1.ServiceType, ports ...corev1.ServicePort) []corev1.Service {
		svc := webService("shop", ports...)
		svc.Spec.Type = kind
		return []corev1.Service{svc}
	}
	grpc := corev1.ServicePort{Name: "grpc", Port: 81, TargetPort: intstr.FromInt32(9090), NodePort: 30081}
	withNodePort := httpPort
	withNodePort.NodePort = 30080
	for _, tc := range []struct {
		name     string
		services []corev1.Service
		q        endpoints.Query
		nodes    bool
	}{
		{"no port of that name", web(corev1.ServiceTypeClusterIP, grpc), endpoints.Query{PortName: "http"}, false},
		{"no nodePort", web(corev1.ServiceTypeClusterIP, httpPort), endpoints.Query{PortName: "http"}, true},
		{"several ports, none chosen", web(corev1.ServiceTypeNodePort, withNodePort, grpc), endpoints.Query{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res endpoints.FleetResult
			var err error
			if tc.nodes {
				res, err = endpoints.NodeFleet(tc.services, nil, nil, tc.q)
			} else {
				res, err = endpoints.Fleet(tc.services, nil, tc.q)
			}
			if err != nil || len(res.Skipped) != 1 {
				t.Fatalf("skipped %v, err %v; want one", res.Skipped, err)
			}
			if reason := res.Skipped[0].Reason; !strings.Contains(string(page), "| `"+reason+"` |") {
				t.Errorf("the k8s_services page does not quote the reason %q", reason)
			}
		})
	}
}
