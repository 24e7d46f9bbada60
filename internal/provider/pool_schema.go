package provider

import (
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// poolArguments are the arguments that say which endpoints of a Service make
// its pool, the same in every data source that gives pools, so that one
// Service gives the same pool whichever data source reads it; args is where
// the state T of the data source holds them.
func poolArguments[T any](args func(*T) *poolArgumentsModel) []attribute[T] {
	return []attribute[T]{
		{name: "port_name", schema: schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "Name of the port to use, among the ports of the Service. The read fails when the " +
				"Service has no port of that name. When unset, the Service's only port is used, or `default_port` " +
				"when the Service has several ports or none (with `target = \"nodes\"`, a Service with several ports " +
				"needs `port_name`).",
			Validators: []validator.String{dns1123Label()},
		}},
		{name: "default_port", schema: schema.Int64Attribute{
			Optional: true,
			Computed: true,
			MarkdownDescription: "Port of the endpoints whose EndpointSlice gives no number for the chosen port " +
				"(or lists no ports at all), and of every endpoint when no port is chosen. Defaults to `80`.",
			Validators: []validator.Int64{int64validator.Between(1, 65535)},
		},
			write: func(w stateWriter, v *T) { w.int(args(v).DefaultPort.ValueInt64()) },
		},
		{name: "terminating_endpoints", schema: schema.StringAttribute{
			Optional: true,
			Computed: true,
			MarkdownDescription: "What to do with endpoints that are terminating but still serving (pods in their " +
				"grace period): " + enumList(endpoints.TerminatingPolicies) + ". `exclude` (the default) leaves them out; " +
				"`fallback` gives them only when no endpoint is ready, as kube-proxy does since Kubernetes 1.28; " +
				"`include` gives them beside the ready ones, for pools that drain connections gracefully. Endpoints " +
				"that are not serving are never given.",
			Validators: []validator.String{stringvalidator.OneOf(enumStrings(endpoints.TerminatingPolicies)...)},
		},
			write: func(w stateWriter, v *T) { w.str(args(v).TerminatingEndpoints.ValueString()) },
		},
		{name: "address_type", schema: schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "Keep only the endpoints of one address family, `IPv4` or `IPv6`, for a pool that " +
				"takes one. When unset, both.",
			Validators: []validator.String{stringvalidator.OneOf(string(discoveryv1.AddressTypeIPv4), string(discoveryv1.AddressTypeIPv6))},
		}},
		{name: "zones", schema: schema.SetAttribute{
			Optional:    true,
			ElementType: types.StringType,
			MarkdownDescription: "Keep only the endpoints in these zones (`topology.kubernetes.io/zone` of their " +
				"node), for zone-local pools. Endpoints whose zone is unknown are left out. With `target = \"nodes\"`, " +
				"the nodes too are kept by their `topology.kubernetes.io/zone` label. When unset, all zones.",
			Validators: []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
		}},
		{name: "target", schema: schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "What the pool's members are: " + enumList(poolTargets) + ". `pods` (the default) " +
				"gives the pods' endpoints, for load balancers that reach pod IPs. `nodes` gives the nodes, on the " +
				"`nodePort` of the chosen port, for load balancers that cannot: the nodes that are not being deleted, " +
				"not labelled `node.kubernetes.io/exclude-from-external-load-balancers`, not tainted " +
				"`ToBeDeletedByClusterAutoscaler` or `karpenter.sh/disrupted`, `Ready`, with an address of " +
				"`node_address_type`, and matching `node_selector`; with `externalTrafficPolicy: Local`, only those " +
				"that run at least one endpoint of the pod pool. `nodes` needs `list` on `nodes`, cluster-wide (a " +
				"ClusterRole), and a Service whose chosen port has a `nodePort` (NodePort or LoadBalancer).",
			Validators: []validator.String{stringvalidator.OneOf(enumStrings(poolTargets)...)},
		}},
		{name: "node_address_type", schema: schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "With `target = \"nodes\"`, which address of each node is given: `InternalIP` (the " +
				"default) or `ExternalIP`, for load balancers outside the node network. Nodes without an address of " +
				"that type are left out.",
			Validators: []validator.String{stringvalidator.OneOf(string(corev1.NodeInternalIP), string(corev1.NodeExternalIP))},
		}},
		{name: "node_selector", schema: schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "With `target = \"nodes\"`, keep only the nodes whose labels match this selector, in " +
				"Kubernetes syntax (`node-role.kubernetes.io/ingress,topology.kubernetes.io/zone in (a,b)`). When " +
				"unset, every eligible node.",
			Validators: []validator.String{labelSelector()},
		}},
		{name: "pod_health_checks", schema: schema.BoolAttribute{
			Optional: true,
			MarkdownDescription: "With `target = \"pods\"`, set each endpoint's `health_check` from its pod's " +
				"`readinessProbe`, so that the load balancer checks exactly what the kubelet checks. This reads the " +
				"Pods behind the Service: one more paginated LIST of Pods (of the Service's selector; for " +
				"`k8s_services`, of each namespace in scope), which needs `list` on `pods`. A Service without a " +
				"selector has no Pods to read: its endpoints keep a null `health_check`. Default `false`.",
		}},
		{name: "kube_proxy_health_port", schema: schema.Int64Attribute{
			Optional: true,
			MarkdownDescription: "With `target = \"nodes\"`, the port of the nodes' `health_check` when the Service " +
				"has no `healthCheckNodePort` (`externalTrafficPolicy: Cluster`, or a Local NodePort Service): " +
				"kube-proxy's `--healthz-bind-address` port, `10256` when unset. Set it for a cluster whose kube-proxy " +
				"serves its health elsewhere, or whose replacement does (Cilium's `kubeProxyReplacementHealthzBindAddr`).",
			Validators: []validator.Int64{int64validator.Between(1, 65535)},
		}},
		{name: "expiry_annotation", schema: schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "Name of an EndpointSlice annotation holding the time after which the slice's " +
				"endpoints are stale, as an RFC 3339 time or Unix seconds. Slices whose time has passed are left " +
				"out, so that endpoints which registered themselves and stopped renewing leave the pool even when " +
				"nothing deletes them. The slices Kubernetes mirrors from a hand-managed Endpoints object carry its " +
				"annotations. A value that cannot be read gives a warning naming the slice, which is kept.",
			Validators: []validator.String{qualifiedName()},
		}},
		{name: "trusted_slice_managers", schema: schema.ListAttribute{
			Optional:    true,
			Computed:    true,
			ElementType: types.StringType,
			MarkdownDescription: "Managers of EndpointSlices (their `endpointslice.kubernetes.io/managed-by` label) whose " +
				"slices count for a Service with a selector, beside the control plane's EndpointSlice controller (`" +
				endpoints.EndpointSliceController + "`): a service mesh or a multi-cluster controller that writes slices " +
				"for such Services. The other slices labelled with the Service's name are left out, with a warning that " +
				"names each and its manager, as anyone who may write an EndpointSlice could otherwise put any address " +
				"in the pool. A Service without a selector reads every slice labelled with its name, whoever wrote it " +
				"(by hand, mirrored from an Endpoints object, a controller of one's own). Defaults to the provider's " +
				"`trusted_slice_managers`, else none.",
			Validators: trustedSliceManagersValidators(),
		},
			write: func(w stateWriter, v *T) { writeStrings(w, args(v).trustedSliceManagers()) },
		},
		readinessGateArgument[T](),
	}
}

