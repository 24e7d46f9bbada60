package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/vigie/terraform-provider-k8s/test/toolbuild"
)

// The control plane is built from tools/cluster, a build-only module whose
// k8s.io/kubernetes requirement is the pinned version: it is read from there
// and written nowhere else. Another served version is built on demand from a
// module generated in the cache, the same way `bin/harness pin`
// generates tools/cluster itself.

const kubernetesModule = "k8s.io/kubernetes"

var versionPattern = regexp.MustCompile(`^v1\.(\d+)\.\d+$`)

// RepoRoot is the root of the repository: the first directory from the
// working directory up that holds tools/cluster/go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "cluster", "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("tools/cluster/go.mod not found above the working directory: run from inside the repository")
		}
		dir = parent
	}
}

// PinnedVersion is the Kubernetes version that tools/cluster/go.mod requires.
func PinnedVersion(root string) (string, error) {
	return requiredVersion(filepath.Join(root, "tools", "cluster", "go.mod"), kubernetesModule)
}

// requiredVersion is the version of module in the require lines of a go.mod.
func requiredVersion(goMod, module string) (string, error) {
	data, err := os.ReadFile(goMod)
	if err != nil {
		return "", err
	}
	if v := requirement(data, module); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("%s requires no %s", goMod, module)
}

// requirement finds "module version" in a go.mod's require lines, in a block
// or not; replace lines ("a => b v") do not match.
func requirement(goMod []byte, module string) string {
	scanner := bufio.NewScanner(bytes.NewReader(goMod))
	for scanner.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(scanner.Text()), "require "))
		if len(fields) >= 2 && fields[0] == module && strings.HasPrefix(fields[1], "v") {
			return fields[1]
		}
	}
	return ""
}

// moduleFor is the directory of the build-only module for version: the
// repository's tools/cluster for the pinned version, else one generated in
// the cache (once per version).
func moduleFor(ctx context.Context, root, version string, log io.Writer) (string, error) {
	pinned, err := PinnedVersion(root)
	if err != nil {
		return "", err
	}
	if version == "" || version == pinned {
		return filepath.Join(root, "tools", "cluster"), nil
	}
	if !versionPattern.MatchString(version) {
		return "", fmt.Errorf("version %q of Kubernetes: want v1.MINOR.PATCH", version)
	}
	cache, err := toolbuild.CacheRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "cluster-module-"+version)
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		return dir, nil
	}
	fmt.Fprintf(log, "generating the build module of Kubernetes %s in %s\n", version, dir)
	tmp, err := os.MkdirTemp(cache, ".cluster-module-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := GenerateModule(ctx, tmp, root, version); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil && !isExist(err) {
		return "", err
	}
	return dir, nil
}

func isExist(err error) bool {
	return errors.Is(err, os.ErrExist) || strings.Contains(err.Error(), "directory not empty")
}

