package soak

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// pool is one pool of the configuration: a Service and where state keeps
// its members.
type pool struct {
	namespace, service string
	fleet              bool
}

func (p pool) String() string { return p.namespace + "/" + p.service }

// resource is the name of a single's data source and terraform_data.
func (p pool) resource() string {
	return strings.ReplaceAll(p.namespace+"_"+p.service, "-", "_")
}

// podState is a pod as the driver made it.
type podState struct {
	ip    string
	ready bool
}

// model is what the driver made: each Service's pods, so that it knows the
// pool each change must bring to state.
type model struct {
	client kubernetes.Interface
	mu     sync.Mutex
	all    []pool
	pods   map[pool]map[string]podState
	// off are pools the driver does not change now (a bad input holds them).
	off    map[pool]bool
	nextIP int
	nextID int
}

func newModel(client kubernetes.Interface) *model {
	return &model{client: client, pods: map[pool]map[string]podState{}, off: map[pool]bool{}}
}

func (m *model) pools() []pool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.all)
}

// want is the pool p must have in state: its ready pods' address:port.
func (m *model) want(p pool) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wantLocked(p)
}

func (m *model) wantLocked(p pool) []string {
	var out []string
	for _, st := range m.pods[p] {
		if st.ready {
			out = append(out, fmt.Sprintf("%s:%d", st.ip, targetPort))
		}
	}
	slices.Sort(out)
	return out
}

func (m *model) ip() string {
	m.nextIP++
	n := m.nextIP
	return fmt.Sprintf("10.%d.%d.%d", 100+n/62500, n/250%250, n%250+1)
}

// create makes the namespaces, the Services and their pods.
func (m *model) create(ctx context.Context, o Options) error {
	var all []pool
	for i := range o.Singles {
		all = append(all, pool{namespace: nsSingles, service: fmt.Sprintf("svc-%02d", i)})
	}
	for i := range o.Fleet {
		all = append(all, pool{namespace: nsFleet, service: fmt.Sprintf("fleet-%02d", i), fleet: true})
	}
	// The Service of the namespace deleted as a bad input (a fault of the
	// single soak's).
	if o.Workspaces == 0 {
		all = append(all, pool{namespace: nsDoomed, service: "doomed"})
	}
	m.all = all
	for _, ns := range []string{nsSingles, nsFleet, nsDoomed, "soak-other"} {
		if err := m.namespace(ctx, ns); err != nil {
			return err
		}
	}
	for _, p := range all {
		if err := m.createService(ctx, p, o.Pods); err != nil {
			return err
		}
	}
	for _, p := range all {
		if err := testcluster.WaitForSlices(ctx, m.client, p.namespace, p.service, 2*time.Minute, testcluster.EndpointCount("IPv4", o.Pods, o.Pods)); err != nil {
			return err
		}
	}
	return nil
}

func (m *model) namespace(ctx context.Context, name string) error {
	_, err := m.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	return testcluster.WaitForServiceAccount(ctx, m.client, name, time.Minute)
}

func service(p pool) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: p.service},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": p.service}, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(targetPort), Protocol: corev1.ProtocolTCP},
		}},
	}
}

// createService creates n ready pods of p, or with n < 0 the pods of the
// model again (a namespace made again), then its Service.
func (m *model) createService(ctx context.Context, p pool, n int) error {
	m.mu.Lock()
	if n >= 0 {
		m.pods[p] = map[string]podState{}
		for range n {
			m.nextID++
			m.pods[p][fmt.Sprintf("%s-%d", p.service, m.nextID)] = podState{ip: m.ip(), ready: true}
		}
	}
	pods := maps.Clone(m.pods[p])
	m.mu.Unlock()
	for name, st := range pods {
		if err := m.runPod(ctx, p, name, st); err != nil {
			return err
		}
	}
	_, err := m.client.CoreV1().Services(p.namespace).Create(ctx, service(p), metav1.CreateOptions{})
	return err
}

func (m *model) runPod(ctx context.Context, p pool, name string, st podState) error {
	return testcluster.RunPod(ctx, m.client, p.namespace, testcluster.Pod{Name: name, Labels: map[string]string{"app": p.service},
		IPs: []string{st.ip}, Ready: st.ready, Node: nodeName})
}

// change is one pool change the driver made: when, which pool, what the
// pool must be in state after it (Change, as the judge pairs it with
// state), and what the driver did.
type change struct {
	Change
	pool pool
	// workspace is the name of the pool's workspace ("" in the single soak).
	workspace string
	what      string
	burst     bool
}

