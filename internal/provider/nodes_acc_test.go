package provider

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// Node objects are cluster-scoped and shared by every test of the cluster:
// each test names its own uniquely, labels them with its run, reads them
// with node_selector on that label, and deletes them when it ends.

const accRunLabel = "tf-acc/nodes-run"

// nodeSpec describes a Node as a test needs it.
type nodeSpec struct {
	suffix     string
	zone       string // no zone label when empty
	internalIP string // no InternalIP when empty
	externalIP string
	notReady   bool
	labels     map[string]string
	taint      string
	// beingDeleted holds the node with a finalizer and deletes it, so it
	// stays with a deletionTimestamp until the cleanup lets it go.
	beingDeleted bool
}

// nodeRun makes Node objects for one test: their names start with
// tf-acc-<run>- and they carry the label accRunLabel=<run>.
type nodeRun struct {
	c   *testCluster
	run string
}

func (c *testCluster) nodeRun() nodeRun {
	return nodeRun{c: c, run: fmt.Sprintf("%06x", rand.IntN(1<<24))}
}

// selector is the node_selector that reads only this run's nodes.
func (r nodeRun) selector() string { return accRunLabel + "=" + r.run }

func (r nodeRun) name(suffix string) string { return "tf-acc-" + r.run + "-" + suffix }

const accHoldFinalizer = "tf-acc.example.com/hold"

// node creates the Node and gives it the status a kubelet would.
func (r nodeRun) node(t *testing.T, s nodeSpec) string {
	t.Helper()
	ctx := r.c.ctx(t)
	nodes := r.c.client.CoreV1().Nodes()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.name(s.suffix), Labels: map[string]string{accRunLabel: r.run}}}
	if s.zone != "" {
		n.Labels[corev1.LabelTopologyZone] = s.zone
	}
	for k, v := range s.labels {
		n.Labels[k] = v
	}
	if s.taint != "" {
		n.Spec.Taints = []corev1.Taint{{Key: s.taint, Effect: corev1.TaintEffectNoSchedule}}
	}
	if s.beingDeleted {
		n.Finalizers = []string{accHoldFinalizer}
	}
	if _, err := nodes.Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", n.Name, err)
	}
	t.Cleanup(func() { r.c.removeNode(n.Name) })
	ready := corev1.ConditionTrue
	if s.notReady {
		ready = corev1.ConditionFalse
	}
	// Where the node lifecycle controller runs (kind), it taints a new Node
	// at once: set the status on the Node as it is then.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		current.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		current.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.Name}}
		if s.internalIP != "" {
			current.Status.Addresses = append(current.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: s.internalIP})
		}
		if s.externalIP != "" {
			current.Status.Addresses = append(current.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: s.externalIP})
		}
		_, err = nodes.UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("set status of node %s: %v", n.Name, err)
	}
	if !s.notReady && !s.beingDeleted {
		alive, stop := context.WithCancel(context.Background())
		t.Cleanup(stop)
		if err := testcluster.KeepNodesAlive(alive, r.c.client, n.Name); err != nil {
			t.Fatal(err)
		}
	}
	if s.beingDeleted {
		if err := nodes.Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete node %s: %v", n.Name, err)
		}
		got, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp == nil {
			t.Fatalf("node %s should be held in deletion by its finalizer: %v", n.Name, err)
		}
	}
	return n.Name
}

// removeNode lets go of a node held by the test's finalizer and deletes it.
func (c *testCluster) removeNode(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := c.client.CoreV1().Nodes()
	for range 5 {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err == nil && len(n.Finalizers) > 0 {
			n.Finalizers = nil
			if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
				continue
			}
		}
		_ = nodes.Delete(ctx, name, metav1.DeleteOptions{})
		return
	}
}

// nodePortService creates Service name of the given type and policy, port
// http 80 to 8080, selecting the pods labelled app=name, and returns the
// nodePort the API server allocated (0 when none).
func (c *testCluster) nodePortService(t *testing.T, ns, name string, policy corev1.ServiceExternalTrafficPolicy) int64 {
	t.Helper()
	return int64(c.createNodePortService(t, ns, name, corev1.ServiceTypeNodePort, policy).Spec.Ports[0].NodePort)
}

