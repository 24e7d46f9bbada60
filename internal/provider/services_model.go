package provider

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/datasource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	corev1 "k8s.io/api/core/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

type servicesModel struct {
	ID            types.String `tfsdk:"id"`
	Namespace     types.String `tfsdk:"namespace"`
	Namespaces    types.Set    `tfsdk:"namespaces"`
	AllNamespaces types.Bool   `tfsdk:"all_namespaces"`
	LabelSelector types.String `tfsdk:"label_selector"`
	Names         types.Set    `tfsdk:"names"`
	poolArgumentsModel
	MinReady    types.Int64    `tfsdk:"min_ready"`
	MinServices types.Int64    `tfsdk:"min_services"`
	Timeouts    timeouts.Value `tfsdk:"timeouts"`
	// Services and Skipped are computed: the read builds them as Terraform
	// values (stateValues), never through these fields.
	Services types.Map  `tfsdk:"services"`
	Skipped  types.List `tfsdk:"skipped"`
}

// withDefaults fills the optional arguments the configuration left out, so
// that state shows the values the read used.
func (m servicesModel) withDefaults() servicesModel {
	if m.Namespace.IsNull() && m.Namespaces.IsNull() && !m.AllNamespaces.ValueBool() {
		m.Namespace = types.StringValue(defaultNamespace)
	}
	m.poolArgumentsModel = m.poolArgumentsModel.withDefaults()
	if m.MinReady.IsNull() {
		m.MinReady = types.Int64Value(0)
	}
	if m.MinServices.IsNull() {
		m.MinServices = types.Int64Value(0)
	}
	return m
}

// request turns the arguments into what readFleet needs.
func (m servicesModel) request(ctx context.Context) (fleetRequest, diag.Diagnostics) {
	var namespaces, names []string
	diags := m.Namespaces.ElementsAs(ctx, &namespaces, false)
	diags.Append(m.Names.ElementsAs(ctx, &names, false)...)
	wait, d := m.Timeouts.Read(ctx, 0)
	diags.Append(d...)
	switch {
	case m.AllNamespaces.ValueBool():
		namespaces = []string{""}
	case len(namespaces) == 0:
		namespaces = []string{m.Namespace.ValueString()}
	}
	slices.Sort(namespaces)
	r := fleetRequest{
		namespaces:  namespaces,
		selector:    m.LabelSelector.ValueString(),
		names:       names,
		minReady:    int(m.MinReady.ValueInt64()),
		minServices: int(m.MinServices.ValueInt64()),
		wait:        wait,
	}
	r.query, r.nodes, d = m.query(ctx)
	diags.Append(d...)
	return r, diags
}

// fleetID names the namespaces read: comma-separated, or * for all.
func fleetID(namespaces []string) string {
	if len(namespaces) == 1 && namespaces[0] == "" {
		return "*"
	}
	return strings.Join(namespaces, ",")
}

// stateValues are the computed attributes of state.
func (m servicesModel) stateValues(namespaces []string, res endpoints.FleetResult) map[string]tftypes.Value {
	namespace := tftypes.NewValue(tftypes.String, nil)
	if !m.Namespace.IsNull() {
		namespace = tftypes.NewValue(tftypes.String, m.Namespace.ValueString())
	}
	return m.withStateValues(map[string]tftypes.Value{
		"id":           tftypes.NewValue(tftypes.String, fleetID(namespaces)),
		"namespace":    namespace,
		"min_ready":    tftypes.NewValue(tftypes.Number, m.MinReady.ValueInt64()),
		"min_services": tftypes.NewValue(tftypes.Number, m.MinServices.ValueInt64()),
		"services":     servicesValue(res.Pools),
		"skipped":      skippedValue(res.Skipped),
	})
}

// lastChangeValue is a trigger time in RFC 3339, or null when zero.
func lastChangeValue(t time.Time) tftypes.Value {
	if t.IsZero() {
		return tftypes.NewValue(tftypes.String, nil)
	}
	return tftypes.NewValue(tftypes.String, t.UTC().Format(time.RFC3339Nano))
}

// lastAppliedAnnotation is kubectl's copy of the whole object: left out.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

