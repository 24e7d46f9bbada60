package companion

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// withUntrustedSlice is fleetObjects(2) where svc-000 has a selector (its
// slice the controller's) and a hand-written slice of manager someone.
func withUntrustedSlice(t *testing.T) map[string]any {
	objects := fleetObjects(2)
	serviceOf(t, objects, "svc-000").Spec.Selector = map[string]string{"app": "svc-000"}
	sliceOf(t, objects, "svc-000").Labels[discoveryv1.LabelManagedBy] = endpoints.EndpointSliceController
	objects["slice svc-000-hand"] = &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "svc-000-hand",
		Labels: map[string]string{discoveryv1.LabelServiceName: "svc-000", discoveryv1.LabelManagedBy: "someone"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"203.0.113.9"}}}}
	return objects
}

func leftOutNames(e evaluation) []string {
	var out []string
	for _, l := range e.leftOut {
		out = append(out, l.service+" "+l.Namespace+"/"+l.Name+" "+l.Manager)
	}
	return out
}

// A fleet's evaluation gives the slices its pools leave out, kept as its
// Services change one by one; with the manager trusted in state, none.
func TestAFleetGivesTheSlicesItLeavesOut(t *testing.T) {
	ctx, now := context.Background(), time.Unix(2e9, 0)
	objects := withUntrustedSlice(t)
	p := newFleetPool(t, 0)
	e := p.evaluate(ctx, cacheOfObjects(t, objects), now, everything)
	if got := leftOutNames(e); len(got) != 1 || got[0] != "shop/svc-000 shop/svc-000-hand someone" {
		t.Fatalf("left out %q, want svc-000-hand of shop/svc-000", got)
	}
	// svc-001 changes alone: svc-000's slice is still left out.
	e = p.evaluate(ctx, cacheOfObjects(t, objects), now, touched{services: map[string]bool{"shop/svc-001": true}})
	if got := leftOutNames(e); len(got) != 1 {
		t.Errorf("after a change of another Service, left out %q, want svc-000-hand still", got)
	}
	delete(objects, "slice svc-000-hand")
	e = p.evaluate(ctx, cacheOfObjects(t, objects), now, touched{services: map[string]bool{"shop/svc-000": true}})
	if got := leftOutNames(e); len(got) != 0 {
		t.Errorf("with the slice deleted, left out %q, want none", got)
	}

	trusting := newFleetPoolWith(t, `"min_ready": 0, "trusted_slice_managers": ["someone"]`, "{}")
	e = trusting.evaluate(ctx, cacheOfObjects(t, withUntrustedSlice(t)), now, everything)
	if got := leftOutNames(e); len(got) != 0 {
		t.Errorf("trusting someone, left out %q, want none", got)
	}
	var after []string
	for _, c := range e.changes {
		if c.Name == "shop/svc-000" {
			after = c.After
		}
	}
	if !strings.Contains(strings.Join(after, ","), "203.0.113.9:8080") {
		t.Errorf("trusting someone, svc-000's pool %q lacks the slice's endpoint", after)
	}
}

// The companion logs a slice left out once, when first left out, and
// gauges how many are.
func TestASliceLeftOutIsLoggedOnceAndGauged(t *testing.T) {
	var log bytes.Buffer
	reg := prometheus.NewRegistry()
	s := &syncer{log: slog.New(slog.NewTextHandler(&log, nil)), metrics: newMetrics(reg)}
	gauge := func() float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "k8s_sync_slices_left_out" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no metric k8s_sync_slices_left_out")
		return 0
	}
	instances := []instance{{address: "data.k8s_services.all"}}
	hand := leftOutOf("shop/web", []endpoints.LeftOutSlice{{Namespace: "shop", Name: "web-hand", Manager: "someone"}})
	bare := leftOutOf("shop/web", []endpoints.LeftOutSlice{{Namespace: "shop", Name: "web-bare"}})
	for i, tt := range []struct {
		leftOut []leftOutSlice
		logged  []string
		gauge   float64
	}{
		{hand, []string{"slice=shop/web-hand manager=someone"}, 1},
		{hand, nil, 1},
		{append(append([]leftOutSlice{}, hand...), bare...), []string{`slice=shop/web-bare manager="(no managed-by label)"`}, 2},
		{nil, nil, 0},
		{hand, []string{"slice=shop/web-hand"}, 1},
	} {
		log.Reset()
		s.evals = []evaluation{{leftOut: tt.leftOut}}
		s.noteLeftOut(instances)
		lines := strings.Split(strings.TrimSpace(log.String()), "\n")
		if log.Len() == 0 {
			lines = nil
		}
		if len(lines) != len(tt.logged) {
			t.Errorf("step %d: logged %q, want %d line(s)", i, lines, len(tt.logged))
		}
		for j, want := range tt.logged {
			if j < len(lines) && (!strings.Contains(lines[j], want) || !strings.Contains(lines[j], "data_source=data.k8s_services.all")) {
				t.Errorf("step %d: line %q lacks %q", i, lines[j], want)
			}
		}
		if got := gauge(); got != tt.gauge {
			t.Errorf("step %d: k8s_sync_slices_left_out = %v, want %v", i, got, tt.gauge)
		}
	}
}
