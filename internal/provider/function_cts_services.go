package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var _ function.Function = (*ctsServicesFunction)(nil)

// ctsServicesFunction is provider::k8s::cts_services: endpoints in the shape
// of Consul-Terraform-Sync's services variable.
type ctsServicesFunction struct{}

func newCTSServicesFunction() function.Function { return &ctsServicesFunction{} }

func (f *ctsServicesFunction) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "cts_services"
}

// ctsAttrTypes is the object type of CTS's services variable.
var ctsAttrTypes = map[string]attr.Type{
	"id":                    types.StringType,
	"name":                  types.StringType,
	"kind":                  types.StringType,
	"address":               types.StringType,
	"port":                  types.Int64Type,
	"meta":                  types.MapType{ElemType: types.StringType},
	"tags":                  types.ListType{ElemType: types.StringType},
	"namespace":             types.StringType,
	"status":                types.StringType,
	"node":                  types.StringType,
	"node_id":               types.StringType,
	"node_address":          types.StringType,
	"node_datacenter":       types.StringType,
	"node_tagged_addresses": types.MapType{ElemType: types.StringType},
	"node_meta":             types.MapType{ElemType: types.StringType},
	"cts_user_defined_meta": types.MapType{ElemType: types.StringType},
}

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

func (f *ctsServicesFunction) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{
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
	}
}

func (f *ctsServicesFunction) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
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