// step makes one random change to a random pool that the driver may
// change (only, when given and the driver may change it): a pod replaced, the Service scaled by one, a pod made not ready
// or ready again. Every call goes to the API server directly.
func (m *model) step(ctx context.Context, only *pool) (*change, error) {
	m.mu.Lock()
	var candidates []pool
	for _, p := range m.all {
		if !m.off[p] && (only == nil || *only == p) {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		m.mu.Unlock()
		return nil, nil
	}
	p := candidates[rand.IntN(len(candidates))]
	pods := m.pods[p]
	var names, ready, notReady []string
	for name, st := range pods {
		names = append(names, name)
		if st.ready {
			ready = append(ready, name)
		} else {
			notReady = append(notReady, name)
		}
	}
	slices.Sort(names)
	slices.Sort(ready)
	slices.Sort(notReady)
	m.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	at := time.Now()
	var what string
	var err error
	switch op := rand.IntN(4); {
	case op == 0 && len(ready) > 0: // a pod replaced: one member for another
		old := ready[rand.IntN(len(ready))]
		if err = m.deletePod(ctx, p, old); err == nil {
			what = "replaced " + old
			err = m.addPod(ctx, p, true)
		}
	case op == 1 && len(ready) < 8 || len(ready) < 3: // scaled up
		what = "scaled up"
		err = m.addPod(ctx, p, true)
	case op == 2 && len(ready) > 3: // scaled down
		victim := ready[rand.IntN(len(ready))]
		what = "scaled down " + victim
		err = m.deletePod(ctx, p, victim)
	default: // readiness flipped
		if len(notReady) > 0 && (rand.IntN(2) == 0 || len(ready) <= 3) {
			name := notReady[rand.IntN(len(notReady))]
			what = "ready again " + name
			err = m.setReady(ctx, p, name, true)
		} else {
			name := ready[rand.IntN(len(ready))]
			what = "not ready " + name
			err = m.setReady(ctx, p, name, false)
		}
	}
	if err != nil {
		// What landed is unknown: the model is read again from the pods.
		if rerr := m.reread(ctx, p); rerr != nil {
			return nil, fmt.Errorf("%s %s: %w; reading it again: %w", p, what, err, rerr)
		}
	}
	return &change{Change: Change{At: at, Key: stateKey(p), Want: m.want(p)}, pool: p, what: what}, nil
}

func (m *model) addPod(ctx context.Context, p pool, ready bool) error {
	m.mu.Lock()
	m.nextID++
	name := fmt.Sprintf("%s-%d", p.service, m.nextID)
	st := podState{ip: m.ip(), ready: ready}
	m.mu.Unlock()
	if err := m.runPod(ctx, p, name, st); err != nil {
		return err
	}
	m.mu.Lock()
	m.pods[p][name] = st
	m.mu.Unlock()
	return nil
}

func (m *model) deletePod(ctx context.Context, p pool, name string) error {
	zero := int64(0)
	err := m.client.CoreV1().Pods(p.namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	m.mu.Lock()
	delete(m.pods[p], name)
	m.mu.Unlock()
	return nil
}

func (m *model) setReady(ctx context.Context, p pool, name string, ready bool) error {
	pod, err := m.client.CoreV1().Pods(p.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	setCondition(pod, corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()})
	setCondition(pod, corev1.PodCondition{Type: corev1.ContainersReady, Status: status, LastTransitionTime: metav1.Now()})
	if _, err := m.client.CoreV1().Pods(p.namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return err
	}
	m.mu.Lock()
	st := m.pods[p][name]
	st.ready = ready
	m.pods[p][name] = st
	m.mu.Unlock()
	return nil
}

func setCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// reread makes the model of p what its pods are.
func (m *model) reread(ctx context.Context, p pool) error {
	list, err := m.client.CoreV1().Pods(p.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + p.service})
	if err != nil {
		return err
	}
	pods := map[string]podState{}
	for _, pod := range list.Items {
		if pod.DeletionTimestamp != nil {
			continue
		}
		ready := false
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.Status == corev1.ConditionTrue
			}
		}
		pods[pod.Name] = podState{ip: pod.Status.PodIP, ready: ready}
	}
	m.mu.Lock()
	m.pods[p] = pods
	m.mu.Unlock()
	return nil
}

// noise makes one change that must start nothing: a label on an
// EndpointSlice of a pool, a Service that no pool reads created or
// deleted, a status write to a pod that leaves its readiness as it is.
func (m *model) noise(ctx context.Context, n int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	all := slices.DeleteFunc(m.pools(), func(p pool) bool { return p.namespace == nsDoomed })
	p := all[rand.IntN(len(all))]
	m.mu.Lock()
	off := m.off[p]
	m.mu.Unlock()
	if off {
		return "", nil
	}
	switch n % 3 {
	case 0:
		slices, err := m.client.DiscoveryV1().EndpointSlices(p.namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + p.service})
		if err != nil || len(slices.Items) == 0 {
			return "", err
		}
		sl := slices.Items[0]
		if sl.Labels == nil {
			sl.Labels = map[string]string{}
		}
		sl.Labels["soak.example/noise"] = fmt.Sprint(n)
		_, err = m.client.DiscoveryV1().EndpointSlices(p.namespace).Update(ctx, &sl, metav1.UpdateOptions{})
		return "slice label " + sl.Name, err
	case 1:
		ns := []string{nsSingles, "soak-other"}[n/3%2]
		name := fmt.Sprintf("unrelated-%d", n/6%4)
		svc := service(pool{namespace: ns, service: name})
		_, err := m.client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return "unrelated Service deleted " + ns + "/" + name, m.client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
		}
		return "unrelated Service created " + ns + "/" + name, err
	default:
		list, err := m.client.CoreV1().Pods(p.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + p.service})
		if err != nil || len(list.Items) == 0 {
			return "", err
		}
		pod := list.Items[rand.IntN(len(list.Items))]
		setCondition(&pod, corev1.PodCondition{Type: "soak.example/Probed", Status: corev1.ConditionTrue, LastProbeTime: metav1.Now(),
			LastTransitionTime: metav1.Now(), Message: fmt.Sprint(n)})
		_, err = m.client.CoreV1().Pods(p.namespace).UpdateStatus(ctx, &pod, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			err = nil
		}
		return "status write " + pod.Name, err
	}
}

// setOff says whether the driver may change p.
func (m *model) setOff(p pool, off bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.off[p] = off
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
