package provider

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// The acceptance tests run the real terraform (or tofu) CLI against a real
// cluster: the local control plane of test/testcluster, which TestMain
// starts when TF_ACC is set, or any cluster named by K8S_TF_KUBECONFIG, whose
// current context must be allowed to create namespaces, nodes, pods and RBAC
// objects. Pods run nowhere: the tests create a Node object without a kubelet
// and set the pods' status themselves (testcluster.RunPod), and the cluster's
// own EndpointSlice controller writes the slices, as it does in production.

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

// localControlPlane is the control plane TestMain started, or nil when the
// tests use the cluster of K8S_TF_KUBECONFIG (or none).
var localControlPlane *testcluster.Cluster

// startLocalControlPlane starts the local control plane for the acceptance
// tests, unless TF_ACC is unset or K8S_TF_KUBECONFIG names a cluster, and
// points K8S_TF_KUBECONFIG at it. The version is K8S_TF_K8S_VERSION
// (make test K8S_VERSION=v1.X.Y), else the pinned one. The returned stop is
// never nil.
func startLocalControlPlane() (stop func(), err error) {
	if os.Getenv("TF_ACC") == "" || os.Getenv(envKubeconfig) != "" {
		return func() {}, nil
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	// K8S_TF_KIND_CONTROLLERS=1: the controllers a kind cluster runs, node
	// lifecycle included, as CI's kind clusters do.
	cluster, err := testcluster.Start(ctx, testcluster.Options{Version: os.Getenv("K8S_TF_K8S_VERSION"), Log: os.Stderr,
		KindControllers: os.Getenv("K8S_TF_KIND_CONTROLLERS") == "1"})
	if err != nil {
		return func() {}, err
	}
	localControlPlane = cluster
	// A Ctrl-C or a kill stops the daemons and removes their state; they
	// would die with this process anyway (parent-death signal).
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-signals
		cluster.Stop()
		fmt.Fprintf(os.Stderr, "%s: local control plane stopped\n", s)
		os.Exit(1)
	}()
	if err := os.Setenv(envKubeconfig, cluster.Kubeconfig()); err != nil {
		cluster.Stop()
		return func() {}, err
	}
	return cluster.Stop, nil
}

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
		t.Skip("acceptance test: set TF_ACC=1 (make testacc does), and " + envKubeconfig + " for a cluster of your own")
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
		return nil, fmt.Errorf("%s is not set: TestMain starts the local control plane when TF_ACC is set and it is not", envKubeconfig)
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
		if err := testcluster.EnsureNode(ctx, client, name, zone); err != nil {
			return nil, err
		}
	}
	// No kubelet renews their leases: where the node lifecycle controller
	// runs (kind), they would be tainted unreachable and their pods evicted.
	if err := testcluster.KeepNodesAlive(context.Background(), client, accNode, accNodeB); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *testCluster) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	// Pods are refused until the namespace's default ServiceAccount exists.
	if err := testcluster.WaitForServiceAccount(ctx, c.client, name, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = testcluster.DeleteNamespace(ctx, c.client, name)
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
	c.runPods(t, ns, webPod("web-1", true, ip))
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
	// readiness is the container's readinessProbe.
	readiness *corev1.Probe
}

// runPod creates a pod on the test node and gives it the status a kubelet
// would: Running, its IPs, and a Ready condition.
func (c *testCluster) runPod(t *testing.T, namespace string, p podSpec) {
	t.Helper()
	pod := testcluster.Pod{Name: p.name, Labels: p.labels, IPs: p.ips, Ready: p.ready, Ports: p.ports, Node: cmp.Or(p.node, accNode),
		ReadinessProbe: p.readiness}
	if err := testcluster.RunPod(c.ctx(t), c.client, namespace, pod); err != nil {
		t.Fatal(err)
	}
}

// webNamespace is a new namespace with svc in it and pods run there.
func (c *testCluster) webNamespace(t *testing.T, svc *corev1.Service, pods ...podSpec) string {
	t.Helper()
	ns := c.namespace(t)
	svc.Namespace = ns
	c.createService(t, svc)
	c.runPods(t, ns, pods...)
	return ns
}

// webPod is a pod of the web Service (webLabels), ready or not, with its
// addresses.
func webPod(name string, ready bool, ips ...string) podSpec {
	return podSpec{name: name, labels: webLabels, ips: ips, ready: ready}
}

// runPods runs each pod in namespace, in this order.
func (c *testCluster) runPods(t *testing.T, namespace string, pods ...podSpec) {
	t.Helper()
	for _, p := range pods {
		c.runPod(t, namespace, p)
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

// waitForSlices waits until the EndpointSlices of Service "web" satisfy
// each done in turn, which says what it is still waiting for, or "" when
// satisfied.
func (c *testCluster) waitForSlices(t *testing.T, namespace string, done ...func([]discoveryv1.EndpointSlice) string) {
	t.Helper()
	for _, done := range done {
		if err := testcluster.WaitForSlices(c.ctx(t), c.client, namespace, "web", 90*time.Second, done); err != nil {
			t.Fatal(err)
		}
	}
}

// endpointCount waits for exactly n endpoints in the slices of one family,
// with ready as given.
func endpointCount(family discoveryv1.AddressType, ready, n int) func([]discoveryv1.EndpointSlice) string {
	return testcluster.EndpointCount(family, ready, n)
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
