package kube

import (
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestEveryReplicaRanksTheMembersTheSameAndOnePrefersEachKey(t *testing.T) {
	members := []string{"a", "b", "c"}
	share := map[string]int{}
	for i := range 300 {
		key := fmt.Sprintf("team-%d", i)
		var first []string
		for _, m := range members {
			if ranked(key, members)[0] == m {
				first = append(first, m)
			}
		}
		if len(first) != 1 {
			t.Fatalf("%s: %v rank first, want one", key, first)
		}
		reversed := slices.Clone(members)
		slices.Reverse(reversed)
		if ranked(key, reversed)[0] != first[0] {
			t.Fatalf("%s: the order of the members changes who is first", key)
		}
		share[first[0]]++
	}
	for _, m := range members {
		if share[m] < 70 || share[m] > 130 {
			t.Errorf("%s is first for %d of 300 keys, want about 100: %v", m, share[m], share)
		}
	}
}

func TestAMemberThatLeavesMovesOnlyItsOwnKeys(t *testing.T) {
	before, after := []string{"a", "b", "c"}, []string{"a", "c"}
	first := func(key string, members []string) string {
		for _, m := range members {
			if ranked(key, members)[0] == m {
				return m
			}
		}
		return ""
	}
	for i := range 200 {
		key := fmt.Sprintf("team-%d", i)
		if was := first(key, before); was != "b" && first(key, after) != was {
			t.Errorf("%s moved from %s to %s when b left", key, was, first(key, after))
		}
	}
}

func TestAMemberIsLiveWhileItsRenewalMoves(t *testing.T) {
	m := newMembership(MemberConfig{Identity: "me", LeaseDuration: time.Minute})
	lease := func(holder string, renew time.Time) coordinationv1.Lease {
		return coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), RenewTime: &metav1.MicroTime{Time: renew}}}
	}
	renew := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) // another clock: only its moves count
	m.observe([]coordinationv1.Lease{lease("me", renew), lease("b", renew), lease("", renew)}, time.Now())
	if got := m.Live(); !slices.Equal(got, []string{"b", "me"}) {
		t.Errorf("live %v, want [b me]", got)
	}
	if m.Settled("b") {
		t.Error("b is settled as soon as it is seen")
	}
	// b stops renewing: seen unchanged for longer than a Lease duration.
	m.seen["b"] = memberSeen{renew: renew, at: time.Now().Add(-2 * time.Minute)}
	m.since["b"] = time.Now().Add(-5 * time.Minute)
	m.observe([]coordinationv1.Lease{lease("b", renew)}, time.Now())
	if got := m.Live(); !slices.Equal(got, []string{"me"}) {
		t.Errorf("live %v after b stopped renewing, want [me]", got)
	}
	m.observe([]coordinationv1.Lease{lease("b", renew.Add(time.Second))}, time.Now())
	if got := m.Live(); !slices.Equal(got, []string{"b", "me"}) || !m.Settled("b") {
		t.Errorf("live %v, b settled %v after b renewed again, want [b me] and settled", got, m.Settled("b"))
	}
}

func TestAReplicaSharesItsKeysOnlyAmongTheLiveReplicasThatReadTheSameKeys(t *testing.T) {
	m := newMembership(MemberConfig{Identity: "me", LeaseDuration: time.Minute, Keys: []string{"team-a", "team-b"}})
	renew := metav1.MicroTime{Time: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}
	lease := func(holder string, keys ...string) coordinationv1.Lease {
		l := coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), RenewTime: &renew}}
		if keys != nil {
			l.Annotations = map[string]string{MemberKeysAnnotation: keysDigest(keys)}
		}
		return l
	}
	m.observe([]coordinationv1.Lease{
		lease("me", "team-a", "team-b"),
		lease("same-in-another-order", "team-b", "team-a"),
		lease("one-more", "team-a", "team-b", "team-c"),
		lease("one-less", "team-a"),
		lease("before-the-digest"),
	}, time.Now())
	if got, want := m.Live(), []string{"before-the-digest", "me", "one-less", "one-more", "same-in-another-order"}; !slices.Equal(got, want) {
		t.Errorf("live %v, want %v", got, want)
	}
	if got, want := m.Agreeing(), []string{"before-the-digest", "me", "same-in-another-order"}; !slices.Equal(got, want) {
		t.Errorf("agreeing %v, want %v", got, want)
	}
	// A replica restarted with the new list agrees from its next renewal.
	m.observe([]coordinationv1.Lease{lease("one-more", "team-a", "team-b")}, time.Now())
	if got := m.Agreeing(); !slices.Contains(got, "one-more") {
		t.Errorf("agreeing %v once one-more reads the same keys, want it among them", got)
	}
}

func TestAMemberLeaseNameIsADNSLabel(t *testing.T) {
	for identity, want := range map[string]string{
		"k8s-sync-7d9f-x2": "g-member-k8s-sync-7d9f-x2",
		"Host_1.example":   "g-member-",
	} {
		got := MemberLeaseName("g", identity)
		if len(got) > 63 || got[:len(want)] != want {
			t.Errorf("%q: %q, want a DNS label starting %q", identity, got, want)
		}
	}
}

func TestSharesSpreadAFewKeysEvenlyAndAgree(t *testing.T) {
	var keys []string
	for i := range 20 {
		keys = append(keys, fmt.Sprintf("team-%02d", i))
	}
	members := []string{"r-a", "r-b", "r-c"}
	shares := Shares(keys, members)
	count := map[string]int{}
	for _, key := range keys {
		order := shares[key]
		if len(order) != 3 || !slices.Equal(slices.Sorted(slices.Values(order)), members) {
			t.Fatalf("%s: order %v, want each member once", key, order)
		}
		count[order[0]]++
	}
	for _, m := range members {
		if count[m] < 6 || count[m] > 7 {
			t.Errorf("%s is first for %d of 20 keys, want 6 or 7: %v", m, count[m], count)
		}
	}
	reversed, backwards := slices.Clone(members), slices.Clone(keys)
	slices.Reverse(reversed)
	slices.Reverse(backwards)
	again := Shares(backwards, reversed)
	for _, key := range keys {
		if again[key][0] != shares[key][0] {
			t.Errorf("%s: first %s, then %s when the lists come in another order", key, shares[key][0], again[key][0])
		}
	}
	if got := Shares(keys, nil); len(got) != 0 {
		t.Errorf("shares without members: %v", got)
	}
}
