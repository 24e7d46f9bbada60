package imagetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestAccImageRunsCommand: -command runs in the image, which has no
// shell, as a program and its arguments: here the image's own tofu, whose
// apply brings the pool current (check says 0 after it); a command that
// needs a shell stops the companion at start, naming what is missing.
func TestAccImageRunsCommand(t *testing.T) {
	needImage(t)
	manifest, err := os.ReadFile(filepath.Join(env.root, manifestPath))
	if err != nil {
		t.Fatal(err)
	}
	s := deploy(t, manifest, "web-command")
	ctx := testCtx(t, 5*time.Minute)
	s.setReady(ctx, t, s.pods[1].Name)
	check := []string{"check", "-chdir=/config", "-log-format=json"}
	if r := s.pod.exec(ctx, t, syncContainer, check); r.code != 2 {
		t.Fatalf("check after %s became Ready exited %d, want 2:\n%s%s", s.pods[1].Name, r.code, r.stdout, r.stderr)
	}

	port := freePort(t)
	command := `-command=tofu apply -auto-approve -input=false -no-color "-lock-timeout=30s"`
	args := append(slices.Clone(s.pod.container(t, syncContainer).Args), settleForTests, "-settle-max=2s", "-listen=127.0.0.1:"+strconv.Itoa(port), command)
	stop, log := s.pod.start(ctx, t, args)
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return metric(port, `k8s_sync_runs_total{result="delivered"}`) >= 1, nil
	})
	if err != nil {
		t.Fatalf("the command delivered nothing within 2 minutes:\n%s", log.String())
	}
	if failed := metric(port, `k8s_sync_runs_total{result="failed"}`); failed > 0 {
		t.Errorf("%v runs of the command failed:\n%s", failed, log.String())
	}
	if end := stop(); end.code != 0 {
		t.Fatalf("sync on SIGTERM exited %d:\n%s", end.code, end.stderr)
	}
	t.Logf("the command ran in the container:\n%s", grepLines(log.String(), `"msg":"run `))
	if r := s.pod.exec(ctx, t, syncContainer, check); r.code != 0 {
		t.Fatalf("check after the command's apply exited %d, want 0 (the command's tofu apply brought the pool current):\n%s%s", r.code, r.stdout, r.stderr)
	}

	t.Run("a command that needs a shell", func(t *testing.T) {
		args := append(slices.Clone(s.pod.container(t, syncContainer).Args), "-listen=", `-command=sh -c 'echo "$K8S_SYNC_CHANGES"'`)
		expectExit1(t, s.pod.exec(ctx, t, syncContainer, args), `the program sh is not on PATH (/usr/local/bin)`)
	})
}

// TestAccImageWithMoreProviders: make image IMAGE_PROVIDERS=DIR puts the
// providers of DIR, a filesystem mirror, in the image's mirror, where tofu
// init finds them with no network at all, and tofu validate runs them. The
// provider added is this one's binary under another name
// (example/pools), copied out of the image, so nothing is downloaded.
func TestAccImageWithMoreProviders(t *testing.T) {
	needImage(t)
	ctx := testCtx(t, 15*time.Minute)
	config := t.TempDir()
	main := `terraform {
  required_providers {
    k8s   = { source = "vigie/k8s" }
    pools = { source = "example/pools", version = "0.0.1" }
  }
}

data "k8s_ready_endpoints" "web" {
  provider  = pools
  namespace = "shop"
  service   = "web"
}
`
	if err := os.WriteFile(filepath.Join(config, "main.tf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	tofu := func(image string, args ...string) (string, error) {
		run := []string{"run", "--rm", "--network=none", "--pull=never", "--user=0", "-v", config + ":/work", "-w", "/work", "--entrypoint", "tofu", image}
		out, err := env.podman.run(ctx, append(run, args...)...)
		return plain(out), err
	}
	// The mirror keeps example/pools under the default registry host of the
	// image's tofu, the CLI that reads it: asked of that tofu, as make image
	// asks it (scripts/registry-host.sh).
	out, err := tofu(env.image, "providers", "-no-color")
	m := regexp.MustCompile(`provider\[([^/\]]+)/example/pools\]`).FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("tofu providers in the image: %v, want provider[<host>/example/pools]:\n%s", err, out)
	}
	host := m[1]
	mirror := t.TempDir()
	executable := filepath.Join(mirror, host, "example", "pools", "0.0.1", "linux_"+runtime.GOARCH, "terraform-provider-pools_v0.0.1")
	if err := os.MkdirAll(filepath.Dir(executable), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = env.podman.run(ctx, "create", "--pull=never", env.image)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	if _, err := env.podman.run(ctx, "cp", id+":/usr/local/bin/terraform-provider-k8s", executable); err != nil {
		t.Fatal(err)
	}
	if _, err := env.podman.run(ctx, "rm", id); err != nil {
		t.Fatal(err)
	}

	images := t.TempDir()
	start := time.Now()
	build := exec.CommandContext(ctx, "make", "--no-print-directory", "image", "IMAGE_PROVIDERS="+mirror, "IMAGE_DIR="+images,
		"IMAGE_TAG=terraform-provider-k8s-sync-providers:test")
	build.Dir = env.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make image IMAGE_PROVIDERS=%s: %v\n%s", mirror, err, out)
	}
	t.Logf("make image with -providers took %s", time.Since(start).Round(time.Second))
	withPools, err := env.podman.load(ctx, filepath.Join(images, "terraform-provider-k8s-sync.tar"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = env.podman.run(context.Background(), "rmi", withPools) })

	// Without it, the image's mirror does not have it.
	if out, err := tofu(env.image, "init", "-input=false", "-no-color"); err == nil || !strings.Contains(out, "example/pools") || !strings.Contains(out, "not found") {
		t.Fatalf("init with the image of make image: %v, want example/pools not found:\n%s", err, out)
	}
	out, err = tofu(withPools, "init", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("init with the image of IMAGE_PROVIDERS, no network: %v", err)
	}
	t.Logf("init: %s", out)
	lock, err := os.ReadFile(filepath.Join(config, ".terraform.lock.hcl"))
	if err != nil || !strings.Contains(string(lock), `provider "`+host+`/example/pools"`) {
		t.Fatalf("the lock file lacks example/pools (%v):\n%s", err, lock)
	}
	if out, err := tofu(withPools, "validate", "-no-color"); err != nil || !strings.Contains(out, "The configuration is valid") {
		t.Fatalf("validate, which runs example/pools: %v\n%s", err, out)
	}
}
