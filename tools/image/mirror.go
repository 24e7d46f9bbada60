package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
)

// mirrorLayouts says where a filesystem mirror keeps a provider, for the
// errors of -providers.
const mirrorLayouts = "HOSTNAME/NAMESPACE/TYPE/VERSION/OS_ARCH/ (unpacked) or HOSTNAME/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip (packed, as `tofu providers mirror` writes it)"

// addMirror writes the files of dir, a filesystem mirror, that are for
// linux/arch into the image's mirror, and refuses what the CLI would not
// find or the image could not run: a file out of the mirror's layout, a
// symbolic link, a provider executable that is dynamically linked or for
// another machine, a file that another -providers directory gave already.
// This provider is left out: the image's own is the one built with it
// (`tofu providers mirror` of a configuration copies it too). seen holds
// the files written so far.
func addMirror(w *tarWriter, dir, arch string, seen map[string]string) error {
	platform := "linux_" + arch
	providers := map[string]bool{}
	err := filepath.WalkDir(dir, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, file)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		parts := strings.Split(rel, "/")
		if rel == "." || d.IsDir() {
			if len(parts) == 3 && parts[1] == "vigie" && parts[2] == "k8s" {
				fmt.Printf("-providers %s: %s left out: the image's own is the one built with it\n", dir, rel)
				return fs.SkipDir
			}
			// The directories of other platforms are left out whole.
			if len(parts) == 5 && parts[4] != platform {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file (a mirror holds files and directories; `tofu providers mirror` writes them)", rel)
		}
		name := parts[len(parts)-1]
		provider := strings.Join(parts[:3], "/")
		switch {
		case len(parts) >= 6:
			// Unpacked, in this platform's directory.
			if len(parts) == 6 && strings.HasPrefix(name, "terraform-provider-") {
				if err := checkStatic(file, arch); err != nil {
					return fmt.Errorf("%s: %w", rel, err)
				}
				providers[provider+" "+parts[3]] = true
			}
		case len(parts) == 4 && strings.HasSuffix(name, ".json"):
			// A packed mirror's index (index.json, VERSION.json).
		case len(parts) == 4 && strings.HasPrefix(name, "terraform-provider-"+parts[2]+"_") && strings.HasSuffix(name, ".zip"):
			if !strings.HasSuffix(name, "_"+platform+".zip") {
				return nil
			}
			if err := checkZip(file, arch); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			providers[provider+" "+strings.TrimSuffix(strings.TrimPrefix(name, "terraform-provider-"+parts[2]+"_"), "_"+platform+".zip")] = true
		default:
			return fmt.Errorf("%s: not where a filesystem mirror keeps a provider: %s", rel, mirrorLayouts)
		}
		into := path.Join(mirrorDir, rel)
		if other, ok := seen[into]; ok {
			return fmt.Errorf("%s: -providers %s gave it already", rel, other)
		}
		seen[into] = dir
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		return w.file(into, file, mode)
	})
	if err != nil {
		return err
	}
	if len(providers) == 0 {
		return fmt.Errorf("no provider for %s in it: lay it out as %s, for that platform (tofu providers mirror -platform=%s DIR)", platform, mirrorLayouts, platform)
	}
	return nil
}

// checkZip checks the provider executable of a packed provider.
func checkZip(file, arch string) error {
	z, err := zip.OpenReader(file)
	if err != nil {
		return err
	}
	defer z.Close()
	for _, f := range z.File {
		if !strings.HasPrefix(path.Base(f.Name), "terraform-provider-") {
			continue
		}
		r, err := f.Open()
		if err != nil {
			return err
		}
		content, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil {
			return err
		}
		return checkStaticELF(bytes.NewReader(content), f.Name, arch)
	}
	return fmt.Errorf("no terraform-provider-* executable in it")
}
