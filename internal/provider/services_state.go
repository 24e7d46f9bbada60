package provider

import (
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// The objects of k8s_services' state: each Service of `services`, its ports
// and load balancer addresses, and each Service of `skipped`.

// serviceObject is one element of `services`: the facts of a Service that a
// pool needs, and its pool.
var serviceObject = newObject([]attribute[endpoints.ServicePool]{
	{name: "namespace", schema: computedString("Namespace of the Service."),
		write: func(w stateWriter, p *endpoints.ServicePool) { w.str(p.Service.Namespace) }},
	{name: "name", schema: computedString("Name of the Service."),
		write: func(w stateWriter, p *endpoints.ServicePool) { w.str(p.Service.Name) }},
	{name: "labels", schema: schema.MapAttribute{
		Computed: true, ElementType: types.StringType,
		MarkdownDescription: "Labels of the Service.",
	}, write: func(w stateWriter, p *endpoints.ServicePool) { writeStringMap(w, p.Service.Labels, "") }},
	{name: "annotations", schema: schema.MapAttribute{
		Computed: true, ElementType: types.StringType,
		MarkdownDescription: "Annotations of the Service, but for `kubectl.kubernetes.io/last-applied-configuration` " +
			"(a copy of the whole object that kubectl keeps, of no use to a pool).",
	}, write: func(w stateWriter, p *endpoints.ServicePool) {
		writeStringMap(w, p.Service.Annotations, lastAppliedAnnotation)
	}},
	{name: "type", schema: computedString("`ClusterIP`, `NodePort`, `LoadBalancer` or `ExternalName`."),
		write: func(w stateWriter, p *endpoints.ServicePool) { w.str(string(endpoints.ServiceType(p.Service))) }},
	{name: "cluster_ips", schema: schema.ListAttribute{
		Computed: true, ElementType: types.StringType,
		MarkdownDescription: "The Service's cluster IPs, one per address family, in the Service's order " +
			"(`spec.clusterIPs`: the primary family, the first of `ipFamilies`, first; not sorted); empty for a " +
			"headless Service.",
	}, write: func(w stateWriter, p *endpoints.ServicePool) { writeStrings(w, clusterIPs(p.Service)) }},
	{name: "external_traffic_policy", schema: computedString("`Cluster` or `Local`, for NodePort and LoadBalancer Services; null otherwise."),
		write: func(w stateWriter, p *endpoints.ServicePool) {
			w.strOrNull(string(p.Service.Spec.ExternalTrafficPolicy))
		}},
	{name: "ports", schema: schema.ListNestedAttribute{
		Computed:            true,
		MarkdownDescription: "The Service's ports, in its order.",
		NestedObject:        schema.NestedAttributeObject{Attributes: servicePortObject.schema()},
	}, write: func(w stateWriter, p *endpoints.ServicePool) { writeList(w, servicePortObject, p.Service.Spec.Ports) }},
	{name: "load_balancer_ingress", schema: schema.ListNestedAttribute{
		Computed:            true,
		MarkdownDescription: "Addresses of the load balancer of a LoadBalancer Service, as its status gives them.",
		NestedObject:        schema.NestedAttributeObject{Attributes: ingressObject.schema()},
	}, write: func(w stateWriter, p *endpoints.ServicePool) {
		writeList(w, ingressObject, p.Service.Status.LoadBalancer.Ingress)
	}},
	{name: "last_change_trigger_time", schema: computedString("The latest `endpoints.kubernetes.io/last-change-trigger-time` among the " +
		"Service's EndpointSlices, in RFC 3339; null when no slice has it."),
		write: func(w stateWriter, p *endpoints.ServicePool) { writeLastChange(w, p.LastChangeTriggerTime) }},
	{name: "endpoints", schema: endpointsAttribute(),
		write: func(w stateWriter, p *endpoints.ServicePool) { writeList(w, endpointObject, p.Endpoints) }},
})

// servicePortObject is one of a Service's `ports`.
var servicePortObject = newObject([]attribute[corev1.ServicePort]{
	{name: "name", schema: computedString("Name of the port; null for the only, unnamed, port of a Service."),
		write: func(w stateWriter, p *corev1.ServicePort) { w.strOrNull(p.Name) }},
	{name: "port", schema: computedInt64("Port of the Service."),
		write: func(w stateWriter, p *corev1.ServicePort) { w.int(int64(p.Port)) }},
	{name: "target_port", schema: computedString("Port of the pods, a number or the name of a container port, as the Service gives it."),
		write: func(w stateWriter, p *corev1.ServicePort) { w.strOrNull(p.TargetPort.String()) }},
	{name: "node_port", schema: computedInt64("Port on every node, for NodePort and LoadBalancer Services; null otherwise."),
		write: func(w stateWriter, p *corev1.ServicePort) {
			if p.NodePort == 0 {
				w.null()
				return
			}
			w.int(int64(p.NodePort))
		}},
	{name: "protocol", schema: computedString("`TCP`, `UDP` or `SCTP`."),
		write: func(w stateWriter, p *corev1.ServicePort) { w.strOrNull(string(p.Protocol)) }},
})

// ingressObject is one of a Service's `load_balancer_ingress`.
var ingressObject = newObject([]attribute[corev1.LoadBalancerIngress]{
	{name: "ip", schema: computedString("IP address; null when the load balancer gives a hostname."),
		write: func(w stateWriter, in *corev1.LoadBalancerIngress) { w.strOrNull(in.IP) }},
	{name: "hostname", schema: computedString("Hostname; null when the load balancer gives an IP address."),
		write: func(w stateWriter, in *corev1.LoadBalancerIngress) { w.strOrNull(in.Hostname) }},
})

// skippedObject is one element of `skipped`.
var skippedObject = newObject([]attribute[endpoints.SkippedService]{
	{name: "namespace", schema: computedString("Namespace of the Service."),
		write: func(w stateWriter, s *endpoints.SkippedService) { w.str(s.Namespace) }},
	{name: "name", schema: computedString("Name of the Service."),
		write: func(w stateWriter, s *endpoints.SkippedService) { w.str(s.Name) }},
	{name: "reason", schema: computedString("Why it is left out."),
		write: func(w stateWriter, s *endpoints.SkippedService) { w.str(s.Reason) }},
})

// computedString and computedInt64 are the declarations of the computed
// attributes of nested objects that need nothing but a description.
func computedString(description string) schema.StringAttribute {
	return schema.StringAttribute{Computed: true, MarkdownDescription: description}
}

func computedInt64(description string) schema.Int64Attribute {
	return schema.Int64Attribute{Computed: true, MarkdownDescription: description}
}

// lastAppliedAnnotation is kubectl's copy of the whole object: left out.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// writeServices writes the `services` map, keyed namespace/name, keys in
// order.
func writeServices(w stateWriter, pools []endpoints.ServicePool) {
	keyed := make([]int, len(pools))
	keys := make([]string, len(pools))
	for i, p := range pools {
		keyed[i] = i
		keys[i] = p.Service.Namespace + "/" + p.Service.Name
	}
	// The rules give the pools in order of namespace and name, which is not
	// always the order of the keys ("a-b/x" < "a/x" while "a" < "a-b").
	slices.SortFunc(keyed, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	w.mapOf(len(pools))
	for _, i := range keyed {
		w.key(keys[i])
		serviceObject.write(w, &pools[i])
	}
	w.end()
}

// clusterIPs lists the cluster IPs, none for a headless Service.
func clusterIPs(svc *corev1.Service) []string {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		if ip != "" && ip != corev1.ClusterIPNone {
			out = append(out, ip)
		}
	}
	return out
}