// Pool targets: the pods' endpoints, or the nodes on the nodePort.
const (
	targetPods  = "pods"
	targetNodes = "nodes"
)

var poolTargets = []string{targetPods, targetNodes}

// endpointsAttribute is the pool of one Service, in every data source.
func endpointsAttribute() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Computed: true,
		MarkdownDescription: "The ready endpoints (with `target = \"nodes\"`, the nodes: one entry per node and " +
			"address family, on the `nodePort`, ready and serving), sorted IPv4 before IPv6, then by address " +
			"numerically, then by port. An empty list when none is ready. With `readiness_gate`, also the " +
			"endpoints of the pods that wait for that gate (`gate_pending = true`).",
		NestedObject: schema.NestedAttributeObject{Attributes: endpointObject.schema()},
	}
}

// endpointObject is one element of `endpoints`.
var endpointObject = newObject([]attribute[endpoints.Endpoint]{
	{name: "address", schema: schema.StringAttribute{
		Computed: true,
		MarkdownDescription: "IP address of the endpoint (the first of its addresses), in canonical form; " +
			"of a node, its first address of `node_address_type` in the family.",
	}, write: func(w stateWriter, e *endpoints.Endpoint) { w.str(e.Address) }},
	{name: "port", schema: schema.Int64Attribute{
		Computed: true,
		MarkdownDescription: "Port the endpoint listens on: the Service's `targetPort` as Kubernetes " +
			"resolved it, or `default_port`; for a node, the chosen port's `nodePort`.",
	}, write: func(w stateWriter, e *endpoints.Endpoint) { w.int(int64(e.Port)) }},
	{name: "address_type", schema: schema.StringAttribute{
		Computed:            true,
		MarkdownDescription: "`IPv4` or `IPv6`.",
	}, write: func(w stateWriter, e *endpoints.Endpoint) { w.str(string(e.AddressType)) }},
	{name: "pod", schema: schema.StringAttribute{
		Computed:            true,
		MarkdownDescription: "Name of the pod behind the endpoint; null when the slice names none, and for a node.",
	}, write: func(w stateWriter, e *endpoints.Endpoint) { w.strOrNull(e.Pod) }},
	{name: "node_name", schema: schema.StringAttribute{
		Computed:            true,
		MarkdownDescription: "Node the endpoint runs on, or the node itself with `target = \"nodes\"`; null when the slice does not say.",
	}, write: func(w stateWriter, e *endpoints.Endpoint) { w.strOrNull(e.NodeName) }},
	{name: "zone", schema: schema.StringAttribute{
		Computed: true,
		MarkdownDescription: "Zone of the endpoint (of the node, from its `topology.kubernetes.io/zone` label, " +
			"with `target = \"nodes\"`); null when the slice or the node does not say.",
	}, write: func(w stateWriter, e *endpoints.Endpoint) { w.strOrNull(e.Zone) }},
	{name: "hostname", schema: schema.StringAttribute{
		Computed:            true,
		MarkdownDescription: "Hostname of the endpoint (set for the pods of a StatefulSet behind a headless Service); null when the slice does not say.",
	}, write: func(w stateWriter, e *endpoints.Endpoint) { w.strOrNull(e.Hostname) }},
	{name: "ready", schema: schema.BoolAttribute{
		Computed:            true,
		MarkdownDescription: "The endpoint's `ready` condition; `true` when the slice gives none.",
	}, write: func(w stateWriter, e *endpoints.Endpoint) { w.bool(e.Ready) }},
	{name: "serving", schema: schema.BoolAttribute{
		Computed:            true,
		MarkdownDescription: "The endpoint's `serving` condition; `true` when the slice gives none, as the `discovery/v1` API and kube-proxy read it.",
	}, write: func(w stateWriter, e *endpoints.Endpoint) { w.bool(e.Serving) }},
	{name: "terminating", schema: schema.BoolAttribute{
		Computed:            true,
		MarkdownDescription: "The endpoint's `terminating` condition; `false` when the slice gives none.",
	}, write: func(w stateWriter, e *endpoints.Endpoint) { w.bool(e.Terminating) }},
	gatePendingAttribute,
	{name: "local_endpoints", schema: schema.Int64Attribute{
		Computed: true,
		MarkdownDescription: "With `target = \"nodes\"`: how many endpoints of the Service's pod pool (of " +
			"this entry's address family) run on the node, usable as a weight. Null with `target = \"pods\"`.",
	}, write: func(w stateWriter, e *endpoints.Endpoint) { w.intOrNull(e.LocalEndpoints) }},
	{name: "health_check", schema: schema.SingleNestedAttribute{
		Computed: true,
		MarkdownDescription: "How a load balancer should check this member between two plans, so that it takes a " +
			"dead one out before the next plan does. A node (`target = \"nodes\"`) is checked as Kubernetes' own " +
			"load balancers check it: with `externalTrafficPolicy: Local`, on the Service's `healthCheckNodePort` " +
			"(kube-proxy answers `/healthz` with 200 only on nodes that run a ready endpoint of the Service); " +
			"otherwise, and for a Local NodePort Service (which has no `healthCheckNodePort`), on kube-proxy's " +
			"health port, `kube_proxy_health_port` (default `10256`, path `/healthz`, which fails on a node being " +
			"deleted or tainted for removal since Kubernetes 1.28). A pod, with `pod_health_checks = true`, is " +
			"checked as the kubelet checks it: the `readinessProbe` of the container that declares the endpoint's " +
			"port (or of the only container with one), an `httpGet`, `tcpSocket` or `grpc` probe, asked of the " +
			"endpoint's address. Null for a pod without `pod_health_checks`, whose pod is gone, whose probe runs a " +
			"command (`exec`) or asks another `host`, or that has no such probe.",
		Attributes: healthCheckObject.schema(),
	}, write: func(w stateWriter, e *endpoints.Endpoint) {
		if e.HealthCheck == nil {
			w.null()
			return
		}
		healthCheckObject.write(w, e.HealthCheck)
	}},
})