// createNodePortService creates the Service and gives it as the API server
// completed it (node ports and healthCheckNodePort allocated).
func (c *testCluster) createNodePortService(t *testing.T, ns, name string, kind corev1.ServiceType, policy corev1.ServiceExternalTrafficPolicy) *corev1.Service {
	t.Helper()
	svc := fleetService(ns, name, nil)
	svc.Spec.Type, svc.Spec.ExternalTrafficPolicy = kind, policy
	created, err := c.client.CoreV1().Services(ns).Create(c.ctx(t), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s/%s: %v", ns, name, err)
	}
	return created
}

// accNodeEntry is a node entry as state holds it.
func accNodeEntry(addr string, port int64, node, zone string, local int64) knownvalue.Check {
	return nodeEntry(addr, port, node, zone, local)
}

// nodesRole is the ClusterRole rule the documentation gives for target = "nodes".
var nodesRole = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}}

// grantClusterRole gives the ServiceAccount namespace/name the rules
// cluster-wide, by a ClusterRole and a ClusterRoleBinding deleted afterwards.
func (c *testCluster) grantClusterRole(t *testing.T, namespace, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := c.ctx(t)
	roleName := "tf-acc-" + namespace + "-" + name
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleName}, Rules: rules}
	if _, err := c.client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create cluster role: %v", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
	}
	if _, err := c.client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create cluster role binding: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.client.RbacV1().ClusterRoleBindings().Delete(ctx, roleName, metav1.DeleteOptions{})
		_ = c.client.RbacV1().ClusterRoles().Delete(ctx, roleName, metav1.DeleteOptions{})
	})
}

