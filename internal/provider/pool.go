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

type (
	// poolRequest is what one read of k8s_ready_endpoints asks for: the
	// pool, and how long the read may wait for its guard.
	poolRequest struct {
		pools.Request
		// wait is how long to wait for MinReady to hold; 0 means not at all.
		wait time.Duration
	}
	// fleetRequest is what one read of k8s_services asks for: the fleet,
	// and how long the read may wait for its guards.
	fleetRequest struct {
		pools.FleetRequest
		// wait is how long to wait for the guards to hold; 0 means not at
		// all.
		wait time.Duration
	}
)

// readPool reads the pool through pools.Request.Read over the API, which
// makes it in the order every read follows; when the pool is smaller than
// MinReady and waiting is allowed, the read follows the slices (a WATCH)
// until it is not, or the time is up.
func readPool(ctx context.Context, client *kube.Client, r poolRequest) (endpoints.Result, diag.Diagnostics) {
	opts := pools.ReadOptions{Now: time.Now}
	if r.wait > 0 {
		opts.WaitForSlices = func(ctx context.Context, from pools.Slices, update func([]discoveryv1.EndpointSlice) bool) error {
			return client.WatchEndpointSlices(ctx, r.Namespace, r.Service, from, update)
		}
	}
	res, err := r.Read(ctx, client.Reader(), opts)
	short, diags, ok := shortRead(err, func(s *pools.ShortError) error { return s.WaitErr },
		func(err error) diag.Diagnostic { return watchDiagnostic(r, err) })
	if !ok {
		return endpoints.Result{}, diags
	}
	diags.Append(expiryWarnings(res.Warnings)...)
	diags.Append(leftOutWarning([]string{r.Namespace + "/" + r.Service}, [][]endpoints.LeftOutSlice{res.LeftOut})...)
	if short != nil {
		diags.Append(tooFewDiagnostic(r, short.Ready, short.Draining, short.Waited))
	}
	return res, diags
}

// shortRead splits the error of a read whose guards may fail: the short
// error S that says which guard failed (nil when none did) apart, with the
// diagnostic of its wait when the wait failed otherwise than by its time
// running out (waitErr of S, said by watch); ok false when err is another
// error, which diags then says.
func shortRead[T any, S interface {
	*T
	error
}](err error, waitErr func(S) error, watch func(error) diag.Diagnostic,
) (short S, diags diag.Diagnostics, ok bool) {
	if err != nil && !errors.As(err, &short) {
		return nil, append(diags, readDiagnostic(err)), false
	}
	if short == nil {
		return nil, diags, true
	}
	if w := waitErr(short); w != nil && !errors.Is(w, context.DeadlineExceeded) && !errors.Is(w, context.Canceled) {
		diags.Append(watch(w))
	}
	return short, diags, true
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
