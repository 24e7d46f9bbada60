package companion

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// configFiles identifies the configuration's files, as the companion reads
// them (deps.go): the root module's *.tf and *.tf.json, and those of every
// local module it calls, through local modules. A change set held for one
// version (refused, waiting) is tried again for the next, so an edit of a
// local module releases it as an edit of the root does.
//
// The module calls of a file are read again only when the file changed (by
// size and modification time): the version is computed at each recompute
// of the pools.
type configFiles struct {
	calls map[string]fileCalls
}

// fileCalls are the local modules a .tf file calls, as of its size and
// modification time.
type fileCalls struct {
	size    int64
	modTime time.Time
	sources []string
}

// configVersion is the version of the configuration of dir, computed
// without cache.
func configVersion(dir string) string {
	return (&configFiles{}).version(dir)
}

// version identifies the configuration files of dir and of the local
// modules they call by path, size and modification time.
func (c *configFiles) version(dir string) string {
	if c.calls == nil {
		c.calls = map[string]fileCalls{}
	}
	h := sha256.New()
	visited := map[string]bool{}
	var walk func(module string)
	walk = func(module string) {
		module = filepath.Clean(module)
		if visited[module] {
			return
		}
		visited[module] = true
		files, _ := filepath.Glob(filepath.Join(module, "*.tf"))
		jsonFiles, _ := filepath.Glob(filepath.Join(module, "*.tf.json"))
		slices.Sort(files)
		slices.Sort(jsonFiles)
		var calls []string
		for _, f := range append(files, jsonFiles...) {
			info, err := os.Stat(f)
			if err != nil {
				continue
			}
			name, err := filepath.Rel(dir, f)
			if err != nil {
				name = f
			}
			fmt.Fprintf(h, "%s %d %d\n", name, info.Size(), info.ModTime().UnixNano())
			if strings.HasSuffix(f, ".tf") {
				calls = append(calls, c.sources(f, info)...)
			}
		}
		for _, source := range calls {
			walk(filepath.Join(module, source))
		}
	}
	walk(dir)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// sources are the local module sources file calls.
func (c *configFiles) sources(file string, info os.FileInfo) []string {
	if got, ok := c.calls[file]; ok && got.size == info.Size() && got.modTime.Equal(info.ModTime()) {
		return got.sources
	}
	var sources []string
	if f, diags := hclparse.NewParser().ParseHCLFile(file); !diags.HasErrors() {
		if body, ok := f.Body.(*hclsyntax.Body); ok {
			for _, block := range body.Blocks {
				if block.Type != "module" || len(block.Labels) != 1 {
					continue
				}
				if source, ok := localSource(block); ok {
					sources = append(sources, source)
				}
			}
		}
	}
	c.calls[file] = fileCalls{size: info.Size(), modTime: info.ModTime(), sources: sources}
	return sources
}