// Every exclusion on real Node objects, pods on some nodes, NodePort
// Services with Cluster and Local policy, a LoadBalancer Service, and a
// ClusterIP Service refused.
func TestAccNodesPools(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	r := c.nodeRun()
	a := r.node(t, nodeSpec{suffix: "a", zone: "tf-acc-z1", internalIP: "172.31.0.1", externalIP: "198.51.100.1"})
	b := r.node(t, nodeSpec{suffix: "b", zone: "tf-acc-z2", internalIP: "172.31.0.2"})
	noZone := r.node(t, nodeSpec{suffix: "no-zone", internalIP: "172.31.0.3"})
	keptByFalse := r.node(t, nodeSpec{suffix: "exclude-false", zone: "tf-acc-z1", internalIP: "172.31.0.4",
		labels: map[string]string{corev1.LabelNodeExcludeBalancers: "false"}})
	excluded := r.node(t, nodeSpec{suffix: "excluded", zone: "tf-acc-z1", internalIP: "172.31.0.10",
		labels: map[string]string{corev1.LabelNodeExcludeBalancers: "true"}})
	r.node(t, nodeSpec{suffix: "excluded-empty", zone: "tf-acc-z1", internalIP: "172.31.0.11",
		labels: map[string]string{corev1.LabelNodeExcludeBalancers: ""}})
	r.node(t, nodeSpec{suffix: "autoscaled", zone: "tf-acc-z1", internalIP: "172.31.0.12", taint: "ToBeDeletedByClusterAutoscaler"})
	r.node(t, nodeSpec{suffix: "disrupted", zone: "tf-acc-z1", internalIP: "172.31.0.13", taint: "karpenter.sh/disrupted"})
	notReady := r.node(t, nodeSpec{suffix: "not-ready", zone: "tf-acc-z1", internalIP: "172.31.0.14", notReady: true})
	r.node(t, nodeSpec{suffix: "deleting", zone: "tf-acc-z1", internalIP: "172.31.0.15", beingDeleted: true})
	noInternalIP := r.node(t, nodeSpec{suffix: "no-internal-ip", zone: "tf-acc-z1", externalIP: "198.51.100.16"})

	// The pods of web, web-local and web-lb: two on a, one on b, one each on
	// an excluded and a NotReady node (which Local must not bring back).
	cluster := c.nodePortService(t, ns, "web", corev1.ServiceExternalTrafficPolicyCluster)
	local := c.nodePortService(t, ns, "web-local", corev1.ServiceExternalTrafficPolicyLocal)
	lbService := c.createNodePortService(t, ns, "web-lb", corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal)
	lb, lbHealth := int64(lbService.Spec.Ports[0].NodePort), int64(lbService.Spec.HealthCheckNodePort)
	if lbHealth == 0 {
		t.Fatal("the API server allocated no healthCheckNodePort to a Local LoadBalancer Service")
	}
	c.createService(t, fleetService(ns, "internal", nil))
	for s, svc := range []string{"web", "web-local", "web-lb"} {
		for i, node := range []string{a, a, b, excluded, notReady} {
			ip := fmt.Sprintf("10.244.%d.%d", 40+s, i+1)
			c.runPod(t, ns, podSpec{name: fmt.Sprintf("%s-%d", svc, i+1), labels: map[string]string{"app": svc}, ips: []string{ip}, ready: true, node: node})
		}
		c.waitForServiceSlices(t, ns, svc, 5)
	}

	read := func(service, args string) string {
		return c.providerConfig() + fmt.Sprintf(`
data "k8s_ready_endpoints" "web" {
  namespace     = %q
  service       = %q
  target        = "nodes"
  node_selector = %q
  %s
}
`, ns, service, r.selector(), args)
	}
	endpoints := tfjsonpath.New("endpoints")
	parallelSteps(t,
		resource.TestStep{
			// Cluster: every eligible node, each with its pods.
			Config: read("web", ""),
			ConfigStateChecks: []statecheck.StateCheck{webValue("endpoints", knownvalue.ListExact([]knownvalue.Check{
				accNodeEntry("172.31.0.1", cluster, a, "tf-acc-z1", 2),
				accNodeEntry("172.31.0.2", cluster, b, "tf-acc-z2", 1),
				accNodeEntry("172.31.0.3", cluster, noZone, "", 0),
				accNodeEntry("172.31.0.4", cluster, keptByFalse, "tf-acc-z1", 0),
			}))},
		},
		resource.TestStep{
			// Local: only the eligible nodes that run a pod.
			Config: read("web-local", ""),
			ConfigStateChecks: []statecheck.StateCheck{webValue("endpoints", knownvalue.ListExact([]knownvalue.Check{
				accNodeEntry("172.31.0.1", local, a, "tf-acc-z1", 2),
				accNodeEntry("172.31.0.2", local, b, "tf-acc-z2", 1),
			}))},
		},
		resource.TestStep{
			// A LoadBalancer Service has node ports too; with Local, its
			// nodes are checked on the healthCheckNodePort the API server
			// allocated.
			Config: read("web-lb", ""),
			ConfigStateChecks: []statecheck.StateCheck{webValue("endpoints", knownvalue.ListExact([]knownvalue.Check{
				checkedNodeEntry("172.31.0.1", lb, a, "tf-acc-z1", 2, nodeHealthCheck(lbHealth, "healthCheckNodePort")),
				checkedNodeEntry("172.31.0.2", lb, b, "tf-acc-z2", 1, nodeHealthCheck(lbHealth, "healthCheckNodePort")),
			}))},
		},
		resource.TestStep{
			// kube-proxy's health port elsewhere: the Cluster Service's
			// nodes are checked there.
			Config: read("web", "kube_proxy_health_port = 10299"),
			ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("data.k8s_ready_endpoints.web", endpoints.AtSliceIndex(0).AtMapKey("health_check"),
				nodeHealthCheck(10299, "kube-proxy"))},
		},
		resource.TestStep{
			// With ExternalIP, the nodes that have one: node a, and the
			// node left out above for having no InternalIP.
			Config: read("web", `node_address_type = "ExternalIP"`),
			ConfigStateChecks: []statecheck.StateCheck{webValue("endpoints", knownvalue.ListExact([]knownvalue.Check{
				accNodeEntry("198.51.100.1", cluster, a, "tf-acc-z1", 2),
				accNodeEntry("198.51.100.16", cluster, noInternalIP, "tf-acc-z1", 0),
			}))},
		},
		resource.TestStep{
			Config: read("internal", ""),
			ExpectError: phrase("Service Port Without NodePort", fmt.Sprintf(`port "http" of Service %s/internal`, ns), "type ClusterIP",
				"Make the Service of type NodePort or LoadBalancer"),
		},
		resource.TestStep{
			// k8s_services: the same pools from one read, the ClusterIP
			// Service skipped with the reason.
			Config: c.providerConfig() + fmt.Sprintf(`
data "k8s_services" "f" {
  namespace     = %q
  target        = "nodes"
  node_selector = %q
}
`, ns, r.selector()),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.k8s_services.f", tfjsonpath.New("services").AtMapKey(ns+"/web-local").AtMapKey("endpoints"), knownvalue.ListExact([]knownvalue.Check{
					accNodeEntry("172.31.0.1", local, a, "tf-acc-z1", 2),
					accNodeEntry("172.31.0.2", local, b, "tf-acc-z2", 1),
				})),
				statecheck.ExpectKnownValue("data.k8s_services.f", tfjsonpath.New("services").AtMapKey(ns+"/web").AtMapKey("endpoints"), knownvalue.ListSizeExact(4)),
				statecheck.ExpectKnownValue("data.k8s_services.f", tfjsonpath.New("skipped"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectExact(map[string]knownvalue.Check{
						"namespace": knownvalue.StringExact(ns), "name": knownvalue.StringExact("internal"),
						"reason": knownvalue.StringExact(fmt.Sprintf("port http of service %s/internal has no nodePort (the Service is of type ClusterIP): "+
							"a node pool needs a NodePort or LoadBalancer Service that allocates node ports", ns)),
					}),
				})),
			},
		},
	)
}

