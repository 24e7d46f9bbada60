package testcluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// KeepNodesAlive creates each node's lease, then renews it, as a kubelet.
func TestKeepNodesAliveCreatesThenRenewsTheLeases(t *testing.T) {
	client := fake.NewClientset()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	before := time.Now().Add(-time.Second)
	if err := KeepNodesAlive(ctx, client, "node-a", "node-b"); err != nil {
		t.Fatal(err)
	}
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	first := map[string]metav1.MicroTime{}
	for _, name := range []string{"node-a", "node-b"} {
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("lease of %s: %v", name, err)
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != name || lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Before(&metav1.MicroTime{Time: before}) {
			t.Fatalf("lease of %s: %+v", name, lease.Spec)
		}
		first[name] = *lease.Spec.RenewTime
	}
	// A second renewal, as the next tick makes it, updates the lease.
	time.Sleep(10 * time.Millisecond)
	if err := renewLease(ctx, client, "node-a"); err != nil {
		t.Fatal(err)
	}
	lease, err := leases.Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if was := first["node-a"]; !was.Before(lease.Spec.RenewTime) {
		t.Errorf("renew time %s, not after the first %s", lease.Spec.RenewTime, was)
	}
}
