package companion

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Which changes of a plan are pool changes: a plan's JSON lists each
// resource's references but not those of locals, nor through a module's
// variables and outputs, so the companion reads the configuration's
// expressions itself (hashicorp/hcl, the parser Terraform and OpenTofu use)
// and follows every reference, through locals, variables, outputs and local
// modules, from the watched data sources to the resources that use them.
// A module from a registry or a remote source is not read: it is one node,
// and every resource in it depends on the pools its inputs do.

// depGraph maps each node of the configuration (a resource, data source,
// local, variable, output or opaque module call, by its address without
// instance keys) to the nodes its expressions reference.
type depGraph struct {
	refs map[string][]string
	// opaque are the module calls whose source is not read.
	opaque map[string]bool
	// skipped are files the companion cannot read (.tf.json).
	skipped []string
	// byService are the resources whose for_each is a fleet's services
	// (for_each = data.k8s_services.NAME.services): their instances are
	// keyed as the fleet's Services, by the fleet's address.
	byService map[string]string
}

// readConfiguration reads the root module of dir and the local modules it
// calls.
func readConfiguration(dir string) (*depGraph, error) {
	g := &depGraph{refs: map[string][]string{}, opaque: map[string]bool{}, byService: map[string]string{}}
	if err := g.readModule(hclparse.NewParser(), dir, "", nil, 0); err != nil {
		return nil, err
	}
	return g, nil
}

