// Package clis finds the Terraform and OpenTofu CLIs the acceptance tests
// run on, by the names the Makefile's CLI lists give them, building those
// built from source (their build-only modules under tools/).
package clis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vigie/terraform-provider-k8s/test/toolbuild"
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
	// serves, built from its own module (module.go).
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

// Names are the names of every CLI known, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(clis))
}

// Known says whether name is a CLI of the table.
func Known(name string) bool {
	_, ok := clis[name]
	return ok
}

// ModuleDir is the directory of the named CLI's build-only module in the
// repository at root, or "" for one found on PATH.
func ModuleDir(name, root string) string { return clis[name].moduleDir(root) }

// Find gives the path of the named CLI, building it first (from its module
// in the repository at root) if it is built from source.
func Find(ctx context.Context, name, root string) (string, error) {
	source, ok := clis[name]
	if !ok {
		return "", fmt.Errorf("no CLI %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return source.find(ctx, source.moduleDir(root))
}
