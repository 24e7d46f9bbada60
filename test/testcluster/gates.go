package testcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// RunGatedPod creates the pod on its node declaring the readiness gates,
// and gives it the status a kubelet would once its containers are ready:
// Running, its IPs, ContainersReady True, and Ready as the kubelet computes
// it (PodReady: ContainersReady and every readiness gate True), so False
// until something sets each gate's condition. p.Ready says whether its
// containers are ready.
func RunGatedPod(ctx context.Context, client kubernetes.Interface, namespace string, p Pod, gates ...corev1.PodConditionType) error {
	_, err := runPod(ctx, client, namespace, p, gates...)
	return err
}

// KubeletReady is the pod's Ready as the kubelet computes it
// (pkg/kubelet/status.GeneratePodReadyCondition): its containers ready and
// every readiness gate's condition True.
func KubeletReady(pod *corev1.Pod) corev1.ConditionStatus {
	if !conditionTrue(pod, corev1.ContainersReady) {
		return corev1.ConditionFalse
	}
	for _, g := range pod.Spec.ReadinessGates {
		if !conditionTrue(pod, g.ConditionType) {
			return corev1.ConditionFalse
		}
	}
	return corev1.ConditionTrue
}

func conditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setCondition sets the condition t of pod to status, its transition time
// now when it changes; it says whether it changed.
func setCondition(pod *corev1.Pod, t corev1.PodConditionType, status corev1.ConditionStatus) bool {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == t {
			if c.Status == status {
				return false
			}
			c.Status, c.LastTransitionTime = status, metav1.Now()
			return true
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: status, LastTransitionTime: metav1.Now()})
	return true
}

// ComputeReady runs the kubelet's status sync for the pods of namespace
// until ctx ends: every interval, each running pod with readiness gates,
// bound to a node, whose Ready differs from KubeletReady gets it, so that a readiness gate set by
// someone else makes the pod Ready as a kubelet would. Its errors are
// retried at the next round; it returns ctx's.
func ComputeReady(ctx context.Context, client kubernetes.Interface, namespace string, interval time.Duration) error {
	return wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		// A failed LIST is retried at the next round.
		list, _ := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		for i := range list.Items {
			pod := &list.Items[i]
			// A pod without gates keeps the Ready its maker gave it (the
			// pods of the fixtures and the companion's tests write Ready
			// alone).
			if len(pod.Spec.ReadinessGates) == 0 || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
				continue
			}
			if setCondition(pod, corev1.PodReady, KubeletReady(pod)) {
				_, _ = client.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
			}
		}
		return false, nil
	})
}

// PodKubelet is a test kubelet for the pods that controllers make (a
// Deployment's ReplicaSets) in one namespace: it binds each unbound pod to
// Node (the scheduler's part), starts each bound pod (Running, an IP of
// IPPrefix, its containers ready at once), keeps Ready as the kubelet
// computes it (KubeletReady), and removes a pod being deleted at once (the
// containers of nothing to stop).
type PodKubelet struct {
	Namespace, Node string
	// IPPrefix is the first three octets of the pods' IPv4 addresses, such
	// as "10.244.80": the pods get .1, .2, ... in the order started (up to
	// 254 of them).
	IPPrefix string
}

// Run is the kubelet's loop, a round every interval until ctx ends; a
// failed request is retried at the next round. It returns ctx's error.
func (k PodKubelet) Run(ctx context.Context, client kubernetes.Interface, interval time.Duration) error {
	started := 0
	pods := client.CoreV1().Pods(k.Namespace)
	return wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		// A failed LIST is retried at the next round.
		list, _ := pods.List(ctx, metav1.ListOptions{})
		for i := range list.Items {
			pod := &list.Items[i]
			switch {
			case pod.DeletionTimestamp != nil:
				_ = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))})
			case pod.Spec.NodeName == "":
				_ = bindPod(ctx, client, pod, k.Node)
			case pod.Status.Phase != corev1.PodRunning && started < 254:
				started++
				setRunning(pod, []string{fmt.Sprintf("%s.%d", k.IPPrefix, started)}, true)
				if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
					started--
				}
			case pod.Status.Phase == corev1.PodRunning:
				if setCondition(pod, corev1.PodReady, KubeletReady(pod)) {
					_, _ = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
				}
			}
		}
		return false, nil
	})
}
