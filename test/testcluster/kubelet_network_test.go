package testcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNetKubeletKeepsTheNetworkInStepWithThePod: a pod's /healthz follows its
// Ready condition; deleted with a grace period, it keeps serving, fails
// /healthz, and at the end of the grace period its network goes and the pod
// object with it; deleted at once, its network goes at once.
func TestNetKubeletKeepsTheNetworkInStepWithThePod(t *testing.T) {
	if reason := NetworkUnavailable(); reason != "" {
		t.Skip(reason)
	}
	c := start(t)
	client := clientOf(t, c)
	n := startNetwork(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, err := StartNetKubelet(ctx, client, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	const ns = "netkubelet"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WaitForServiceAccount(ctx, client, ns, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := EnsureNode(ctx, client, "net-node", "net-zone"); err != nil {
		t.Fatal(err)
	}
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
