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
)

// nodeTarget says whether a read gives nodes rather than pods, and which.
type nodeTarget struct {
	enabled bool
	// selector is node_selector as given, sent with the LIST of Nodes so
	// that the API server leaves out what the rules would.
	selector string
}

// nodeArguments reads target, node_address_type and node_selector into q.
func nodeArguments(q *endpoints.Query, target, addressType, selector types.String) (nodeTarget, diag.Diagnostics) {
	var diags diag.Diagnostics
	if target.ValueString() != targetNodes {
		return nodeTarget{}, diags
	}
	q.NodeAddressType = corev1.NodeAddressType(addressType.ValueString())
	if s := selector.ValueString(); s != "" {
		parsed, err := labels.Parse(s)
		if err != nil {
			// The validator makes this unreachable but for a bug.
			diags.AddAttributeError(path.Root("node_selector"), "Invalid Node Selector", err.Error())
			return nodeTarget{}, diags
		}
		q.NodeSelector = parsed
	}
	return nodeTarget{enabled: true, selector: selector.ValueString()}, diags
}

// poolRequest is what one read of k8s_ready_endpoints asks for.
type poolRequest struct {
	namespace, service string
	query              endpoints.Query
	// nodes, when enabled, makes the pool of nodes.
	nodes nodeTarget
	// minReady is the fewest ready endpoints the pool may have (draining
	// ones are not counted); 0 means no guard.
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
	if r.nodes.enabled {
		// Refuse a Service without a nodePort before asking for more.
		if _, err := endpoints.NodePort(svc, r.query); err != nil {
			return endpoints.Result{}, append(diags, rulesDiagnostic(err))
		}
	}
	list, err := client.ListEndpointSlices(ctx, r.namespace, r.service)
	if err != nil {
		return endpoints.Result{}, append(diags, listEndpointSlicesDiagnostic(r.namespace, r.service, err))
	}
	var nodes []corev1.Node
	if r.nodes.enabled {
		nodeList, err := client.ListNodes(ctx, r.nodes.selector)
		if err != nil {
			return endpoints.Result{}, append(diags, listNodesDiagnostic(err))
		}
		nodes = nodeList.Items
	}
	apply := func(items []discoveryv1.EndpointSlice) (endpoints.Result, error) {
		q := r.query
		q.Now = time.Now()
		if r.nodes.enabled {
			return endpoints.Nodes(svc, items, nodes, q)
		}
		return endpoints.Pool(svc, items, q)
	}
	res, err := apply(list.Items)
	if err != nil {
		return endpoints.Result{}, append(diags, rulesDiagnostic(err))
	}

	waited := false
	if endpoints.CountReady(res.Endpoints) < r.minReady && r.wait > 0 {
		waited = true
		err := client.WatchEndpointSlices(ctx, r.namespace, r.service, list, func(items []discoveryv1.EndpointSlice) bool {
			if next, err := apply(items); err == nil {
				res = next
			}
			return endpoints.CountReady(res.Endpoints) >= r.minReady
		})
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			diags.Append(watchDiagnostic(r, err))
		}
	}
	diags.Append(expiryWarnings(res.Warnings)...)
	if ready := endpoints.CountReady(res.Endpoints); ready < r.minReady {
		diags.Append(tooFewDiagnostic(r, ready, len(res.Endpoints)-ready, waited))
	}
	return res, diags
}
