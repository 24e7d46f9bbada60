package imagetest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// chartDir is the chart's directory in this repository.
func chartDir(t *testing.T) string {
	t.Helper()
	root := env.root
	if root == "" {
		var err error
		if root, err = testcluster.RepoRoot(); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(root, "charts", "terraform-provider-k8s-sync")
}

// everyValue sets every value of the chart to something a platform team
// would give: the schema takes it and the rendering carries each.
const everyValue = `
image:
  repository: registry.example.com/lb/k8s-sync
  tag: "1.0"
  pullPolicy: Always
imagePullSecrets:
  - name: regcred
cli: terraform
replicas: 3
leaderElection:
  enabled: true
  leaseName: lb-sync
podDisruptionBudget:
  enabled: true
configuration:
  source: configMap
  configMap: lb-config
  path: /config
workspaces:
  - name: team-a
    configMap: team-a-lb
    settings:
      terraform: terraform
      provider_alias: east
      settle_quiet: 1s
      settle_max: 30s
      lock_timeout: 2m
      retry_initial: 500ms
      retry_max: 5m
      max_shrink: 0.3
      allow_empty: false
      allow: [haproxy_backend.web]
      command: /hooks/apply
      command_repeat: 1h30m
      refresh: true
      target_changed: true
      full_plan_interval: 1h
      state_interval: 30s
      state_timeout: 2m
      clusters: [east]
      env:
        TF_LOG: warn
  - name: team-b
    configMap: team-b-lb
maxConcurrentRuns: 2
backend:
  kubernetes: false
  envFromSecret: backend-credentials
rbac:
  clusterWide: false
  namespaces: [shop, other]
  nodes: true
  pods: true
readinessGates:
  enabled: true
extraArgs: [-settle-quiet=10s, -max-shrink=0.3]
metrics:
  port: 9090
  service:
    enabled: true
  serviceMonitor:
    enabled: true
    interval: 15s
    labels:
      release: prometheus
resources:
  requests:
    cpu: 100m
    memory: 256Mi
  limits:
    memory: 1Gi
podLabels:
  team: lb
podAnnotations:
  example.com/owner: lb-team
nodeSelector:
  kubernetes.io/os: linux
tolerations:
  - key: dedicated
    operator: Equal
    value: lb
    effect: NoSchedule
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: kubernetes.io/arch, operator: In, values: [amd64, arm64]}
priorityClassName: lb-critical
`

// TestAccChartValues is the chart's values.schema.json and what its values
// render, with helm alone: a values file of every value is taken and each
// value reaches the objects; values of the wrong type or name are refused
// by the schema, naming the value; the PodDisruptionBudget, the replicas'
// anti-affinity and the readiness gates' rule are rendered exactly when
// they should be.
func TestAccChartValues(t *testing.T) {
	helmBinary(t)
	chart := chartDir(t)
	valuesFile := func(t *testing.T, content string) string {
		t.Helper()
		f := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	render := func(t *testing.T, args ...string) []*unstructured.Unstructured {
		t.Helper()
		out, err := helm(t, append([]string{"template", "values", chart, "--namespace", "lb-values"}, args...)...)
		if err != nil {
			t.Fatalf("helm template %v: %v\n%s", args, err, out)
		}
		return decode(t, []byte(out))
	}

	t.Run("a values file of every value is linted and each value is rendered", func(t *testing.T) {
		f := valuesFile(t, everyValue)
		if out, err := helm(t, "lint", chart, "--strict", "-f", f); err != nil {
			t.Fatalf("helm lint: %v\n%s", err, out)
		}
		objects := render(t, "-f", f)
		d := deploymentOf(t, objects)
		spec := d.Spec.Template.Spec
		if want := []corev1.LocalObjectReference{{Name: "regcred"}}; !reflect.DeepEqual(spec.ImagePullSecrets, want) {
			t.Errorf("imagePullSecrets: %v, want %v", spec.ImagePullSecrets, want)
		}
		if spec.PriorityClassName != "lb-critical" {
			t.Errorf("priorityClassName: %q", spec.PriorityClassName)
		}
		if want := map[string]string{"kubernetes.io/os": "linux"}; !reflect.DeepEqual(spec.NodeSelector, want) {
			t.Errorf("nodeSelector: %v, want %v", spec.NodeSelector, want)
		}
		if want := []corev1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "lb", Effect: "NoSchedule"}}; !reflect.DeepEqual(spec.Tolerations, want) {
			t.Errorf("tolerations: %v, want %v", spec.Tolerations, want)
		}
		if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.PodAntiAffinity != nil {
			t.Errorf("affinity: %+v, want the given nodeAffinity alone (it replaces the default anti-affinity)", spec.Affinity)
		}
		labels := d.Spec.Template.Labels
		if labels["team"] != "lb" || labels["app.kubernetes.io/instance"] != "values" {
			t.Errorf("the pods' labels %v lack podLabels or the selector's", labels)
		}
		annotations := d.Spec.Template.Annotations
		if annotations["example.com/owner"] != "lb-team" || len(annotations["checksum/workspaces"]) != 64 {
			t.Errorf("the pods' annotations %v lack podAnnotations or checksum/workspaces", annotations)
		}
		want := corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}
		containers := append(slices.Clone(spec.InitContainers), spec.Containers...)
		if len(containers) != 3 {
			t.Errorf("%d containers, want an init container per workspace and sync", len(containers))
		}
		for _, c := range containers {
			if !equalResources(c.Resources, want) {
				t.Errorf("container %s: resources %v, want %v", c.Name, c.Resources, want)
			}
			if c.Image != "registry.example.com/lb/k8s-sync:1.0" || c.ImagePullPolicy != corev1.PullAlways {
				t.Errorf("container %s: image %s (%s)", c.Name, c.Image, c.ImagePullPolicy)
			}
		}
		pdb := pdbOf(t, objects)
		if pdb == nil || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget %+v, want maxUnavailable 1", pdb)
		}
		// Readiness gates in each namespace the pools read.
		for _, ns := range []string{"shop", "other"} {
			if !hasRule(rulesOf(t, objects, "Role", "values-read", ns), "pods/status", "patch") {
				t.Errorf("the Role of namespace %s has no patch on pods/status", ns)
			}
		}
		var files struct {
			Workspaces []map[string]any `json:"workspaces"`
		}
		for _, o := range objects {
			if o.GetKind() == "ConfigMap" && o.GetName() == "values-workspaces" {
				data, _, _ := unstructured.NestedString(o.Object, "data", "workspaces.yaml")
				if err := yaml.Unmarshal([]byte(data), &files); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(files.Workspaces) != 2 || files.Workspaces[0]["command_repeat"] != "1h30m" || files.Workspaces[0]["max_shrink"] != 0.3 {
			t.Errorf("the -workspaces file lacks team-a's settings: %v", files.Workspaces)
		}
	})

	t.Run("the schema refuses values of the wrong type or name, naming them", func(t *testing.T) {
		for _, tc := range []struct {
			name, values, want string
		}{
			{"replicas as a string", `replicas: "2"`, "replicas"},
			{"no replica", `replicas: 0`, "replicas"},
			{"a value the chart does not have", `replica: 2`, "replica"},
			{"a misspelt podDisruptionBudget", `podDisruptionBudgets: {enabled: false}`, "podDisruptionBudgets"},
			{"a pull policy Kubernetes does not have", `image: {repository: x, pullPolicy: Sometimes}`, "pullPolicy"},
			{"an image tag as a number", `image: {repository: x, tag: 1.10}`, "tag"},
			{"a CLI the image does not have", `cli: bash`, "cli"},
			{"a configuration source the chart does not have", `configuration: {source: git}`, "source"},
			{"imagePullSecrets as names", `imagePullSecrets: [regcred]`, "imagePullSecrets"},
			{"a node selector's value as a number", `nodeSelector: {zone: 1}`, "nodeSelector"},
			{"tolerations as a map", `tolerations: {key: dedicated}`, "tolerations"},
			{"a toleration's misspelt field", `tolerations: [{key: dedicated, efect: NoSchedule}]`, "efect"},
			{"a misspelt affinity", `affinity: {podAntiAfinity: {}}`, "podAntiAfinity"},
			{"a misspelt resources field", `resources: {request: {cpu: 1}}`, "request"},
			{"pod labels as a list", `podLabels: [team]`, "podLabels"},
			{"readiness gates as a string", `readinessGates: {enabled: "true"}`, "enabled"},
			{"a metrics port as a string", `metrics: {port: "9464"}`, "port"},
			{"an extra argument that is no flag", `extraArgs: [settle-quiet=1s]`, "extraArgs"},
			{"rbac.namespaces as a string", `rbac: {clusterWide: false, namespaces: shop}`, "namespaces"},
			{"a workspace's name with capitals", `workspaces: [{name: Team_A, configMap: x}]`, "name"},
			{"a workspace without its configMap", `workspaces: [{name: a}]`, "configMap"},
			{"a workspace's duration as a number", `workspaces: [{name: a, configMap: x, settings: {settle_quiet: 10}}]`, "settle_quiet"},
			{"a workspace's duration without a unit", `workspaces: [{name: a, configMap: x, settings: {state_interval: "30"}}]`, "state_interval"},
			{"a workspace's misspelt setting", `workspaces: [{name: a, configMap: x, settings: {settle_quite: 1s}}]`, "settle_quite"},
			{"a workspace's max_shrink above 1", `workspaces: [{name: a, configMap: x, settings: {max_shrink: 2}}]`, "max_shrink"},
			{"a workspace's env of numbers", `workspaces: [{name: a, configMap: x, settings: {env: {TF_LOG_LEVEL: 1}}}]`, "TF_LOG_LEVEL"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				f := valuesFile(t, tc.values)
				// lint and install (template) check values alike: lint the
				// first, render the others.
				command := []string{"template", "bad", chart}
				if tc.name == "replicas as a string" {
					command = []string{"lint", chart, "--strict"}
				}
				out, err := helm(t, append(command, "-f", f)...)
				if err == nil || !strings.Contains(out, "schema") || !strings.Contains(out, tc.want) {
					t.Errorf("helm %s with %s: %v, want a refusal by the schema naming %q:\n%s", command[0], tc.values, err, tc.want, out)
				}
			})
		}
	})

	t.Run("a PodDisruptionBudget with more than one replica", func(t *testing.T) {
		for _, tc := range []struct {
			set  []string
			want bool
		}{
			{nil, true},
			{[]string{"replicas=3"}, true},
			{[]string{"replicas=1"}, false},
			{[]string{"replicas=1", "leaderElection.enabled=false"}, false},
			{[]string{"podDisruptionBudget.enabled=false"}, false},
		} {
			pdb := pdbOf(t, render(t, setArgs(tc.set)...))
			if got := pdb != nil; got != tc.want {
				t.Errorf("with %v: a PodDisruptionBudget is rendered: %v, want %v", tc.set, got, tc.want)
				continue
			}
			if pdb == nil {
				continue
			}
			if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
				t.Errorf("with %v: maxUnavailable %v, minAvailable %v; want maxUnavailable 1 alone", tc.set, pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
			}
			if pdb.Spec.UnhealthyPodEvictionPolicy == nil || *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
				t.Errorf("with %v: unhealthyPodEvictionPolicy %v, want AlwaysAllow", tc.set, pdb.Spec.UnhealthyPodEvictionPolicy)
			}
			if !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, map[string]string{"app.kubernetes.io/name": "terraform-provider-k8s-sync", "app.kubernetes.io/instance": "values"}) {
				t.Errorf("with %v: the budget selects %v", tc.set, pdb.Spec.Selector.MatchLabels)
			}
		}
	})

	t.Run("the replicas prefer different nodes unless an affinity is given", func(t *testing.T) {
		for _, tc := range []struct {
			set                        []string
			antiAffinity, nodeAffinity bool
		}{
			{nil, true, false},
			{[]string{"replicas=1"}, false, false},
			{[]string{"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=1",
				"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key=zone",
				"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator=Exists"}, false, true},
		} {
			affinity := deploymentOf(t, render(t, setArgs(tc.set)...)).Spec.Template.Spec.Affinity
			var anti, node bool
			if affinity != nil {
				node = affinity.NodeAffinity != nil
				if a := affinity.PodAntiAffinity; a != nil {
					terms := a.PreferredDuringSchedulingIgnoredDuringExecution
					anti = len(terms) == 1 && len(a.RequiredDuringSchedulingIgnoredDuringExecution) == 0 &&
						terms[0].PodAffinityTerm.TopologyKey == "kubernetes.io/hostname" &&
						terms[0].PodAffinityTerm.LabelSelector.MatchLabels["app.kubernetes.io/instance"] == "values"
				}
			}
			if anti != tc.antiAffinity || node != tc.nodeAffinity {
				t.Errorf("with %v: soft anti-affinity on the hostname %v, node affinity %v; want %v, %v (%+v)", tc.set, anti, node, tc.antiAffinity, tc.nodeAffinity, affinity)
			}
		}
	})

	t.Run("readiness gates add the pods' reading and patch on pods/status where the pools read", func(t *testing.T) {
		for _, tc := range []struct {
			set        []string
			kind, name string
			namespaces []string
			gates      bool
		}{
			{nil, "ClusterRole", "values-read", []string{""}, false},
			{[]string{"readinessGates.enabled=true"}, "ClusterRole", "values-read", []string{""}, true},
			{[]string{"readinessGates.enabled=true", "rbac.clusterWide=false", "rbac.namespaces={shop,other}"}, "Role", "values-read", []string{"shop", "other"}, true},
			{[]string{"rbac.clusterWide=false", "rbac.namespaces={shop}", "rbac.pods=true"}, "Role", "values-read", []string{"shop"}, false},
		} {
			objects := render(t, setArgs(tc.set)...)
			for _, ns := range tc.namespaces {
				rules := rulesOf(t, objects, tc.kind, tc.name, ns)
				if got := hasRule(rules, "pods/status", "patch"); got != tc.gates {
					t.Errorf("with %v: %s %s/%s has patch on pods/status: %v, want %v", tc.set, tc.kind, ns, tc.name, got, tc.gates)
				}
				podsRead := tc.gates || slices.Contains(tc.set, "rbac.pods=true")
				if got := hasRule(rules, "pods", "list") && hasRule(rules, "pods", "watch"); got != podsRead {
					t.Errorf("with %v: %s %s/%s has list and watch on pods: %v, want %v", tc.set, tc.kind, ns, tc.name, got, podsRead)
				}
			}
			// Nothing else anywhere may touch pods/status, and nothing
			// patches pods themselves.
			for _, o := range objects {
				if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
					continue
				}
				for _, r := range rulesOf(t, objects, o.GetKind(), o.GetName(), o.GetNamespace()) {
					// get: k8s_readiness_gate reads each pod it opens.
					if slices.Contains(r.Resources, "pods") && slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "list" && v != "watch" && (v != "get" || !tc.gates) }) {
						t.Errorf("with %v: %s %s grants %v on pods", tc.set, o.GetKind(), o.GetName(), r.Verbs)
					}
					if slices.Contains(r.Resources, "pods/status") && (!tc.gates || !reflect.DeepEqual(r.Verbs, []string{"patch"})) {
						t.Errorf("with %v: %s %s grants %v on pods/status", tc.set, o.GetKind(), o.GetName(), r.Verbs)
					}
				}
			}
		}
	})
}

