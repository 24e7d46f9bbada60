package provider

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/kube"
	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

// nodeArguments reads target, node_address_type and node_selector into q.
func nodeArguments(q *endpoints.Query, target, addressType, selector types.String) (pools.NodeTarget, diag.Diagnostics) {
	var diags diag.Diagnostics
	if target.ValueString() != targetNodes {
		return pools.NodeTarget{}, diags
	}
	q.NodeAddressType = corev1.NodeAddressType(addressType.ValueString())
	if s := selector.ValueString(); s != "" {
		parsed, err := labels.Parse(s)
		if err != nil {
			// The validator makes this unreachable but for a bug.
			diags.AddAttributeError(path.Root("node_selector"), "Invalid Node Selector", err.Error())
			return pools.NodeTarget{}, diags
		}
		q.NodeSelector = parsed
	}
	return pools.NodeTarget{Enabled: true, Selector: selector.ValueString()}, diags
}

// poolRequest is what one read of k8s_ready_endpoints asks for: the pool,
// and how long the read may wait for its guard.
type poolRequest struct {
	pools.Request
	// wait is how long to wait for MinReady to hold; 0 means not at all.
	wait time.Duration
}

// readPool reads the pool through pools.Request.Read over the API, which
// makes it in the order every read follows; when the pool is smaller than
// MinReady and waiting is allowed, the read follows the slices (a WATCH)
// until it is not, or the time is up.
func readPool(ctx context.Context, client *kube.Client, r poolRequest) (endpoints.Result, diag.Diagnostics) {
	var diags diag.Diagnostics
	opts := pools.ReadOptions{Now: time.Now}
	if r.wait > 0 {
		opts.WaitForSlices = func(ctx context.Context, from pools.Slices, update func([]discoveryv1.EndpointSlice) bool) error {
			return client.WatchEndpointSlices(ctx, r.Namespace, r.Service, from, update)
		}
	}
	res, err := r.Read(ctx, client.Reader(), opts)
	var short *pools.ShortError
	if err != nil && !errors.As(err, &short) {
		return endpoints.Result{}, append(diags, readDiagnostic(err))
	}
	if short != nil && short.WaitErr != nil && !errors.Is(short.WaitErr, context.DeadlineExceeded) && !errors.Is(short.WaitErr, context.Canceled) {
		diags.Append(watchDiagnostic(r, short.WaitErr))
	}
	diags.Append(expiryWarnings(res.Warnings)...)
	if short != nil {
		diags.Append(tooFewDiagnostic(r, short.Ready, short.Draining, short.Waited))
	}
	return res, diags
}

// readDiagnostic is the diagnostic of a read's *pools.ReadError or
// *pools.RuleError: what was read, and the remedy for it.
func readDiagnostic(err error) diag.Diagnostic {
	var read *pools.ReadError
	if !errors.As(err, &read) {
		return rulesDiagnostic(err)
	}
	switch read.Object {
	case pools.ServiceObject:
		return getServiceDiagnostic(read.Namespace, read.Name, read.Err)
	case pools.EndpointSlicesObject:
		return listEndpointSlicesDiagnostic(read.Namespace, read.Name, read.Err)
	case pools.ServicesObject:
		return listServicesDiagnostic(read.Namespace, read.Err)
	case pools.ServiceEndpointSlicesObject:
		return listServiceSlicesDiagnostic(read.Namespace, read.Err)
	case pools.NodesObject:
		return listNodesDiagnostic(read.Err)
	default:
		return listPodsDiagnostic(read.Namespace, read.Err)
	}
}
