package testcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestNetKubeletKeepsTheNetworkInStepWithThePod: a pod's /healthz follows its
// Ready condition; deleted with a grace period, it keeps serving, fails
// /healthz, and at the end of the grace period its network goes and the pod
// object with it; deleted at once, its network goes at once.
func TestNetKubeletKeepsTheNetworkInStepWithThePod(t *testing.T) {
	const ns = "netkubelet"
	ctx, client, n, k := netKubeletIn(t, ns)
	run := func(name string, i int, ready bool) *NetPod {
		t.Helper()
		err := k.RunPod(ctx, ns, Pod{Name: name, IPs: n.PodIPs(i), Ready: ready, Node: "net-node", Ports: map[string]int32{"http": 8080}})
		if err != nil {
			t.Fatal(err)
		}
		return n.Pod(name)
	}
	a, b := run("web-a", 1, false), run("web-b", 2, true)
	healthOf := func(p *NetPod) func() string {
		return func() string {
			status, _, body := httpGet(t, podURL(p.IPs[0], 8080, "/healthz"))
			return fmt.Sprintf("%d %s", status, body)
		}
	}
	eventually(t, "web-a not ready", healthOf(a), "503 not-ready\n")
	eventually(t, "web-b ready", healthOf(b), "200 ready\n")

	if err := SetPodReady(ctx, client, ns, "web-a", true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web-a made ready", healthOf(a), "200 ready\n")
	if err := SetPodReady(ctx, client, ns, "web-a", false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web-a made not ready", healthOf(a), "503 not-ready\n")

	grace := int64(3)
	if err := client.CoreV1().Pods(ns).Delete(ctx, "web-b", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web-b terminating", healthOf(b), "503 terminating\n")
	if status, pod, _ := httpGet(t, podURL(b.IPs[1], 8080, "/")); status != 200 || pod != "web-b" {
		t.Errorf("terminating web-b does not serve: %d %q", status, pod)
	}
	gone := func(name string, p *NetPod) func() string {
		return func() string {
			_, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return fmt.Sprintf("pod gone %t, network %t, namespace %t, link %t, server %t",
				apierrors.IsNotFound(err), n.Pod(name) != nil, exists(p.Netns), exists(p.HostLink), alive(p.ServerPID()))
		}
	}
	const allGone = "pod gone true, network false, namespace false, link false, server false"
	eventually(t, "web-b at the end of its grace period", gone("web-b", b), allGone)

	zero := int64(0)
	if err := client.CoreV1().Pods(ns).Delete(ctx, "web-a", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web-a deleted at once", gone("web-a", a), allGone)
	if err := DeleteNamespace(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
}

// eventually polls got, up to 30 s, until it returns want.
func eventually(t *testing.T, what string, got func() string, want string) {
	t.Helper()
	last := ""
	for range 300 {
		if last = got(); last == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: still %q after 30 s, want %q", what, last, want)
}

// TestNetKubeletRunsTheDeploymentsPods: the pods of a Deployment, made by
// the control plane's controllers, are bound to the node, get an address
// and a server, and are Ready as the kubelet computes it: not while their
// readiness gate's condition is absent, at once when it is set True. Scaled
// down, a pod keeps serving through its grace period, then goes.
func TestNetKubeletRunsTheDeploymentsPods(t *testing.T) {
	const ns, gate = "netdeployment", corev1.PodConditionType("example.com/gate")
	ctx, client, n, k := netKubeletIn(t, ns)
	k.RunControllerPods(ControllerPods{Namespace: ns, Node: "net-node"})
	replicas, grace := int32(2), int64(3)
	app := map[string]string{"app": "web"}
	_, err := client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: app},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: app}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: &grace,
				ReadinessGates:                []corev1.PodReadinessGate{{ConditionType: gate}},
				Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
			}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := func() string {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		var out []string
		for _, p := range list.Items {
			answer := "no network"
			if np := n.Pod(p.Name); np != nil && p.Status.PodIP == np.IPs[0] {
				// Not httpGet: a network may go between the two lines.
				if resp, err := podClient.Get(podURL(np.IPs[1], 8080, "/")); err != nil {
					answer = err.Error()
				} else {
					_ = resp.Body.Close()
					answer = fmt.Sprintf("answers %d as itself %t", resp.StatusCode, resp.Header.Get("X-Pod") == p.Name)
				}
			}
			out = append(out, fmt.Sprintf("node %s, %s, ContainersReady %t, Ready %t, terminating %t",
				p.Spec.NodeName, answer, conditionTrue(&p, corev1.ContainersReady), conditionTrue(&p, corev1.PodReady), p.DeletionTimestamp != nil))
		}
		slices.Sort(out)
		return strings.Join(out, "; ")
	}
	waiting := "node net-node, answers 200 as itself true, ContainersReady true, Ready false, terminating false"
	eventually(t, "the Deployment's pods, their gate closed", pods, waiting+"; "+waiting)
	if err := k.Err(); err != nil {
		t.Fatal(err)
	}

	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: gate, Status: corev1.ConditionTrue})
		if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ready := "node net-node, answers 200 as itself true, ContainersReady true, Ready true, terminating false"
	eventually(t, "the Deployment's pods, their gate open", pods, ready+"; "+ready)

	one := int32(1)
	scale, err := client.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = one
	if _, err := client.AppsV1().Deployments(ns).UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "one pod scaled down, in its grace period", pods, ready+"; "+strings.Replace(ready, "terminating false", "terminating true", 1))
	eventually(t, "one pod scaled down, after its grace period", pods, ready)
	if err := DeleteNamespace(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
}

// netKubeletIn skips the test where pods cannot have a network; else it
// starts a control plane, a network and a NetKubelet on it, and makes
// namespace ns and node net-node; the context ends with the test.
func netKubeletIn(t *testing.T, ns string) (context.Context, kubernetes.Interface, *Network, *NetKubelet) {
	t.Helper()
	if reason := NetworkUnavailable(); reason != "" {
		t.Skip(reason)
	}
	c := start(t)
	client := clientOf(t, c)
	n := startNetwork(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	k, err := StartNetKubelet(ctx, client, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WaitForServiceAccount(ctx, client, ns, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := EnsureNode(ctx, client, "net-node", "net-zone"); err != nil {
		t.Fatal(err)
	}
	return ctx, client, n, k
}
