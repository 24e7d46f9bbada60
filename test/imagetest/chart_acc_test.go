package imagetest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// serviceMonitorCRD is the Prometheus Operator's ServiceMonitor kind, without
// its schema: enough for the API server to take the chart's ServiceMonitor.
const serviceMonitorCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// valueSets are the chart's values that tests render: each a release of its
// own, so that their cluster-wide objects do not meet.
var valueSets = []struct {
	release, namespace string
	set                []string
}{
	{"defaults", "lb-defaults", nil},
	{"namespaced", "lb-namespaced", []string{"rbac.clusterWide=false", "rbac.namespaces={shop,other}", "rbac.nodes=true", "rbac.pods=true",
		"metrics.service.enabled=true", "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prometheus"}},
	{"baked", "lb-baked", []string{"configuration.source=image", "configuration.path=/config", "backend.kubernetes=false",
		"backend.envFromSecret=backend-credentials", "leaderElection.enabled=false", "replicas=1", "cli=terraform",
		"image.repository=registry.example.com/lb/k8s-sync-with-config", "image.tag=1.0.0", "extraArgs={-settle-quiet=10s,-max-shrink=0.3}"}},
	{"workspaces", "lb-workspaces", []string{"workspaces[0].name=team-a", "workspaces[0].configMap=team-a-lb",
		"workspaces[0].settings.settle_quiet=1s", "workspaces[1].name=team-b", "workspaces[1].configMap=team-b-lb", "maxConcurrentRuns=2"}},
}

// TestAccChart is issue 26's item 3: helm lint of the chart with each set of
// values, their rendering applied server-side to the API server, values that
// cannot work refused by name, and the pod of the chart's namespaced
// rendering run as the manifest's is.
func TestAccChart(t *testing.T) {
	needImage(t)
	chart := chartDir(t)
	kubectlApply(t, []byte(serviceMonitorCRD))
	kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com")
	ensureNamespaces(testCtx(t, time.Minute), t, workloadNS, "other")
	for _, v := range valueSets {
		t.Run("lint and apply "+v.release, func(t *testing.T) {
			args := setArgs(v.set)
			if out, err := helm(t, append([]string{"lint", chart, "--strict"}, args...)...); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
			rendered, err := helm(t, append([]string{"template", v.release, chart, "--namespace", v.namespace}, args...)...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, rendered)
			}
			ensureNamespaces(testCtx(t, time.Minute), t, v.namespace)
			out := kubectlIn(t, []byte(rendered), "apply", "--server-side", "--field-manager=helm-template", "-f", "-")
			t.Logf("applied:\n%s", out)
			for _, kind := range kindsOf(v.set) {
				if !strings.Contains(out, kind) {
					t.Errorf("the rendering of %s has no %s:\n%s", v.release, kind, out)
				}
			}
		})
	}
	t.Run("values that cannot work are refused by name", func(t *testing.T) {
		for _, tc := range []struct {
			set  []string
			want string
		}{
			// What the schema cannot say (TestAccChartValues has what it
			// refuses).
			{[]string{"rbac.clusterWide=false"}, "give the namespaces the pools read in rbac.namespaces"},
			{[]string{"metrics.serviceMonitor.enabled=true"}, "metrics.serviceMonitor.enabled needs metrics.service.enabled"},
			{[]string{"leaderElection.enabled=false"}, "replicas > 1 needs leaderElection.enabled"},
		} {
			out, err := helm(t, append([]string{"template", "bad", chart}, setArgs(tc.set)...)...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("helm template with %v: %v, want an error with %q:\n%s", tc.set, err, tc.want, out)
			}
		}
	})
	t.Run("the pods are admitted by the restricted Pod Security Standard", func(t *testing.T) {
		ctx := testCtx(t, 2*time.Minute)
		const ns = "lb-restricted"
		_, err := env.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted",
			"pod-security.kubernetes.io/warn":    "restricted",
		}}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		for _, v := range []struct {
			release string
			set     []string
		}{
			{"restricted", nil},
			{"restricted-ws", []string{"workspaces[0].name=team-a", "workspaces[0].configMap=team-a-lb", "workspaces[1].name=team-b", "workspaces[1].configMap=team-b-lb"}},
		} {
			rendered, err := helm(t, append([]string{"template", v.release, chart, "--namespace", ns}, setArgs(v.set)...)...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, rendered)
			}
			// The Deployment: pod security admission warns of a template
			// that its pods would violate.
			out := kubectlIn(t, []byte(rendered), "apply", "--server-side", "--field-manager=helm-template", "-f", "-")
			if strings.Contains(out, "PodSecurity") {
				t.Errorf("%s: applying the rendering to a restricted namespace warns:\n%s", v.release, out)
			}
			// Its pod, which admission enforces on: created in a dry run.
			template := (&scenario{objects: decode(t, []byte(rendered))}).deployment(t).Spec.Template
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: v.release + "-", Namespace: ns, Labels: template.Labels}, Spec: template.Spec}
			dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
			if _, err := env.client.CoreV1().Pods(ns).Create(ctx, pod, dryRun); err != nil {
				t.Errorf("%s: the pod of the rendering is refused in a restricted namespace: %v", v.release, err)
			}
			// The same pod with one container that may escalate its
			// privileges is refused: admission is enforcing.
			bad := pod.DeepCopy()
			bad.Spec.InitContainers[0].SecurityContext.AllowPrivilegeEscalation = nil
			if _, err := env.client.CoreV1().Pods(ns).Create(ctx, bad, dryRun); err == nil || !strings.Contains(err.Error(), "allowPrivilegeEscalation") {
				t.Errorf("%s: a pod whose init container may escalate its privileges: %v, want a refusal by pod security admission", v.release, err)
			}
		}
	})
	t.Run("a change of a workspace's settings rolls the pods", func(t *testing.T) {
		// The companion reads the -workspaces file at start: the pod
		// template's checksum of it changes with it, and only with it.
		checksum := func(set ...string) string {
			t.Helper()
			rendered, err := helm(t, append([]string{"template", "roll", chart, "--namespace", "lb-roll"},
				setArgs(append([]string{"workspaces[0].name=team-a", "workspaces[0].configMap=team-a-lb"}, set...))...)...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, rendered)
			}
			s := &scenario{objects: decode(t, []byte(rendered))}
			sum := s.deployment(t).Spec.Template.Annotations["checksum/workspaces"]
			if len(sum) != 64 {
				t.Fatalf("the pod template's checksum/workspaces is %q, want a sha256", sum)
			}
			return sum
		}
		base := checksum("workspaces[0].settings.settle_quiet=1s")
		if again := checksum("workspaces[0].settings.settle_quiet=1s", "replicas=3"); again != base {
			t.Errorf("checksum/workspaces changed with replicas alone: %s, then %s", base, again)
		}
		if changed := checksum("workspaces[0].settings.settle_quiet=2s"); changed == base {
			t.Errorf("checksum/workspaces is %s with settle_quiet 1s and 2s: a helm upgrade would not roll the pods", base)
		}
	})
	t.Run("the pod of the chart's rendering", func(t *testing.T) {
		rendered, err := helm(t, "template", "chart-sync", chart, "--namespace", "lb-chart",
			"--set", "rbac.clusterWide=false", "--set", "rbac.namespaces={shop}",
			"--set", "image.repository=localhost/terraform-provider-k8s-sync", "--set", "image.pullPolicy=Never")
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, rendered)
		}
		s := deploy(t, []byte(rendered), "web-chart")
		s.checkSyncCheck(t)
	})
}

