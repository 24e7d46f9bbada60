package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// GetPod reads one Pod, trimmed (TrimPod). Its error starts with
// "get pod NAMESPACE/NAME: " and wraps the API error (NotFound for a pod
// gone).
func (c *Client) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := c.withRetries(ctx, func(ctx context.Context) error {
		return c.core.Get().MaxRetries(0).Namespace(namespace).Resource("pods").Name(name).Do(ctx).Into(pod)
	})
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	trimmed := TrimPod(pod)
	return &trimmed, nil
}

// OpenGate sets the condition gate of Pod namespace/name True, with reason
// and message, by a strategic merge patch of its status (conditions merge
// by type, so the pod's other conditions are kept): what `patch` on
// `pods/status` allows, and nothing more. uid, when set, is a precondition:
// a pod of the same name made since it was read is not opened. Its error
// starts with "open readiness gate GATE of pod NAMESPACE/NAME: ".
func (c *Client) OpenGate(ctx context.Context, namespace, name string, uid types.UID, gate corev1.PodConditionType, reason, message string) error {
	patch := map[string]any{
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: gate, Status: corev1.ConditionTrue, Reason: reason, Message: message,
			LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
		}}},
	}
	if uid != "" {
		patch["metadata"] = map[string]any{"uid": uid}
	}
	body, err := json.Marshal(patch)
	if err == nil {
		err = c.withRetries(ctx, func(ctx context.Context) error {
			return c.core.Patch(types.StrategicMergePatchType).MaxRetries(0).Namespace(namespace).Resource("pods").
				Name(name).SubResource("status").Body(body).Do(ctx).Error()
		})
	}
	if err != nil {
		return fmt.Errorf("open readiness gate %s of pod %s/%s: %w", gate, namespace, name, err)
	}
	return nil
}
