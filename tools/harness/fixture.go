package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vigie/terraform-provider-k8s/internal/testcluster"
)

// The bench's fixture: Services with ready pods, made by the fake kubelet as
// the acceptance tests make them, and one Service with thousands of
// endpoints in hand-written slices.

const (
	benchNamespace = "bench"
	// fleetServices Services of 10 ready pods each are in benchNamespace:
	// the plans of 1 to 1000 reads use the first 100, the fleet all of them.
	fleetServices = 500
	benchNode     = "bench-node"
	benchZone     = "bench-zone-a"
	// workers is how many requests are in flight at once: enough to keep the
	// API server busy, few enough not to queue behind each other.
	workers = 32
	// bigService has bigEndpoints endpoints in slices of 100, the
	// controller's default size.
	bigService = "big"
	// bigNamespace keeps the big Service's slices out of the fleet read of
	// benchNamespace.
	bigNamespace = "bench-big"
	bigEndpoints = 5000
)

func serviceName(i int) string { return fmt.Sprintf("svc-%03d", i) }

// createFixture makes services Services with pods ready pods each, and
// waits until the EndpointSlice controller has published every pod.
func createFixture(ctx context.Context, client kubernetes.Interface, services, pods int) error {
	start := time.Now()
	if err := testcluster.EnsureNode(ctx, client, benchNode, benchZone); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := testcluster.WaitForServiceAccount(ctx, client, benchNamespace, time.Minute); err != nil {
		return err
	}
	// Services first: a pod created before its Service would be published
	// only when the controller gets to the Service, which is the same end
	// state, but ordering keeps the controller's work queue short.
	err := parallel(ctx, services, func(ctx context.Context, i int) error {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: serviceName(i)},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": serviceName(i)},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			},
		}
		_, err := client.CoreV1().Services(benchNamespace).Create(ctx, svc, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	err = parallel(ctx, services*pods, func(ctx context.Context, k int) error {
		i, j := k/pods, k%pods
		return testcluster.RunPod(ctx, client, benchNamespace, testcluster.Pod{
			Name: fmt.Sprintf("%s-%d", serviceName(i), j), Labels: map[string]string{"app": serviceName(i)},
			IPs: []string{fmt.Sprintf("10.%d.%d.%d", 200+i/256, i%256, j+1)}, Ready: true, Node: benchNode,
			Ports: map[string]int32{"http": 8080},
			// What pod_health_checks reads.
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromString("http")}}},
		})
	})
	if err != nil {
		return err
	}
	err = parallel(ctx, services, func(ctx context.Context, i int) error {
		return testcluster.WaitForSlices(ctx, client, benchNamespace, serviceName(i), 5*time.Minute,
			testcluster.EndpointCount(discoveryv1.AddressTypeIPv4, pods, pods))
	})
	if err != nil {
		return err
	}
	if err := createBigService(ctx, client); err != nil {
		return err
	}
	fmt.Fprintf(logw, "fixture: %d Services x %d ready pods, and Service %s with %d endpoints, in namespace %s after %.1f s\n",
		services, pods, bigService, bigEndpoints, benchNamespace, time.Since(start).Seconds())
	return nil
}

// createBigService makes the selector-less Service big with bigEndpoints
// ready endpoints, each with the attributes a pod's endpoint has (node, zone,
// target pod), in hand-written slices of 100.
func createBigService(ctx context.Context, client kubernetes.Interface) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bigNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: bigNamespace, Name: bigService},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := client.CoreV1().Services(bigNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	const perSlice = 100
	ready, node, zone, port, name := true, benchNode, benchZone, int32(8080), "http"
	return parallel(ctx, bigEndpoints/perSlice, func(ctx context.Context, s int) error {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: bigNamespace, Name: fmt.Sprintf("%s-%03d", bigService, s), Labels: map[string]string{
				discoveryv1.LabelServiceName: bigService, discoveryv1.LabelManagedBy: "harness-bench",
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		}
		for e := range perSlice {
			k := s*perSlice + e
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.100.%d.%d", k/250, k%250+1)},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				NodeName:   &node, Zone: &zone,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: bigNamespace, Name: fmt.Sprintf("big-%04d", k)},
			})
		}
		_, err := client.DiscoveryV1().EndpointSlices(bigNamespace).Create(ctx, slice, metav1.CreateOptions{})
		return err
	})
}

// parallel runs do(0) ... do(n-1) on a few workers and returns the first
// error, after which the remaining calls are skipped.
func parallel(ctx context.Context, n int, do func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for k := range jobs {
				if err := do(ctx, k); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for k := range n {
		select {
		case jobs <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
