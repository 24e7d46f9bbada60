// Package binsize says where the bytes of a Go binary go: the size of its
// symbols by module and by package, for the bench's size report.
package binsize

import (
	"cmp"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Print prints the bytes that the symbols of binary occupy in the file (code,
// read-only data, data; not the zero-filled .bss), by module and by package.
// The function tables of .gopclntab and the runtime's metadata are not
// symbols of a package; they are given as one line, and they shrink roughly
// in proportion to the code when a package goes.
func Print(w io.Writer, binary string) error {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return err
	}
	modules := []string{info.Main.Path}
	for _, d := range info.Deps {
		modules = append(modules, d.Path)
	}
	// Longest first, so that a nested module wins over its parent.
	slices.SortFunc(modules, func(a, b string) int { return cmp.Compare(len(b), len(a)) })

	f, err := elf.Open(binary)
	if err != nil {
		return err
	}
	defer f.Close()
	symbols, err := f.Symbols()
	if err != nil {
		return fmt.Errorf("%s: %w (give an unstripped build)", binary, err)
	}
	byModule, byPackage := map[string]*share{}, map[string]*share{}
	var total share
	inSymbols := map[*elf.Section]uint64{}
	for _, s := range symbols {
		if s.Section == elf.SHN_UNDEF || int(s.Section) >= len(f.Sections) {
			continue
		}
		section := f.Sections[s.Section]
		if section.Type == elf.SHT_NOBITS || section.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		inSymbols[section] += s.Size
		pkg := symbolPackage(s.Name)
		mod := moduleOf(pkg, modules)
		for _, u := range []*share{get(byModule, mod), get(byPackage, pkg), &total} {
			u.add(section, s.Size)
		}
	}

	fmt.Fprintf(w, "| module | code | data | total |\n|---|---:|---:|---:|\n")
	for _, m := range top(byModule, 15) {
		u := byModule[m]
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", m, mb(u.code), mb(u.data), mb(u.code+u.data))
	}
	fmt.Fprintf(w, "| all symbols | %s | %s | %s |\n", mb(total.code), mb(total.data), mb(total.code+total.data))
	var pclntab, other uint64
	for _, section := range f.Sections {
		if section.Type != elf.SHT_PROGBITS || section.Flags&elf.SHF_ALLOC == 0 || section.Size < inSymbols[section] {
			continue
		}
		if section.Name == ".gopclntab" {
			pclntab += section.Size - inSymbols[section]
		} else {
			other += section.Size - inSymbols[section]
		}
	}
	fmt.Fprintf(w, "| not in any symbol: .gopclntab (function tables; shrinks with the code) | | %s | %s |\n", mb(pclntab), mb(pclntab))
	fmt.Fprintf(w, "| not in any symbol: type descriptors, strings, other tables | | %s | %s |\n", mb(other), mb(other))
	fmt.Fprintf(w, "| **loaded sections in all** | | | **%s** |\n", mb(total.code+total.data+pclntab+other))
	fmt.Fprintf(w, "\n| package | code | data | total |\n|---|---:|---:|---:|\n")
	for _, p := range top(byPackage, 15) {
		u := byPackage[p]
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", p, mb(u.code), mb(u.data), mb(u.code+u.data))
	}
	return nil
}

type share struct{ code, data uint64 }

func (u *share) add(section *elf.Section, size uint64) {
	if section.Flags&elf.SHF_EXECINSTR != 0 {
		u.code += size
	} else {
		u.data += size
	}
}

func get(m map[string]*share, key string) *share {
	if m[key] == nil {
		m[key] = &share{}
	}
	return m[key]
}

func top(m map[string]*share, n int) []string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b].code+m[b].data, m[a].code+m[a].data), cmp.Compare(a, b))
	})
	return keys[:min(n, len(keys))]
}

func mb(n uint64) string { return fmt.Sprintf("%.2f MB", float64(n)/1e6) }

// runtimeMetadata collects symbols that belong to no package: function data,
// strings and the like, laid out by the linker.
const runtimeMetadata = "(linker data: go:func.*, go:string.*, ...)"

// symbolPackage returns the import path of the package a Go symbol belongs
// to: k8s.io/api/core/v1 for "k8s.io/api/core/v1.(*PodSpec).Unmarshal", and
// the package of the type for type descriptors, equality functions and itabs.
func symbolPackage(name string) string {
	for _, prefix := range []string{"type:.eq.", "type:.hash.", "type:.namedata.", "type:*", "type:", "go:itab.*", "go:itab."} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			name = rest
			break
		}
	}
	if strings.HasPrefix(name, "go:") || strings.HasPrefix(name, "runtime.") && strings.Contains(name, "·") {
		return runtimeMetadata
	}
	// An itab names the type, then the interface; a generic function its
	// type arguments, which may come from other packages.
	if i := strings.IndexAny(name, ",["); i >= 0 {
		name = name[:i]
	}
	slash := strings.LastIndexByte(name, '/')
	dot := strings.IndexByte(name[slash+1:], '.')
	if dot < 0 {
		return runtimeMetadata
	}
	return name[:slash+1+dot]
}

// moduleOf names the module a package comes from; the standard library
// (including its vendored golang.org/x packages) is "std".
func moduleOf(pkg string, modules []string) string {
	if pkg == runtimeMetadata {
		return pkg
	}
	for _, m := range modules {
		if pkg == m || strings.HasPrefix(pkg, m+"/") {
			return m
		}
	}
	first, _, _ := strings.Cut(pkg, "/")
	if !strings.Contains(first, ".") {
		return "std"
	}
	return "(unknown module) " + pkg
}
