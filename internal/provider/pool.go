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

// readPool reads the Service and its EndpointSlices (and Nodes for a pool of
// nodes), makes the pool with pools.Request.Compute, and when the pool is
// smaller than MinReady and waiting is allowed, follows the slices until it
// is not, or the time is up.
func readPool(ctx context.Context, client *kube.Client, r poolRequest) (endpoints.Result, diag.Diagnostics) {
	var diags diag.Diagnostics
	svc, err := client.GetService(ctx, r.Namespace, r.Service)
	if err != nil {
		return endpoints.Result{}, append(diags, getServiceDiagnostic(r.Namespace, r.Service, err))
	}
	// Refuse a Service that cannot give the pool before asking for more.
	if err := r.CheckService(svc); err != nil {
		return endpoints.Result{}, append(diags, rulesDiagnostic(err))
	}
	list, err := client.ListEndpointSlices(ctx, r.Namespace, r.Service)
	if err != nil {
		return endpoints.Result{}, append(diags, listEndpointSlicesDiagnostic(r.Namespace, r.Service, err))
	}
	objects := pools.Objects{Service: svc, EndpointSlices: list.Items}
	if r.Nodes.Enabled {
		nodeList, err := client.ListNodes(ctx, r.Nodes.Selector)
		if err != nil {
			return endpoints.Result{}, append(diags, listNodesDiagnostic(err))
		}
		objects.Nodes = nodeList.Items
	}
	res, err := r.Compute(objects, time.Now())
	if err != nil {
		return endpoints.Result{}, append(diags, rulesDiagnostic(err))
	}

	waited := false
	if r.Short(res) && r.wait > 0 {
		waited = true
		err := client.WatchEndpointSlices(ctx, r.Namespace, r.Service, list, func(items []discoveryv1.EndpointSlice) bool {
			objects.EndpointSlices = items
			if next, err := r.Compute(objects, time.Now()); err == nil {
				res = next
			}
			return !r.Short(res)
		})
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			diags.Append(watchDiagnostic(r, err))
		}
	}
	// The Pods are read last, once the guard holds, so that the endpoints a
	// wait brought have theirs; the guard does not depend on them.
	if r.ReadsPods() && !r.Short(res) {
		pods, err := listServicePods(ctx, client, svc)
		if err != nil {
			return endpoints.Result{}, append(diags, listPodsDiagnostic(r.Namespace, err))
		}
		objects.Pods = pods
		if res, err = r.Compute(objects, time.Now()); err != nil {
			return endpoints.Result{}, append(diags, rulesDiagnostic(err))
		}
	}
	diags.Append(expiryWarnings(res.Warnings)...)
	if r.Short(res) {
		ready := endpoints.CountReady(res.Endpoints)
		diags.Append(tooFewDiagnostic(r, ready, len(res.Endpoints)-ready, waited))
	}
	return res, diags
}

// listServicePods lists the Pods that svc selects; a Service without a
// selector selects none, and its endpoints (written by hand) name no Pods the
// provider could trust to be its own.
func listServicePods(ctx context.Context, client *kube.Client, svc *corev1.Service) ([]corev1.Pod, error) {
	if len(svc.Spec.Selector) == 0 {
		return nil, nil
	}
	list, err := client.ListPods(ctx, svc.Namespace, labels.SelectorFromSet(svc.Spec.Selector).String())
	return list.Items, err
}
