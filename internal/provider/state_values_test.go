package provider

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// The values a read builds by hand must have the types the schema declares,
// or Terraform rejects the state.
func TestStateValuesHaveTheSchemaTypes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		dataSource datasource.DataSource
		attribute  string
		built      tftypes.Type
	}{
		{"endpoints of k8s_ready_endpoints", newReadyEndpointsDataSource(), "endpoints", endpointListType},
		{"services of k8s_services", newServicesDataSource(), "services", servicesMapType},
		{"skipped of k8s_services", newServicesDataSource(), "skipped", skippedListType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var resp datasource.SchemaResponse
			tt.dataSource.Schema(ctx, datasource.SchemaRequest{}, &resp)
			attr, ok := resp.Schema.Attributes[tt.attribute]
			if !ok {
				t.Fatalf("the schema has no attribute %q", tt.attribute)
			}
			if want := attr.GetType().TerraformType(ctx); !want.Equal(tt.built) {
				t.Errorf("built type\n %s\nschema type\n %s", tt.built, want)
			}
		})
	}
}

func TestStateFromConfigLeavesTheConfigurationAlone(t *testing.T) {
	typ := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"given": tftypes.String, "computed": tftypes.String}}
	config := tftypes.NewValue(typ, map[string]tftypes.Value{
		"given":    tftypes.NewValue(tftypes.String, "web"),
		"computed": tftypes.NewValue(tftypes.String, nil),
	})
	before := config.Copy()
	state, err := stateFromConfig(config, computedValues{"computed": func(w *msgpackWriter) { w.str("shop/web") }})
	if err != nil {
		t.Fatal(err)
	}
	if !config.Equal(before) {
		t.Errorf("the configuration changed to %s", config)
	}
	want := tftypes.NewValue(typ, map[string]tftypes.Value{
		"given":    tftypes.NewValue(tftypes.String, "web"),
		"computed": tftypes.NewValue(tftypes.String, "shop/web"),
	})
	if got, err := decodeMsgPack(state, typ); err != nil || !got.Equal(want) {
		t.Errorf("state = %s (%v), want %s", got, err, want)
	}
	if _, err := stateFromConfig(config, computedValues{"typo": func(w *msgpackWriter) { w.str("x") }}); err == nil {
		t.Error("an attribute the schema lacks was accepted")
	}
}

// The state the reads write must be what tftypes writes for the same values
// (the reference builders, state_reference_test.go): byte for byte, except
// for maps, whose entries tftypes writes in no set order, so those are
// compared as values.
func TestStateIsWhatTftypesWrites(t *testing.T) {
	long := strings.Repeat("x", 300)
	one := 1
	many := 70000
	eps := []endpoints.Endpoint{
		{Address: "10.0.0.1", Port: 8080, AddressType: "IPv4", Ready: true, Serving: true},
		{Address: "10.0.0.2", Port: 80, AddressType: "IPv4", Pod: "web-1", NodeName: "node-a", Zone: "z1", Hostname: "web-1", Serving: true, Terminating: true},
		{Address: "fd00::3", Port: 65535, AddressType: "IPv6", Pod: strings.Repeat("p", 40), NodeName: long},
		{Address: "192.0.2.9", Port: 30080, AddressType: "IPv4", NodeName: "node-b", LocalEndpoints: &one, Ready: true},
		{Address: "192.0.2.10", Port: 255, AddressType: "IPv4", NodeName: "node-c", LocalEndpoints: &many, Ready: true},
	}
	for len(eps) < 40 { // past 15, a list's header is no longer one byte
		eps = append(eps, endpoints.Endpoint{Address: fmt.Sprintf("10.1.0.%d", len(eps)), Port: int32(len(eps) * 1000), AddressType: "IPv4", Ready: true})
	}
	trigger := time.Date(2026, 11, 30, 22, 1, 2, 300, time.UTC)
	labels := map[string]string{}
	for i := range 20 {
		labels[fmt.Sprintf("label-%02d", i)] = fmt.Sprint(i)
	}
	svc := func(namespace, name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	}
	web := svc("shop", "web")
	web.Labels = labels
	web.Annotations = map[string]string{"a": "1", lastAppliedAnnotation: "{}"}
	web.Spec.Type = corev1.ServiceTypeLoadBalancer
	web.Spec.ClusterIP, web.Spec.ClusterIPs = "10.96.0.1", []string{"10.96.0.1", "fd00::1"}
	web.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	web.Spec.Ports = []corev1.ServicePort{
		{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), NodePort: 30080, Protocol: corev1.ProtocolTCP},
		{Port: 443, TargetPort: intstr.FromInt32(8443)},
	}
	web.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}, {Hostname: "lb.example.com"}}
	headless := svc("shop-eu", "db")
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	pools := []endpoints.ServicePool{
		{Service: web, Result: endpoints.Result{Endpoints: eps, LastChangeTriggerTime: trigger}},
		{Service: headless, Result: endpoints.Result{Endpoints: eps[:1]}},
		// "shop-eu/db" < "shop/api" as keys, though "shop" < "shop-eu".
		{Service: svc("shop", "api")},
	}
	skipped := []endpoints.SkippedService{{Namespace: "shop", Name: "batch", Reason: "no port named http"}}

	tests := []struct {
		name    string
		typ     tftypes.Type
		want    tftypes.Value
		write   func(w *msgpackWriter)
		hasMaps bool
	}{
		{"no endpoint", endpointListType, endpointsValue(nil), func(w *msgpackWriter) { writeEndpoints(w, nil) }, false},
		{"endpoints of every kind", endpointListType, endpointsValue(eps), func(w *msgpackWriter) { writeEndpoints(w, eps) }, false},
		{"no trigger time", tftypes.String, lastChangeValue(time.Time{}), func(w *msgpackWriter) { writeLastChange(w, time.Time{}) }, false},
		{"a trigger time", tftypes.String, lastChangeValue(trigger), func(w *msgpackWriter) { writeLastChange(w, trigger) }, false},
		{"one Service", serviceType, serviceValue(pools[0]), func(w *msgpackWriter) { writeService(w, pools[0]) }, true},
		{"a headless Service", serviceType, serviceValue(pools[1]), func(w *msgpackWriter) { writeService(w, pools[1]) }, true},
		{"Services", servicesMapType, servicesValue(pools), func(w *msgpackWriter) { writeServices(w, pools) }, true},
		{"no Service", servicesMapType, servicesValue(nil), func(w *msgpackWriter) { writeServices(w, nil) }, false},
		{"skipped Services", skippedListType, skippedValue(skipped), func(w *msgpackWriter) { writeSkipped(w, skipped) }, false},
		{"none skipped", skippedListType, skippedValue(nil), func(w *msgpackWriter) { writeSkipped(w, nil) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w msgpackWriter
			tt.write(&w)
			got, err := decodeMsgPack(w.b, tt.typ)
			if err != nil {
				t.Fatalf("tftypes cannot read what was written: %v", err)
			}
			if !got.Equal(tt.want) {
				t.Fatalf("written\n%s\nwant\n%s", got, tt.want)
			}
			checkGolden(t, filepath.Join("testdata", "golden", "state", strings.ReplaceAll(tt.name, " ", "_")+".json"), stateJSON(t, got))
			if tt.hasMaps {
				return
			}
			want, err := encodeMsgPack(tt.want, tt.typ)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.b, want) {
				t.Errorf("written % x\ntftypes % x", w.b, want)
			}
		})
	}
}

