package provider

import (
	"time"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	corev1 "k8s.io/api/core/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// The reads' state built as tftypes values of the schema's types, as the
// provider built it before it wrote MessagePack itself (and as the golden
// files were written): the reference the writers of state_values.go are
// checked against (TestStateIsWhatTftypesWrites).

// endpointType is the type of one element of `endpoints`.
var endpointType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
	"address":      tftypes.String,
	"port":         tftypes.Number,
	"address_type": tftypes.String,
	"pod":          tftypes.String,
	"node_name":    tftypes.String,
	"zone":         tftypes.String,
	"hostname":     tftypes.String,
	"ready":        tftypes.Bool,
	"serving":      tftypes.Bool,
	"terminating":  tftypes.Bool,
	// local_endpoints: null for a pod, a count for a node.
	"local_endpoints": tftypes.Number,
}}

var endpointListType = tftypes.List{ElementType: endpointType}

// endpointsValue is the `endpoints` list of state: never null, an empty list
// when there is no endpoint.
func endpointsValue(eps []endpoints.Endpoint) tftypes.Value {
	elems := make([]tftypes.Value, len(eps))
	for i, e := range eps {
		local := tftypes.NewValue(tftypes.Number, nil)
		if e.LocalEndpoints != nil {
			local = tftypes.NewValue(tftypes.Number, int64(*e.LocalEndpoints))
		}
		elems[i] = tftypes.NewValue(endpointType, map[string]tftypes.Value{
			"address":         tftypes.NewValue(tftypes.String, e.Address),
			"port":            tftypes.NewValue(tftypes.Number, int64(e.Port)),
			"address_type":    tftypes.NewValue(tftypes.String, string(e.AddressType)),
			"pod":             stringOrNullValue(e.Pod),
			"node_name":       stringOrNullValue(e.NodeName),
			"zone":            stringOrNullValue(e.Zone),
			"hostname":        stringOrNullValue(e.Hostname),
			"ready":           tftypes.NewValue(tftypes.Bool, e.Ready),
			"serving":         tftypes.NewValue(tftypes.Bool, e.Serving),
			"terminating":     tftypes.NewValue(tftypes.Bool, e.Terminating),
			"local_endpoints": local,
		})
	}
	return tftypes.NewValue(endpointListType, elems)
}

// stringOrNullValue is s, or null when s is empty: the API gives no value.
func stringOrNullValue(s string) tftypes.Value {
	if s == "" {
		return tftypes.NewValue(tftypes.String, nil)
	}
	return tftypes.NewValue(tftypes.String, s)
}

// lastChangeValue is a trigger time in RFC 3339, or null when zero.
func lastChangeValue(t time.Time) tftypes.Value {
	if t.IsZero() {
		return tftypes.NewValue(tftypes.String, nil)
	}
	return tftypes.NewValue(tftypes.String, t.UTC().Format(time.RFC3339Nano))
}

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
