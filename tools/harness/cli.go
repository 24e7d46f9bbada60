package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vigie/terraform-provider-k8s/internal/toolbuild"
)

// The CLIs the acceptance tests run on, by the name the Makefile's ACC_CLIS
// list gives them. A CLI built from source is a build-only module under
// tools/ (go.mod with a tool line, go.sum) plus an entry here; `make testacc`
// runs the tests once per name in ACC_CLIS.
var clis = map[string]cliSource{
	// terraform: the one on PATH.
	"terraform": {find: func(context.Context, string) (string, error) { return exec.LookPath("terraform") }},
	// tofu: OpenTofu built from tools/tofu, with the flags of its release
	// build (static, stripped, and version.dev=no so that it reports 1.x.y
	// rather than 1.x.y-dev).
	"tofu": {module: "tofu", find: func(ctx context.Context, module string) (string, error) {
		return buildCLI(ctx, toolbuild.Spec{
			Name:     "tofu",
			Module:   module,
			Binaries: map[string]string{"tofu": "github.com/opentofu/opentofu/cmd/tofu"},
			LDFlags:  "-s -w -X github.com/opentofu/opentofu/version.dev=no",
		})
	}},
	// terraform-1.16: the newest Terraform whose source the module proxy
	// serves, built from its own module (climodule.go).
	"terraform-1.16": {module: "terraform", find: func(ctx context.Context, module string) (string, error) {
		return moduleCLI(ctx, "terraform", module)
	}},
	// terraform-1.5 and tofu-1.6: the oldest that build here, for make test-matrix.
	"terraform-1.5": {module: "terraform-oldest", find: func(ctx context.Context, module string) (string, error) {
		return moduleCLI(ctx, "terraform", module)
	}},
	"tofu-1.6": {module: "tofu-oldest", find: func(ctx context.Context, module string) (string, error) {
		return moduleCLI(ctx, "tofu", module)
	}},
}

// cliSource is how one CLI is found: module names the directory under tools/
// of a CLI built from source (empty for one found on PATH), and find gives
// the CLI's path, given that directory.
type cliSource struct {
	module string
	find   func(ctx context.Context, module string) (string, error)
}

// moduleDir is the directory of the CLI's module in the repository at root,
// or "" for a CLI found on PATH.
func (s cliSource) moduleDir(root string) string {
	if s.module == "" {
		return ""
	}
	return filepath.Join(root, "tools", s.module)
}

func buildCLI(ctx context.Context, spec toolbuild.Spec) (string, error) {
	spec.Log = os.Stderr
	bin, err := toolbuild.Build(ctx, spec)
	if err != nil {
		return "", err
	}
	for name := range spec.Binaries {
		return filepath.Join(bin, name), nil
	}
	return "", errors.New("no binary")
}

// cli prints the path of the named CLI, building it first if it is built
// from source.
func cli(ctx context.Context, args []string) error {
	names := make([]string, 0, len(clis))
	for name := range clis {
		names = append(names, name)
	}
	slices.Sort(names)
	source, known := clis[args0(args)]
	if len(args) != 1 || !known {
		return fmt.Errorf("usage: harness cli %s", strings.Join(names, "|"))
	}
	path, err := source.find(ctx, source.moduleDir(repoRoot()))
	if err != nil {
		return fmt.Errorf("CLI %s: %w", args[0], err)
	}
	fmt.Println(path)
	return nil
}

func args0(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