var (
	stringMapType   = tftypes.Map{ElementType: tftypes.String}
	stringListType  = tftypes.List{ElementType: tftypes.String}
	servicePortType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"name": tftypes.String, "port": tftypes.Number, "target_port": tftypes.String,
		"node_port": tftypes.Number, "protocol": tftypes.String,
	}}
	ingressType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"ip": tftypes.String, "hostname": tftypes.String,
	}}
	serviceType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"namespace":                tftypes.String,
		"name":                     tftypes.String,
		"labels":                   stringMapType,
		"annotations":              stringMapType,
		"type":                     tftypes.String,
		"cluster_ips":              stringListType,
		"external_traffic_policy":  tftypes.String,
		"ports":                    tftypes.List{ElementType: servicePortType},
		"load_balancer_ingress":    tftypes.List{ElementType: ingressType},
		"last_change_trigger_time": tftypes.String,
		"endpoints":                endpointListType,
	}}
	servicesMapType = tftypes.Map{ElementType: serviceType}
	skippedType     = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"namespace": tftypes.String, "name": tftypes.String, "reason": tftypes.String,
	}}
	skippedListType = tftypes.List{ElementType: skippedType}
)

func servicesValue(pools []endpoints.ServicePool) tftypes.Value {
	out := make(map[string]tftypes.Value, len(pools))
	for _, p := range pools {
		out[p.Service.Namespace+"/"+p.Service.Name] = serviceValue(p)
	}
	return tftypes.NewValue(servicesMapType, out)
}

func serviceValue(p endpoints.ServicePool) tftypes.Value {
	svc := p.Service
	ports := make([]tftypes.Value, 0, len(svc.Spec.Ports))
	for _, port := range svc.Spec.Ports {
		nodePort := tftypes.NewValue(tftypes.Number, nil)
		if port.NodePort != 0 {
			nodePort = tftypes.NewValue(tftypes.Number, int64(port.NodePort))
		}
		ports = append(ports, tftypes.NewValue(servicePortType, map[string]tftypes.Value{
			"name":        stringOrNullValue(port.Name),
			"port":        tftypes.NewValue(tftypes.Number, int64(port.Port)),
			"target_port": stringOrNullValue(port.TargetPort.String()),
			"node_port":   nodePort,
			"protocol":    stringOrNullValue(string(port.Protocol)),
		}))
	}
	ingress := make([]tftypes.Value, 0, len(svc.Status.LoadBalancer.Ingress))
	for _, in := range svc.Status.LoadBalancer.Ingress {
		ingress = append(ingress, tftypes.NewValue(ingressType, map[string]tftypes.Value{
			"ip":       stringOrNullValue(in.IP),
			"hostname": stringOrNullValue(in.Hostname),
		}))
	}
	return tftypes.NewValue(serviceType, map[string]tftypes.Value{
		"namespace":                tftypes.NewValue(tftypes.String, svc.Namespace),
		"name":                     tftypes.NewValue(tftypes.String, svc.Name),
		"labels":                   stringMapValue(svc.Labels, ""),
		"annotations":              stringMapValue(svc.Annotations, lastAppliedAnnotation),
		"type":                     tftypes.NewValue(tftypes.String, string(endpoints.ServiceType(svc))),
		"cluster_ips":              clusterIPsValue(svc),
		"external_traffic_policy":  stringOrNullValue(string(svc.Spec.ExternalTrafficPolicy)),
		"ports":                    tftypes.NewValue(tftypes.List{ElementType: servicePortType}, ports),
		"load_balancer_ingress":    tftypes.NewValue(tftypes.List{ElementType: ingressType}, ingress),
		"last_change_trigger_time": lastChangeValue(p.LastChangeTriggerTime),
		"endpoints":                endpointsValue(p.Endpoints),
	})
}

// clusterIPsValue lists the cluster IPs, none for a headless Service.
func clusterIPsValue(svc *corev1.Service) tftypes.Value {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	out := make([]tftypes.Value, 0, len(ips))
	for _, ip := range ips {
		if ip != "" && ip != corev1.ClusterIPNone {
			out = append(out, tftypes.NewValue(tftypes.String, ip))
		}
	}
	return tftypes.NewValue(stringListType, out)
}

// stringMapValue is m as a map of strings, never null, without the key skip.
func stringMapValue(m map[string]string, skip string) tftypes.Value {
	out := make(map[string]tftypes.Value, len(m))
	for k, v := range m {
		if k != skip {
			out[k] = tftypes.NewValue(tftypes.String, v)
		}
	}
	return tftypes.NewValue(stringMapType, out)
}

func skippedValue(skipped []endpoints.SkippedService) tftypes.Value {
	out := make([]tftypes.Value, 0, len(skipped))
	for _, s := range skipped {
		out = append(out, tftypes.NewValue(skippedType, map[string]tftypes.Value{
			"namespace": tftypes.NewValue(tftypes.String, s.Namespace),
			"name":      tftypes.NewValue(tftypes.String, s.Name),
			"reason":    tftypes.NewValue(tftypes.String, s.Reason),
		}))
	}
	return tftypes.NewValue(skippedListType, out)
}
