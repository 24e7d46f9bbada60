// Pins the oldest Terraform CLI that make test-matrix runs the acceptance
// tests on (tools/harness/internal/clis/module.go builds it from this module's go.sum).
module github.com/vigie/terraform-provider-k8s/tools/terraform-oldest

go 1.26.0

require github.com/hashicorp/terraform v1.5.7
