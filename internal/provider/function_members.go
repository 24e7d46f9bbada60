package provider

import (
	"context"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// newMembersFunction is provider::k8s::members: endpoints to "address:port"
// pool members.
func newMembersFunction() function.Function { return membersFunction }

// memberAttrTypes are the attributes members reads of each endpoint;
// Terraform drops the others (pod, zone, ...) when it converts the argument.
var memberAttrTypes = map[string]attr.Type{"address": types.StringType, "port": types.Int64Type}

type memberModel struct {
	Address types.String `tfsdk:"address"`
	Port    types.Int64  `tfsdk:"port"`
}

var membersFunction = &providerFunction{
	name: "members",
	definition: function.Definition{
		Summary: "Pool members \"address:port\" from a list of endpoints, IPv6 addresses in brackets",
		MarkdownDescription: "Gives one string `address:port` per endpoint, in the order of the list, as load balancers, " +
			"URLs and most pool resources take them. An IPv6 address is written in brackets (`[fd00::7]:8080`), " +
			"as RFC 3986 has it, so that its colons are not taken for the port's.",
		Parameters: []function.Parameter{
			function.ListParameter{
				Name: "endpoints",
				MarkdownDescription: "A list of objects with at least `address` (an IPv4 or IPv6 address) and `port` " +
					"(1-65535), such as the `endpoints` of `k8s_ready_endpoints`. Other attributes are ignored.",
				ElementType: types.ObjectType{AttrTypes: memberAttrTypes},
			},
		},
		Return: function.ListReturn{ElementType: types.StringType},
	},
	run: runMembers,
}

func runMembers(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var endpoints []*memberModel
	resp.Error = req.Arguments.Get(ctx, &endpoints)
	if resp.Error != nil {
		return
	}
	members := make([]string, 0, len(endpoints))
	for i, e := range endpoints {
		if e == nil || e.Address.IsNull() || e.Port.IsNull() {
			resp.Error = function.NewArgumentFuncError(0, "endpoint "+strconv.Itoa(i)+" has no address or no port")
			return
		}
		if err := checkMember(e.Address.ValueString(), e.Port.ValueInt64()); err != nil {
			resp.Error = function.NewArgumentFuncError(0, "endpoint "+strconv.Itoa(i)+": "+err.Error())
			return
		}
		members = append(members, hostPortMember(e.Address.ValueString(), e.Port.ValueInt64()))
	}
	resp.Error = resp.Result.Set(ctx, members)
}
