package testcluster

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Rollout says how RollingUpdate replaces pods.
type Rollout struct {
	Namespace string
	// Old are the names of the pods replaced, New the pods that replace
	// them, in the same order.
	Old []string
	New []Pod
	// Pause between a new pod starting ready and the deletion of the old one
	// it replaces, and between one replacement and the next (what a
	// Deployment's minReadySeconds gives).
	Pause time.Duration
	// Grace is the grace period of each deletion, in seconds: the old pod
	// drains that long (NetKubelet), then goes.
	Grace int64
}

// RollingUpdate replaces pods one at a time, as a Deployment with maxSurge 1
// and maxUnavailable 0 does: the new pod starts, ready; after Pause the old
// one is deleted with Grace; after another Pause the next replacement
// begins. It returns once every old pod is gone from the API (bounded by
// ctx and by the grace period plus a minute).
func (k *NetKubelet) RollingUpdate(ctx context.Context, r Rollout) error {
	if len(r.Old) != len(r.New) {
		return fmt.Errorf("rolling update: %d old pods for %d new ones", len(r.Old), len(r.New))
	}
	wait := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	for i, pod := range r.New {
		pod.Ready = true
		if err := k.RunPod(ctx, r.Namespace, pod); err != nil {
			return fmt.Errorf("rolling update, new pod %s: %w", pod.Name, err)
		}
		if err := wait(r.Pause); err != nil {
			return err
		}
		grace := r.Grace
		if err := k.client.CoreV1().Pods(r.Namespace).Delete(ctx, r.Old[i], metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			return fmt.Errorf("rolling update, delete %s: %w", r.Old[i], err)
		}
		if i < len(r.New)-1 {
			if err := wait(r.Pause); err != nil {
				return err
			}
		}
	}
	deadline := time.Now().Add(time.Duration(r.Grace)*time.Second + time.Minute)
	for _, name := range r.Old {
		for {
			_, err := k.client.CoreV1().Pods(r.Namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				if err != nil {
					return fmt.Errorf("rolling update: pod %s: %w", name, err)
				}
				return fmt.Errorf("rolling update: pod %s still there a minute after its grace period", name)
			}
			if err := wait(100 * time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}
