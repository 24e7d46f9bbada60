package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// newCTSServicesFunction is provider::k8s::cts_services: endpoints in the
// shape of Consul-Terraform-Sync's services variable.
func newCTSServicesFunction() function.Function { return ctsServicesFunction }

// ctsAttrTypes is the object type of CTS's services variable: strings but
// for port, tags and the maps of strings.
var ctsAttrTypes = func() map[string]attr.Type {
	m := map[string]attr.Type{"port": types.Int64Type, "tags": types.ListType{ElemType: types.StringType}}
	for _, name := range []string{"id", "name", "kind", "address", "namespace", "status", "node", "node_id", "node_address", "node_datacenter"} {
		m[name] = types.StringType
	}
	for _, name := range []string{"meta", "node_tagged_addresses", "node_meta", "cts_user_defined_meta"} {
		m[name] = types.MapType{ElemType: types.StringType}
	}
	return m
}()

type ctsInstanceModel struct {
	ID                  string            `tfsdk:"id"`
	Name                string            `tfsdk:"name"`
	Kind                string            `tfsdk:"kind"`
	Address             string            `tfsdk:"address"`
	Port                int64             `tfsdk:"port"`
	Meta                map[string]string `tfsdk:"meta"`
	Tags                []string          `tfsdk:"tags"`
	Namespace           string            `tfsdk:"namespace"`
	Status              string            `tfsdk:"status"`
	Node                string            `tfsdk:"node"`
	NodeID              string            `tfsdk:"node_id"`
	NodeAddress         string            `tfsdk:"node_address"`
	NodeDatacenter      string            `tfsdk:"node_datacenter"`
	NodeTaggedAddresses map[string]string `tfsdk:"node_tagged_addresses"`
	NodeMeta            map[string]string `tfsdk:"node_meta"`
	CTSUserDefinedMeta  map[string]string `tfsdk:"cts_user_defined_meta"`
}

var ctsServicesFunction = &providerFunction{
	name: "cts_services",
	definition: function.Definition{
		Summary: "Endpoints in the shape of the services variable of Consul-Terraform-Sync modules",
		MarkdownDescription: "Gives a map in the exact type of the `services` variable that Consul-Terraform-Sync (CTS) " +
			"passes to its modules, one element per endpoint, so that modules written for CTS take Kubernetes " +
			"endpoints unchanged. The argument is a `k8s_ready_endpoints` data source, an object with `name`, " +
			"`namespace`, `endpoints` (and optionally `labels`), or the `services` map of `k8s_services`.",
		Parameters: []function.Parameter{
			function.DynamicParameter{
				Name: "services",
				MarkdownDescription: "One Service: a `k8s_ready_endpoints` data source (`data.k8s_ready_endpoints.web`) or " +
					"an object `{ name, namespace, endpoints, labels }` (`namespace` defaults to `default`, `labels` " +
					"to none); or many: the `services` map of `k8s_services`, or a map of such objects.",
			},
		},
		Return: function.MapReturn{ElementType: types.ObjectType{AttrTypes: ctsAttrTypes}},
	},
	run: runCTSServices,
}

func runCTSServices(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var arg types.Dynamic
	resp.Error = req.Arguments.Get(ctx, &arg)
	if resp.Error != nil {
		return
	}
	if arg.IsNull() || arg.IsUnderlyingValueNull() {
		resp.Error = function.NewArgumentFuncError(0, "services must not be null")
		return
	}
	tv, err := arg.UnderlyingValue().ToTerraformValue(ctx)
	if err != nil {
		resp.Error = function.NewArgumentFuncError(0, err.Error())
		return
	}
	services, err := decodeServices(tv)
	if err != nil {
		resp.Error = function.NewArgumentFuncError(0, err.Error())
		return
	}
	instances, err := ctsInstances(services)
	if err != nil {
		resp.Error = function.NewArgumentFuncError(0, err.Error())
		return
	}
	out := make(map[string]ctsInstanceModel, len(instances))
	for key, in := range instances {
		out[key] = ctsInstanceModel(in)
	}
	resp.Error = resp.Result.Set(ctx, out)
}