// readModule adds the module at dir, whose addresses start with prefix
// ("module.a.module.b." or ""); inputs are the expressions of its call's
// arguments, resolved in the calling module.
func (g *depGraph) readModule(parser *hclparse.Parser, dir, prefix string, inputs map[string][]string, depth int) error {
	if depth > 32 {
		return fmt.Errorf("%s: modules nested more than 32 deep", dir)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return err
	}
	jsonFiles, _ := filepath.Glob(filepath.Join(dir, "*.tf.json"))
	g.skipped = append(g.skipped, jsonFiles...)
	if len(files) == 0 && depth == 0 {
		return fmt.Errorf("%s has no .tf file: run the companion in the working directory of the configuration (-chdir)", dir)
	}
	slices.Sort(files)
	for name, refs := range inputs {
		g.refs[prefix+"var."+name] = refs
	}
	for _, file := range files {
		f, diags := parser.ParseHCLFile(file)
		if diags.HasErrors() {
			return fmt.Errorf("read %s: %s", file, diags.Error())
		}
		body, ok := f.Body.(*hclsyntax.Body)
		if !ok {
			continue
		}
		for _, block := range body.Blocks {
			if err := g.readBlock(parser, dir, prefix, block, depth); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *depGraph) readBlock(parser *hclparse.Parser, dir, prefix string, block *hclsyntax.Block, depth int) error {
	switch {
	case block.Type == "resource" && len(block.Labels) == 2:
		node := prefix + block.Labels[0] + "." + block.Labels[1]
		g.add(node, prefix, bodyRefs(block.Body))
		if attr, ok := block.Body.Attributes["for_each"]; ok {
			if expr, ok := attr.Expr.(*hclsyntax.ScopeTraversalExpr); ok {
				if names := traversalNames(expr.Traversal); len(names) == 4 && names[0] == "data" && names[1] == "k8s_services" &&
					names[3] == "services" && len(names) == len(expr.Traversal) {
					g.byService[node] = prefix + "data.k8s_services." + names[2]
				}
			}
		}
	case block.Type == "data" && len(block.Labels) == 2:
		g.add(prefix+"data."+block.Labels[0]+"."+block.Labels[1], prefix, bodyRefs(block.Body))
	case block.Type == "locals":
		for name, attr := range block.Body.Attributes {
			g.add(prefix+"local."+name, prefix, attr.Expr.Variables())
		}
	case block.Type == "output" && len(block.Labels) == 1:
		g.add(prefix+"output."+block.Labels[0], prefix, bodyRefs(block.Body))
	case block.Type == "module" && len(block.Labels) == 1:
		call := prefix + "module." + block.Labels[0]
		inputs := map[string][]string{}
		var all []string
		for name, attr := range block.Body.Attributes {
			refs := g.resolve(prefix, attr.Expr.Variables())
			inputs[name] = refs
			all = append(all, refs...)
		}
		for _, b := range block.Body.Blocks {
			all = append(all, g.resolve(prefix, bodyRefs(b.Body))...)
		}
		if source, ok := localSource(block); ok {
			return g.readModule(parser, filepath.Join(dir, source), call+".", inputs, depth+1)
		}
		g.opaque[call] = true
		g.refs[call] = all
	}
	return nil
}

// localSource is the source of a module call when it is a local folder
// ("./lb", "../shared"): a module the companion reads.
func localSource(block *hclsyntax.Block) (string, bool) {
	attr, ok := block.Body.Attributes["source"]
	if !ok {
		return "", false
	}
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() || v.Type().FriendlyName() != "string" {
		return "", false
	}
	source := v.AsString()
	return source, strings.HasPrefix(source, "./") || strings.HasPrefix(source, "../")
}

// add records node's references, resolved in the module of prefix.
func (g *depGraph) add(node, prefix string, traversals []hcl.Traversal) {
	g.refs[node] = append(g.refs[node], g.resolve(prefix, traversals)...)
}

// resolve turns references into node addresses.
func (g *depGraph) resolve(prefix string, traversals []hcl.Traversal) []string {
	var out []string
	for _, t := range traversals {
		names := traversalNames(t)
		if len(names) == 0 {
			continue
		}
		switch names[0] {
		case "each", "count", "self", "path", "terraform":
		case "local", "var":
			if len(names) >= 2 {
				out = append(out, prefix+names[0]+"."+names[1])
			}
		case "data":
			if len(names) >= 3 {
				out = append(out, prefix+"data."+names[1]+"."+names[2])
			}
		case "module":
			if len(names) >= 2 {
				call := prefix + "module." + names[1]
				out = append(out, call)
				if len(names) >= 3 {
					out = append(out, call+".output."+names[2])
				}
			}
		default:
			if len(names) >= 2 {
				out = append(out, prefix+names[0]+"."+names[1])
			}
		}
	}
	return out
}

// traversalNames are the attribute names of t, up to its first index.
func traversalNames(t hcl.Traversal) []string {
	var names []string
	for _, step := range t {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			names = append(names, s.Name)
		case hcl.TraverseAttr:
			names = append(names, s.Name)
		default:
			return names
		}
	}
	return names
}

// bodyRefs are the references of every expression in body and its blocks.
func bodyRefs(body *hclsyntax.Body) []hcl.Traversal {
	var out []hcl.Traversal
	for _, attr := range body.Attributes {
		out = append(out, attr.Expr.Variables()...)
	}
	for _, b := range body.Blocks {
		out = append(out, bodyRefs(b.Body)...)
	}
	return out
}

// dependents is the set of nodes that depend, directly or not, on one of
// the watched data sources (addresses without instance keys).
func (g *depGraph) dependents(watched []string) map[string]bool {
	dependent := map[string]bool{}
	for _, w := range watched {
		dependent[w] = true
	}
	for changed := true; changed; {
		changed = false
		for node, refs := range g.refs {
			if dependent[node] {
				continue
			}
			for _, r := range refs {
				if dependent[r] {
					dependent[node] = true
					changed = true
					break
				}
			}
		}
	}
	return dependent
}

// poolChangeFilter says whether a change of the plan, by resource address,
// is a pool change.
type poolChangeFilter struct {
	dependent map[string]bool
	opaque    map[string]bool
	// graph is the configuration's, when dependent was derived from it;
	// watched are the data sources it was derived from.
	graph   *depGraph
	watched []string
	// allowed, when set, replaces the derived set: the addresses (with or
	// without instance keys) a run may change.
	allowed []string
}

// newPoolChangeFilter is the filter of the configuration g whose watched
// data sources are watched.
func newPoolChangeFilter(g *depGraph, watched []string) poolChangeFilter {
	watched = slices.Clone(watched)
	slices.Sort(watched)
	return poolChangeFilter{dependent: g.dependents(watched), opaque: g.opaque, graph: g, watched: slices.Compact(watched)}
}

// targetable says whether the configuration says what depends on what:
// not with -allow, nor when it has files the companion does not read.
func (f poolChangeFilter) targetable() bool { return f.graph != nil && len(f.graph.skipped) == 0 }

// targets are the -target addresses of a plan that changes what depends on
// the changed data sources but not what depends on the excluded ones (a
// plan reads the data sources its targets need, and only those): the
// resources and the modules from a registry.
//
// A root module's output is planned only when everything it uses is:
// for an output that uses a changed pool, what it uses is targeted too
// (the other pools it reads are read again), unless that depends on an
// excluded pool.
func (f poolChangeFilter) targets(changed, excluded []string) []string {
	want, avoid := f.graph.dependents(changed), f.graph.dependents(excluded)
	targeted := map[string]bool{}
	for node := range want {
		if avoid[node] {
			continue
		}
		if f.opaque[node] || isManagedResource(node) {
			targeted[node] = true
		}
		if !strings.HasPrefix(node, "output.") {
			continue
		}
		uses := f.graph.ancestors(node)
		if slices.ContainsFunc(slices.Collect(maps.Keys(uses)), func(n string) bool { return avoid[n] }) {
			continue
		}
		for n := range uses {
			if f.opaque[n] || isManagedResource(n) || isDataSource(n) {
				targeted[n] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(targeted))
}

// byServiceInstances narrows targets: a resource whose instances are keyed
// as a changed fleet's Services (for_each = the fleet's services), and
// that uses no other changed pool, is targeted by the instances of the
// Services that changed, so that the others are neither refreshed nor
// planned. A change of the fleet's skipped list, or of a fleet with keys
// of its own, keeps the whole resource.
func (f poolChangeFilter) byServiceInstances(targets []string, changes map[string][]poolChange) []string {
	if f.graph == nil || len(f.graph.byService) == 0 {
		return targets
	}
	var out []string
	for _, t := range targets {
		fleet, keyed := f.graph.byService[t]
		services, changed := changes[fleet]
		others := slices.DeleteFunc(slices.Collect(maps.Keys(changes)), func(a string) bool { return a == fleet })
		if !keyed || !changed || slices.ContainsFunc(services, func(c poolChange) bool { return !strings.Contains(c.Name, "/") }) ||
			f.graph.dependents(resourcesOf(mapOf(others)))[t] {
			out = append(out, t)
			continue
		}
		for _, c := range services {
			out = append(out, fmt.Sprintf("%s[%q]", t, c.Name))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// mapOf is a set of addresses as the keys of a map.
func mapOf(addresses []string) map[string]bool {
	out := map[string]bool{}
	for _, a := range addresses {
		out[a] = true
	}
	return out
}

// leavesOut says whether something that uses a changed pool also uses an
// excluded one, and so is left out of the run's targets.
func (f poolChangeFilter) leavesOut(changed, excluded []string) bool {
	if f.graph == nil || len(excluded) == 0 {
		return false
	}
	avoid := f.graph.dependents(excluded)
	for node := range f.graph.dependents(changed) {
		if avoid[node] && (f.opaque[node] || isManagedResource(node) || strings.HasPrefix(node, "output.")) {
			return true
		}
	}
	return false
}

// isDataSource says whether a node of the graph is a data block.
func isDataSource(node string) bool {
	parts := strings.Split(node, ".")
	for len(parts) > 3 && parts[0] == "module" {
		parts = parts[2:]
	}
	return len(parts) == 3 && parts[0] == "data"
}

// ancestors are the nodes node uses, directly or not.
func (g *depGraph) ancestors(node string) map[string]bool {
	out := map[string]bool{}
	next := []string{node}
	for len(next) > 0 {
		n := next[len(next)-1]
		next = next[:len(next)-1]
		for _, r := range g.refs[n] {
			if !out[r] {
				out[r] = true
				next = append(next, r)
			}
		}
	}
	return out
}

// withDataSources are targets and the changed data sources that depend on
// no excluded one: a plan of them brings their results current in state,
// and the outputs that use them, when no resource does.
func (f poolChangeFilter) withDataSources(targets, changed, excluded []string) []string {
	avoid := f.graph.dependents(excluded)
	out := slices.Clone(targets)
	for _, address := range changed {
		if !avoid[address] {
			out = append(out, address)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// isManagedResource says whether a node of the graph is a resource block:
// TYPE.NAME after its module path.
func isManagedResource(node string) bool {
	parts := strings.Split(node, ".")
	for len(parts) > 2 && parts[0] == "module" {
		parts = parts[2:]
	}
	if len(parts) != 2 {
		return false
	}
	switch parts[0] {
	case "data", "local", "var", "output", "module":
		return false
	}
	return true
}

func (f poolChangeFilter) allows(address string) bool {
	if len(f.allowed) > 0 {
		bare := withoutKeys(address)
		for _, a := range f.allowed {
			if a == address || a == bare || strings.HasPrefix(address, a+"[") || strings.HasPrefix(bare, a+".") {
				return true
			}
		}
		return false
	}
	bare := withoutKeys(address)
	if f.dependent[bare] {
		return true
	}
	// A resource inside a module that is not read depends on what its call does.
	for call := range f.opaque {
		if f.dependent[call] && strings.HasPrefix(bare, call+".") {
			return true
		}
	}
	return false
}

// withoutKeys is an address without its instance keys:
// module.a["x"].aws_lb_target_group_attachment.m[2] -> module.a.aws_lb_target_group_attachment.m.
func withoutKeys(address string) string {
	var b strings.Builder
	depth, quoted, escaped := 0, false, false
	for _, r := range address {
		switch {
		case quoted:
			switch {
			case escaped:
				escaped = false
			case r == '\\':
				escaped = true
			case r == '"':
				quoted = false
			}
		case r == '"' && depth > 0:
			quoted = true
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}
