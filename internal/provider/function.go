package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/function"
)

var _ function.Function = (*providerFunction)(nil)

// providerFunction is a function of this provider: its name, its
// definition and its run, which is all that differs between them
// (newMembersFunction, newCTSServicesFunction). It holds no state, so that
// one value serves every call.
type providerFunction struct {
	name       string
	definition function.Definition
	run        func(context.Context, function.RunRequest, *function.RunResponse)
}

func (f *providerFunction) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = f.name
}

func (f *providerFunction) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = f.definition
}

func (f *providerFunction) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	f.run(ctx, req, resp)
}
