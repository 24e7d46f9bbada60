package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// executable is the smallest ELF header debug/elf reads: static, or with
// an interpreter (dynamically linked).
func executable(t *testing.T, machine elf.Machine, dynamic bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Ehsize: 64, Phentsize: 56, Shentsize: 64}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	if dynamic {
		h.Phoff, h.Phnum = 64, 1
	}
	if err := binary.Write(&buf, binary.LittleEndian, h); err != nil {
		t.Fatal(err)
	}
	if dynamic {
		if err := binary.Write(&buf, binary.LittleEndian, elf.Prog64{Type: uint32(elf.PT_INTERP)}); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// zipped is a packed provider: a zip holding name with content.
func zipped(t *testing.T, name string, content []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	f, err := z.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// mirror writes files (path: content) under a new directory; a file whose
// name starts with terraform-provider- is executable.
func mirror(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		file := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(path.Base(name), "terraform-provider-") && !strings.HasSuffix(name, ".zip") {
			mode = 0o755
		}
		if err := os.WriteFile(file, content, mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// entries are the regular files of a layer made by addMirror of dirs, with
// their modes.
func entries(t *testing.T, arch string, dirs ...string) (map[string]int64, error) {
	t.Helper()
	var buf bytes.Buffer
	w := &tarWriter{tw: tar.NewWriter(&buf), when: time.Unix(0, 0), dirs: map[string]bool{}}
	seen := map[string]string{}
	for _, dir := range dirs {
		if err := addMirror(w, dir, arch, seen); err != nil {
			return nil, err
		}
	}
	if err := w.tw.Close(); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	r := tar.NewReader(&buf)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			out["/"+h.Name] = h.Mode
		}
	}
}

func TestProvidersJoinTheImagesMirror(t *testing.T) {
	static := executable(t, elf.EM_X86_64, false)
	unpacked := mirror(t, map[string][]byte{
		"mirror.test/hashicorp/null/3.2.4/linux_amd64/terraform-provider-null_v3.2.4_x5": static,
		"mirror.test/hashicorp/null/3.2.4/linux_amd64/LICENSE.txt":                       []byte("MPL"),
		"mirror.test/hashicorp/null/3.2.4/linux_arm64/terraform-provider-null_v3.2.4_x5": executable(t, elf.EM_AARCH64, false),
		// Left out: the image's own is the one built with it.
		"mirror.test/vigie/k8s/0.1.0/linux_amd64/terraform-provider-k8s_v0.1.0": static,
	})
	packed := mirror(t, map[string][]byte{
		"other-mirror.test/f5networks/bigip/index.json":                                       []byte(`{"versions":{"1.22.0":{}}}`),
		"other-mirror.test/f5networks/bigip/1.22.0.json":                                      []byte(`{"archives":{}}`),
		"other-mirror.test/f5networks/bigip/terraform-provider-bigip_1.22.0_linux_amd64.zip":  zipped(t, "terraform-provider-bigip_v1.22.0", static),
		"other-mirror.test/f5networks/bigip/terraform-provider-bigip_1.22.0_linux_arm64.zip":  []byte("not read: another platform"),
		"other-mirror.test/f5networks/bigip/terraform-provider-bigip_1.22.0_darwin_arm64.zip": []byte("not read: another platform"),
	})
	got, err := entries(t, "amd64", unpacked, packed)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{
		mirrorDir + "/mirror.test/hashicorp/null/3.2.4/linux_amd64/terraform-provider-null_v3.2.4_x5":     0o755,
		mirrorDir + "/mirror.test/hashicorp/null/3.2.4/linux_amd64/LICENSE.txt":                           0o644,
		mirrorDir + "/other-mirror.test/f5networks/bigip/index.json":                                      0o644,
		mirrorDir + "/other-mirror.test/f5networks/bigip/1.22.0.json":                                     0o644,
		mirrorDir + "/other-mirror.test/f5networks/bigip/terraform-provider-bigip_1.22.0_linux_amd64.zip": 0o644,
	}
	if len(got) != len(want) {
		t.Errorf("the layer holds %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for name, mode := range want {
		if m, ok := got[name]; !ok || m != mode {
			t.Errorf("%s: in the layer %v with mode %o, want mode %o", name, ok, m, mode)
		}
	}
	// The image of another platform takes that platform's.
	got, err = entries(t, "arm64", unpacked)
	if err != nil {
		t.Fatal(err)
	}
	if arm := mirrorDir + "/mirror.test/hashicorp/null/3.2.4/linux_arm64/terraform-provider-null_v3.2.4_x5"; len(got) != 1 || got[arm] != 0o755 {
		t.Errorf("the linux/arm64 layer holds %v, want %s alone", slices.Sorted(maps.Keys(got)), arm)
	}
}

func TestProvidersThatTheImageCannotUseAreRefused(t *testing.T) {
	static := executable(t, elf.EM_X86_64, false)
	const null = "mirror.test/hashicorp/null/3.2.4/linux_amd64/terraform-provider-null_v3.2.4_x5"
	for _, tc := range []struct {
		name  string
		files []map[string][]byte
		want  string
	}{
		{"a dynamically linked provider", []map[string][]byte{{null: executable(t, elf.EM_X86_64, true)}}, "dynamically linked"},
		{"a provider for another machine", []map[string][]byte{{null: executable(t, elf.EM_AARCH64, false)}}, "built for EM_AARCH64"},
		{"a packed provider that is dynamically linked", []map[string][]byte{{
			"h/n/bigip/terraform-provider-bigip_1.0.0_linux_amd64.zip": zipped(t, "terraform-provider-bigip_v1.0.0", executable(t, elf.EM_X86_64, true)),
		}}, "h/n/bigip/terraform-provider-bigip_1.0.0_linux_amd64.zip: terraform-provider-bigip_v1.0.0: dynamically linked"},
		{"a zip without a provider", []map[string][]byte{{
			"h/n/bigip/terraform-provider-bigip_1.0.0_linux_amd64.zip": zipped(t, "README", nil),
		}}, "no terraform-provider-* executable in it"},
		{"a file out of the layout", []map[string][]byte{{"hashicorp/null/terraform-provider-null": static}}, "hashicorp/null/terraform-provider-null: not where a filesystem mirror keeps a provider"},
		{"no provider for the platform", []map[string][]byte{{
			"mirror.test/hashicorp/null/3.2.4/darwin_arm64/terraform-provider-null_v3.2.4_x5": static,
		}}, "no provider for linux_amd64 in it"},
		{"an empty directory", []map[string][]byte{{}}, "no provider for linux_amd64"},
		{"this provider alone", []map[string][]byte{{
			"mirror.test/vigie/k8s/0.0.1/linux_amd64/terraform-provider-k8s_v0.0.1": static,
		}}, "no provider for linux_amd64 in it"},
		{"the same provider twice", []map[string][]byte{{null: static}, {null: static}}, "gave it already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dirs []string
			for _, files := range tc.files {
				dirs = append(dirs, mirror(t, files))
			}
			_, err := entries(t, "amd64", dirs...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("addMirror: %v, want an error with %q", err, tc.want)
			}
		})
	}
	t.Run("a symbolic link", func(t *testing.T) {
		dir := mirror(t, map[string][]byte{null: static})
		link := filepath.Join(dir, filepath.FromSlash(null)+"-link")
		if err := os.Symlink(filepath.Join(dir, filepath.FromSlash(null)), link); err != nil {
			t.Fatal(err)
		}
		if _, err := entries(t, "amd64", dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("addMirror: %v, want a symbolic link refused", err)
		}
	})
	t.Run("a missing directory", func(t *testing.T) {
		if _, err := entries(t, "amd64", filepath.Join(t.TempDir(), "missing")); err == nil || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("addMirror: %v, want not found", err)
		}
	})
}
