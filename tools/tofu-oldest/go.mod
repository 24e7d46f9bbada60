// Pins the oldest OpenTofu CLI that make test-matrix runs the acceptance
// tests on (tools/harness/internal/clis/module.go builds it from this module's go.sum).
module github.com/vigie/terraform-provider-k8s/tools/tofu-oldest

go 1.26.0

require github.com/opentofu/opentofu v1.6.3
