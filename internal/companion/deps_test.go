package companion

import (
	"os"
	"path/filepath"
	"testing"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPoolChangesAreFoundThroughLocalsModulesAndOutputs(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"main.tf": `
data "k8s_ready_endpoints" "web" {
  service = "web"
}
data "k8s_services" "fleet" {
  namespace = "shop"
}
locals {
  members = [for e in data.k8s_ready_endpoints.web.endpoints : "${e.address}:${e.port}"]
  renamed = local.members
  other   = "constant"
}
resource "terraform_data" "direct" {
  input = data.k8s_ready_endpoints.web.endpoints
}
resource "terraform_data" "through_locals" {
  count = 2
  input = local.renamed
}
resource "terraform_data" "unrelated" {
  input = local.other
}
resource "terraform_data" "in_a_block" {
  lifecycle {
    replace_triggered_by = [terraform_data.direct]
  }
}
module "lb" {
  source  = "./lb"
  members = local.members
  name    = "web"
}
resource "terraform_data" "from_module_output" {
  input = module.lb.rendered
}
resource "terraform_data" "from_module_name" {
  input = module.lb.name
}
module "registry" {
  source   = "example/lb/aws"
  for_each = data.k8s_services.fleet.services
  pool     = each.value.endpoints
}
module "registry_unrelated" {
  source = "example/lb/aws"
  pool   = []
}
`,
		"lb/main.tf": `
variable "members" {}
variable "name" {}
resource "terraform_data" "backend" {
  input = var.members
}
resource "terraform_data" "label" {
  input = var.name
}
output "rendered" {
  value = terraform_data.backend.output
}
output "name" {
  value = var.name
}
`,
	})
	g, err := readConfiguration(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := poolChangeFilter{dependent: g.dependents([]string{"data.k8s_ready_endpoints.web", "data.k8s_services.fleet"}), opaque: g.opaque}
	tests := []struct {
		address string
		want    bool
	}{
		{"terraform_data.direct", true},
		{"terraform_data.through_locals[1]", true},
		{"terraform_data.in_a_block", true},
		{"module.lb.terraform_data.backend", true},
		{"terraform_data.from_module_output", true},
		{`module.registry["shop/web"].aws_lb_target_group_attachment.m[0]`, true},
		{"terraform_data.unrelated", false},
		{"module.lb.terraform_data.label", false},
		{"terraform_data.from_module_name", false},
		{"module.registry_unrelated.aws_lb.this", false},
		{"terraform_data.not_in_the_configuration", false},
	}
	for _, tt := range tests {
		if got := f.allows(tt.address); got != tt.want {
			t.Errorf("allows(%s) = %v, want %v", tt.address, got, tt.want)
		}
	}
}

func TestAllowedAddressesReplaceTheDerivedSet(t *testing.T) {
	f := poolChangeFilter{allowed: []string{"terraform_data.pool", "module.lb"}}
	for address, want := range map[string]bool{
		"terraform_data.pool":         true,
		`terraform_data.pool["a"]`:    true,
		"module.lb.terraform_data.x":  true,
		`module.lb["a"].aws_lb.this`:  true,
		"terraform_data.pool_other":   false,
		"module.lbx.terraform_data.x": false,
		"terraform_data.other":        false,
	} {
		if got := f.allows(address); got != want {
			t.Errorf("allows(%s) = %v, want %v", address, got, want)
		}
	}
}

func TestWithoutKeys(t *testing.T) {
	for in, want := range map[string]string{
		`module.a["x"].aws_lb.m[2]`:    "module.a.aws_lb.m",
		`terraform_data.p["a]b"]`:      "terraform_data.p",
		`terraform_data.p["q\"]"]`:     "terraform_data.p",
		"data.k8s_ready_endpoints.web": "data.k8s_ready_endpoints.web",
	} {
		if got := withoutKeys(in); got != want {
			t.Errorf("withoutKeys(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestAConfigurationWithoutTfFilesIsAnError(t *testing.T) {
	if _, err := readConfiguration(t.TempDir()); err == nil {
		t.Error("no error for a directory without .tf files")
	}
}
