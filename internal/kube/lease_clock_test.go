package kube

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeLeases are the Leases of client-go's fake clientset.
type fakeLeases struct{ client kubernetes.Interface }

func (f fakeLeases) get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	return f.client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (f fakeLeases) create(ctx context.Context, lease *coordinationv1.Lease) error {
	_, err := f.client.CoordinationV1().Leases(lease.Namespace).Create(ctx, lease, metav1.CreateOptions{})
	return err
}

func (f fakeLeases) update(ctx context.Context, lease *coordinationv1.Lease) error {
	_, err := f.client.CoordinationV1().Leases(lease.Namespace).Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

func (f fakeLeases) list(ctx context.Context, namespace, selector string) ([]coordinationv1.Lease, error) {
	list, err := f.client.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The replicas' Leases of a group, on one fake clock: each step lets the
// time pass, has some replicas renew their Lease and read the group's, and
// says what replica a then knows of the others.
func TestAGroupsMembersOnTheClock(t *testing.T) {
	type step struct {
		after time.Duration
		renew []string
		// live, agreeing and settled are what replica a knows after it.
		live, agreeing, settled []string
	}
	same := []string{"team-a", "team-b"}
	for _, tc := range []struct {
		name  string
		keys  map[string][]string
		steps []step
	}{
		{name: "a replica joining is live at once and settled a Lease duration later", keys: map[string][]string{"a": same, "b": same},
			steps: []step{
				{renew: []string{"a"}, live: []string{"a"}, agreeing: []string{"a"}},
				{after: 2 * time.Second, renew: []string{"b", "a"}, live: []string{"a", "b"}, agreeing: []string{"a", "b"}},
				{after: 14 * time.Second, renew: []string{"b", "a"}, live: []string{"a", "b"}, agreeing: []string{"a", "b"}},
				{after: time.Second, renew: []string{"b", "a"}, live: []string{"a", "b"}, agreeing: []string{"a", "b"}, settled: []string{"b"}},
			}},
		{name: "a replica whose Lease is not renewed for a Lease duration is gone", keys: map[string][]string{"a": same, "b": same},
			steps: []step{
				{renew: []string{"b", "a"}, live: []string{"a", "b"}, agreeing: []string{"a", "b"}},
				{after: 14 * time.Second, renew: []string{"a"}, live: []string{"a", "b"}, agreeing: []string{"a", "b"}},
				{after: time.Second, renew: []string{"a"}, live: []string{"a"}, agreeing: []string{"a"}, settled: []string{"b"}},
				// It renews again: live at once.
				{after: 2 * time.Second, renew: []string{"b", "a"}, live: []string{"a", "b"}, agreeing: []string{"a", "b"}, settled: []string{"b"}},
			}},
		{name: "two lists disagreeing: live, but not sharing the workspaces", keys: map[string][]string{"a": same, "b": append(same, "team-c"), "c": same},
			steps: []step{
				{renew: []string{"b", "c", "a"}, live: []string{"a", "b", "c"}, agreeing: []string{"a", "c"}},
				{after: 16 * time.Second, renew: []string{"b", "c", "a"}, live: []string{"a", "b", "c"}, agreeing: []string{"a", "c"},
					settled: []string{"b", "c"}},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := testingclock.NewFakeClock(start)
			leases := fakeLeases{fake.NewClientset()}
			members := map[string]*member{}
			for id, keys := range tc.keys {
				members[id] = newMember(leases, MemberConfig{Namespace: "sync", Group: "lb", Identity: id, LeaseDuration: 15 * time.Second,
					RetryPeriod: 2 * time.Second, Keys: keys, Clock: clk}, time.Second)
			}
			a := members["a"].m
			for i, s := range tc.steps {
				clk.Step(s.after)
				for _, id := range s.renew {
					if err := members[id].step(ctx); err != nil {
						t.Fatalf("step %d: %s: %v", i, id, err)
					}
				}
				if got := a.Live(); !slices.Equal(got, s.live) {
					t.Errorf("step %d: live %v, want %v", i, got, s.live)
				}
				if got := a.Agreeing(); !slices.Equal(got, s.agreeing) {
					t.Errorf("step %d: agreeing %v, want %v", i, got, s.agreeing)
				}
				var settled []string
				for _, id := range slices.Sorted(func(yield func(string) bool) {
					for id := range tc.keys {
						if !yield(id) {
							return
						}
					}
				}) {
					if id != "a" && a.Settled(id) {
						settled = append(settled, id)
					}
				}
				if !slices.Equal(settled, s.settled) {
					t.Errorf("step %d: settled %v, want %v", i, settled, s.settled)
				}
			}
		})
	}
}

// A workspace's Lease between two replicas, on one fake clock: each step
// lets the time pass and has a replica try to take or renew it, or give it
// up; the Lease's holder is then as the step says.
func TestAWorkspacesLeaseOnTheClock(t *testing.T) {
	type step struct {
		after   time.Duration
		try     string
		release string
		// took says whether try took or renewed it; holder is the
		// Lease's holder after the step.
		took   bool
		holder string
	}
	for _, tc := range []struct {
		name string
		// patience is how long b waits once the Lease can be taken.
		patience time.Duration
		steps    []step
	}{
		{name: "a hand-over: the holder gives it up, the other takes it at once", steps: []step{
			{try: "a", took: true, holder: "a"},
			{after: 2 * time.Second, try: "b", took: false, holder: "a"},
			{after: 2 * time.Second, release: "a", holder: ""},
			{after: 2 * time.Second, try: "b", took: true, holder: "b"},
			{after: 2 * time.Second, try: "a", took: false, holder: "b"},
		}},
		{name: "a holder that stops renewing loses it a Lease duration after its last renewal was seen", steps: []step{
			{try: "a", took: true, holder: "a"},
			{after: time.Second, try: "b", took: false, holder: "a"},
			{after: 14 * time.Second, try: "b", took: false, holder: "a"},
			{after: time.Second, try: "b", took: true, holder: "b"},
		}},
		{name: "a holder that renews keeps it", steps: []step{
			{try: "a", took: true, holder: "a"},
			{after: time.Second, try: "b", took: false, holder: "a"},
			{after: 10 * time.Second, try: "a", took: true, holder: "a"},
			{after: 10 * time.Second, try: "b", took: false, holder: "a"},
			{after: 10 * time.Second, try: "b", took: false, holder: "a"},
		}},
		{name: "a replica that is not preferred waits its patience once the Lease is free", patience: 4 * time.Second, steps: []step{
			{try: "a", took: true, holder: "a"},
			{after: time.Second, release: "a", holder: ""},
			{after: time.Second, try: "b", took: false, holder: ""},
			{after: 2 * time.Second, try: "b", took: false, holder: ""},
			{after: 2 * time.Second, try: "b", took: true, holder: "b"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := testingclock.NewFakeClock(start)
			leases := fakeLeases{fake.NewClientset()}
			holders := map[string]*leaseHolder{}
			for _, id := range []string{"a", "b"} {
				cfg := LeaseConfig{Namespace: "sync", Name: "lb-team-a", Identity: id, LeaseDuration: 15 * time.Second,
					RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second, Clock: clk}
				if id == "b" && tc.patience > 0 {
					cfg.Patience = func(string) time.Duration { return tc.patience }
				}
				holders[id] = &leaseHolder{client: leases, cfg: cfg, requestTimeout: time.Second, clock: clk}
			}
			for i, s := range tc.steps {
				clk.Step(s.after)
				if s.try != "" {
					took, err := holders[s.try].tryAcquireOrRenew(ctx, clk.Now().Add(time.Second))
					if err != nil {
						t.Fatalf("step %d: %s: %v", i, s.try, err)
					}
					if took != s.took {
						t.Errorf("step %d: %s took it: %v, want %v", i, s.try, took, s.took)
					}
				}
				if s.release != "" {
					holders[s.release].release()
				}
				lease, err := leases.get(ctx, "sync", "lb-team-a")
				if err != nil {
					t.Fatal(err)
				}
				holder := ""
				if lease.Spec.HolderIdentity != nil {
					holder = *lease.Spec.HolderIdentity
				}
				if holder != s.holder {
					t.Errorf("step %d: held by %q, want %q", i, holder, s.holder)
				}
			}
		})
	}
}
