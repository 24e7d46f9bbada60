package provider

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The acceptance tests run the real terraform (or tofu) CLI against a real
// cluster: the local control plane of scripts/cluster-up.sh (make testacc
// starts it), or any cluster named by K8S_TF_KUBECONFIG, whose current
// context must be allowed to create namespaces, nodes, pods and RBAC objects.
// Pods run nowhere: the tests create a Node object without a kubelet and set
// the pods' status themselves, and the cluster's own EndpointSlice controller
// writes the slices, as it does in production.

const envKubeconfig = "K8S_TF_KUBECONFIG"

// accNode is the Node the test pods are scheduled on; its zone label is what
// the EndpointSlice controller copies into each endpoint.
const (
	accNode = "tf-acc-node"
	accZone = "tf-acc-zone-a"
	// accNodeB is a second node, in another zone, for the zone filter.
	accNodeB = "tf-acc-node-b"
	accZoneB = "tf-acc-zone-b"
)

type testCluster struct {
	kubeconfig string
	rest       *rest.Config
	client     kubernetes.Interface
}

var (
	sharedCluster    *testCluster
	sharedClusterErr error
	sharedClusterSet sync.Once
)

// accCluster returns the cluster of the acceptance tests, or skips the test
// when TF_ACC is not set, as resource.Test does.
func accCluster(t *testing.T) *testCluster {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 and " + envKubeconfig + " (make testacc does both)")
	}
	sharedClusterSet.Do(func() { sharedCluster, sharedClusterErr = connectTestCluster() })
	if sharedClusterErr != nil {
		t.Fatal(sharedClusterErr)
	}
	return sharedCluster
}

func connectTestCluster() (*testCluster, error) {
	path := os.Getenv(envKubeconfig)
	if path == "" {
		return nil, fmt.Errorf("%s is not set: run make testacc, or point it at a cluster's kubeconfig", envKubeconfig)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", envKubeconfig, path, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c := &testCluster{kubeconfig: path, rest: cfg, client: client}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, zone := range map[string]string{accNode: accZone, accNodeB: accZoneB} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create node %s: %w", name, err)
		}
	}
	return c, nil
}

func (c *testCluster) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// providerConfig is a provider block that reads the cluster as its admin.
func (c *testCluster) providerConfig() string {
	return kubeconfigProvider(c.kubeconfig)
}

// namespace creates a namespace of the test's own and deletes it afterwards,
// force-deleting its pods first: without a kubelet, nothing would confirm
// their shutdown and the namespace would never go.
func (c *testCluster) namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("acc-%06x", rand.IntN(1<<24))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	ctx := c.ctx(t)
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	// Pods are refused until the serviceaccount controller has made the
	// namespace's default ServiceAccount, which takes longer while the
	// controller manager reconnects after an API server restart.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := c.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s has no default ServiceAccount: %v", name, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		zero := int64(0)
		_ = c.client.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = c.client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

func (c *testCluster) createService(t *testing.T, svc *corev1.Service) {
	t.Helper()
	if _, err := c.client.CoreV1().Services(svc.Namespace).Create(c.ctx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service %s/%s: %v", svc.Namespace, svc.Name, err)
	}
}

// webWithOneReadyPod makes the Service "web" (port http: 80 to 8080) with
// one ready pod, web-1 at ip, and waits for its EndpointSlice.
func (c *testCluster) webWithOneReadyPod(t *testing.T, ns, ip string) {
	t.Helper()
	c.createService(t, webServiceSpec(ns, httpPort))
	c.runPod(t, ns, podSpec{name: "web-1", labels: webLabels, ips: []string{ip}, ready: true})
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 1, 1))
}

// selectorlessWebService is the Service "web" without a selector, its port
// http 80 targeting targetPort: its endpoints come from hand-written slices
// or a hand-managed Endpoints object.
func selectorlessWebService(ns string, targetPort int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(targetPort)}}},
	}
}

// podSpec describes a pod as the tests need it: where it listens, which IPs
// it has and whether it is ready.
type podSpec struct {
	name   string
	labels map[string]string
	ips    []string
	ready  bool
	// ports are the container ports, by name, that a named targetPort
	// resolves to.
	ports map[string]int32
	// node is where the pod runs; accNode when empty.
	node string
}

