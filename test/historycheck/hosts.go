package historycheck

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// registryHost matches the host of a package registry named as
// registry.<name>.io or registry.<name>.org, as the provider registries of
// Terraform and OpenTofu are. Nothing in the repository names one: a host
// is asked of the CLI that uses it (scripts/registry-host.sh), and tests
// and examples use made-up hosts (mirror.test, registry.example.com). The
// pattern names no host itself, so this file passes its own check.
var registryHost = regexp.MustCompile(`(?i)\bregistry\.[a-z0-9-]+\.(io|org)\b`)

// RegistryHostLine gives the registry hosts a line names, if any.
func RegistryHostLine(line string) []string {
	return registryHost.FindAllString(line, -1)
}

// RepositoryFiles are the files of the repository at root as git lists
// them: those it tracks and those not yet added that it does not ignore,
// relative to root, slash-separated, sorted.
func RepositoryFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return files, nil
}

// RegistryHosts reads each of paths under root (every file: code, tests,
// scripts, docs) and gives every line that names a registry host. A path
// that is gone (deleted, not yet committed) or is not a regular file is
// skipped.
func RegistryHosts(root string, paths []string) ([]Finding, error) {
	var found []Finding
	for _, rel := range paths {
		file := filepath.Join(root, filepath.FromSlash(rel))
		info, err := os.Lstat(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		content, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if !registryHost.Match(content) {
			continue
		}
		for n, line := range strings.Split(string(content), "\n") {
			for _, host := range RegistryHostLine(line) {
				found = append(found, Finding{File: rel, Line: n + 1, Why: fmt.Sprintf("a registry host %q (ask the CLI for it: scripts/registry-host.sh)", host), Text: line})
			}
		}
	}
	return found, nil
}
