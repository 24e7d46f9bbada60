package main

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestTheImagesMirrorKeepsThisProviderUnderEachHostGiven: the image's
// mirror keeps this provider as HOST/vigie/k8s/VERSION/linux_ARCH/ under
// each -mirror-host and under no other, as a hard link to the entrypoint.
// The hosts are made up: the image's build asks the real one of its CLI.
func TestTheImagesMirrorKeepsThisProviderUnderEachHostGiven(t *testing.T) {
	dir := t.TempDir()
	static := executable(t, elf.EM_X86_64, false)
	provider, cli := filepath.Join(dir, "terraform-provider-k8s"), filepath.Join(dir, "tofu")
	for _, f := range []string{provider, cli} {
		if err := os.WriteFile(f, static, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "image.tar")
	o := options{
		platforms:   platformFlag{{arch: "amd64", provider: provider, cli: cli}},
		mirrorHosts: hostsFlag{"mirror.test", "other-mirror.test"},
		cliName:     "tofu",
		version:     "0.0.1",
		tag:         "terraform-provider-k8s-sync:test",
		out:         out,
	}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		r := tar.NewReader(rc)
		for {
			h, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix("/"+h.Name, mirrorDir+"/") && h.Typeflag != tar.TypeDir {
				links["/"+h.Name] = "/" + h.Linkname
				if h.Typeflag != tar.TypeLink {
					t.Errorf("%s: type %c in the mirror, want a hard link", h.Name, h.Typeflag)
				}
			}
		}
		_ = rc.Close()
	}
	want := map[string]string{
		mirrorDir + "/mirror.test/vigie/k8s/0.0.1/linux_amd64/terraform-provider-k8s_v0.0.1":       providerPath,
		mirrorDir + "/other-mirror.test/vigie/k8s/0.0.1/linux_amd64/terraform-provider-k8s_v0.0.1": providerPath,
	}
	if len(links) != len(want) {
		t.Errorf("the image's mirror holds %v, want %v", links, want)
	}
	for name, target := range want {
		if links[name] != target {
			t.Errorf("%s: links to %q, want %q", name, links[name], target)
		}
	}
}

// TestAnImageWithoutAMirrorHostIsRefused: with no -mirror-host the image's
// CLI would find this provider nowhere, so no image is written.
func TestAnImageWithoutAMirrorHostIsRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "image.tar")
	err := run(options{platforms: platformFlag{{arch: "amd64", provider: "p", cli: "c"}}, cliName: "tofu", version: "0.0.1", out: out})
	if err == nil || !strings.Contains(err.Error(), "give -mirror-host") {
		t.Fatalf("run: %v, want -mirror-host asked for", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s written (%v)", out, err)
	}
	var h hostsFlag
	for _, bad := range []string{"", "mirror.test/vigie", "mirror test"} {
		if err := h.Set(bad); err == nil {
			t.Errorf("-mirror-host %q taken, want it refused", bad)
		}
	}
}

// TestTheMirrorHostIsAskedOfTheCLI: scripts/registry-host.sh, which gives
// make image its -mirror-host, reads the host from what `<cli> providers`
// says of a configuration that requires vigie/k8s, and stops on a CLI that
// fails or names no such provider. The CLIs here are scripts that answer
// as terraform and tofu do, with a made-up host; make testacc-image runs
// the real one (the image's tofu installs vigie/k8s from its mirror).
func TestTheMirrorHostIsAskedOfTheCLI(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "registry-host.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cli := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// It answers for the configuration of the directory it runs in.
	cli("good", `[ "$1" = providers ] && grep -q 'source = "vigie/k8s"' main.tf || exit 9
printf '\nProviders required by configuration:\n.\n\\-- provider[mirror.test/vigie/k8s]\n\n'
`)
	cli("failing", "echo 'Error: Unsupported argument' >&2; exit 1\n")
	cli("other", "echo 'provider[mirror.test/hashicorp/null]'\n")
	ask := func(args ...string) (string, error) {
		cmd := exec.Command(script, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := ask("./good", filepath.Join(dir, "good")); err != nil || out != "mirror.test\nmirror.test\n" {
		t.Errorf("registry-host.sh ./good and its absolute path: %v, %q, want mirror.test twice", err, out)
	}
	for _, tc := range []struct{ cli, want string }{
		{"./failing", "./failing providers failed:\nError: Unsupported argument"},
		{"./other", "names no provider[<host>/vigie/k8s]"},
		{"./missing", "CLI ./missing not found"},
	} {
		if out, err := ask("./good", tc.cli); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("registry-host.sh ./good %s: %v, %q, want a failure with %q", tc.cli, err, out, tc.want)
		}
	}
}