// GenerateModule writes into dir the build-only module of the control plane
// at Kubernetes version: go.mod, go.sum and the etcd command (copied from the
// repository's tools/cluster). It asks the module proxy for the modules.
func GenerateModule(ctx context.Context, dir, root, version string) error {
	m := versionPattern.FindStringSubmatch(version)
	if m == nil {
		return fmt.Errorf("version %q of Kubernetes: want v1.MINOR.PATCH", version)
	}
	staging := "v0." + strings.TrimPrefix(version, "v1.")
	upstream, err := downloadGoMod(ctx, kubernetesModule+"@"+version)
	if err != nil {
		return err
	}
	goLine := ""
	var replaces []string
	etcd := ""
	scanner := bufio.NewScanner(bytes.NewReader(upstream))
	for scanner.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(scanner.Text()), "require "))
		switch {
		case len(fields) == 2 && fields[0] == "go" && goLine == "":
			goLine = fields[1]
		case len(fields) >= 2 && strings.HasPrefix(fields[0], "k8s.io/") && fields[1] == "v0.0.0":
			replaces = append(replaces, fmt.Sprintf("\t%s => %s %s", fields[0], fields[0], staging))
		case len(fields) >= 2 && fields[0] == "go.etcd.io/etcd/server/v3":
			etcd = fields[1]
		}
	}
	if goLine == "" || len(replaces) == 0 || etcd == "" {
		return fmt.Errorf("%s@%s: go.mod without a go line, staging requirements or etcd server", kubernetesModule, version)
	}
	goMod := fmt.Sprintf(`// Build-only module for the local test control plane (etcd, kube-apiserver,
// kube-controller-manager), generated by test/testcluster.GenerateModule
// (bin/harness pin VERSION rewrites it; make harness builds bin/harness). It is a separate module so
// that the provider's own go.mod never sees Kubernetes' huge dependency graph.
// The k8s.io/kubernetes requirement below is the version the tests pin.
module github.com/vigie/terraform-provider-k8s/tools/cluster

go %s

tool (
	k8s.io/kubernetes/cmd/kube-apiserver
	k8s.io/kubernetes/cmd/kube-controller-manager
)

require (
	go.etcd.io/etcd/server/v3 %s
	k8s.io/kubernetes %s
)

// k8s.io/kubernetes is not meant to be consumed as a module: its go.mod requires
// every staging repository at the placeholder version v0.0.0 and points them at
// ./staging/src with replace directives, which are ignored in a dependent
// module. Each staging repository is published separately with the matching
// tag: Kubernetes v1.X.Y <=> staging v0.X.Y.
replace (
%s
)
`, goLine, etcd, version, strings.Join(replaces, "\n"))
	if err := os.MkdirAll(filepath.Join(dir, "cmd", "etcd"), 0o755); err != nil {
		return err
	}
	etcdMain, err := os.ReadFile(filepath.Join(root, "tools", "cluster", "cmd", "etcd", "main.go"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cmd", "etcd", "main.go"), etcdMain, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, "go.sum"))
	tidy := exec.CommandContext(ctx, "go", "mod", "tidy")
	tidy.Dir = dir
	tidy.Env = append(toolbuild.BuildEnv(), "GOFLAGS=-mod=mod")
	if out, err := tidy.CombinedOutput(); err != nil {
		return fmt.Errorf("go mod tidy for Kubernetes %s (the toolchain must satisfy go %s): %w\n%s", version, goLine, err, out)
	}
	return nil
}

func downloadGoMod(ctx context.Context, moduleAtVersion string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "k8s-mod-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", moduleAtVersion)
	cmd.Dir = tmp
	cmd.Env = append(toolbuild.BuildEnv(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var info struct{ GoMod, Error string }
	if err != nil {
		return nil, fmt.Errorf("go mod download %s: %w %s", moduleAtVersion, err, out)
	}
	if err := json.Unmarshal(out, &info); err != nil || info.Error != "" {
		return nil, fmt.Errorf("go mod download %s: %v %s", moduleAtVersion, err, info.Error) //nolint:errorlint // err is only a JSON error here
	}
	return os.ReadFile(info.GoMod)
}

// buildSpec says how the control plane of version is built from module: the
// version is stamped as a release build stamps it (a module build has no git
// metadata; without it the server reports v0.0.0-master and clients' version
// skew checks get confused).
func buildSpec(module, version string, log io.Writer) toolbuild.Spec {
	minor := versionPattern.FindStringSubmatch(version)[1]
	ldflags := "-s -w"
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		ldflags += fmt.Sprintf(" -X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=1 -X %[1]s.gitMinor=%[3]s -X %[1]s.gitTreeState=clean -X %[1]s.gitCommit=", pkg, version, minor)
	}
	return toolbuild.Spec{
		Name:    "cluster",
		Module:  module,
		LDFlags: ldflags,
		Log:     log,
		Binaries: map[string]string{
			"etcd":                    "./cmd/etcd",
			"kube-apiserver":          "k8s.io/kubernetes/cmd/kube-apiserver",
			"kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
		},
	}
}

// Binaries finds or builds the control plane of version ("" is the pinned
// one) and returns the directory of etcd, kube-apiserver and
// kube-controller-manager, and the version they are.
func Binaries(ctx context.Context, root, version string, log io.Writer) (string, string, error) {
	if log == nil {
		log = io.Discard
	}
	if version == "" {
		pinned, err := PinnedVersion(root)
		if err != nil {
			return "", "", err
		}
		version = pinned
	}
	module, err := moduleFor(ctx, root, version, log)
	if err != nil {
		return "", "", err
	}
	bin, err := toolbuild.Build(ctx, buildSpec(module, version, log))
	return bin, version, err
}