// Every length and integer is written in the form tftypes writes it.
func TestMsgpackWriterWritesTheShortestForms(t *testing.T) {
	for _, n := range []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64} {
		var w msgpackWriter
		w.int(n)
		if want, _ := encodeMsgPack(tftypes.NewValue(tftypes.Number, n), tftypes.Number); !bytes.Equal(w.b, want) {
			t.Errorf("%d: written % x, tftypes % x", n, w.b, want)
		}
	}
	for _, n := range []int{0, 31, 32, 255, 256, 65535, 65536} {
		s := strings.Repeat("s", n)
		var w msgpackWriter
		w.str(s)
		if want, _ := encodeMsgPack(tftypes.NewValue(tftypes.String, s), tftypes.String); !bytes.Equal(w.b, want) {
			t.Errorf("a string of %d bytes: written % x..., tftypes % x...", n, w.b[:min(len(w.b), 6)], want[:min(len(want), 6)])
		}
	}
	for _, n := range []int{0, 15, 16, 65535, 65536} {
		elems := make([]tftypes.Value, n)
		for i := range elems {
			elems[i] = tftypes.NewValue(tftypes.Bool, true)
		}
		typ := tftypes.List{ElementType: tftypes.Bool}
		var w msgpackWriter
		w.arrayLen(n)
		for range n {
			w.bool(true)
		}
		if want, _ := encodeMsgPack(tftypes.NewValue(typ, elems), typ); !bytes.Equal(w.b, want) {
			t.Errorf("a list of %d: written % x..., tftypes % x...", n, w.b[:min(len(w.b), 6)], want[:min(len(want), 6)])
		}
	}
	for _, n := range []int{0, 15, 16, 65535, 65536} {
		attrs := make(map[string]tftypes.Type, n)
		values := make(map[string]tftypes.Value, n)
		for i := range n {
			attrs[fmt.Sprintf("a%06d", i)] = tftypes.Bool
			values[fmt.Sprintf("a%06d", i)] = tftypes.NewValue(tftypes.Bool, false)
		}
		typ := tftypes.Object{AttributeTypes: attrs}
		var w msgpackWriter
		w.mapLen(n)
		for i := range n {
			w.str(fmt.Sprintf("a%06d", i))
			w.bool(false)
		}
		if want, _ := encodeMsgPack(tftypes.NewValue(typ, values), typ); !bytes.Equal(w.b, want) {
			t.Errorf("an object of %d: written % x..., tftypes % x...", n, w.b[:min(len(w.b), 6)], want[:min(len(want), 6)])
		}
	}
}

// encodeMsgPack and decodeMsgPack are tftypes' own MessagePack, through the
// protocol's DynamicValue.
func encodeMsgPack(v tftypes.Value, t tftypes.Type) ([]byte, error) {
	dv, err := tfprotov6.NewDynamicValue(t, v)
	return dv.MsgPack, err
}

func decodeMsgPack(b []byte, t tftypes.Type) (tftypes.Value, error) {
	return (&tfprotov6.DynamicValue{MsgPack: b}).Unmarshal(t)
}
