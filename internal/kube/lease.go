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
	l := &leaseHolder{client: leases, cfg: cfg, requestTimeout: c.opts.RequestTimeout}
	log.Info("waiting for the Lease", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	ticker := time.NewTicker(cfg.RetryPeriod)
	defer ticker.Stop()
	for {
		ok, err := l.tryAcquireOrRenew(ctx, time.Now().Add(c.opts.RequestTimeout))
		if err != nil && apierrors.IsForbidden(err) {
			return fmt.Errorf("lease %s/%s: add the RBAC rule {apiGroups: [\"coordination.k8s.io\"], resources: [\"leases\"], verbs: [\"get\", \"create\", \"update\"]}: %w", cfg.Namespace, cfg.Name, err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
	log.Info("leading", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	leadCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	done := make(chan error, 1)
	go func() { done <- lead(leadCtx) }()
	lastRenew := time.Now()
	for {
		select {
		case err := <-done:
			l.release()
			log.Info("released the Lease", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
			return err
		case <-ticker.C:
			deadline := lastRenew.Add(cfg.RenewDeadline)
			ok, err := l.tryAcquireOrRenew(leadCtx, deadline)
			if ok {
				lastRenew = time.Now()
				continue
			}
			if time.Now().Before(deadline) {
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

type leaseHolder struct {
	client         *rest.RESTClient
	cfg            LeaseConfig
	requestTimeout time.Duration
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
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{}
	err := l.client.Get().Namespace(l.cfg.Namespace).Resource("leases").Name(l.cfg.Name).Do(ctx).Into(lease)
	if apierrors.IsNotFound(err) {
		if l.observedAt.IsZero() || l.observedHolder != "" || !l.observedRenew.IsZero() {
			l.observedHolder, l.observedRenew, l.observedAt = "", time.Time{}, time.Now()
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
		err := l.client.Post().Namespace(l.cfg.Namespace).Resource("leases").Body(lease).Do(ctx).Error()
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
		l.observedHolder, l.observedRenew, l.observedAt = holder, renew, time.Now()
	}
	if holder != "" && holder != l.cfg.Identity && time.Since(l.observedAt) < l.cfg.LeaseDuration {
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
	err = l.client.Put().Namespace(l.cfg.Namespace).Resource("leases").Name(l.cfg.Name).Body(lease).Do(ctx).Error()
	if err != nil {
		return false, err
	}
	l.observedHolder, l.observedRenew, l.observedAt = l.cfg.Identity, now.Time, time.Now()
	return true, nil
}

// waiting says this replica's patience keeps it from taking a Lease that
// could be taken since takeable, last held by holder.
func (l *leaseHolder) waiting(holder string, takeable time.Time) bool {
	return l.cfg.Patience != nil && time.Now().Before(takeable.Add(l.cfg.Patience(holder)))
}

// release gives the Lease up: no holder, so that the next replica takes it
// without waiting for it to expire.
func (l *leaseHolder) release() {
	ctx, cancel := context.WithTimeout(context.Background(), l.requestTimeout)
	defer cancel()
	lease := &coordinationv1.Lease{}
	if err := l.client.Get().Namespace(l.cfg.Namespace).Resource("leases").Name(l.cfg.Name).Do(ctx).Into(lease); err != nil {
		return
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != l.cfg.Identity {
		return
	}
	empty := ""
	lease.Spec.HolderIdentity = &empty
	_ = l.client.Put().Namespace(l.cfg.Namespace).Resource("leases").Name(l.cfg.Name).Body(lease).Do(ctx).Error()
}
