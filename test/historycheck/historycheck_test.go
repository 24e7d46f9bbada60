package historycheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestALineOfUserDocs(t *testing.T) {
	tests := []struct {
		name           string
		line           string
		releaseHeading bool
		refused        string // a part of the first reason, empty when the line passes
	}{
		{name: "an abbreviated commit id is refused", line: "measured at commit 8331de0, load 0.2", refused: "commit-like id"},
		{name: "a full commit id is refused", line: "see 3a33fb6c2d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a", refused: "commit-like id"},
		{name: "a commit id in parentheses is refused", line: "the incumbent (3a33fb6) was measured", refused: "commit-like id"},
		{name: "an issue number with a hash is refused", line: "the soak of #28 holds", refused: "issue number"},
		{name: "an issue named in words is refused", line: "the size of issue 39", refused: "issue number"},
		{name: "a pull request is refused", line: "as PR 12 did", refused: "issue number"},
		{name: "a date is refused", line: "measured once, 2026-11-30", refused: "date"},
		{name: "a date in a CHANGELOG's release heading passes", line: "## 0.1.0 (2026-12-24)", releaseHeading: true},
		{name: "a date in the CHANGELOG's text is refused", line: "* released on 2026-12-24", refused: "date"},
		{name: "no longer is refused", line: "the companion no longer finds a Service different", refused: "history"},
		{name: "before these changes is refused", line: "48 MiB (322 MiB before these changes)", refused: "history"},
		{name: "the previous run is refused", line: "1.60x in the previous run", refused: "history"},
		{name: "another team's builds are refused", line: "shared with other engineers' builds", refused: "history"},
		{name: "an Azure tenant id in the AKS example passes", line: `  tenant_id = "6dae42f8-4368-4678-94ff-3960e28e3630"`},
		{name: "a pod name with its template hash passes", line: `pod = "web-6d4cf56db6-x7x9k"`},
		{name: "an image digest passes", line: "image: ghcr.io/x/y@sha256:e3b2327e3a5ab8c76f5ece68936e4cafaa82edf58486b769727ab0b3b97a5b0d"},
		{name: "an RFC 3339 timestamp in an example's value passes", line: `"lb.example.com/expires" = "2030-01-02T15:04:05Z"`},
		{name: "a word of hex letters passes", line: "a deadbeef facade accede", refused: ""},
		{name: "a number passes", line: "5000 Services of 10 endpoints, 1234567 bytes"},
		{name: "a Markdown heading passes", line: "## Install"},
		{name: "an anchor in a link passes", line: "[Pods or nodes?](data-sources/ready_endpoints.md#pods-or-nodes)"},
		{name: "before in its ordinary sense passes", line: "`haproxy -c` checks the file before the reload"},
		{name: "a version passes", line: "Terraform 1.5.7 and OpenTofu v1.12.6, Kubernetes v1.37.2"},
		{name: "an IPv6 address passes", line: "fd00:10:244::1a2b and 2001:db8::7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why := CheckLine(tt.line, tt.releaseHeading)
			switch {
			case tt.refused == "" && len(why) > 0:
				t.Errorf("CheckLine(%q) refused it: %v; want it passed", tt.line, why)
			case tt.refused != "" && len(why) == 0:
				t.Errorf("CheckLine(%q) passed it; want it refused for a %s", tt.line, tt.refused)
			case tt.refused != "" && !strings.Contains(why[0], tt.refused):
				t.Errorf("CheckLine(%q) = %v; want a %s", tt.line, why, tt.refused)
			}
		})
	}
}

func TestCheckNamesTheFileAndLineOfWhatItRefuses(t *testing.T) {
	root := t.TempDir()
	write := writerIn(t, root)
	write("README.md", "# p\n\nIt works.\n")
	write("CHANGELOG.md", "# Changelog\n\n## 0.1.0 (2026-12-24)\n\n* A pool, no longer empty.\n")
	write("docs/index.md", "fine\nmeasured 2026-12-01\n")
	write("docs/notes.txt", "2026-12-01 is not Markdown: not read\n")
	write("examples/a/main.tf", "# fine\n")
	write("examples/a/main_test.go", "// 8331de0 in a test: not read\n")
	write("charts/c/README.md", "see #12\n")
	write("charts/c/values.yaml", "# 8331de0: not read\n")

	paths, err := Paths(root)
	if err != nil {
		t.Fatal(err)
	}
	wantPaths := []string{"CHANGELOG.md", "README.md", "charts/c/README.md", "docs/index.md", "examples/a/main.tf"}
	if strings.Join(paths, " ") != strings.Join(wantPaths, " ") {
		t.Errorf("Paths = %v, want %v", paths, wantPaths)
	}
	found, err := Check(root, paths)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, fmt.Sprintf("%s:%d", f.File, f.Line))
	}
	want := []string{"CHANGELOG.md:5", "charts/c/README.md:1", "docs/index.md:2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("findings at %v, want %v (%v)", got, want, found)
	}
}

// writerIn writes files under root, their folders made as needed.
func writerIn(t *testing.T, root string) func(rel, text string) {
	return func(rel, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
