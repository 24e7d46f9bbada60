// Pins the Terraform CLI that the acceptance tests run besides the one on
// PATH (tools/harness/internal/clis/module.go). Nothing is compiled from this module
// itself: the harness checks Terraform's module against go.sum, copies it,
// leaves out the remote-state backends that Terraform publishes as separate
// modules (they are not in its module archive) and builds the copy.
module github.com/vigie/terraform-provider-k8s/tools/terraform

go 1.26.0

require github.com/hashicorp/terraform v1.16.4
