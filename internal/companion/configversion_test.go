package companion

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The configuration's version is what releases a change set held for it
// (refused, waiting): it must change whenever a file the companion reads
// changes, the local modules' files as much as the root's.
func TestTheConfigurationsVersionCoversEveryFileTheCompanionReads(t *testing.T) {
	files := map[string]string{
		"main.tf": `
module "lb" {
  source = "./modules/lb"
}
module "remote" {
  source = "example.com/acme/lb/aws"
}
`,
		"extra.tf.json":           `{}`,
		"modules/lb/main.tf":      "module \"inner\" {\n  source = \"../inner\"\n}\n",
		"modules/lb/vars.tf.json": `{}`,
		"modules/inner/main.tf":   `resource "terraform_data" "x" {}`,
		"README.md":               "not read",
		"modules/lb/notes.txt":    "not read",
		"unused/main.tf":          "# a folder no module call names",
	}
	for _, tc := range []struct {
		name    string
		edit    string
		changes bool
	}{
		{name: "a file of the root module", edit: "main.tf", changes: true},
		{name: "a JSON file of the root module", edit: "extra.tf.json", changes: true},
		{name: "a file of a local module", edit: "modules/lb/main.tf", changes: true},
		{name: "a JSON file of a local module", edit: "modules/lb/vars.tf.json", changes: true},
		{name: "a file of a module a local module calls", edit: "modules/inner/main.tf", changes: true},
		{name: "a file that is not configuration", edit: "README.md", changes: false},
		{name: "a file beside a local module's", edit: "modules/lb/notes.txt", changes: false},
		{name: "a folder no module call names", edit: "unused/main.tf", changes: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, files)
			before := configVersion(dir)
			path := filepath.Join(dir, tc.edit)
			if err := os.WriteFile(path, []byte(files[tc.edit]+"\n# edited\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			later := time.Now().Add(time.Minute)
			if err := os.Chtimes(path, later, later); err != nil {
				t.Fatal(err)
			}
			if after := configVersion(dir); (after != before) != tc.changes {
				t.Errorf("editing %s: version %s -> %s, want changed=%v", tc.edit, before, after, tc.changes)
			}
		})
	}
}

// A module that calls itself (a mistake Terraform refuses) does not make
// the version loop.
func TestTheConfigurationsVersionEndsOnAModuleCycle(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"main.tf":   "module \"a\" {\n  source = \"./a\"\n}\n",
		"a/main.tf": "module \"b\" {\n  source = \"../b\"\n}\n",
		"b/main.tf": "module \"a\" {\n  source = \"../a\"\n}\n",
	})
	if configVersion(dir) == "" {
		t.Fatal("no version")
	}
}
