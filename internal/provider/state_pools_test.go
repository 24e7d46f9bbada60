package provider

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

// A pool decoded from the state a read wrote, recomputed from the objects
// that read saw, is no change; recomputed from other objects, it names the
// members added and removed.
func TestAPoolOfStateComparesWithWhatAReadWouldWrite(t *testing.T) {
	ctx := context.Background()
	api := standInWithOneEndpoint(t, "10.6.0.1")
	p := newProtocolProvider(t, writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
	state, diags := p.read(t, ReadyEndpointsType, map[string]tftypes.Value{"service": tfString("web"), "port_name": tfString("http")})
	failOnDiagnostics(t, "read", diags)
	pool, err := DecodeStatePool(ctx, ReadyEndpointsType, stateJSON(t, state))
	if err != nil {
		t.Fatal(err)
	}
	if pool.Pool == nil || pool.Pool.Namespace != "default" || pool.Pool.Service != "web" || pool.Pool.Query.PortName != "http" {
		t.Fatalf("decoded %+v", pool.Pool)
	}
	svc := api.services["default/web"]
	objects := pools.Objects{Service: &svc, EndpointSlices: slices.Clone(api.slices)}
	res, err := pool.Pool.Compute(objects, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if changes, err := pool.ComparePool(res); err != nil || changes != nil {
		t.Errorf("the same objects: changes %+v (%v), want none", changes, err)
	}
	objects.EndpointSlices = []discoveryv1.EndpointSlice{webSlice("web-b", discoveryv1.Endpoint{Addresses: []string{"10.6.0.2"}})}
	res, err = pool.Pool.Compute(objects, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	changes, err := pool.ComparePool(res)
	if err != nil || len(changes) != 1 {
		t.Fatalf("another endpoint: changes %+v (%v), want one", changes, err)
	}
	if c := changes[0]; !slices.Equal(c.Added, []string{"10.6.0.2:8080"}) || !slices.Equal(c.Removed, []string{"10.6.0.1:8080"}) {
		t.Errorf("change %+v, want 10.6.0.2:8080 added and 10.6.0.1:8080 removed", c)
	}
}

func TestAFleetOfStateComparesWithWhatAReadWouldWrite(t *testing.T) {
	ctx := context.Background()
	api := fleetFixture(t)
	p := newProtocolProvider(t, writeKubeconfig(t, t.TempDir(), "kubeconfig", map[string]string{"stand-in": api.URL}))
	state, diags := p.read(t, ServicesType, map[string]tftypes.Value{"namespaces": stringSet("shop", "blog"), "port_name": tfString("http")})
	failOnDiagnostics(t, "read", diags)
	fleet, err := DecodeStatePool(ctx, ServicesType, stateJSON(t, state))
	if err != nil {
		t.Fatal(err)
	}
	if fleet.Fleet == nil || !slices.Equal(fleet.Fleet.Namespaces, []string{"blog", "shop"}) {
		t.Fatalf("decoded %+v", fleet.Fleet)
	}
	var services []corev1.Service
	for _, key := range []string{"blog/web", "shop/api", "shop/exporter", "shop/web"} {
		services = append(services, api.services[key])
	}
	objects := pools.FleetObjects{Services: services, EndpointSlices: slices.Clone(api.slices)}
	res, err := fleet.Fleet.Compute(objects, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if changes, err := fleet.CompareFleet(res); err != nil || changes != nil {
		t.Errorf("the same objects: changes %+v (%v), want none", changes, err)
	}
	// shop/api loses its only pod.
	objects.EndpointSlices = slices.DeleteFunc(slices.Clone(api.slices), func(s discoveryv1.EndpointSlice) bool {
		return s.Labels[discoveryv1.LabelServiceName] == "api"
	})
	res, err = fleet.Fleet.Compute(objects, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	changes, err := fleet.CompareFleet(res)
	if err != nil || len(changes) != 1 {
		t.Fatalf("a pod gone: changes %+v (%v), want one", changes, err)
	}
	if c := changes[0]; c.Name != "shop/api" || len(c.Added) != 0 || !slices.Equal(c.Removed, []string{"10.0.1.1:8080"}) {
		t.Errorf("change %+v, want shop/api with 10.0.1.1:8080 removed", c)
	}
}
