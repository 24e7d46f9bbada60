package testcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// NetKubelet is the fake kubelet for pods with a real network (podnet.go):
// RunPod starts the pod's network and server before writing its status, and
// so does the kubelet for the pods that controllers make (a Deployment's
// ReplicaSets) once RunControllerPods names them; an informer on the pods
// keeps each network in step with its pod, as a kubelet keeps a container:
//
//   - the pod's ContainersReady condition (what its readiness probe found;
//     SetPodReady flips it) decides what its /healthz answers, and its Ready
//     condition is kept as the kubelet computes it: ContainersReady and
//     every readiness gate's condition True (KubeletReady), written again
//     whenever a gate's condition changes;
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
	store  cache.Store

	mu   sync.Mutex
	pods map[types.UID]*kubeletPod
	// controlled are the pods of controllers that the kubelet runs;
	// starting, those it is starting; nextIP, the Network.PodIPs number of
	// the next one; errs, why some could not start.
	controlled []ControllerPods
	starting   map[types.UID]bool
	nextIP     int
	errs       []error
}

type kubeletPod struct {
	namespace, name string
	net             *NetPod
	terminating     *time.Timer
	// running: its status is written, so its conditions are the kubelet's
	// to follow.
	running bool
}

// ControllerPods are pods that controllers create (a Deployment's
// ReplicaSets) and that the kubelet runs: those of Namespace that Selector
// matches and that have a controller (an owner reference with controller
// true; RunPod's pods have none).
type ControllerPods struct {
	Namespace string
	// Selector chooses among the pods of Namespace; nil for every one.
	Selector labels.Selector
	// Node is the node a pod bound to no node is bound to (the
	// scheduler's part); the kubelet runs the pods bound to it.
	Node string
}

// StartNetKubelet starts the informer of the fake kubelet of n. Stop it
// with Stop; the networks themselves go with n.Close or with their pods.
func StartNetKubelet(ctx context.Context, client kubernetes.Interface, n *Network) (*NetKubelet, error) {
	k := &NetKubelet{client: client, net: n, stop: make(chan struct{}), pods: map[types.UID]*kubeletPod{},
		starting: map[types.UID]bool{}, nextIP: 1}
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.updated,
		UpdateFunc: func(_, obj any) { k.updated(obj) },
		DeleteFunc: k.deleted,
	}); err != nil {
		return nil, err
	}
	k.store = pods.GetStore()
	factory.Start(k.stop)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		close(k.stop)
		return nil, errors.New("fake kubelet: the pod informer did not sync within a minute")
	}
	return k, nil
}

// RunControllerPods makes the kubelet run the pods of c, those there
// already and those to come: each one bound to no node is bound to c.Node;
// then, as a kubelet starting its containers, it gets a network with the
// next addresses of the kubelet's Network (PodIPs 1, 2, ... in the order
// started, never reused while the kubelet runs) and a server on each of
// its containers' ports, and the status setRunning gives (its containers
// ready at once). A pod that cannot start is left as it is, and Err says
// why.
func (k *NetKubelet) RunControllerPods(c ControllerPods) {
	if c.Selector == nil {
		c.Selector = labels.Everything()
	}
	k.mu.Lock()
	k.controlled = append(k.controlled, c)
	k.mu.Unlock()
	for _, obj := range k.store.List() {
		k.updated(obj)
	}
}

// Err says why pods of RunControllerPods could not start, or nil.
func (k *NetKubelet) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return errors.Join(k.errs...)
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
	if len(ports) == 0 {
		return fmt.Errorf("pod %s: a pod with a network needs a container port to serve", p.Name)
	}
	slices.Sort(ports)
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
	k.pods[created.UID] = &kubeletPod{namespace: namespace, name: p.Name, net: np, running: true}
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
	if kp == nil {
		k.startIfControlled(pod)
		return
	}
	if !kp.running || kp.terminating != nil {
		return
	}
	if pod.DeletionTimestamp == nil {
		health := HealthNotReady
		if conditionTrue(pod, corev1.ContainersReady) {
			health = HealthReady
		}
		_ = kp.net.SetHealth(health)
		if !conditionIs(pod, corev1.PodReady, KubeletReady(pod)) {
			go k.computeReady(pod.Namespace, pod.Name, pod.UID)
		}
		return
	}
	_ = kp.net.SetHealth(HealthTerminating)
	uid := pod.UID
	kp.terminating = time.AfterFunc(time.Until(pod.DeletionTimestamp.Time), func() { k.finish(uid) })
}

