package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// The replicas that share Leases out know each other by a Lease of each
// one's own, labelled with their group and renewed every RetryPeriod: a
// replica is live while its Lease's renewal is seen to move, by this
// replica's clock (as WithLease judges a holder), so that clocks need not
// agree.

// MemberLabel is the label of the members' Leases; its value is the group.
const MemberLabel = "terraform-provider-k8s-sync/member-of"

// MemberKeysAnnotation is the annotation of a member's Lease that gives a
// digest of the keys the replica shares out (its workspaces).
const MemberKeysAnnotation = "terraform-provider-k8s-sync/keys"

// MemberConfig names a replica and its group.
type MemberConfig struct {
	Namespace, Group, Identity string
	LeaseDuration, RetryPeriod time.Duration
	// Keys are the keys the replica shares out with the group (its
	// workspaces); their digest is on its Lease (Agreeing).
	Keys []string
	// Pod, when set, is the pod the replica runs in (its name and UID), in
	// Namespace: it owns the member Lease, so that the garbage collector
	// deletes the Lease with the pod and those of replicas gone do not
	// accumulate.
	Pod *PodRef
	// Clock is the time of the renewals and of what is seen of the
	// others'; nil: the real one.
	Clock clock.WithTicker
}

// PodRef names a pod: its name and its UID.
type PodRef struct{ Name, UID string }

// ownerReferences make p the owner of an object in its namespace; none
// when p is nil.
func (p *PodRef) ownerReferences() []metav1.OwnerReference {
	if p == nil {
		return nil
	}
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: types.UID(p.UID)}}
}

// Membership is what a replica knows of its group.
type Membership struct {
	cfg   MemberConfig
	clock clock.Clock
	// keys is the digest of cfg.Keys, on this replica's Lease.
	keys string

	mu sync.Mutex
	// seen are the members' renewals as last seen, and when they were seen
	// to move; since is when each was first seen.
	seen  map[string]memberSeen
	since map[string]time.Time
}

type memberSeen struct {
	renew time.Time
	at    time.Time
	// keys is the digest of the member's keys, "" when its Lease has none.
	keys string
}

// keysDigest is the digest of keys, in any order.
func keysDigest(keys []string) string {
	sum := sha256.Sum256([]byte(strings.Join(slices.Sorted(slices.Values(keys)), "\n")))
	return hex.EncodeToString(sum[:16])
}

// MemberLeaseName is the name of identity's Lease in group: the identity
// as a DNS label where it is one, else with a digest.
func MemberLeaseName(group, identity string) string {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(identity))
	sum := sha256.Sum256([]byte(identity))
	name := group + "-member-" + clean
	if clean != identity || len(name) > 63 {
		name = group + "-member-" + hex.EncodeToString(sum[:6])
	}
	return name
}

func newMembership(cfg MemberConfig) *Membership {
	return &Membership{cfg: cfg, clock: clockOf(cfg.Clock), keys: keysDigest(cfg.Keys), seen: map[string]memberSeen{}, since: map[string]time.Time{}}
}

// JoinGroup keeps this replica's member Lease and reads the group's every
// RetryPeriod, until ctx ends; the first read is done when it returns.
func (c *Client) JoinGroup(ctx context.Context, cfg MemberConfig, log *slog.Logger) (*Membership, error) {
	leases, err := c.coordinationClient()
	if err != nil {
		return nil, err
	}
	return joinGroup(ctx, restLeases{leases}, cfg, c.opts.RequestTimeout, log)
}

// member is a replica's part in its group: its own Lease, renewed, and the
// group's, read.
type member struct {
	m              *Membership
	own            *leaseHolder
	leases         leaseAPI
	requestTimeout time.Duration
}

func newMember(leases leaseAPI, cfg MemberConfig, requestTimeout time.Duration) *member {
	m := newMembership(cfg)
	own := &leaseHolder{client: leases, requestTimeout: requestTimeout, clock: m.clock, cfg: LeaseConfig{
		Namespace: cfg.Namespace, Name: MemberLeaseName(cfg.Group, cfg.Identity), Identity: cfg.Identity,
		LeaseDuration: cfg.LeaseDuration, Labels: map[string]string{MemberLabel: cfg.Group}, OwnerReferences: cfg.Pod.ownerReferences(),
		Annotations: map[string]string{MemberKeysAnnotation: m.keys},
	}}
	return &member{m: m, own: own, leases: leases, requestTimeout: requestTimeout}
}

