// Package imagetest runs the companion's image (make image) as users deploy
// it: in a container that podman starts the way the kubelet would start the
// pod of examples/sync/kubernetes/companion.yaml or of the chart
// (charts/terraform-provider-k8s-sync), against the local control plane of
// test/testcluster, with the state in the `kubernetes` backend. It also
// lints and applies the chart, and runs the commands of the companion's
// guide. `make testacc-image` runs it (it builds the image and installs
// podman); it needs TF_ACC=1 and K8S_TF_IMAGE, the image's docker-archive.
package imagetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// env is what the tests share: one control plane, one podman with the
// image loaded.
var env struct {
	root    string
	cluster *testcluster.Cluster
	client  kubernetes.Interface
	podman  *podman
	// image is the loaded image's name; helm the path of helm.
	image, helm string
}

// The image's name in the chart's defaults and the manifest.
const publishedImage = "ghcr.io/vigie/terraform-provider-k8s-sync:0.1.0"

func TestMain(m *testing.M) {
	code, err := setUp(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagetest:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setUp(m *testing.M) (int, error) {
	archive := os.Getenv("K8S_TF_IMAGE")
	if os.Getenv("TF_ACC") == "" || archive == "" {
		// The tests skip and say why.
		return m.Run(), nil
	}
	if _, err := exec.LookPath("podman"); err != nil {
		return 0, fmt.Errorf("podman is not on PATH (make testacc-image installs it): %w", err)
	}
	var err error
	if env.root, err = testcluster.RepoRoot(); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if env.helm, err = testcluster.Helm(ctx, env.root, os.Stderr); err != nil {
		return 0, err
	}
	env.cluster, err = testcluster.Start(ctx, testcluster.Options{Version: os.Getenv("K8S_TF_K8S_VERSION"), Log: os.Stderr})
	if err != nil {
		return 0, err
	}
	defer env.cluster.Stop()
	cfg, err := env.cluster.RESTConfig()
	if err != nil {
		return 0, err
	}
	if env.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return 0, err
	}
	if err := testcluster.EnsureNode(ctx, env.client, node, "zone-a"); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "k8s-imagetest-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if env.podman, err = newPodman(dir, env.cluster.Server, filepath.Join(env.cluster.Dir, testcluster.CAFile), env.client); err != nil {
		return 0, err
	}
	start := time.Now()
	if env.image, err = env.podman.load(ctx, archive); err != nil {
		return 0, err
	}
	fmt.Fprintf(os.Stderr, "imagetest: loaded %s in %s\n", env.image, time.Since(start).Round(time.Millisecond))
	env.podman.images[publishedImage] = env.image
	env.podman.images[env.image] = env.image
	return m.Run(), nil
}

func needImage(t *testing.T) {
	t.Helper()
	if env.cluster == nil {
		t.Skip("acceptance test of the image: set TF_ACC=1 and K8S_TF_IMAGE to the image's docker-archive (make testacc-image does)")
	}
}

func testCtx(t *testing.T, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// syncBuffer is a buffer written by a process and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