// healthCheckObject is an endpoint's `health_check`.
var healthCheckObject = newObject([]attribute[endpoints.HealthCheck]{
	{name: "type", schema: computedString("`http`, `https`, `tcp` or `grpc`: what to ask of the port. `https` does not check " +
		"the certificate, as the kubelet does not."),
		write: func(w stateWriter, h *endpoints.HealthCheck) { w.str(h.Type) }},
	{name: "port", schema: computedInt64("Port to check, on the member's `address`."),
		write: func(w stateWriter, h *endpoints.HealthCheck) { w.int(int64(h.Port)) }},
	{name: "path", schema: computedString("HTTP path to ask for with `http` and `https` (a 2xx or 3xx answer is healthy, " +
		"as the kubelet judges it); null for `tcp` and `grpc`."),
		write: func(w stateWriter, h *endpoints.HealthCheck) { w.strOrNull(h.Path) }},
	{name: "source", schema: computedString("Where the check comes from: `readinessProbe`, `healthCheckNodePort` or `kube-proxy`."),
		write: func(w stateWriter, h *endpoints.HealthCheck) { w.str(h.Source) }},
})

// writeLastChange writes a trigger time in RFC 3339, or null when zero.
func writeLastChange(w stateWriter, t time.Time) {
	if t.IsZero() {
		w.null()
		return
	}
	w.str(t.UTC().Format(time.RFC3339Nano))
}

// guardAttribute is the schema of a guard (min_ready, min_services): a
// count the read must find, 0 (no guard) by default.
func guardAttribute(description string) schema.Int64Attribute {
	return schema.Int64Attribute{
		Optional:            true,
		Computed:            true,
		MarkdownDescription: description,
		Validators:          []validator.Int64{int64validator.AtLeast(0)},
	}
}
