package provider

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// gatedDeployment is the Deployment web of ns (webDeployment), replicas
// pods that declare accGate, rolled with maxSurge 100% and maxUnavailable
// 0. The old pods go minReadySeconds (15) after the new ones are Ready:
// longer than the plans that follow an apply, which then find the pool as
// the apply left it.
func gatedDeployment(ns string, replicas int32) *appsv1.Deployment {
	return webDeployment(ns, replicas, intstr.FromString("100%"), 15, accGate)
}

// rolledOut says whether the Deployment's rollout is complete: every pod
// of the current template available, no other pod left.
func rolledOut(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == *d.Spec.Replicas &&
		d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas
}

// A real Deployment whose pods declare the gate, run by the control plane's
// Deployment and ReplicaSet controllers and a test kubelet that computes
// Ready as the kubelet does: its first pods, and then the new pods of a
// rollout, wait for the gate, so the rollout does not progress (the old
// pods stay) until terraform apply gives the load balancer the new pods
// and opens their gate; then it completes, and once the load balancer is
// given the pool without the old pods the next plan is empty.
func TestAccReadinessGateHoldsADeploymentRolloutUntilApply(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	c.createService(t, webServiceSpec(ns, corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = testcluster.PodKubelet{Namespace: ns, Node: accNode, IPPrefix: "10.244.81"}.Run(ctx, c.client, 200*time.Millisecond)
	}()
	t.Cleanup(func() { cancel(); <-done })
	deployments := c.client.AppsV1().Deployments(ns)
	if _, err := deployments.Create(c.ctx(t), gatedDeployment(ns, 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deployment := func() *appsv1.Deployment {
		d, err := deployments.Get(c.ctx(t), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	waitRolledOut := func() {
		t.Helper()
		err := wait.PollUntilContextTimeout(c.ctx(t), 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
			return rolledOut(deployment()), nil
		})
		if err != nil {
			t.Fatalf("the rollout did not complete: %+v", deployment().Status)
		}
	}
	// holds checks for 3 s that the rollout does not progress: n pods, of
	// which ready are Ready (the old ones), the rollout not complete.
	holds := func(n, ready int) {
		t.Helper()
		for range 10 {
			list, err := c.client.CoreV1().Pods(ns).List(c.ctx(t), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			gotReady := 0
			for i := range list.Items {
				if testcluster.KubeletReady(&list.Items[i]) == corev1.ConditionTrue {
					gotReady++
				}
			}
			if len(list.Items) != n || gotReady != ready || rolledOut(deployment()) {
				t.Fatalf("the rollout went on without the gate: %d pods, %d ready (want %d, %d); %+v", len(list.Items), gotReady, n, ready, deployment().Status)
			}
			// A check every 300 ms over a span that is the scenario
			// itself: nothing to poll for.
			time.Sleep(300 * time.Millisecond)
		}
	}
	provider := kubeconfigProvider(c.identity(t, ns, "gates", gateRole))
	rollout := func() {
		d := deployment()
		d.Spec.Template.Annotations["version"] = "2"
		if _, err := deployments.Update(c.ctx(t), d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviderFactories,
		Steps: []resource.TestStep{
			{
				// The first pods wait for the gate: nothing is available.
				PreConfig: func() {
					c.waitForServiceSlices(t, ns, "web", 2)
					holds(2, 0)
				},
				Config: gatedConfig(provider, ns),
			},
			{
				PreConfig: func() {
					waitRolledOut()
					rollout()
					// The surge: two new pods beside the two old ones.
					c.waitForServiceSlices(t, ns, "web", 4)
					holds(4, 2)
				},
				Config: gatedConfig(provider, ns),
			},
			{
				// The old pods gone, the next run takes them out of the
				// load balancer; nothing waits, and the plan after it is empty.
				PreConfig: func() {
					waitRolledOut()
					c.waitForServiceSlices(t, ns, "web", 2)
				},
				Config: gatedConfig(provider, ns),
			},
		},
	})
}
