package readme

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// env is what the acceptance test uses: the local control plane, the
// repository's root and the CLI it runs.
var env struct {
	root    string
	cluster *testcluster.Cluster
	cli     string
}

// node is the Node the quick start's pods are bound to.
const node = "readme-node"

func TestMain(m *testing.M) {
	code, err := setUp(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "readme:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setUp(m *testing.M) (int, error) {
	if os.Getenv("TF_ACC") == "" {
		return m.Run(), nil // the acceptance test skips and says why
	}
	var err error
	if env.cli = os.Getenv("TF_ACC_TERRAFORM_PATH"); env.cli == "" {
		if env.cli, err = exec.LookPath("terraform"); err != nil {
			return 0, fmt.Errorf("TF_ACC_TERRAFORM_PATH is not set and terraform is not on PATH: %w", err)
		}
	}
	if env.root, err = testcluster.RepoRoot(); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	env.cluster, err = testcluster.Start(ctx, testcluster.Options{Version: os.Getenv("K8S_TF_K8S_VERSION"), Log: os.Stderr})
	if err != nil {
		return 0, err
	}
	defer env.cluster.Stop()
	if err := testcluster.EnsureNode(ctx, env.cluster.Client(), node, "zone-a"); err != nil {
		return 0, err
	}
	return m.Run(), nil
}