// A node read is three requests, counted at a proxy: the Service, its
// EndpointSlices, the Nodes. Without list on nodes the read is refused with
// the documented error; with the documented ClusterRole it passes.
func TestAccNodesRequestsAndRBAC(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	r := c.nodeRun()
	a := r.node(t, nodeSpec{suffix: "a", zone: "tf-acc-z1", internalIP: "172.31.1.1"})
	port := c.nodePortService(t, ns, "web", corev1.ServiceExternalTrafficPolicyLocal)
	c.runPod(t, ns, podSpec{name: "web-1", labels: map[string]string{"app": "web"}, ips: []string{"10.244.50.1"}, ready: true, node: a})
	c.waitForServiceSlices(t, ns, "web", 1)

	withoutNodes := c.identityToken(t, ns, "no-nodes", documentedRole)
	withNodes := c.identityToken(t, ns, "with-nodes", documentedRole)
	c.grantClusterRole(t, ns, "with-nodes", nodesRole)
	proxy := c.startFaultProxy(t, nil)
	config := func(token string) string {
		return proxy.providerVia(token, "15s") + fmt.Sprintf(`
data "k8s_ready_endpoints" "web" {
  namespace     = %q
  service       = "web"
  target        = "nodes"
  node_selector = %q
}
`, ns, r.selector())
	}
	parallelSteps(t,
		resource.TestStep{
			Config: config(withoutNodes),
			ExpectError: phrase("Permission Denied Listing Nodes", "`list` on `nodes`", "ClusterRole", "ClusterRoleBinding",
				"list nodes:", "forbidden"),
		},
		resource.TestStep{
			PreConfig: func() { proxy.reset() },
			Config:    config(withNodes),
			ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("data.k8s_ready_endpoints.web", tfjsonpath.New("endpoints"),
				knownvalue.ListExact([]knownvalue.Check{accNodeEntry("172.31.1.1", port, a, "tf-acc-z1", 1)}))},
		},
		resource.TestStep{
			// The plan and apply of the step above each read once.
			PreConfig: func() {
				reads := proxy.count("GET services")
				if reads == 0 || proxy.count("LIST endpointslices") != reads || proxy.count("LIST nodes") != reads || proxy.total() != 3*reads {
					t.Errorf("requests %v: want one GET of the Service, one LIST of endpointslices and one of nodes per read, nothing else", proxy.snapshot())
				}
			},
			Config:   config(withNodes),
			PlanOnly: true,
		},
	)
}
