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
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// A description that would let a read leave a computed attribute null, or
// rewrite an argument, does not get past newObject.
func TestNewObjectRefusesWhatWouldLeaveStateWrong(t *testing.T) {
	write := func(w stateWriter, _ *string) { w.str("x") }
	tests := []struct {
		name  string
		attrs []attribute[string]
		want  string
	}{
		{"a computed attribute without a writer", []attribute[string]{
			{name: "id", schema: schema.StringAttribute{Computed: true}},
		}, `computed attribute "id" has no writer`},
		{"an optional and computed attribute without a writer", []attribute[string]{
			{name: "namespace", schema: schema.StringAttribute{Optional: true, Computed: true}},
		}, `computed attribute "namespace" has no writer`},
		{"an argument with a writer", []attribute[string]{
			{name: "service", schema: schema.StringAttribute{Required: true}, write: write},
		}, `attribute "service" is an argument and has a writer`},
		{"an attribute described twice", []attribute[string]{
			{name: "id", schema: schema.StringAttribute{Computed: true}, write: write},
			{name: "id", schema: schema.StringAttribute{Computed: true}, write: write},
		}, `attribute "id" is described twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if got := fmt.Sprint(recover()); !strings.Contains(got, tt.want) {
					t.Errorf("newObject panicked with %q, want %q", got, tt.want)
				}
			}()
			newObject(tt.attrs)
		})
	}
}

func TestWriteStateLeavesTheConfigurationAlone(t *testing.T) {
	typ := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"given": tftypes.String, "computed": tftypes.String}}
	config := tftypes.NewValue(typ, map[string]tftypes.Value{
		"given":    tftypes.NewValue(tftypes.String, "web"),
		"computed": tftypes.NewValue(tftypes.String, nil),
	})
	before := config.Copy()
	described := newObject([]attribute[string]{
		{name: "given", schema: schema.StringAttribute{Optional: true}},
		{name: "computed", schema: schema.StringAttribute{Computed: true}, write: func(w stateWriter, v *string) { w.str(*v) }},
	})
	id := "shop/web"
	state, err := encodeState(described, config, &id)
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
	typo := newObject([]attribute[string]{{name: "typo", schema: schema.StringAttribute{Computed: true}, write: func(w stateWriter, _ *string) { w.str("x") }}})
	if _, err := encodeState(typo, config, &id); err == nil {
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

	ctx := context.Background()
	typeOf := func(a schema.Attribute) tftypes.Type { return a.GetType().TerraformType(ctx) }
	endpointsType := typeOf(endpointsAttribute())
	serviceType := schema.NestedAttributeObject{Attributes: serviceObject.schema()}.Type().TerraformType(ctx)
	servicesType := typeOf(servicesAttributes.schema()["services"])
	skippedType := typeOf(servicesAttributes.schema()["skipped"])
	readyType := schemaType(t, newReadyEndpointsDataSource())
	fleetType := schemaType(t, newServicesDataSource())
	readyState := readyEndpointsState{res: endpoints.Result{Endpoints: eps, LastChangeTriggerTime: trigger}}
	readyConfig := configValue(readyType, map[string]tftypes.Value{
		"service": tfString("web"), "namespace": tfString("shop"), "zones": stringSet("z1"), "timeouts": readTimeouts(tfString("1m")),
	})
	if diags := getConfig(ctx, tfsdk.Config{Raw: readyConfig, Schema: dataSourceSchema(t, newReadyEndpointsDataSource())}, &readyState.readyEndpointsModel); diags.HasError() {
		t.Fatal(diags)
	}
	readyState.readyEndpointsModel = readyState.withDefaults()
	fleetState := servicesState{namespaces: []string{"shop", "shop-eu"}, res: endpoints.FleetResult{Pools: pools, Skipped: skipped}}
	fleetConfig := configValue(fleetType, map[string]tftypes.Value{"namespaces": stringSet("shop", "shop-eu"), "port_name": tfString("http")})
	if diags := getConfig(ctx, tfsdk.Config{Raw: fleetConfig, Schema: dataSourceSchema(t, newServicesDataSource())}, &fleetState.servicesModel); diags.HasError() {
		t.Fatal(diags)
	}
	fleetState.servicesModel = fleetState.withDefaults()

	tests := []struct {
		name    string
		typ     tftypes.Type
		write   func(w stateWriter) error
		hasMaps bool
	}{
		{"no endpoint", endpointsType, func(w stateWriter) error { writeList(w, endpointObject, nil); return nil }, false},
		{"endpoints of every kind", endpointsType, func(w stateWriter) error { writeList(w, endpointObject, eps); return nil }, false},
		{"no trigger time", tftypes.String, func(w stateWriter) error { writeLastChange(w, time.Time{}); return nil }, false},
		{"a trigger time", tftypes.String, func(w stateWriter) error { writeLastChange(w, trigger); return nil }, false},
		{"one Service", serviceType, func(w stateWriter) error { serviceObject.write(w, &pools[0]); return nil }, true},
		{"a headless Service", serviceType, func(w stateWriter) error { serviceObject.write(w, &pools[1]); return nil }, true},
		{"Services", servicesType, func(w stateWriter) error { writeServices(w, pools); return nil }, true},
		{"no Service", servicesType, func(w stateWriter) error { writeServices(w, nil); return nil }, false},
		{"skipped Services", skippedType, func(w stateWriter) error { writeList(w, skippedObject, skipped); return nil }, false},
		{"none skipped", skippedType, func(w stateWriter) error { writeList(w, skippedObject, nil); return nil }, false},
		{"the state of a k8s_ready_endpoints", readyType, func(w stateWriter) error {
			return writeState(w, readyEndpointsAttributes, readyConfig, &readyState)
		}, false},
		{"the state of a k8s_services", fleetType, func(w stateWriter) error {
			return writeState(w, servicesAttributes, fleetConfig, &fleetState)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w msgpackWriter
			if err := tt.write(&w); err != nil {
				t.Fatal(err)
			}
			reference := newTftypesWriter(tt.typ)
			if err := tt.write(reference); err != nil {
				t.Fatal(err)
			}
			want, err := reference.value()
			if err != nil {
				t.Fatalf("the description does not write a %s: %v", tt.typ, err)
			}
			got, err := decodeMsgPack(w.b, tt.typ)
			if err != nil {
				t.Fatalf("tftypes cannot read what was written: %v", err)
			}
			if !got.Equal(want) {
				t.Fatalf("written\n%s\nwant\n%s", got, want)
			}
			if !strings.HasPrefix(tt.name, "the state of") {
				checkGolden(t, filepath.Join("testdata", "golden", "state", strings.ReplaceAll(tt.name, " ", "_")+".json"), stateJSON(t, got))
			}
			if tt.hasMaps {
				return
			}
			wantBytes, err := encodeMsgPack(want, tt.typ)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.b, wantBytes) {
				t.Errorf("written % x\ntftypes % x", w.b, wantBytes)
			}
		})
	}
}

// attributeType is the type of attribute name of o, as Terraform holds it.
func attributeType[T any](o object[T], name string) tftypes.Type {
	return o.schema()[name].GetType().TerraformType(context.Background())
}

// dataSourceSchema and schemaType are the schema of a data source and its
// type as Terraform sends configurations of it.
func dataSourceSchema(t *testing.T, ds datasource.DataSource) schema.Schema {
	t.Helper()
	var resp datasource.SchemaResponse
	ds.Schema(context.Background(), datasource.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	return resp.Schema
}

func schemaType(t *testing.T, ds datasource.DataSource) tftypes.Type {
	return dataSourceSchema(t, ds).Type().TerraformType(context.Background())
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
