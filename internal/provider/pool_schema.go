package provider

import (
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
// Service gives the same pool whichever data source reads it.
func poolArguments() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"port_name": schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "Name of the port to use, among the ports of the Service. The read fails when the " +
				"Service has no port of that name. When unset, the Service's only port is used, or `default_port` " +
				"when the Service has several ports or none (with `target = \"nodes\"`, a Service with several ports " +
				"needs `port_name`).",
			Validators: []validator.String{dns1123Label()},
		},
		"default_port": schema.Int64Attribute{
			Optional: true,
			Computed: true,
			MarkdownDescription: "Port of the endpoints whose EndpointSlice gives no number for the chosen port " +
				"(or lists no ports at all), and of every endpoint when no port is chosen. Defaults to `80`.",
			Validators: []validator.Int64{int64validator.Between(1, 65535)},
		},
		"terminating_endpoints": schema.StringAttribute{
			Optional: true,
			Computed: true,
			MarkdownDescription: "What to do with endpoints that are terminating but still serving (pods in their " +
				"grace period): " + enumList(endpoints.TerminatingPolicies) + ". `exclude` (the default) leaves them out; " +
				"`fallback` gives them only when no endpoint is ready, as kube-proxy does since Kubernetes 1.28; " +
				"`include` gives them beside the ready ones, for pools that drain connections gracefully. Endpoints " +
				"that no longer serve are never given.",
			Validators: []validator.String{stringvalidator.OneOf(enumStrings(endpoints.TerminatingPolicies)...)},
		},
		"address_type": schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "Keep only the endpoints of one address family, `IPv4` or `IPv6`, for a pool that " +
				"takes one. When unset, both.",
			Validators: []validator.String{stringvalidator.OneOf(string(discoveryv1.AddressTypeIPv4), string(discoveryv1.AddressTypeIPv6))},
		},
		"zones": schema.SetAttribute{
			Optional:    true,
			ElementType: types.StringType,
			MarkdownDescription: "Keep only the endpoints in these zones (`topology.kubernetes.io/zone` of their " +
				"node), for zone-local pools. Endpoints whose zone is unknown are left out. With `target = \"nodes\"`, " +
				"the nodes too are kept by their `topology.kubernetes.io/zone` label. When unset, all zones.",
			Validators: []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
		},
		"target": schema.StringAttribute{
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
		},
		"node_address_type": schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "With `target = \"nodes\"`, which address of each node is given: `InternalIP` (the " +
				"default) or `ExternalIP`, for load balancers outside the node network. Nodes without an address of " +
				"that type are left out.",
			Validators: []validator.String{stringvalidator.OneOf(string(corev1.NodeInternalIP), string(corev1.NodeExternalIP))},
		},
		"node_selector": schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "With `target = \"nodes\"`, keep only the nodes whose labels match this selector, in " +
				"Kubernetes syntax (`node-role.kubernetes.io/ingress,topology.kubernetes.io/zone in (a,b)`). When " +
				"unset, every eligible node.",
			Validators: []validator.String{labelSelector()},
		},
		"expiry_annotation": schema.StringAttribute{
			Optional: true,
			MarkdownDescription: "Name of an EndpointSlice annotation holding the time after which the slice's " +
				"endpoints are stale, as an RFC 3339 time or Unix seconds. Slices whose time has passed are left " +
				"out, so that endpoints which registered themselves and stopped renewing leave the pool even when " +
				"nothing deletes them. The slices Kubernetes mirrors from a hand-managed Endpoints object carry its " +
				"annotations. A value that cannot be read gives a warning naming the slice, which is kept.",
			Validators: []validator.String{qualifiedName()},
		},
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
			"numerically, then by port. An empty list when none is ready.",
		NestedObject: schema.NestedAttributeObject{
			Attributes: map[string]schema.Attribute{
				"address": schema.StringAttribute{
					Computed: true,
					MarkdownDescription: "IP address of the endpoint (the first of its addresses), in canonical form; " +
						"of a node, its first address of `node_address_type` in the family.",
				},
				"port": schema.Int64Attribute{
					Computed: true,
					MarkdownDescription: "Port the endpoint listens on: the Service's `targetPort` as Kubernetes " +
						"resolved it, or `default_port`; for a node, the chosen port's `nodePort`.",
				},
				"address_type": schema.StringAttribute{
					Computed:            true,
					MarkdownDescription: "`IPv4` or `IPv6`.",
				},
				"pod": schema.StringAttribute{
					Computed:            true,
					MarkdownDescription: "Name of the pod behind the endpoint; null when the slice names none, and for a node.",
				},
				"node_name": schema.StringAttribute{
					Computed:            true,
					MarkdownDescription: "Node the endpoint runs on, or the node itself with `target = \"nodes\"`; null when the slice does not say.",
				},
				"zone": schema.StringAttribute{
					Computed: true,
					MarkdownDescription: "Zone of the endpoint (of the node, from its `topology.kubernetes.io/zone` label, " +
						"with `target = \"nodes\"`); null when the slice or the node does not say.",
				},
				"hostname": schema.StringAttribute{
					Computed:            true,
					MarkdownDescription: "Hostname of the endpoint (set for the pods of a StatefulSet behind a headless Service); null when the slice does not say.",
				},
				"ready": schema.BoolAttribute{
					Computed:            true,
					MarkdownDescription: "The endpoint's `ready` condition; `true` when the slice gives none.",
				},
				"serving": schema.BoolAttribute{
					Computed:            true,
					MarkdownDescription: "The endpoint's `serving` condition; `true` when the slice gives none, as the `discovery/v1` API and kube-proxy read it.",
				},
				"terminating": schema.BoolAttribute{
					Computed:            true,
					MarkdownDescription: "The endpoint's `terminating` condition; `false` when the slice gives none.",
				},
				"local_endpoints": schema.Int64Attribute{
					Computed: true,
					MarkdownDescription: "With `target = \"nodes\"`: how many endpoints of the Service's pod pool (of " +
						"this entry's address family) run on the node, usable as a weight. Null with `target = \"pods\"`.",
				},
			},
		},
	}
}

