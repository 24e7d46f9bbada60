package testcluster

import (
	"context"
	"io"
	"path/filepath"

	"github.com/vigie/terraform-provider-k8s/test/toolbuild"
)

// Helm finds or builds helm from its build-only module, tools/helm of the
// repository at root (built once, then cached), and gives its path: the
// chart's lint and rendering, in tests and `make docs`.
func Helm(ctx context.Context, root string, log io.Writer) (string, error) {
	bin, err := toolbuild.Build(ctx, toolbuild.Spec{
		Name:     "helm",
		Module:   filepath.Join(root, "tools", "helm"),
		Binaries: map[string]string{"helm": "helm.sh/helm/v3/cmd/helm"},
		LDFlags:  "-s -w",
		Log:      log,
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(bin, "helm"), nil
}
