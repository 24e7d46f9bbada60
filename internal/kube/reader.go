package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

// Reader is the client as package pools reads a pool: each call one bounded,
// retried request (a LIST page by page), its error naming the object.
func (c *Client) Reader() pools.Reader { return apiReader{c} }

type apiReader struct{ c *Client }

func (r apiReader) Service(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	return r.c.GetService(ctx, namespace, name)
}

func (r apiReader) EndpointSlices(ctx context.Context, namespace, service string) (pools.Slices, error) {
	return r.c.ListEndpointSlices(ctx, namespace, service)
}

func (r apiReader) Services(ctx context.Context, namespace, selector string) ([]corev1.Service, error) {
	list, err := r.c.ListServices(ctx, namespace, selector)
	return list.Items, err
}

func (r apiReader) ServiceEndpointSlices(ctx context.Context, namespace string) (pools.Slices, error) {
	return r.c.ListServiceEndpointSlices(ctx, namespace)
}

func (r apiReader) Nodes(ctx context.Context, selector string) ([]corev1.Node, error) {
	list, err := r.c.ListNodes(ctx, selector)
	return list.Items, err
}

func (r apiReader) Pods(ctx context.Context, namespace, selector string) ([]corev1.Pod, error) {
	list, err := r.c.ListPods(ctx, namespace, selector)
	return list.Items, err
}

// PodPages gives the Pods page by page (pools.PodPager).
func (r apiReader) PodPages(ctx context.Context, namespace, selector string, each func(pods []corev1.Pod, restart bool)) error {
	return r.c.PodPages(ctx, namespace, selector, each)
}

// Ping asks the API server whether it is ready (/readyz, which every
// identity may read), once, bounded by the request timeout: the sync
// companion's probe of a cluster between its informers' events.
func (c *Client) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	return c.core.Get().MaxRetries(0).AbsPath("/readyz").Do(ctx).Error()
}