// runPod creates a pod on the test node and gives it the status a kubelet
// would: Running, its IPs, and a Ready condition.
func (c *testCluster) runPod(t *testing.T, namespace string, p podSpec) {
	t.Helper()
	container := corev1.Container{Name: "app", Image: "registry.invalid/app:1"}
	for name, port := range p.ports {
		container.Ports = append(container.Ports, corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: corev1.ProtocolTCP})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: p.name, Labels: p.labels},
		Spec:       corev1.PodSpec{NodeName: cmp.Or(p.node, accNode), Containers: []corev1.Container{container}},
	}
	ctx := c.ctx(t)
	created, err := c.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", p.name, err)
	}
	ready := corev1.ConditionFalse
	if p.ready {
		ready = corev1.ConditionTrue
	}
	created.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		PodIP: p.ips[0],
		// The controller takes the endpoints' last-change-trigger-time from here.
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()}},
	}
	for _, ip := range p.ips {
		created.Status.PodIPs = append(created.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if _, err := c.client.CoreV1().Pods(namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set status of pod %s: %v", p.name, err)
	}
}

// deletePod deletes a pod with a grace period, which leaves it terminating
// (no kubelet confirms it), or at once with grace 0.
func (c *testCluster) deletePod(t *testing.T, namespace, name string, grace int64) {
	t.Helper()
	if err := c.client.CoreV1().Pods(namespace).Delete(c.ctx(t), name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
}

// waitForSlices waits until the EndpointSlices of Service "web" satisfy done,
// which says what it is still waiting for, or "" when satisfied.
func (c *testCluster) waitForSlices(t *testing.T, namespace string, done func([]discoveryv1.EndpointSlice) string) {
	const service = "web"
	t.Helper()
	ctx := c.ctx(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := c.client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + service,
		})
		waiting := ""
		if err != nil {
			waiting = err.Error()
		} else {
			waiting = done(list.Items)
		}
		if waiting == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("EndpointSlices of %s/%s: still waiting for %s", namespace, service, waiting)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// endpointCount waits for exactly n endpoints in the slices of one family,
// with ready as given.
func endpointCount(family discoveryv1.AddressType, ready, n int) func([]discoveryv1.EndpointSlice) string {
	return func(slices []discoveryv1.EndpointSlice) string {
		gotReady, gotAll := 0, 0
		for _, s := range slices {
			if s.AddressType != family {
				continue
			}
			for _, e := range s.Endpoints {
				gotAll++
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					gotReady++
				}
			}
		}
		if gotReady == ready && gotAll == n {
			return ""
		}
		return fmt.Sprintf("%d %s endpoints, %d ready (have %d, %d ready)", n, family, ready, gotAll, gotReady)
	}
}

// identity makes a ServiceAccount with exactly the given rules in namespace,
// and returns the path of a kubeconfig that authenticates as it.
func (c *testCluster) identity(t *testing.T, namespace, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	return c.writeKubeconfig(t, name, &clientcmdapi.AuthInfo{Token: c.identityToken(t, namespace, name, rules)}, c.rest.Host)
}

// identityToken makes a ServiceAccount with exactly the given rules in
// namespace, and returns a short-lived token of it. It works on any cluster
// that issues tokens.
func (c *testCluster) identityToken(t *testing.T, namespace, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := c.ctx(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := c.client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service account: %v", err)
	}
	if len(rules) > 0 {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules}
		if _, err := c.client.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create role: %v", err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		}
		if _, err := c.client.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create role binding: %v", err)
		}
	}
	expiry := int64(3600)
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	token, err := c.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, request, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	return token.Status.Token
}

// documentedRole is the Role the documentation gives: get on services, list
// on endpointslices.
var documentedRole = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list"}},
}

// writeKubeconfig writes a kubeconfig for the cluster's CA and the given
// server and credentials.
func (c *testCluster) writeKubeconfig(t *testing.T, name string, auth *clientcmdapi.AuthInfo, server string) string {
	t.Helper()
	cluster := &clientcmdapi.Cluster{Server: server, CertificateAuthority: c.rest.CAFile, CertificateAuthorityData: c.rest.CAData,
		InsecureSkipTLSVerify: c.rest.Insecure, TLSServerName: c.rest.ServerName}
	if cluster.TLSServerName == "" && server != c.rest.Host {
		// Through a proxy, the certificate still names the API server.
		cluster.TLSServerName = hostOf(c.rest.Host)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = cluster
	cfg.AuthInfos[name] = auth
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// hostPort is the address to dial for an API server URL.
func hostPort(t *testing.T, server string) string {
	t.Helper()
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return u.Host
}

func hostOf(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
