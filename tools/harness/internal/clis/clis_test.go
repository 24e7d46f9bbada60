package clis

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository this package is in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// makefileCLIs gives the names of the CLI lists of the GNUmakefile
// (ACC_CLIS, MATRIX_CLIS), without the lists they include.
func makefileCLIs(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "GNUmakefile"))
	if err != nil {
		t.Fatal(err)
	}
	lists := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^(ACC_CLIS|MATRIX_CLIS) \?= (.*)$`).FindAllStringSubmatch(string(data), -1) {
		for _, name := range strings.Fields(m[2]) {
			if !strings.HasPrefix(name, "$(") {
				lists[m[1]] = append(lists[m[1]], name)
			}
		}
	}
	if len(lists["ACC_CLIS"]) == 0 || len(lists["MATRIX_CLIS"]) == 0 {
		t.Fatalf("no ACC_CLIS or MATRIX_CLIS list in the GNUmakefile: %v", lists)
	}
	return lists
}

func TestEveryCLIThatTheMakefileRunsIsInTheTable(t *testing.T) {
	for list, names := range makefileCLIs(t) {
		for _, name := range names {
			if _, known := clis[name]; !known {
				t.Errorf("%s names %q, which clis.go does not know", list, name)
			}
		}
	}
}

func TestEveryCLIOfTheTableIsRunByTheMakefile(t *testing.T) {
	run := map[string]bool{}
	for _, names := range makefileCLIs(t) {
		for _, name := range names {
			run[name] = true
		}
	}
	for name := range clis {
		if !run[name] {
			t.Errorf("clis.go knows %q, which no list of the GNUmakefile runs", name)
		}
	}
}

// A CLI built from source is a build-only module under tools/ with the
// go.sum that pins it.
func TestEveryCLIBuiltFromSourceHasItsModule(t *testing.T) {
	built := 0
	for name, source := range clis {
		dir := source.moduleDir(repoRoot(t))
		if dir == "" {
			continue
		}
		built++
		for _, file := range []string{"go.mod", "go.sum"} {
			if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
				t.Errorf("CLI %s: %v", name, err)
			}
		}
	}
	if built == 0 {
		t.Error("no CLI is built from source")
	}
}

func TestTheTerraformCLIIsTheOneOnPath(t *testing.T) {
	want, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("no terraform on PATH")
	}
	source := clis["terraform"]
	got, err := source.find(context.Background(), source.moduleDir(repoRoot(t)))
	if err != nil || got != want {
		t.Errorf("terraform is %q (%v), want %q", got, err, want)
	}
}
