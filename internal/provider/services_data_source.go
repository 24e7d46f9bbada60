package provider

import (
	"context"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/datasource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/datasourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

var (
	_ datasource.DataSourceWithConfigure        = (*servicesDataSource)(nil)
	_ datasource.DataSourceWithConfigValidators = (*servicesDataSource)(nil)
)

type servicesDataSource struct {
	client *kube.Client
}

func newServicesDataSource() datasource.DataSource {
	return &servicesDataSource{}
}

func (d *servicesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_services"
}

func (d *servicesDataSource) Schema(ctx context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Every Service of a namespace, of several, or of the cluster, that a label selector " +
			"picks, with its pool, in ONE read: one LIST of Services and one LIST of EndpointSlices per namespace " +
			"(one each with `all_namespaces`), whether it covers one Service or thousands. The result is a map " +
			"for `for_each`, one pool per Service.",
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.BlockWithOpts(ctx, timeouts.Opts{
				ReadDescription: "How long the read may wait for `min_ready` and `min_services`, as a duration " +
					"such as `\"5m\"`. Without it the read does not wait.",
			}),
		},
		Attributes: servicesAttributes.schema(),
	}
}

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
		MarkdownDescription: "The namespaces read, comma-separated, or `*` for all of them.",
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
		Optional:            true,
		ElementType:         types.StringType,
		MarkdownDescription: "Keep only the Services of these names. When unset, every name.",
		Validators:          []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(dns1123Label())},
	}},
	{name: "min_ready", schema: schema.Int64Attribute{
		Optional: true,
		Computed: true,
		MarkdownDescription: "The fewest endpoints each Service's pool may have. With fewer in any of them, the read " +
			"fails with an error that names every Service short of it, so that an apply stops before it empties " +
			"or shrinks a pool. With a `timeouts { read = ... }` block, the read first waits up to that long, by " +
			"watching the EndpointSlices (this needs `watch` on `endpointslices`). `0`, the default, means no guard.",
		Validators: []validator.Int64{int64validator.AtLeast(0)},
	}, write: func(w stateWriter, s *servicesState) { w.int(s.MinReady.ValueInt64()) }},
	{name: "min_services", schema: schema.Int64Attribute{
		Optional: true,
		Computed: true,
		MarkdownDescription: "The fewest Services `services` may hold. With fewer, the read fails, so that a " +
			"selector typo or a missing namespace does not empty every pool. Waits like `min_ready` under " +
			"`timeouts`. `0`, the default, means no guard.",
		Validators: []validator.Int64{int64validator.AtLeast(0)},
	}, write: func(w stateWriter, s *servicesState) { w.int(s.MinServices.ValueInt64()) }},
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
			"the reason: a Service without the port `port_name` names.",
		NestedObject: schema.NestedAttributeObject{Attributes: skippedObject.schema()},
	}, write: func(w stateWriter, s *servicesState) { writeList(w, skippedObject, s.res.Skipped) }},
}).with(poolArguments(func(s *servicesState) *poolArgumentsModel { return &s.poolArgumentsModel }))

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
		MarkdownDescription: "The Service's cluster IPs, one per address family; empty for a headless Service.",
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

func (d *servicesDataSource) ConfigValidators(context.Context) []datasource.ConfigValidator {
	return []datasource.ConfigValidator{
		datasourcevalidator.Conflicting(path.MatchRoot("namespace"), path.MatchRoot("namespaces"), path.MatchRoot("all_namespaces")),
		nodeArgumentsNeedNodes{},
	}
}

func (d *servicesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = configuredClient(req.ProviderData, &resp.Diagnostics)
}

func (d *servicesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	readForFramework(ctx, d, req, resp)
}

func (d *servicesDataSource) readState(ctx context.Context, config tfsdk.Config) ([]byte, diag.Diagnostics) {
	return readState(ctx, config, d.client, servicesAttributes, readServices)
}

// readServices reads the fleet that the arguments ask for.
func readServices(ctx context.Context, client *kube.Client, m servicesModel) (servicesState, diag.Diagnostics) {
	m = m.withDefaults()
	request, diags := m.request(ctx)
	if diags.HasError() {
		return servicesState{}, diags
	}
	ctx, cancel := withWait(ctx, request.wait)
	defer cancel()
	res, d := readFleet(ctx, client, request)
	diags.Append(d...)
	if diags.HasError() {
		return servicesState{}, diags
	}
	tflog.Debug(ctx, "read services", map[string]any{"services": len(res.Pools), "skipped": len(res.Skipped)})
	return servicesState{servicesModel: m, namespaces: request.Namespaces, res: res}, diags
}
