package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
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
				"when the Service has several ports or none.",
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
				"node), for zone-local pools. Endpoints whose zone is unknown are left out. When unset, all zones.",
			Validators: []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
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

// endpointsAttribute is the pool of one Service, in every data source.
func endpointsAttribute() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Computed: true,
		MarkdownDescription: "The ready endpoints, sorted IPv4 before IPv6, then by address numerically, then " +
			"by port. An empty list when none is ready.",
		NestedObject: schema.NestedAttributeObject{
			Attributes: map[string]schema.Attribute{
				"address": schema.StringAttribute{
					Computed:            true,
					MarkdownDescription: "IP address of the endpoint (the first of its addresses), in canonical form.",
				},
				"port": schema.Int64Attribute{
					Computed: true,
					MarkdownDescription: "Port the endpoint listens on: the Service's `targetPort` as Kubernetes " +
						"resolved it, or `default_port`.",
				},
				"address_type": schema.StringAttribute{
					Computed:            true,
					MarkdownDescription: "`IPv4` or `IPv6`.",
				},
				"pod": schema.StringAttribute{
					Computed:            true,
					MarkdownDescription: "Name of the pod behind the endpoint; null when the slice names none.",
				},
				"node_name": schema.StringAttribute{
					Computed:            true,
					MarkdownDescription: "Node the endpoint runs on; null when the slice does not say.",
				},
				"zone": schema.StringAttribute{
					Computed:            true,
					MarkdownDescription: "Zone of the endpoint; null when the slice does not say.",
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
			},
		},
	}
}
