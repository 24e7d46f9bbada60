package companion

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// One companion for the pools of two clusters: the test's control plane
// (blue) and a second one (green), read through two provider
// configurations, as examples/pools/multi-cluster (Terraform) and its
// opentofu-for-each (OpenTofu) do.

// greenCluster is the second control plane, started once for the tests
// that need it.
var greenCluster struct {
	cluster *testcluster.Cluster
	client  kubernetes.Interface
}

func startGreen(t *testing.T) (*testcluster.Cluster, kubernetes.Interface) {
	t.Helper()
	if greenCluster.cluster != nil {
		return greenCluster.cluster, greenCluster.client
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := testcluster.Start(ctx, testcluster.Options{Version: os.Getenv("K8S_TF_K8S_VERSION"), Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	client := c.Client()
	if err := testcluster.EnsureNode(ctx, client, accNode, accZone); err != nil {
		t.Fatal(err)
	}
	greenCluster.cluster, greenCluster.client = c, client
	return c, client
}

// stopGreen stops the second control plane, if it started (TestMain).
func stopGreen() {
	if greenCluster.cluster != nil {
		greenCluster.cluster.Stop()
	}
}

// twoContexts is a kubeconfig with contexts blue and green, one per cluster.
func twoContexts(t *testing.T, green *testcluster.Cluster) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for name, path := range map[string]string{"blue": acc.kubeconfig, "green": green.Kubeconfig()} {
		one, err := clientcmd.LoadFromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		current := one.Contexts[one.CurrentContext]
		cfg.Clusters[name] = one.Clusters[current.Cluster]
		cfg.AuthInfos[name] = one.AuthInfos[current.AuthInfo]
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	cfg.CurrentContext = "blue"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// shopWeb makes Service shop/web in the cluster of client (namespace shop
// made once), with ready pods at ips.
func shopWeb(t *testing.T, client kubernetes.Interface, ips ...string) {
	t.Helper()
	ctx := testCtx(t)
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	if err := testcluster.WaitForServiceAccount(ctx, client, "shop", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	_ = client.CoreV1().Services("shop").Delete(ctx, "web", metav1.DeleteOptions{})
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
	if _, err := client.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.CoreV1().Services("shop").Delete(ctx, "web", metav1.DeleteOptions{})
		pods, _ := client.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{})
		zero := int64(0)
		for _, p := range pods.Items {
			_ = client.CoreV1().Pods("shop").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	})
	for _, ip := range ips {
		addPod(t, client, ip)
	}
	if err := testcluster.WaitForSlices(ctx, client, "shop", "web", 90*time.Second, testcluster.EndpointCount("IPv4", len(ips), len(ips))); err != nil {
		t.Fatal(err)
	}
}

// addPod runs a ready pod of shop/web at ip.
func addPod(t *testing.T, client kubernetes.Interface, ip string) {
	t.Helper()
	name := "web-" + strings.ReplaceAll(ip, ".", "-")
	p := testcluster.Pod{Name: name, Labels: map[string]string{"app": "web"}, IPs: []string{ip}, Ready: true, Node: accNode}
	if err := testcluster.RunPod(testCtx(t), client, "shop", p); err != nil {
		t.Fatal(err)
	}
}

func isTofu() bool { return strings.Contains(filepath.Base(acc.terraform), "tofu") }

// multiClusterExample is a working directory with the multi-cluster
// example for this CLI, its variables in terraform.tfvars (where the
// companion reads them too), applied.
func multiClusterExample(t *testing.T, kubeconfig string) *workdir {
	t.Helper()
	root := filepath.Join("..", "..", "examples", "pools", "multi-cluster")
	base := t.TempDir()
	dir, main, tfvars := base, filepath.Join(root, "main.tf"), fmt.Sprintf("kubeconfig = %q\n", kubeconfig)
	if isTofu() {
		// for_each on provider blocks; it reads ../backend.cfg.tftpl.
		dir, main = filepath.Join(base, "opentofu-for-each"), filepath.Join(root, "opentofu-for-each", "main.tf")
		tfvars = fmt.Sprintf("clusters = {\n  blue = { kubeconfig = %q, context = \"blue\" }\n  green = { kubeconfig = %q, context = \"green\" }\n}\n",
			kubeconfig, kubeconfig)
	}
	text, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	template, err := os.ReadFile(filepath.Join(root, "backend.cfg.tftpl"))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, base, map[string]string{"backend.cfg.tftpl": string(template)})
	writeFiles(t, dir, map[string]string{"main.tf": string(text), "terraform.tfvars": tfvars})
	w := &workdir{dir: dir}
	w.terraform(t, "apply", "-auto-approve", "-input=false", "-no-color")
	return w
}

// resourceOutput is the output of terraform_data.name in state.
func (w *workdir) resourceOutput(t *testing.T, name string) string {
	t.Helper()
	var st struct {
		Resources []struct {
			Type, Name string
			Instances  []struct {
				Attributes struct {
					// A dynamic value in state: its value and type.
					Output struct {
						Value []string `json:"value"`
					} `json:"output"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(w.terraform(t, "state", "pull")), &st); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Resources {
		if r.Type == "terraform_data" && r.Name == name && len(r.Instances) == 1 {
			return strings.Join(r.Instances[0].Attributes.Output.Value, " ")
		}
	}
	t.Fatalf("no terraform_data.%s in state", name)
	return ""
}

// backend is the HAProxy backend that state holds.
func (w *workdir) backend(t *testing.T) string {
	t.Helper()
	return w.terraform(t, "output", "-raw", "haproxy_backend")
}

func wantServers(t *testing.T, backend string, present []string, absent ...string) {
	t.Helper()
	for _, ip := range present {
		if !strings.Contains(backend, " "+ip+":8080 ") {
			t.Errorf("the backend lacks %s:\n%s", ip, backend)
		}
	}
	for _, ip := range absent {
		if strings.Contains(backend, " "+ip+":8080 ") {
			t.Errorf("the backend has %s:\n%s", ip, backend)
		}
	}
}

func TestAccSyncOneCompanionKeepsThePoolsOfTwoClustersCurrent(t *testing.T) {
	needCluster(t)
	green, greenClient := startGreen(t)
	kubeconfig := twoContexts(t, green)
	shopWeb(t, acc.client, "10.244.0.1")
	shopWeb(t, greenClient, "10.245.0.1")
	w := multiClusterExample(t, kubeconfig)
	wantServers(t, w.backend(t), []string{"10.244.0.1", "10.245.0.1"})
	// No -cluster: each configuration connects as its block says.
	c := startSync(t, w, "-listen", "127.0.0.1:0")
	c.waitForCount(t, 30*time.Second, "watching", 2)

	addPod(t, greenClient, "10.245.0.2")
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "state_updated"})
	wantServers(t, w.backend(t), []string{"10.244.0.1", "10.245.0.1", "10.245.0.2"})
	c.quiet(t, 3*time.Second)
	wantRuns(t, c, 1, " for a pod Ready in the second cluster, want 1")

	// A change in each within one window: one run.
	addPod(t, acc.client, "10.244.0.2")
	addPod(t, greenClient, "10.245.0.3")
	c.waitForCount(t, 60*time.Second, "run ended", 2, map[string]string{"result": "state_updated"})
	c.quiet(t, 3*time.Second)
	wantRuns(t, c, 2, " in all, want 2: changes in both clusters within one window are one run")
	wantServers(t, w.backend(t), []string{"10.244.0.1", "10.244.0.2", "10.245.0.1", "10.245.0.2", "10.245.0.3"})
	// Prometheus's text escapes the quotes of a label's value.
	c.wantMetric(t, `k8s_sync_cluster_pools_watched{cluster="`+strings.ReplaceAll(greenName(), `"`, `\"`)+`"} 1`)
}

// greenName is the green configuration as the companion names it.
func greenName() string {
	if isTofu() {
		return `k8s.cluster["green"]`
	}
	return "k8s.green"
}

// A cluster that stops answering has its pools left as they are and out
// of runs; the other's changes are applied; when it answers again, it
// catches up without a restart. Each cluster's pool has a resource of its
// own here: a resource that reads both (the example's backend) cannot be
// planned without the cluster that does not answer.
func TestAccSyncAClusterThatDoesNotAnswerLeavesTheOthersCurrent(t *testing.T) {
	needCluster(t)
	green, greenClient := startGreen(t)
	kubeconfig := twoContexts(t, green)
	shopWeb(t, acc.client, "10.244.0.1")
	shopWeb(t, greenClient, "10.245.0.1")
	config := fmt.Sprintf(`
terraform {
  required_providers {
    k8s = { source = "vigie/k8s" }
  }
}
provider "k8s" {
  alias      = "blue"
  kubeconfig = %[1]q
  context    = "blue"
}
provider "k8s" {
  alias      = "green"
  kubeconfig = %[1]q
  context    = "green"
}
data "k8s_ready_endpoints" "blue" {
  provider  = k8s.blue
  namespace = "shop"
  service   = "web"
}
data "k8s_ready_endpoints" "green" {
  provider  = k8s.green
  namespace = "shop"
  service   = "web"
}
resource "terraform_data" "blue" {
  input = [for e in data.k8s_ready_endpoints.blue.endpoints : e.address]
}
resource "terraform_data" "green" {
  input = [for e in data.k8s_ready_endpoints.green.endpoints : e.address]
}
`, kubeconfig)
	w := newWorkdir(t, config)
	c := startSync(t, w, "-listen", "127.0.0.1:0")
	c.waitForCount(t, 30*time.Second, "watching", 2)
	green.StopAPIServer()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = green.StartAPIServer(context.Background())
		}
	})
	c.waitFor(t, 30*time.Second, "cluster does not answer: its pools are left as they are and out of runs", map[string]string{"cluster": "k8s.green"})
	c.wantMetric(t, `k8s_sync_cluster_reachable{cluster="k8s.green"} 0`)
	c.waitHealthz(t, 5*time.Second, "cluster k8s.green does not answer")
	addPod(t, acc.client, "10.244.0.2")
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	if blue, green := w.resourceOutput(t, "blue"), w.resourceOutput(t, "green"); blue != "10.244.0.1 10.244.0.2" || green != "10.245.0.1" {
		t.Errorf("members: blue %q, green %q; want blue's two and green's one, kept", blue, green)
	}
	if err := green.StartAPIServer(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	restarted = true
	c.waitFor(t, 30*time.Second, "cluster answers again", map[string]string{"cluster": "k8s.green"})
	addPod(t, greenClient, "10.245.0.2")
	c.waitForCount(t, 90*time.Second, "run ended", 2, map[string]string{"result": "applied"})
	if green := w.resourceOutput(t, "green"); green != "10.245.0.1 10.245.0.2" {
		t.Errorf("green's members %q after the cluster answered again, want both", green)
	}
}
