package provider

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// poolRequest is what one read of k8s_ready_endpoints asks for.
type poolRequest struct {
	namespace, service string
	query              endpoints.Query
	// minReady is the fewest endpoints the pool may have; 0 means no guard.
	minReady int
	// wait is how long to wait for minReady to hold; 0 means not at all.
	wait time.Duration
}

// readPool reads the Service and its EndpointSlices, applies the rules, and
// when the pool is smaller than minReady and waiting is allowed, follows the
// slices until it is not, or the time is up.
func readPool(ctx context.Context, client *kube.Client, r poolRequest) (endpoints.Result, diag.Diagnostics) {
	var diags diag.Diagnostics
	svc, err := client.GetService(ctx, r.namespace, r.service)
	if err != nil {
		return endpoints.Result{}, append(diags, getServiceDiagnostic(r.namespace, r.service, err))
	}
	list, err := client.ListEndpointSlices(ctx, r.namespace, r.service)
	if err != nil {
		return endpoints.Result{}, append(diags, listEndpointSlicesDiagnostic(r.namespace, r.service, err))
	}
	apply := func(items []discoveryv1.EndpointSlice) (endpoints.Result, error) {
		q := r.query
		q.Now = time.Now()
		return endpoints.Pool(svc, items, q)
	}
	res, err := apply(list.Items)
	if err != nil {
		return endpoints.Result{}, append(diags, rulesDiagnostic(err))
	}

	waited := false
	if len(res.Endpoints) < r.minReady && r.wait > 0 {
		waited = true
		err := client.WatchEndpointSlices(ctx, r.namespace, r.service, list, func(items []discoveryv1.EndpointSlice) bool {
			if next, err := apply(items); err == nil {
				res = next
			}
			return len(res.Endpoints) >= r.minReady
		})
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			diags.Append(watchDiagnostic(r, err))
		}
	}
	for _, w := range res.Warnings {
		diags.AddWarning("Unreadable Expiry Annotation", w)
	}
	if len(res.Endpoints) < r.minReady {
		diags.Append(tooFewDiagnostic(r, len(res.Endpoints), waited))
	}
	return res, diags
}
