package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// readyEndpointsKind is k8s_ready_endpoints.
var readyEndpointsKind = &dataSourceKind[readyEndpointsModel, readyEndpointsState]{
	typeName: "_ready_endpoints",
	description: "The ready endpoints of a Kubernetes Service, read from its EndpointSlices: one entry per " +
		"pod address and port, without duplicates, in a stable order, ready to feed the pool of an external " +
		"load balancer that reaches pods directly; or, with `target = \"nodes\"`, the nodes on the Service's " +
		"`nodePort`, for one that cannot.",
	readTimeout: "How long the read may wait for `min_ready` endpoints, as a duration such as `\"5m\"`. " +
		"Without it the read does not wait.",
	attributes: readyEndpointsAttributes,
	read:       readReadyEndpoints,
	validators: func() []datasource.ConfigValidator { return []datasource.ConfigValidator{nodeArgumentsNeedNodes{}} },
}

func newReadyEndpointsDataSource() datasource.DataSource { return readyEndpointsKind.new() }

// readyEndpointsState is what a read of k8s_ready_endpoints writes: its
// arguments, with the defaults it used, and what it found.
type readyEndpointsState struct {
	readyEndpointsModel
	res endpoints.Result
}

// readyEndpointsAttributes are the attributes of k8s_ready_endpoints.
var readyEndpointsAttributes = newObject([]attribute[readyEndpointsState]{
	{name: "id", schema: schema.StringAttribute{
		Computed:            true,
		MarkdownDescription: "`<namespace>/<service>`.",
	}, write: func(w stateWriter, s *readyEndpointsState) {
		w.str(s.Namespace.ValueString() + "/" + s.Service.ValueString())
	}},
	{name: "service", schema: schema.StringAttribute{
		Required:            true,
		MarkdownDescription: "Name of the Kubernetes Service.",
		Validators:          []validator.String{dns1123Label()},
	}},
	{name: "namespace", schema: schema.StringAttribute{
		Optional:            true,
		Computed:            true,
		MarkdownDescription: "Namespace of the Service. Defaults to `default`.",
		Validators:          []validator.String{dns1123Label()},
	}, write: func(w stateWriter, s *readyEndpointsState) { w.str(s.Namespace.ValueString()) }},
	{name: "min_ready", schema: guardAttribute(
		"The fewest ready endpoints the result may have: endpoints whose `ready` is true, " +
			"after every filter. Draining endpoints (`terminating = true`, given by `terminating_endpoints`) take " +
			"no new connections and are not counted. With fewer, the read fails with an error " +
			"that says how many were found, so that an apply stops before it empties or shrinks a pool. With a " +
			"`timeouts { read = ... }` block, the read first waits up to that long for enough endpoints, by " +
			"watching the Service's EndpointSlices (this needs `watch` on `endpointslices`). `0`, the default, " +
			"means no guard.",
	), write: func(w stateWriter, s *readyEndpointsState) { w.int(s.MinReady.ValueInt64()) }},
	{name: "last_change_trigger_time", schema: schema.StringAttribute{
		Computed: true,
		MarkdownDescription: "The latest `endpoints.kubernetes.io/last-change-trigger-time` among the Service's " +
			"EndpointSlices, in RFC 3339: when the last change they reflect (a pod or Service update) happened. " +
			"Null when no slice has it.",
	}, write: func(w stateWriter, s *readyEndpointsState) { writeLastChange(w, s.res.LastChangeTriggerTime) }},
	{name: "endpoints", schema: endpointsAttribute(),
		write: func(w stateWriter, s *readyEndpointsState) { writeList(w, endpointObject, s.res.Endpoints) }},
}).with(poolArguments(func(s *readyEndpointsState) *poolArgumentsModel { return &s.poolArgumentsModel }))

// readReadyEndpoints reads the pool of one Service that the arguments ask for.
func readReadyEndpoints(ctx context.Context, client *kube.Client, m readyEndpointsModel) (readyEndpointsState, diag.Diagnostics) {
	m = m.withDefaults()
	request, diags := m.request(ctx)
	res, diags := readWaiting(ctx, client, request, request.wait, diags, readPool)
	if !diags.HasError() {
		tflog.Debug(ctx, "read ready endpoints", map[string]any{
			"namespace": request.Namespace, "service": request.Service, "endpoints": len(res.Endpoints),
		})
	}
	return readyEndpointsState{readyEndpointsModel: m, res: res}, diags
}
