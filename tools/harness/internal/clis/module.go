package clis

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vigie/terraform-provider-k8s/test/toolbuild"
)

// moduleCLI builds a Terraform or OpenTofu CLI from its own Go module, at
// the version that the build-only module pin (tools/terraform,
// tools/terraform-oldest, tools/tofu-oldest) requires and with the checksum
// of the pin's go.sum, as its release is built (static, stripped,
// version.dev=no so that it reports 1.x.y). Its code comes from the module
// cache and is never committed here.
func moduleCLI(ctx context.Context, name, pin string) (string, error) {
	module, version, err := pinnedModule(pin)
	if err != nil {
		return "", err
	}
	main := "."
	if module == "github.com/opentofu/opentofu" {
		main = "./cmd/tofu"
	}
	return buildCLI(ctx, toolbuild.Spec{
		Name:     name,
		Module:   pin,
		Binaries: map[string]string{name: main},
		LDFlags:  "-s -w -X " + module + "/version.dev=no",
		Prepare: func(ctx context.Context, dir string, log io.Writer) (string, error) {
			return copyModule(ctx, pin, module, version, filepath.Join(dir, "src"), log)
		},
	})
}

// pinnedModule reads the one `require MODULE VERSION` of a pin's go.mod.
func pinnedModule(pin string) (module, version string, err error) {
	data, err := os.ReadFile(filepath.Join(pin, "go.mod"))
	if err != nil {
		return "", "", err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "require" {
			return f[1], f[2], nil
		}
	}
	return "", "", fmt.Errorf("%s/go.mod requires no module", pin)
}

// copyModule downloads the module through the Go module proxy, checks it
// against the pin's go.sum, and copies it to src, writable. Since v1.6
// Terraform keeps most remote-state backends (s3, gcs, azurerm, consul...) in
// separate modules that its module archive lacks, replaced by directories
// that are not there: the copy leaves them out of its go.mod and out of
// internal/backend/init. The CLI so built has the local, http, inmem, remote
// and cloud backends, all the tests use.
func copyModule(ctx context.Context, pin, module, version, src string, log io.Writer) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir, cmd.Env = pin, toolbuild.BuildEnv()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	}
	var got struct{ Dir, Sum string }
	if err := json.Unmarshal(out, &got); err != nil {
		return "", err
	}
	sums, err := os.ReadFile(filepath.Join(pin, "go.sum"))
	if err != nil {
		return "", err
	}
	if want := module + " " + version + " " + got.Sum; !bytes.Contains(sums, []byte(want+"\n")) {
		return "", fmt.Errorf("%s %s: checksum %s is not the one in %s/go.sum", module, version, got.Sum, pin)
	}
	fmt.Fprintf(log, "copying %s %s to build it (a cold build takes ~5-8 min on 2 idle cores)...\n", module, version)
	_ = os.RemoveAll(src)
	if out, err := exec.CommandContext(ctx, "cp", "-R", got.Dir, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copy %s: %w\n%s", got.Dir, err, out)
	}
	if out, err := exec.CommandContext(ctx, "chmod", "-R", "u+w", src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("chmod %s: %w\n%s", src, err, out)
	}
	return src, dropMissingModules(ctx, src, log)
}

// dropMissingModules removes the requirements replaced by a local directory
// that the module archive does not hold, and the backends they register.
func dropMissingModules(ctx context.Context, src string, log io.Writer) error {
	goMod := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "go", append([]string{"mod", "edit"}, args...)...)
		cmd.Dir, cmd.Env = src, toolbuild.BuildEnv()
		return cmd.Output()
	}
	out, err := goMod("-json")
	if err != nil {
		return err
	}
	var mod struct {
		Replace []struct{ Old, New struct{ Path string } }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		return err
	}
	initFile := filepath.Join(src, "internal", "backend", "init", "init.go")
	for _, r := range mod.Replace {
		if !strings.HasPrefix(r.New.Path, "./") {
			continue
		}
		if _, err := os.Stat(filepath.Join(src, r.New.Path)); err == nil {
			continue
		}
		if _, err := goMod("-droprequire="+r.Old.Path, "-dropreplace="+r.Old.Path); err != nil {
			return err
		}
		if dropped, err := dropImport(initFile, r.Old.Path); err != nil {
			return err
		} else if dropped {
			fmt.Fprintf(log, "  left out %s\n", r.Old.Path)
		}
	}
	return nil
}

// dropImport removes `\tALIAS "path"` and every line calling ALIAS.New( from
// file, and says whether it found the import.
func dropImport(file, path string) (bool, error) {
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	alias := ""
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for scanner.Scan() {
		if f := strings.Fields(scanner.Text()); len(f) == 2 && f[1] == `"`+path+`"` {
			alias = f[0]
		}
	}
	if alias == "" {
		return false, nil
	}
	var kept []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.TrimSpace(line) == alias+` "`+path+`"` || strings.Contains(line, alias+".New(") {
			continue
		}
		kept = append(kept, line)
	}
	return true, os.WriteFile(file, []byte(strings.Join(kept, "\n")), 0o644)
}
