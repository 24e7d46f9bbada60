package testcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// NetKubelet is the fake kubelet for pods with a real network (podnet.go):
// RunPod starts the pod's network and server before writing its status, and
// an informer on the pods keeps each network in step with its pod, as a
// kubelet keeps a container:
//
//   - the pod's Ready condition (SetPodReady flips it) decides what its
//     /healthz answers;
//   - a pod deleted with a grace period is terminating: /healthz answers 503
//     "terminating" while the server goes on serving requests (an application
//     that drains), and when the grace period ends the network is removed and
//     the deletion confirmed (the pod object goes), as a kubelet does once the
//     container has stopped;
//   - a pod gone from the API (deleted with no grace, or its namespace) loses
//     its network at once.
type NetKubelet struct {
	client kubernetes.Interface
	net    *Network
	stop   chan struct{}

	mu   sync.Mutex
	pods map[types.UID]*kubeletPod
}

type kubeletPod struct {
	namespace, name string
	net             *NetPod
	terminating     *time.Timer
}

// StartNetKubelet starts the informer of the fake kubelet of n. Stop it
// with Stop; the networks themselves go with n.Close or with their pods.
func StartNetKubelet(ctx context.Context, client kubernetes.Interface, n *Network) (*NetKubelet, error) {
	k := &NetKubelet{client: client, net: n, stop: make(chan struct{}), pods: map[types.UID]*kubeletPod{}}
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { k.updated(obj) },
		DeleteFunc: k.deleted,
	}); err != nil {
		return nil, err
	}
	factory.Start(k.stop)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		close(k.stop)
		return nil, errors.New("fake kubelet: the pod informer did not sync within a minute")
	}
	return k, nil
}

// Network is the network of the kubelet's pods.
func (k *NetKubelet) Network() *Network { return k.net }

// RunPod starts the pod's network and its server on every container port of
// p (at least one), then creates the pod as RunPod does, with a readinessProbe
// of /healthz on its first port unless p has one. Pod names are
// unique per Network.
func (k *NetKubelet) RunPod(ctx context.Context, namespace string, p Pod) error {
	var ports []int32
	for _, port := range p.Ports {
		ports = append(ports, port)
	}
	slices.Sort(ports)
	if len(ports) == 0 {
		return fmt.Errorf("pod %s: a pod with a network needs a container port to serve", p.Name)
	}
	health := HealthNotReady
	if p.Ready {
		health = HealthReady
	}
	if p.ReadinessProbe == nil {
		// What the pod's server does: /healthz answers as its readiness.
		p.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromInt32(ports[0])}}}
	}
	np, err := k.net.AddPod(ctx, p.Name, p.IPs, ports, health)
	if err != nil {
		return err
	}
	created, err := runPod(ctx, k.client, namespace, p)
	if err != nil {
		k.net.RemovePod(p.Name)
		return err
	}
	k.mu.Lock()
	k.pods[created.UID] = &kubeletPod{namespace: namespace, name: p.Name, net: np}
	k.mu.Unlock()
	return nil
}

func (k *NetKubelet) updated(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	kp := k.pods[pod.UID]
	if kp == nil || kp.terminating != nil {
		return
	}
	if pod.DeletionTimestamp == nil {
		health := HealthNotReady
		if podReady(pod) {
			health = HealthReady
		}
		_ = kp.net.SetHealth(health)
		return
	}
	_ = kp.net.SetHealth(HealthTerminating)
	uid := pod.UID
	kp.terminating = time.AfterFunc(time.Until(pod.DeletionTimestamp.Time), func() { k.finish(uid) })
}

// finish ends a terminating pod at the end of its grace period: its network
// goes, then the kubelet confirms the deletion.
func (k *NetKubelet) finish(uid types.UID) {
	k.mu.Lock()
	kp := k.pods[uid]
	delete(k.pods, uid)
	k.mu.Unlock()
	if kp == nil {
		return
	}
	k.net.RemovePod(kp.name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zero := int64(0)
	// Nothing waits for this call: if it fails, the pod stays terminating,
	// and a test that expected it gone says so.
	_ = k.client.CoreV1().Pods(kp.namespace).Delete(ctx, kp.name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid},
	})
}

func (k *NetKubelet) deleted(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	kp := k.pods[pod.UID]
	delete(k.pods, pod.UID)
	k.mu.Unlock()
	if kp == nil {
		return
	}
	if kp.terminating != nil {
		kp.terminating.Stop()
	}
	k.net.RemovePod(kp.name)
}

// Stop stops the informer and the pending ends of terminating pods; the
// networks stay until their Network is closed.
func (k *NetKubelet) Stop() {
	select {
	case <-k.stop:
		return
	default:
	}
	close(k.stop)
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, kp := range k.pods {
		if kp.terminating != nil {
			kp.terminating.Stop()
		}
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// SetPodReady writes the pod's Ready condition, as a kubelet does when a
// readiness probe changes its mind. The EndpointSlice controller follows, and
// so does the /healthz of a pod with a network.
func SetPodReady(ctx context.Context, client kubernetes.Interface, namespace, name string, ready bool) error {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		found := false
		for i, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				found = true
				if c.Status != status {
					pod.Status.Conditions[i].Status, pod.Status.Conditions[i].LastTransitionTime = status, metav1.Now()
				}
			}
		}
		if !found {
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()})
		}
		_, err = client.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("set pod %s/%s ready=%t: %w", namespace, name, ready, err)
	}
	return nil
}
