package provider

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// The computed values of state, written as MessagePack (msgpack.go). Each
// object's attributes are written in order of name, as tftypes writes them;
// TestStateIsWhatTftypesWrites checks every writer against the same state
// built as tftypes values of the schema's types.

// writeEndpoints writes the `endpoints` list of state: never null, an empty
// list when there is no endpoint.
func writeEndpoints(w *msgpackWriter, eps []endpoints.Endpoint) {
	w.arrayLen(len(eps))
	for i := range eps {
		e := &eps[i]
		w.mapLen(11)
		w.str("address")
		w.str(e.Address)
		w.str("address_type")
		w.str(string(e.AddressType))
		w.str("hostname")
		w.strOrNull(e.Hostname)
		// local_endpoints: null for a pod, a count for a node.
		w.str("local_endpoints")
		w.intOrNull(e.LocalEndpoints)
		w.str("node_name")
		w.strOrNull(e.NodeName)
		w.str("pod")
		w.strOrNull(e.Pod)
		w.str("port")
		w.int(int64(e.Port))
		w.str("ready")
		w.bool(e.Ready)
		w.str("serving")
		w.bool(e.Serving)
		w.str("terminating")
		w.bool(e.Terminating)
		w.str("zone")
		w.strOrNull(e.Zone)
	}
}

// writeLastChange writes a trigger time in RFC 3339, or null when zero.
func writeLastChange(w *msgpackWriter, t time.Time) {
	if t.IsZero() {
		w.null()
		return
	}
	w.str(t.UTC().Format(time.RFC3339Nano))
}

// lastAppliedAnnotation is kubectl's copy of the whole object: left out.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// writeServices writes the `services` map of k8s_services, keyed
// namespace/name, keys in order.
func writeServices(w *msgpackWriter, pools []endpoints.ServicePool) {
	keyed := make([]int, len(pools))
	keys := make([]string, len(pools))
	for i, p := range pools {
		keyed[i] = i
		keys[i] = p.Service.Namespace + "/" + p.Service.Name
	}
	// The rules give the pools in order of namespace and name, which is not
	// always the order of the keys ("a-b/x" < "a/x" while "a" < "a-b").
	slices.SortFunc(keyed, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	w.mapLen(len(pools))
	for _, i := range keyed {
		w.str(keys[i])
		writeService(w, pools[i])
	}
}

func writeService(w *msgpackWriter, p endpoints.ServicePool) {
	svc := p.Service
	w.mapLen(11)
	w.str("annotations")
	w.stringMap(svc.Annotations, lastAppliedAnnotation)
	w.str("cluster_ips")
	w.strings(clusterIPs(svc))
	w.str("endpoints")
	writeEndpoints(w, p.Endpoints)
	w.str("external_traffic_policy")
	w.strOrNull(string(svc.Spec.ExternalTrafficPolicy))
	w.str("labels")
	w.stringMap(svc.Labels, "")
	w.str("last_change_trigger_time")
	writeLastChange(w, p.LastChangeTriggerTime)
	w.str("load_balancer_ingress")
	w.arrayLen(len(svc.Status.LoadBalancer.Ingress))
	for _, in := range svc.Status.LoadBalancer.Ingress {
		w.mapLen(2)
		w.str("hostname")
		w.strOrNull(in.Hostname)
		w.str("ip")
		w.strOrNull(in.IP)
	}
	w.str("name")
	w.str(svc.Name)
	w.str("namespace")
	w.str(svc.Namespace)
	w.str("ports")
	w.arrayLen(len(svc.Spec.Ports))
	for _, port := range svc.Spec.Ports {
		w.mapLen(5)
		w.str("name")
		w.strOrNull(port.Name)
		w.str("node_port")
		if port.NodePort != 0 {
			w.int(int64(port.NodePort))
		} else {
			w.null()
		}
		w.str("port")
		w.int(int64(port.Port))
		w.str("protocol")
		w.strOrNull(string(port.Protocol))
		w.str("target_port")
		w.strOrNull(port.TargetPort.String())
	}
	w.str("type")
	w.str(string(endpoints.ServiceType(svc)))
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

// writeSkipped writes the `skipped` list of k8s_services.
func writeSkipped(w *msgpackWriter, skipped []endpoints.SkippedService) {
	w.arrayLen(len(skipped))
	for _, s := range skipped {
		w.mapLen(3)
		w.str("name")
		w.str(s.Name)
		w.str("namespace")
		w.str(s.Namespace)
		w.str("reason")
		w.str(s.Reason)
	}
}