// TestChartREADMEDocumentsEveryValue holds the chart's README to its
// values: each value of values.schema.json is in a table of the README,
// and values.yaml gives nothing the schema does not type.
func TestChartREADMEDocumentsEveryValue(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "charts", "terraform-provider-k8s-sync")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(chart, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var schema schemaNode
	if err := json.Unmarshal(read("values.schema.json"), &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	readme := string(read("README.md"))
	paths := schema.valuePaths("")
	if len(paths) < 30 {
		t.Fatalf("the schema has %d values: %v", len(paths), paths)
	}
	for _, p := range paths {
		if !strings.Contains(readme, "| `"+p+"` |") {
			t.Errorf("README.md has no row for the value %s", p)
		}
	}
	var values map[string]any
	if err := yaml.Unmarshal(read("values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	var walk func(prefix string, v map[string]any, node *schemaNode)
	walk = func(prefix string, v map[string]any, node *schemaNode) {
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child, ok := node.Properties[k]
			if !ok {
				t.Errorf("values.yaml gives %s%s, which the schema does not have", prefix, k)
				continue
			}
			if m, isMap := v[k].(map[string]any); isMap && child.Properties != nil {
				walk(prefix+k+".", m, child)
			}
		}
	}
	walk("", values, &schema)
}

// schemaNode is what the README test reads of a JSON Schema.
type schemaNode struct {
	Type       any                    `json:"type"`
	Properties map[string]*schemaNode `json:"properties"`
	Items      *schemaNode            `json:"items"`
}

// valuePaths are the values a README documents, sorted: each property,
// into objects the chart defines (not Kubernetes' own types, nor a
// workspace's settings, which the README lists in their row).
func (n *schemaNode) valuePaths(prefix string) []string {
	var out []string
	for k, child := range n.Properties {
		p := prefix + k
		switch {
		case child.Items != nil && child.Items.Properties != nil && k == "workspaces":
			out = append(out, p)
			for ik := range child.Items.Properties {
				out = append(out, p+"[]."+ik)
			}
		case child.Properties != nil && !slices.Contains([]string{"resources", "affinity"}, k):
			out = append(out, child.valuePaths(p+".")...)
		default:
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func deploymentOf(t *testing.T, objects []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	return (&scenario{objects: objects}).deployment(t)
}

// pdbOf is the rendered PodDisruptionBudget, or nil.
func pdbOf(t *testing.T, objects []*unstructured.Unstructured) *policyv1.PodDisruptionBudget {
	t.Helper()
	for _, o := range objects {
		if o.GetKind() == "PodDisruptionBudget" {
			var pdb policyv1.PodDisruptionBudget
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &pdb); err != nil {
				t.Fatal(err)
			}
			return &pdb
		}
	}
	return nil
}

// rulesOf are the rules of the rendered Role or ClusterRole name (namespace
// "" for a ClusterRole).
func rulesOf(t *testing.T, objects []*unstructured.Unstructured, kind, name, namespace string) []rbacv1.PolicyRule {
	t.Helper()
	for _, o := range objects {
		if o.GetKind() == kind && o.GetName() == name && o.GetNamespace() == namespace {
			var role rbacv1.ClusterRole // a Role's rules are the same
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
				t.Fatal(err)
			}
			return role.Rules
		}
	}
	t.Fatalf("no %s %s in namespace %q rendered", kind, name, namespace)
	return nil
}

func hasRule(rules []rbacv1.PolicyRule, resource, verb string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
	})
}

func equalResources(a, b corev1.ResourceRequirements) bool {
	eq := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || v.Cmp(w) != 0 {
				return false
			}
		}
		return true
	}
	return eq(a.Requests, b.Requests) && eq(a.Limits, b.Limits)
}
