package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/datasourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// servicesKind is k8s_services.
var servicesKind = &dataSourceKind[servicesModel, servicesState]{
	typeName: "_services",
	description: "Every Service of a namespace, of several, or of the cluster, that a label selector " +
		"picks, with its pool, in ONE read: one LIST of Services and one LIST of EndpointSlices per namespace " +
		"(one each with `all_namespaces`), whether it covers one Service or thousands. The result is a map " +
		"for `for_each`, one pool per Service.",
	readTimeout: "How long the read may wait for `min_ready` and `min_services`, as a duration " +
		"such as `\"5m\"`. Without it the read does not wait.",
	attributes: servicesAttributes,
	read:       readServices,
	validators: func() []datasource.ConfigValidator {
		return []datasource.ConfigValidator{
			datasourcevalidator.Conflicting(path.MatchRoot("namespace"), path.MatchRoot("namespaces"), path.MatchRoot("all_namespaces")),
			nodeArgumentsNeedNodes{},
		}
	},
}

func newServicesDataSource() datasource.DataSource { return servicesKind.new() }

// servicesState is what a read of k8s_services writes: its arguments, with
// the defaults it used, the namespaces it read and what it found.
type servicesState struct {
	servicesModel
	namespaces []string
	res        endpoints.FleetResult
}

// servicesAttributes are the attributes of k8s_services.
var servicesAttributes = newObject([]attribute[servicesState]{
	{name: "id", schema: schema.StringAttribute{
		Computed:            true,
		MarkdownDescription: "The namespaces read, sorted and comma-separated (`namespaces = [\"b\", \"a\"]` gives `a,b`), or `*` for all of them.",
	}, write: func(w stateWriter, s *servicesState) { w.str(fleetID(s.namespaces)) }},
	{name: "namespace", schema: schema.StringAttribute{
		Optional: true,
		Computed: true,
		MarkdownDescription: "Namespace of the Services. Defaults to `default` when neither `namespaces` nor " +
			"`all_namespaces` is set.",
		Validators: []validator.String{dns1123Label()},
	}, write: func(w stateWriter, s *servicesState) {
		if s.Namespace.IsNull() {
			w.null()
		} else {
			w.str(s.Namespace.ValueString())
		}
	}},
	{name: "namespaces", schema: schema.SetAttribute{
		Optional:            true,
		ElementType:         types.StringType,
		MarkdownDescription: "Several namespaces to read, instead of `namespace`: one LIST of Services and one of EndpointSlices each.",
		Validators:          []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(dns1123Label())},
	}},
	{name: "all_namespaces", schema: schema.BoolAttribute{
		Optional: true,
		MarkdownDescription: "Read the Services of every namespace, with one cluster-wide LIST of Services and one " +
			"of EndpointSlices (this needs a ClusterRole).",
	}},
	{name: "label_selector", schema: schema.StringAttribute{
		Optional: true,
		MarkdownDescription: "Keep only the Services whose labels match this selector, in Kubernetes syntax " +
			"(`app=web,tier in (frontend,edge),!canary`). When unset, every Service.",
		Validators: []validator.String{labelSelector()},
	}},
	{name: "names", schema: schema.SetAttribute{
		Optional:    true,
		ElementType: types.StringType,
		MarkdownDescription: "Keep only the Services of these names. When unset, every name. Each entry must be a " +
			"DNS-1123 label, as Service names are, else `terraform validate` fails naming it.",
		Validators: []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(dns1123Label())},
	}},
	{name: "min_ready", schema: guardAttribute(
		"The fewest ready endpoints (`ready` true; draining ones are not counted) each " +
			"Service's pool may have. With fewer in any of them, the read " +
			"fails with an error that names every Service short of it, so that an apply stops before it empties " +
			"or shrinks a pool. With a `timeouts { read = ... }` block, the read first waits up to that long, by " +
			"watching the EndpointSlices (this needs `watch` on `endpointslices`). `0`, the default, means no guard.",
	), write: func(w stateWriter, s *servicesState) { w.int(s.MinReady.ValueInt64()) }},
	{name: "min_services", schema: guardAttribute(
		"The fewest Services `services` may hold. With fewer, the read fails, so that a " +
			"selector typo or a missing namespace does not empty every pool. Waits like `min_ready` under " +
			"`timeouts`. `0`, the default, means no guard.",
	), write: func(w stateWriter, s *servicesState) { w.int(s.MinServices.ValueInt64()) }},
	{name: "services", schema: schema.MapNestedAttribute{
		Computed: true,
		MarkdownDescription: "The selected Services, keyed `\"<namespace>/<name>\"`, each with the facts of the " +
			"Service a pool needs and its `endpoints`: the same list, by the same rules, that " +
			"`k8s_ready_endpoints` gives for that Service. An empty map when no Service matches.",
		NestedObject: schema.NestedAttributeObject{Attributes: serviceObject.schema()},
	}, write: func(w stateWriter, s *servicesState) { writeServices(w, s.res.Pools) }},
	{name: "skipped", schema: schema.ListNestedAttribute{
		Computed: true,
		MarkdownDescription: "The selected Services left out of `services`, sorted by namespace and name, with " +
			"the reason: a Service without the port `port_name` names; with `target = \"nodes\"`, also a Service " +
			"whose port has no nodePort, or that has several ports when `port_name` is unset.",
		NestedObject: schema.NestedAttributeObject{Attributes: skippedObject.schema()},
	}, write: func(w stateWriter, s *servicesState) { writeList(w, skippedObject, s.res.Skipped) }},
}).with(poolArguments(func(s *servicesState) *poolArgumentsModel { return &s.poolArgumentsModel }))

// readServices reads the fleet that the arguments ask for.
func readServices(ctx context.Context, client *kube.Client, m servicesModel) (servicesState, diag.Diagnostics) {
	m = m.withDefaults()
	request, diags := m.request(ctx)
	res, diags := readWaiting(ctx, client, request, request.wait, diags, readFleet)
	if !diags.HasError() {
		tflog.Debug(ctx, "read services", map[string]any{"services": len(res.Pools), "skipped": len(res.Skipped)})
	}
	return servicesState{servicesModel: m, namespaces: request.Namespaces, res: res}, diags
}
