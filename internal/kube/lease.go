package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// Leader election on a coordination.k8s.io/v1 Lease, by the algorithm of
// client-go's tools/leaderelection: a replica takes the Lease when it has no
// holder or its holder has not renewed it for LeaseDuration (as observed on
// this replica's clock, so that clocks need not agree), renews it every
// RetryPeriod, and stops leading when it could not renew it for
// RenewDeadline; every write carries the resourceVersion read, so two
// replicas never both win. client-go's package itself is not imported: it
// imports the whole typed clientset, which makes the provider's binary and
// each of its starts by Terraform measurably larger and slower
// (bench/README.md), for a feature only the companion uses.

// LeaseConfig names the Lease and bounds its timing.
type LeaseConfig struct {
	Namespace, Name, Identity                 string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Patience, when set, is how much longer this replica waits, once the
	// Lease can be taken (it has no holder, its holder let it expire, or
	// it does not exist), before it takes it, given the last holder: the
	// replicas that share Leases out give the one they prefer the first
	// try.
	Patience func(lastHolder string) time.Duration
	// Labels are set on the Lease when this replica creates it.
	Labels map[string]string
	// OwnerReferences are set on the Lease when this replica creates it:
	// the garbage collector deletes the Lease once its owner is gone.
	OwnerReferences []metav1.OwnerReference
	// Annotations are set on the Lease when this replica creates, takes
	// or renews it.
	Annotations map[string]string
	// Clock is the time of the renewals and of the holder's observation;
	// nil: the real one.
	Clock clock.WithTicker
}

// clockOf is clk, or the real clock when it is nil.
func clockOf(clk clock.WithTicker) clock.WithTicker {
	if clk == nil {
		return clock.RealClock{}
	}
	return clk
}

// WithDefaults fills the durations client-go's users commonly use: 15 s,
// 10 s and 2 s.
func (c LeaseConfig) WithDefaults() LeaseConfig {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 15 * time.Second
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = 10 * time.Second
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = 2 * time.Second
	}
	return c
}

// ErrLeaseLost is the cause of the context lead gets when the Lease was
// lost: what it runs must stop before another replica can take the Lease.
var ErrLeaseLost = errors.New("lost the Lease")

// WithLease runs lead while this replica holds the Lease: it waits to take
// it, runs lead with a context that ends when the Lease is lost (cause
// ErrLeaseLost) or ctx ends, and on ctx's end gives the Lease up so another
// replica takes it at once. It returns lead's error, or an error when the
// Lease was lost.
//
// Each renewal is bounded by what is left of RenewDeadline since the last
// one (as client-go's leaderelection bounds it), not by a request timeout:
// a replica cut off from the API server stops leading RenewDeadline after
// its last renewal, and so at least LeaseDuration - RenewDeadline before
// another replica, which waits LeaseDuration from the last renewal it saw,
// can take over.
func (c *Client) WithLease(ctx context.Context, cfg LeaseConfig, log *slog.Logger, lead func(context.Context) error) error {
	leases, err := c.coordinationClient()
	if err != nil {
		return err
	}
	return withLease(ctx, restLeases{leases}, cfg, c.opts.RequestTimeout, log, lead)
}

