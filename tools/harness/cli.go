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
var clis = map[string]func(ctx context.Context, root string) (string, error){
	// terraform: the one on PATH.
	"terraform": func(context.Context, string) (string, error) { return exec.LookPath("terraform") },
	// tofu: OpenTofu built from tools/tofu, with the flags of its release
	// build (static, stripped, and version.dev=no so that it reports 1.x.y
	// rather than 1.x.y-dev).
	"tofu": func(ctx context.Context, root string) (string, error) {
		return buildCLI(ctx, toolbuild.Spec{
			Name:     "tofu",
			Module:   filepath.Join(root, "tools", "tofu"),
			Binaries: map[string]string{"tofu": "github.com/opentofu/opentofu/cmd/tofu"},
			LDFlags:  "-s -w -X github.com/opentofu/opentofu/version.dev=no",
		})
	},
	// terraform-1.15: the newest Terraform whose source the module proxy
	// serves, built from its own module (climodule.go).
	"terraform-1.15": func(ctx context.Context, root string) (string, error) {
		return moduleCLI(ctx, "terraform", filepath.Join(root, "tools", "terraform"))
	},
	// terraform-1.5 and tofu-1.6: the oldest that build here, for make test-matrix.
	"terraform-1.5": func(ctx context.Context, root string) (string, error) {
		return moduleCLI(ctx, "terraform", filepath.Join(root, "tools", "terraform-oldest"))
	},
	"tofu-1.6": func(ctx context.Context, root string) (string, error) {
		return moduleCLI(ctx, "tofu", filepath.Join(root, "tools", "tofu-oldest"))
	},
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
	if len(args) != 1 || clis[args[0]] == nil {
		return fmt.Errorf("usage: harness cli %s", strings.Join(names, "|"))
	}
	path, err := clis[args[0]](ctx, repoRoot())
	if err != nil {
		return fmt.Errorf("CLI %s: %w", args[0], err)
	}
	fmt.Println(path)
	return nil
}
