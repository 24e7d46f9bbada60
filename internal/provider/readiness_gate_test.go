package provider

import "testing"

func TestReadinessGateArgumentsAreRefusedNamingThem(t *testing.T) {
	expectRefused(t, []refusedConfig{
		{"a gate that is not a condition type, in k8s_ready_endpoints", `
  service        = "web"
  readiness_gate = "not a/condition/type"`, phrase("Attribute readiness_gate must be a pod condition type", `"not a/condition/type"`)},
		{"a gate on a pool of nodes", `
  service        = "web"
  target         = "nodes"
  readiness_gate = "k8s.example/pool-web"`, phrase("Pod Argument With Node Target", "readiness_gate", `set target = "pods"`)},
	}, func(args string) string {
		return unconfiguredProvider + "data \"k8s_ready_endpoints\" \"web\" {\n  " + args + "\n}"
	})
	expectRefused(t, []refusedConfig{
		{"a gate that is not a condition type, in k8s_services", `
  readiness_gate = "-bad-"`, phrase("Attribute readiness_gate must be a pod condition type", `"-bad-"`)},
	}, func(args string) string {
		return unconfiguredProvider + "data \"k8s_services\" \"all\" {\n  " + args + "\n}\n"
	})
	expectRefused(t, []refusedConfig{
		{"a gate that is not a condition type, in k8s_readiness_gate", `
  readiness_gate = "a b"
  pods           = []`, phrase("Attribute readiness_gate must be a pod condition type", `"a b"`)},
		{"a namespace that is not a DNS label", `
  namespace      = "Shop"
  readiness_gate = "k8s.example/pool-web"
  pods           = []`, phrase("Attribute namespace must be a DNS-1123 label", `"Shop"`)},
	}, func(args string) string {
		return unconfiguredProvider + "resource \"k8s_readiness_gate\" \"web\" {\n  " + args + "\n}\n"
	})
}