// step renews this replica's Lease and reads the group's.
func (p *member) step(ctx context.Context) error {
	if _, err := p.own.tryAcquireOrRenew(ctx, p.m.clock.Now().Add(p.requestTimeout)); err != nil {
		return err
	}
	listCtx, cancel := context.WithTimeout(ctx, p.requestTimeout)
	defer cancel()
	items, err := p.leases.list(listCtx, p.m.cfg.Namespace, MemberLabel+"="+p.m.cfg.Group)
	if err != nil {
		return err
	}
	p.m.observe(items, p.m.clock.Now())
	return nil
}

// joinGroup is JoinGroup on leases, each request bounded by requestTimeout.
func joinGroup(ctx context.Context, leases leaseAPI, cfg MemberConfig, requestTimeout time.Duration, log *slog.Logger) (*Membership, error) {
	p := newMember(leases, cfg, requestTimeout)
	if err := p.step(ctx); err != nil {
		return nil, err
	}
	ticker := clockOf(cfg.Clock).NewTicker(cfg.RetryPeriod)
	go func() {
		defer p.own.release()
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C():
			}
			if err := p.step(ctx); err != nil && ctx.Err() == nil {
				log.Warn("reading the replicas of the group failed", "group", cfg.Group, "error", err.Error())
			}
		}
	}()
	return p.m, nil
}

// observe takes the members' Leases as read at now.
func (m *Membership) observe(leases []coordinationv1.Lease, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range leases {
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil {
			continue
		}
		id, renew := *l.Spec.HolderIdentity, l.Spec.RenewTime.Time
		s, ok := m.seen[id]
		if !ok || !s.renew.Equal(renew) {
			s = memberSeen{renew: renew, at: now}
		}
		s.keys = l.Annotations[MemberKeysAnnotation]
		m.seen[id] = s
		if _, ok := m.since[id]; !ok {
			m.since[id] = now
		}
	}
}

// Live are the members whose renewal was seen to move within
// LeaseDuration, this replica always among them, sorted.
func (m *Membership) Live() []string {
	return m.live(func(memberSeen) bool { return true })
}

// Agreeing are the live members that share out the same keys as this
// replica (the same digest on their Lease), this replica always among
// them, sorted: those it shares its keys among. Replicas that read
// different lists, as in a rollout that adds a workspace, give some keys
// to different members: handing those to each other, two replicas passed
// a workspace back and forth every few seconds, at times with no holder,
// for as long as both ran (16 times in 2 minutes, 2026-12-06). A member
// whose Lease has no digest (a version before it) is taken to agree.
func (m *Membership) Agreeing() []string {
	return m.live(func(s memberSeen) bool { return s.keys == "" || s.keys == m.keys })
}

func (m *Membership) live(keep func(memberSeen) bool) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []string{m.cfg.Identity}
	for id, s := range m.seen {
		if id != m.cfg.Identity && m.clock.Since(s.at) < m.cfg.LeaseDuration && keep(s) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Settled says whether the member has been seen live for LeaseDuration: a
// replica just started, or restarting, is not handed work until then.
func (m *Membership) Settled(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	since, ok := m.since[id]
	return ok && m.clock.Since(since) >= m.cfg.LeaseDuration
}

// ranked are members in the order rendezvous hashing (highest random
// weight) prefers them for key: every replica that knows the same members
// ranks them the same, and a member that goes moves only the keys it was
// first for.
func ranked(key string, members []string) []string {
	weight := func(member string) string {
		sum := sha256.Sum256([]byte(key + "\x00" + member))
		return hex.EncodeToString(sum[:8])
	}
	out := slices.Clone(members)
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(weight(b)+b, weight(a)+a) })
	return out
}

// Shares gives each of keys the order in which members should try it:
// first the member the group gives it, then the others by rendezvous
// hashing. Keys are given, in their sorted order, to the member hashing
// prefers among those that hold fewer than their share (the keys divided
// by the members, rounded up), so that a few keys spread evenly as well as
// many (rendezvous hashing with bounded loads). Every replica that knows
// the same keys and members gives the same.
func Shares(keys, members []string) map[string][]string {
	out := map[string][]string{}
	if len(members) == 0 {
		return out
	}
	share := (len(keys) + len(members) - 1) / len(members)
	load := map[string]int{}
	for _, key := range slices.Sorted(slices.Values(keys)) {
		order := ranked(key, members)
		first := slices.IndexFunc(order, func(m string) bool { return load[m] < share })
		given := order[first]
		load[given]++
		out[key] = append([]string{given}, slices.Delete(order, first, first+1)...)
	}
	return out
}