// serviceAttributes are the facts of a Service that a pool needs, and its
// pool, as one element of k8s_services' `services`.
func serviceAttributes() map[string]schema.Attribute {
	str := func(description string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: description}
	}
	num := func(description string) schema.Int64Attribute {
		return schema.Int64Attribute{Computed: true, MarkdownDescription: description}
	}
	return map[string]schema.Attribute{
		"namespace": str("Namespace of the Service."),
		"name":      str("Name of the Service."),
		"labels": schema.MapAttribute{
			Computed: true, ElementType: types.StringType,
			MarkdownDescription: "Labels of the Service.",
		},
		"annotations": schema.MapAttribute{
			Computed: true, ElementType: types.StringType,
			MarkdownDescription: "Annotations of the Service, but for `kubectl.kubernetes.io/last-applied-configuration` " +
				"(a copy of the whole object that kubectl keeps, of no use to a pool).",
		},
		"type": str("`ClusterIP`, `NodePort`, `LoadBalancer` or `ExternalName`."),
		"cluster_ips": schema.ListAttribute{
			Computed: true, ElementType: types.StringType,
			MarkdownDescription: "The Service's cluster IPs, one per address family, in the Service's order " +
				"(`spec.clusterIPs`: the primary family, the first of `ipFamilies`, first; not sorted); empty for a " +
				"headless Service.",
		},
		"external_traffic_policy": str("`Cluster` or `Local`, for NodePort and LoadBalancer Services; null otherwise."),
		"ports": schema.ListNestedAttribute{
			Computed:            true,
			MarkdownDescription: "The Service's ports, in its order.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"name":        str("Name of the port; null for the only, unnamed, port of a Service."),
				"port":        num("Port of the Service."),
				"target_port": str("Port of the pods, a number or the name of a container port, as the Service gives it."),
				"node_port":   num("Port on every node, for NodePort and LoadBalancer Services; null otherwise."),
				"protocol":    str("`TCP`, `UDP` or `SCTP`."),
			}},
		},
		"load_balancer_ingress": schema.ListNestedAttribute{
			Computed:            true,
			MarkdownDescription: "Addresses of the load balancer of a LoadBalancer Service, as its status gives them.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"ip":       str("IP address; null when the load balancer gives a hostname."),
				"hostname": str("Hostname; null when the load balancer gives an IP address."),
			}},
		},
		"last_change_trigger_time": str("The latest `endpoints.kubernetes.io/last-change-trigger-time` among the " +
			"Service's EndpointSlices, in RFC 3339; null when no slice has it."),
		"endpoints": endpointsAttribute(),
	}
}
