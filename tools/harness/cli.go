package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/clis"
)

// cli prints the path of the named CLI, building it first if it is built
// from source.
func cli(ctx context.Context, args []string) error {
	if len(args) != 1 || !clis.Known(args[0]) {
		return fmt.Errorf("usage: harness cli %s", strings.Join(clis.Names(), "|"))
	}
	path, err := clis.Find(ctx, args[0], repoRoot())
	if err != nil {
		return fmt.Errorf("CLI %s: %w", args[0], err)
	}
	fmt.Println(path)
	return nil
}