// kindsOf are the kinds a set of values must render, as kubectl apply names
// them.
func kindsOf(set []string) []string {
	kinds := []string{"serviceaccount/", "deployment.apps/"}
	joined := strings.Join(set, " ")
	if !strings.Contains(joined, "replicas=1") {
		kinds = append(kinds, "poddisruptionbudget.policy/")
	}
	switch {
	case strings.Contains(joined, "rbac.clusterWide=false"):
		kinds = append(kinds, "role.rbac.authorization.k8s.io/", "clusterrole.rbac.authorization.k8s.io/") // nodes
	default:
		kinds = append(kinds, "clusterrole.rbac.authorization.k8s.io/")
	}
	if strings.Contains(joined, "serviceMonitor.enabled=true") {
		kinds = append(kinds, "service/", "servicemonitor.monitoring.coreos.com/")
	}
	if strings.Contains(joined, "workspaces[") {
		// The -workspaces file.
		kinds = append(kinds, "configmap/")
	}
	return kinds
}

func setArgs(set []string) []string {
	var args []string
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return args
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, helmBinary(t), args...)
	cmd.Env = append(cmd.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if env.cluster != nil {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+env.cluster.Kubeconfig())
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// helmBuilt is helm built from tools/helm for the tests that need it and
// no cluster (TestAccChartValues without K8S_TF_IMAGE).
var helmBuilt struct {
	sync.Once
	path string
	err  error
}

// helmBinary is the path of helm: TestMain's, or built on first use.
func helmBinary(t *testing.T) string {
	t.Helper()
	if env.helm != "" {
		return env.helm
	}
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test of the chart: set TF_ACC=1 (helm is built from tools/helm)")
	}
	helmBuilt.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		root, err := testcluster.RepoRoot()
		if err != nil {
			helmBuilt.err = err
			return
		}
		helmBuilt.path, helmBuilt.err = testcluster.Helm(ctx, root, os.Stderr)
	})
	if helmBuilt.err != nil {
		t.Fatalf("building helm: %v", helmBuilt.err)
	}
	return helmBuilt.path
}