// withLease is WithLease on leases, each request bounded by requestTimeout.
func withLease(ctx context.Context, leases leaseAPI, cfg LeaseConfig, requestTimeout time.Duration, log *slog.Logger,
	lead func(context.Context) error) error {
	clk := clockOf(cfg.Clock)
	l := &leaseHolder{client: leases, cfg: cfg, requestTimeout: requestTimeout, clock: clk}
	log.Info("waiting for the Lease", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	ticker := clk.NewTicker(cfg.RetryPeriod)
	defer ticker.Stop()
	for {
		ok, err := l.tryAcquireOrRenew(ctx, clk.Now().Add(requestTimeout))
		if err != nil && apierrors.IsForbidden(err) {
			return fmt.Errorf("lease %s/%s: add the RBAC rule {apiGroups: [\"coordination.k8s.io\"], resources: [\"leases\"], verbs: [\"get\", \"create\", \"update\"]}: %w", cfg.Namespace, cfg.Name, err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
	log.Info("leading", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	leadCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	done := make(chan error, 1)
	go func() { done <- lead(leadCtx) }()
	lastRenew := clk.Now()
	for {
		select {
		case err := <-done:
			// Logged before the release, so that no other replica can
			// log "leading" for this Lease before this line: a judge of
			// the logs reads a lead as ended here.
			log.Info("stopped leading", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
			l.release()
			log.Info("released the Lease", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
			return err
		case <-ticker.C():
			deadline := lastRenew.Add(cfg.RenewDeadline)
			ok, err := l.tryAcquireOrRenew(leadCtx, deadline)
			if ok {
				lastRenew = clk.Now()
				continue
			}
			if clk.Now().Before(deadline) {
				continue
			}
			log.Error("lost the Lease: stopping", "lease", cfg.Namespace+"/"+cfg.Name, "error", errText(err))
			stop(ErrLeaseLost)
			if err := <-done; err != nil {
				return fmt.Errorf("lost the Lease %s/%s: %w", cfg.Namespace, cfg.Name, err)
			}
			return fmt.Errorf("%w %s/%s", ErrLeaseLost, cfg.Namespace, cfg.Name)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return "held by another replica"
	}
	return err.Error()
}

func (c *Client) coordinationClient() (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(c.base)
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &coordinationv1.SchemeGroupVersion
	client, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("build coordination.k8s.io/v1 client: %w", err)
	}
	return client, nil
}

// leaseAPI is the API server's Leases, as leader election and the
// members' Leases use them: the REST client of coordination.k8s.io/v1
// (restLeases), or client-go's fake clientset in the unit tests.
type leaseAPI interface {
	get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	create(ctx context.Context, lease *coordinationv1.Lease) error
	update(ctx context.Context, lease *coordinationv1.Lease) error
	list(ctx context.Context, namespace, selector string) ([]coordinationv1.Lease, error)
}

// restLeases are the Leases through the REST client.
type restLeases struct{ client *rest.RESTClient }

func (r restLeases) get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{}
	return lease, r.client.Get().Namespace(namespace).Resource("leases").Name(name).Do(ctx).Into(lease)
}

func (r restLeases) create(ctx context.Context, lease *coordinationv1.Lease) error {
	return r.client.Post().Namespace(lease.Namespace).Resource("leases").Body(lease).Do(ctx).Error()
}

func (r restLeases) update(ctx context.Context, lease *coordinationv1.Lease) error {
	return r.client.Put().Namespace(lease.Namespace).Resource("leases").Name(lease.Name).Body(lease).Do(ctx).Error()
}

func (r restLeases) list(ctx context.Context, namespace, selector string) ([]coordinationv1.Lease, error) {
	var list coordinationv1.LeaseList
	err := r.client.Get().Namespace(namespace).Resource("leases").
		VersionedParams(&metav1.ListOptions{LabelSelector: selector}, metav1.ParameterCodec).Do(ctx).Into(&list)
	return list.Items, err
}

type leaseHolder struct {
	client         leaseAPI
	cfg            LeaseConfig
	requestTimeout time.Duration
	clock          clock.Clock
	// observed is the last holder and renew time seen, and when it was seen.
	observedHolder string
	observedRenew  time.Time
	observedAt     time.Time
}

// tryAcquireOrRenew takes or renews the Lease, its requests ending by
// deadline at the latest.
func (l *leaseHolder) tryAcquireOrRenew(ctx context.Context, deadline time.Time) (bool, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	now := metav1.NewMicroTime(l.clock.Now())
	lease, err := l.client.get(ctx, l.cfg.Namespace, l.cfg.Name)
	if apierrors.IsNotFound(err) {
		if l.observedAt.IsZero() || l.observedHolder != "" || !l.observedRenew.IsZero() {
			l.observedHolder, l.observedRenew, l.observedAt = "", time.Time{}, l.clock.Now()
		}
		if l.waiting("", l.observedAt) {
			return false, nil
		}
		seconds := int32(l.cfg.LeaseDuration.Seconds())
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: l.cfg.Namespace, Name: l.cfg.Name, Labels: l.cfg.Labels, OwnerReferences: l.cfg.OwnerReferences,
				Annotations: l.cfg.Annotations},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: &l.cfg.Identity, LeaseDurationSeconds: &seconds,
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: new(int32),
			},
		}
		err := l.client.create(ctx, lease)
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	var renew time.Time
	if lease.Spec.RenewTime != nil {
		renew = lease.Spec.RenewTime.Time
	}
	if holder != l.observedHolder || !renew.Equal(l.observedRenew) {
		l.observedHolder, l.observedRenew, l.observedAt = holder, renew, l.clock.Now()
	}
	if holder != "" && holder != l.cfg.Identity && l.clock.Since(l.observedAt) < l.cfg.LeaseDuration {
		return false, nil
	}
	if holder != l.cfg.Identity {
		takeable := l.observedAt
		if holder != "" {
			takeable = takeable.Add(l.cfg.LeaseDuration)
		}
		if l.waiting(holder, takeable) {
			return false, nil
		}
	}
	seconds := int32(l.cfg.LeaseDuration.Seconds())
	if holder != l.cfg.Identity {
		lease.Spec.AcquireTime = &now
		transitions := int32(0)
		if lease.Spec.LeaseTransitions != nil {
			transitions = *lease.Spec.LeaseTransitions
		}
		transitions++
		lease.Spec.LeaseTransitions = &transitions
	}
	lease.Spec.HolderIdentity = &l.cfg.Identity
	lease.Spec.LeaseDurationSeconds = &seconds
	lease.Spec.RenewTime = &now
	if len(l.cfg.Annotations) > 0 {
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		maps.Copy(lease.Annotations, l.cfg.Annotations)
	}
	if err := l.client.update(ctx, lease); err != nil {
		return false, err
	}
	l.observedHolder, l.observedRenew, l.observedAt = l.cfg.Identity, now.Time, l.clock.Now()
	return true, nil
}

// waiting says this replica's patience keeps it from taking a Lease that
// could be taken since takeable, last held by holder.
func (l *leaseHolder) waiting(holder string, takeable time.Time) bool {
	return l.cfg.Patience != nil && l.clock.Now().Before(takeable.Add(l.cfg.Patience(holder)))
}

// release gives the Lease up: no holder, so that the next replica takes it
// without waiting for it to expire.
func (l *leaseHolder) release() {
	ctx, cancel := context.WithTimeout(context.Background(), l.requestTimeout)
	defer cancel()
	lease, err := l.client.get(ctx, l.cfg.Namespace, l.cfg.Name)
	if err != nil {
		return
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != l.cfg.Identity {
		return
	}
	empty := ""
	lease.Spec.HolderIdentity = &empty
	_ = l.client.update(ctx, lease)
}
