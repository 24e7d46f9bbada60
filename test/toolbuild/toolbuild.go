// Package toolbuild builds the pinned tools of the project (the local control
// plane, OpenTofu) from their build-only Go modules under tools/, into a cache
// shared by every clone and worktree of the repository. Nothing is downloaded
// but Go modules.
//
// A build is keyed on the module's go.sum (any version bump changes it):
//
//	${K8S_TF_CACHE:-$HOME/.cache/terraform-provider-k8s}/<name>-<sha256(go.sum)[:16]>/bin
//
// Concurrent callers (a test run and a demo, two test packages) wait for one
// build under a lock instead of compiling the same thing twice, and a binary
// is written under a temporary name and renamed, so an interrupted build never
// leaves a file that looks finished.
package toolbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Spec says what to build from one module.
type Spec struct {
	// Name prefixes the cache directory: "cluster", "tofu".
	Name string
	// Module is the directory of the build-only module (with go.mod, go.sum).
	Module string
	// Binaries maps each binary's name to its package, as go build takes it
	// from inside Module ("./cmd/etcd", "k8s.io/kubernetes/cmd/kube-apiserver").
	Binaries map[string]string
	// LDFlags are passed to go build.
	LDFlags string
	// Log receives progress; nil discards it.
	Log io.Writer
	// Prepare, when set, makes the source tree to build in, under the
	// cache directory dir, and returns it: the packages of Binaries are
	// then relative to that tree, which is removed after the build. It is
	// for a CLI whose own module is built (Terraform, an older OpenTofu)
	// rather than a tool required by Module.
	Prepare func(ctx context.Context, dir string, log io.Writer) (string, error)
}

// CacheRoot is where built tools are kept: $K8S_TF_CACHE, or
// ~/.cache/terraform-provider-k8s.
func CacheRoot() (string, error) {
	if dir := os.Getenv("K8S_TF_CACHE"); dir != "" {
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set K8S_TF_CACHE (%w)", err)
	}
	return filepath.Join(home, ".cache", "terraform-provider-k8s"), nil
}

// Dir is the cache directory of spec's build: <root>/<name>-<hash of go.sum>.
func Dir(spec Spec) (string, error) {
	sum, err := os.ReadFile(filepath.Join(spec.Module, "go.sum"))
	if err != nil {
		return "", err
	}
	root, err := CacheRoot()
	if err != nil {
		return "", err
	}
	hash := sha256.Sum256(sum)
	return filepath.Join(root, spec.Name+"-"+hex.EncodeToString(hash[:])[:16]), nil
}

// Build finds or builds every binary of spec and returns the directory that
// holds them.
func Build(ctx context.Context, spec Spec) (string, error) {
	dir, err := Dir(spec)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bin")
	if haveAll(bin, spec) {
		return bin, nil
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	unlock, err := lock(filepath.Join(dir, ".build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	log := spec.Log
	if log == nil {
		log = io.Discard
	}
	buildDir := spec.Module
	if spec.Prepare != nil && !haveAll(bin, spec) {
		if buildDir, err = spec.Prepare(ctx, dir, log); err != nil {
			return "", err
		}
		defer os.RemoveAll(buildDir)
	}
	for name, pkg := range spec.Binaries {
		target := filepath.Join(bin, name)
		if isExecutable(target) {
			continue // built by whoever held the lock before us
		}
		fmt.Fprintf(log, "building %s from %s (a cold build of the control plane takes ~7 min on 2 idle cores, OpenTofu ~4 min)...\n", name, spec.Module)
		start := time.Now()
		tmp := filepath.Join(bin, "."+name+".tmp")
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", spec.LDFlags, "-o", tmp, pkg)
		cmd.Dir = buildDir
		cmd.Env = BuildEnv()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("go build %s in %s: %w\n%s", pkg, buildDir, err, out.Bytes())
		}
		if err := os.Rename(tmp, target); err != nil {
			return "", err
		}
		fmt.Fprintf(log, "built %s in %s\n", name, time.Since(start).Round(time.Second))
	}
	return bin, nil
}

// BuildEnv is the environment of a tool build or module update. GOWORK=off: a
// go.work at the root must not drag the tool's module into the provider's
// build list. -mod=readonly: go.sum is the cache key, so a build must never
// rewrite it. GOTOOLCHAIN=local: never fetch a toolchain (the go lines are kept
// low enough). CGO_ENABLED=0: static binaries, as upstream builds its servers.
// -buildvcs=false: the repository's git state must not change the binaries.
func BuildEnv() []string {
	return append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
}

func haveAll(bin string, spec Spec) bool {
	for name := range spec.Binaries {
		if !isExecutable(filepath.Join(bin, name)) {
			return false
		}
	}
	return true
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0
}

// lock takes an exclusive flock on path, waiting for another holder.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
