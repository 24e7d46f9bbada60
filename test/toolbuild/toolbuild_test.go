package toolbuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// tinyModule writes a module with one command that prints what it is told.
func tinyModule(t *testing.T, message string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":        "module example.test/tiny\n\ngo 1.26.0\n",
		"go.sum":        "// " + message + "\n", // the cache key
		"hello/main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print(\"" + message + "\") }\n",
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestConcurrentBuildsShareOneCachedBinaryPerGoSum(t *testing.T) {
	t.Setenv("K8S_TF_CACHE", t.TempDir())
	spec := Spec{Name: "tiny", Module: tinyModule(t, "one"), Binaries: map[string]string{"hello": "./hello"}}
	var wg sync.WaitGroup
	dirs := make([]string, 3)
	errs := make([]error, 3)
	for i := range dirs {
		wg.Go(func() { dirs[i], errs[i] = Build(context.Background(), spec) })
	}
	wg.Wait()
	for i := range dirs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if dirs[i] != dirs[0] {
			t.Errorf("builds in %s and %s", dirs[0], dirs[i])
		}
	}
	out, err := exec.Command(filepath.Join(dirs[0], "hello")).Output()
	if err != nil || string(out) != "one" {
		t.Fatalf("built binary says %q (%v), want one", out, err)
	}
	entries, _ := os.ReadDir(dirs[0])
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}

	other := Spec{Name: "tiny", Module: tinyModule(t, "two"), Binaries: spec.Binaries}
	otherDir, err := Build(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	if otherDir == dirs[0] {
		t.Errorf("another go.sum was given the same cache directory %s", otherDir)
	}
}