// startIfControlled starts pod in a goroutine of its own when it is one of
// the controlled pods, bound to no node or to theirs, and not running yet.
// k.mu is held.
func (k *NetKubelet) startIfControlled(pod *corev1.Pod) {
	if k.starting[pod.UID] || pod.DeletionTimestamp != nil || pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending ||
		metav1.GetControllerOf(pod) == nil {
		return
	}
	for _, c := range k.controlled {
		if c.Namespace != pod.Namespace || !c.Selector.Matches(labels.Set(pod.Labels)) ||
			pod.Spec.NodeName != "" && pod.Spec.NodeName != c.Node {
			continue
		}
		k.starting[pod.UID] = true
		number := k.nextIP
		k.nextIP++
		go k.start(pod.DeepCopy(), c.Node, number)
		return
	}
}

// start runs a controlled pod as a kubelet would; it gives up after a
// minute.
func (k *NetKubelet) start(pod *corev1.Pod, node string, number int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := k.startPod(ctx, pod, node, number)
	k.mu.Lock()
	delete(k.starting, pod.UID)
	if err != nil {
		k.errs = append(k.errs, err)
	}
	k.mu.Unlock()
}

func (k *NetKubelet) startPod(ctx context.Context, pod *corev1.Pod, node string, number int) error {
	if pod.Spec.NodeName == "" {
		if err := bindPod(ctx, k.client, pod, node); err != nil {
			if apierrors.IsNotFound(err) {
				return nil // deleted before it was bound: nothing to run
			}
			return err
		}
	}
	var ports []int32
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if !slices.Contains(ports, p.ContainerPort) {
				ports = append(ports, p.ContainerPort)
			}
		}
	}
	if len(ports) == 0 {
		return fmt.Errorf("pod %s/%s: a pod with a network needs a container port to serve", pod.Namespace, pod.Name)
	}
	slices.Sort(ports)
	if number > 253 {
		return fmt.Errorf("pod %s/%s: the kubelet has given its 253 addresses", pod.Namespace, pod.Name)
	}
	ips := k.net.PodIPs(number)
	np, err := k.net.AddPod(ctx, pod.Name, ips, ports, HealthReady)
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	// Known before its status is written: a deletion from now on removes
	// the network.
	k.mu.Lock()
	k.pods[pod.UID] = &kubeletPod{namespace: pod.Namespace, name: pod.Name, net: np}
	k.mu.Unlock()
	pods := k.client.CoreV1().Pods(pod.Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if current.UID != pod.UID {
			return apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
		}
		setRunning(current, ips, true)
		_, err = pods.UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		k.forget(pod.UID)
		if apierrors.IsNotFound(err) {
			return nil // deleted while it started
		}
		return fmt.Errorf("set status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	k.mu.Lock()
	if kp := k.pods[pod.UID]; kp != nil {
		kp.running = true
	}
	k.mu.Unlock()
	// What happened to the pod while it started (a deletion, a gate set)
	// is in the informer's store, which is written before each event is
	// handed out: from here on the events are followed.
	if obj, ok, _ := k.store.Get(pod); ok {
		k.updated(obj)
	}
	return nil
}

// computeReady writes the pod's Ready as the kubelet computes it, when it
// differs; a failure waits for the pod's next change.
func (k *NetKubelet) computeReady(namespace, name string, uid types.UID) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods := k.client.CoreV1().Pods(namespace)
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil || pod.UID != uid || pod.DeletionTimestamp != nil {
			return err
		}
		if !setCondition(pod, corev1.PodReady, KubeletReady(pod)) {
			return nil
		}
		_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
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
	k.forget(pod.UID)
}

// forget removes the pod's network at once.
func (k *NetKubelet) forget(uid types.UID) {
	k.mu.Lock()
	kp := k.pods[uid]
	delete(k.pods, uid)
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

// conditionIs says whether the pod's condition t has status (an absent
// condition is False).
func conditionIs(pod *corev1.Pod, t corev1.PodConditionType, status corev1.ConditionStatus) bool {
	return conditionTrue(pod, t) == (status == corev1.ConditionTrue)
}

// SetPodReady writes what the pod's readiness probe found, as a kubelet
// does when the probe changes its mind: ContainersReady, and Ready as the
// kubelet computes it (the same, for a pod without readiness gates). The
// EndpointSlice controller follows, and so does the /healthz of a pod with
// a network.
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
		setCondition(pod, corev1.ContainersReady, status)
		setCondition(pod, corev1.PodReady, KubeletReady(pod))
		_, err = client.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("set pod %s/%s ready=%t: %w", namespace, name, ready, err)
	}
	return nil
}
