package main

import (
	"context"
	"fmt"
	"os"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// helm prints the path of helm, built from tools/helm if needed (make docs
// renders the companion's chart with it).
func helm(ctx context.Context) error {
	path, err := testcluster.Helm(ctx, repoRoot(), os.Stderr)
	if err != nil {
		return err
	}
	fmt.Println(path)
	return nil
}
