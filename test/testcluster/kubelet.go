package testcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The fake kubelet: the control plane has no node agent, so pods are bound to
// Node objects that nothing runs, and their status is written the way a
// kubelet would write it. The EndpointSlice controller then publishes them as
// it does in production. The tests, the bench and the demo all make their
// pods here.

// EnsureNode creates a Node named name in zone (the label the EndpointSlice
// controller copies into each endpoint), unless it exists.
func EnsureNode(ctx context.Context, client kubernetes.Interface, name, zone string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return nil
}

// Pod is a pod as the callers need it: where it runs, which IPs it has,
// whether it is ready, and its container ports.
type Pod struct {
	Name   string
	Labels map[string]string
	// IPs are the pod's addresses, one per family; the first is its podIP.
	IPs   []string
	Ready bool
	// Ports are the container ports, by name, that a named targetPort
	// resolves to.
	Ports map[string]int32
	// Node is the Node the pod is bound to.
	Node string
	// ReadinessProbe is the container's, as the pod declares it; the fake
	// kubelet does not run it (Ready says what it found).
	ReadinessProbe *corev1.Probe
}

// RunPod creates the pod on its node and gives it the status a kubelet
// would: Running, its IPs, ContainersReady as p.Ready says, and Ready as the
// kubelet computes it (the same, for a pod without readiness gates).
func RunPod(ctx context.Context, client kubernetes.Interface, namespace string, p Pod) error {
	_, err := runPod(ctx, client, namespace, p)
	return err
}

// runPod creates the pod of p declaring gates, then writes its status as
// a kubelet does once its containers run (setRunning).
func runPod(ctx context.Context, client kubernetes.Interface, namespace string, p Pod, gates ...corev1.PodConditionType) (*corev1.Pod, error) {
	if len(p.IPs) == 0 || p.Node == "" {
		return nil, fmt.Errorf("pod %s: needs a node and at least one IP", p.Name)
	}
	container := corev1.Container{Name: "app", Image: "registry.invalid/app:1", ReadinessProbe: p.ReadinessProbe}
	for name, port := range p.Ports {
		container.Ports = append(container.Ports, corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: corev1.ProtocolTCP})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: p.Name, Labels: p.Labels},
		Spec:       corev1.PodSpec{NodeName: p.Node, Containers: []corev1.Container{container}},
	}
	for _, g := range gates {
		pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: g})
	}
	created, err := client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s: %w", p.Name, err)
	}
	setRunning(created, p.IPs, p.Ready)
	updated, err := client.CoreV1().Pods(namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("set status of pod %s: %w", p.Name, err)
	}
	return updated, nil
}

// setRunning gives pod the status a kubelet writes once its containers
// run: Running, ips (the first is its podIP), ContainersReady as
// containersReady says (what their readiness probes found), and Ready as
// the kubelet computes it (KubeletReady). The EndpointSlice controller takes
// the endpoints' last-change-trigger-time from Ready's transition time.
func setRunning(pod *corev1.Pod, ips []string, containersReady bool) {
	pod.Status.Phase, pod.Status.PodIP, pod.Status.PodIPs = corev1.PodRunning, ips[0], nil
	for _, ip := range ips {
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	containers := corev1.ConditionFalse
	if containersReady {
		containers = corev1.ConditionTrue
	}
	setCondition(pod, corev1.ContainersReady, containers)
	setCondition(pod, corev1.PodReady, KubeletReady(pod))
}

// bindPod binds pod to node, as the scheduler does.
func bindPod(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, node string) error {
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bind pod %s/%s to node %s: %w", pod.Namespace, pod.Name, node, err)
	}
	return nil
}

// SlicesCheck says what it still waits for in the EndpointSlices of a
// Service, or "" when they are as expected.
type SlicesCheck func([]discoveryv1.EndpointSlice) string

// WaitForSlices waits, up to timeout, until the EndpointSlices of service
// pass done.
func WaitForSlices(ctx context.Context, client kubernetes.Interface, namespace, service string, timeout time.Duration, done SlicesCheck) error {
	deadline := time.Now().Add(timeout)
	for {
		list, err := client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + service,
		})
		waiting := ""
		if err != nil {
			waiting = err.Error()
		} else {
			waiting = done(list.Items)
		}
		if waiting == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("EndpointSlices of %s/%s: still waiting for %s", namespace, service, waiting)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("EndpointSlices of %s/%s: still waiting for %s: %w", namespace, service, waiting, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// EndpointCount expects exactly n endpoints of family in the slices, ready
// of them ready (no ready condition counts as ready, as in Kubernetes).
func EndpointCount(family discoveryv1.AddressType, ready, n int) SlicesCheck {
	return func(slices []discoveryv1.EndpointSlice) string {
		gotReady, gotAll := 0, 0
		for _, s := range slices {
			if s.AddressType != family {
				continue
			}
			for _, e := range s.Endpoints {
				gotAll++
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					gotReady++
				}
			}
		}
		if gotReady == ready && gotAll == n {
			return ""
		}
		return fmt.Sprintf("%d %s endpoints, %d ready (have %d, %d ready)", n, family, ready, gotAll, gotReady)
	}
}

// DeleteNamespace force-deletes the namespace's pods (no kubelet would ever
// confirm their shutdown, and the namespace would never go) and then the
// namespace.
func DeleteNamespace(ctx context.Context, client kubernetes.Interface, namespace string) error {
	zero := int64(0)
	_ = client.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	err := client.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// WaitForServiceAccount waits until the namespace's default ServiceAccount
// exists: pods are refused until the serviceaccount controller has made it,
// which takes longer while the controller manager reconnects after an API
// server restart.
func WaitForServiceAccount(ctx context.Context, client kubernetes.Interface, namespace string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s has no default ServiceAccount: %w", namespace, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// LeaseRenewal is how often KeepNodesAlive renews the Node Leases: a
// kubelet renews every 10 s a lease of 40 s, within the 40 to 50 s after
// which the node lifecycle controller marks a node unreachable.
const LeaseRenewal = 10 * time.Second

// KeepNodesAlive renews the Lease of each node in kube-node-lease, as a
// kubelet does, until ctx ends: where the node lifecycle controller runs (a
// kind cluster, Options.KindControllers), a Node whose lease nobody renews
// is marked unreachable and tainted, and its pods are evicted. It renews
// once before returning, and returns that renewal's error.
func KeepNodesAlive(ctx context.Context, client kubernetes.Interface, names ...string) error {
	renew := func() error {
		var errs []error
		for _, name := range names {
			errs = append(errs, renewLease(ctx, client, name))
		}
		return errors.Join(errs...)
	}
	if err := renew(); err != nil {
		return err
	}
	go func() {
		tick := time.NewTicker(LeaseRenewal)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = renew() // the next tick tries again; the lease lasts four ticks
			}
		}
	}()
	return nil
}

func renewLease(ctx context.Context, client kubernetes.Interface, name string) error {
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &name, LeaseDurationSeconds: ptrTo(int32(40)), RenewTime: &now},
		}, metav1.CreateOptions{})
	} else if err == nil {
		lease.Spec.RenewTime = &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("renew the lease of node %s: %w", name, err)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// DevOverrides is a CLI configuration (terraformrc) that makes terraform and
// tofu use the provider binary in dir instead of installing vigie/k8s: how
// the tests, the bench and the demo run a build of the provider.
func DevOverrides(dir string) string {
	return fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"vigie/k8s\" = %q\n  }\n  direct {}\n}\n", dir)
}
