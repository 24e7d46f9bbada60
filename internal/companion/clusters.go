package companion

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// One companion keeps every k8s provider configuration of the state
// current: each is a cluster of its own (a client, informers), connected as
// the user says (-cluster), else as its provider block says when its
// kubeconfig and context are constants or variables with values, else (the
// default configuration only) as the provider finds a cluster without
// arguments.

// connection is how the companion connects to the cluster of one provider
// configuration: a kubeconfig and a context, each "" for the loader's
// default (the KUBE_* variables, $KUBECONFIG, ~/.kube/config, in-cluster;
// its current context), as the provider's.
type connection struct {
	kubeconfig, context string
	// source says where it came from, for the log and errors.
	source string
}

// clusterName names a provider configuration as users write it: k8s,
// k8s.east, k8s.by_region["eu"].
func clusterName(key string) string {
	if key == "" {
		return "k8s"
	}
	return "k8s." + key
}

// parseClusterFlag reads -cluster ALIAS=VALUE, VALUE being
// KUBECONFIG#CONTEXT, KUBECONFIG (a path: it has a slash, or names a file),
// or CONTEXT (of the default kubeconfig). ALIAS is the provider block's
// alias, "default" for the one without, ALIAS[KEY] for an instance of
// OpenTofu's provider for_each.
func parseClusterFlag(v string) (string, connection, error) {
	alias, value, ok := strings.Cut(v, "=")
	if !ok || alias == "" || value == "" {
		return "", connection{}, fmt.Errorf("-cluster %q: give ALIAS=CONTEXT, ALIAS=KUBECONFIG or ALIAS=KUBECONFIG#CONTEXT", v)
	}
	key, err := clusterKey(alias)
	if err != nil {
		return "", connection{}, fmt.Errorf("-cluster %q: %w", v, err)
	}
	c := connection{source: "-cluster " + v}
	switch path, ctx, hasContext := strings.Cut(value, "#"); {
	case hasContext:
		c.kubeconfig, c.context = path, ctx
	case strings.ContainsRune(value, '/') || fileExists(value):
		c.kubeconfig = value
	default:
		c.context = value
	}
	return key, c, nil
}

// clusterKey is an alias as -cluster gives it, as state names it:
// "default" is "", by_region[eu] is by_region["eu"].
func clusterKey(alias string) (string, error) {
	if alias == "default" {
		return "", nil
	}
	name, rest, indexed := strings.Cut(alias, "[")
	if !hclsyntax.ValidIdentifier(name) {
		return "", fmt.Errorf("%q is not a provider alias", name)
	}
	if !indexed {
		return name, nil
	}
	key, ok := strings.CutSuffix(rest, "]")
	if !ok || key == "" {
		return "", fmt.Errorf("%q: an instance key is written ALIAS[KEY]", alias)
	}
	if unquoted, err := strconv.Unquote(key); err == nil {
		key = unquoted
	}
	return name + "[" + strconv.Quote(key) + "]", nil
}

func fileExists(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir()
}

// connectionArguments are the arguments of the provider block the companion
// can connect with, and trusted_slice_managers, which says nothing of the
// connection (the companion reads it from each data source's state); a
// block that sets any other (host, token, exec...) connects in a way the
// companion cannot repeat from the configuration.
var connectionArguments = map[string]bool{"alias": true, "for_each": true, "kubeconfig": true, "context": true,
	"request_timeout": true, "qps": true, "burst": true, "trusted_slice_managers": true}

// providerConnections reads the provider "k8s" blocks of the root module
// of dir: the connection of each configuration (by key as state names it)
// whose kubeconfig and context are constants or variables with values
// (defaults, terraform.tfvars, *.auto.tfvars, $TF_VAR_name), and for the
// others why not.
func providerConnections(dir string) (map[string]connection, map[string]error, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(files)
	parser := hclparse.NewParser()
	var blocks []*hclsyntax.Block
	variables := map[string]cty.Value{}
	for _, file := range files {
		f, diags := parser.ParseHCLFile(file)
		if diags.HasErrors() {
			return nil, nil, fmt.Errorf("read %s: %s", file, diags.Error())
		}
		body, ok := f.Body.(*hclsyntax.Body)
		if !ok {
			continue
		}
		for _, b := range body.Blocks {
			switch {
			case b.Type == "provider" && len(b.Labels) == 1 && b.Labels[0] == "k8s":
				blocks = append(blocks, b)
			case b.Type == "variable" && len(b.Labels) == 1:
				if attr, ok := b.Body.Attributes["default"]; ok {
					if v, diags := attr.Expr.Value(nil); !diags.HasErrors() {
						variables[b.Labels[0]] = v
					}
				}
			}
		}
	}
	if err := readVariableValues(parser, dir, variables); err != nil {
		return nil, nil, err
	}
	found, failed := map[string]connection{}, map[string]error{}
	for _, b := range blocks {
		readProviderBlock(dir, b, variables, found, failed)
	}
	return found, failed, nil
}

// readVariableValues sets the values of terraform.tfvars, *.auto.tfvars
// (in Terraform's order) and $TF_VAR_name over the defaults.
func readVariableValues(parser *hclparse.Parser, dir string, variables map[string]cty.Value) error {
	files := []string{filepath.Join(dir, "terraform.tfvars")}
	auto, _ := filepath.Glob(filepath.Join(dir, "*.auto.tfvars"))
	slices.Sort(auto)
	for _, file := range append(files, auto...) {
		if !fileExists(file) {
			continue
		}
		f, diags := parser.ParseHCLFile(file)
		if diags.HasErrors() {
			return fmt.Errorf("read %s: %s", file, diags.Error())
		}
		attrs, diags := f.Body.JustAttributes()
		if diags.HasErrors() {
			return fmt.Errorf("read %s: %s", file, diags.Error())
		}
		for name, attr := range attrs {
			if v, diags := attr.Expr.Value(nil); !diags.HasErrors() {
				variables[name] = v
			}
		}
	}
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(strings.TrimPrefix(kv, "TF_VAR_"), "=")
		if !strings.HasPrefix(kv, "TF_VAR_") {
			continue
		}
		// As Terraform reads them: a string, unless it is an HCL value of
		// another type (a map for a for_each).
		v := cty.StringVal(value)
		if expr, diags := hclsyntax.ParseExpression([]byte(value), "TF_VAR_"+name, hcl.InitialPos); !diags.HasErrors() {
			if parsed, diags := expr.Value(nil); !diags.HasErrors() && !parsed.Type().Equals(cty.String) {
				v = parsed
			}
		}
		variables[name] = v
	}
	return nil
}

// readProviderBlock adds the configurations of one provider "k8s" block.
func readProviderBlock(dir string, b *hclsyntax.Block, variables map[string]cty.Value, found map[string]connection, failed map[string]error) {
	vars := cty.EmptyObjectVal
	if len(variables) > 0 {
		vars = cty.ObjectVal(variables)
	}
	abs, _ := filepath.Abs(dir)
	paths := cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal(abs), "root": cty.StringVal(abs), "cwd": cty.StringVal(abs)})
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": vars, "path": paths}}
	alias := ""
	if attr, ok := b.Body.Attributes["alias"]; ok {
		v, diags := attr.Expr.Value(nil)
		if diags.HasErrors() || !v.Type().Equals(cty.String) {
			return
		}
		alias = v.AsString()
	}
	fail := func(key string, err error) {
		failed[key] = fmt.Errorf("provider %s: %w; give -cluster %s=KUBECONFIG#CONTEXT", clusterName(key), err, flagAlias(key))
	}
	for _, name := range slices.Sorted(maps.Keys(b.Body.Attributes)) {
		if !connectionArguments[name] {
			fail(alias, fmt.Errorf("it sets %s, which the companion cannot connect with", name))
			return
		}
	}
	if len(b.Body.Blocks) > 0 {
		fail(alias, fmt.Errorf("its %s block connects in a way the companion cannot repeat", b.Body.Blocks[0].Type))
		return
	}
	forEach, ok := b.Body.Attributes["for_each"]
	if !ok {
		readConnection(b, ctx, alias, found, failed, fail)
		return
	}
	each, diags := forEach.Expr.Value(ctx)
	iterable := each.Type().IsMapType() || each.Type().IsObjectType() || each.Type().IsSetType()
	if diags.HasErrors() || !each.IsWhollyKnown() || !iterable {
		fail(alias+"[*]", fmt.Errorf("its for_each has no value the companion can read (%s)", diags.Error()))
		return
	}
	for it := each.ElementIterator(); it.Next(); {
		k, v := it.Element()
		if !k.Type().Equals(cty.String) {
			continue
		}
		key := alias + "[" + strconv.Quote(k.AsString()) + "]"
		instance := &hcl.EvalContext{Variables: map[string]cty.Value{"var": vars, "path": paths,
			"each": cty.ObjectVal(map[string]cty.Value{"key": k, "value": v})}}
		readConnection(b, instance, key, found, failed, fail)
	}
}

// readConnection evaluates kubeconfig and context in ctx for key.
func readConnection(b *hclsyntax.Block, ctx *hcl.EvalContext, key string, found map[string]connection, failed map[string]error,
	fail func(string, error),
) {
	c := connection{source: "the provider block of " + clusterName(key)}
	for name, to := range map[string]*string{"kubeconfig": &c.kubeconfig, "context": &c.context} {
		attr, ok := b.Body.Attributes[name]
		if !ok {
			continue
		}
		v, diags := attr.Expr.Value(ctx)
		if diags.HasErrors() || !v.IsWhollyKnown() || v.IsNull() || !v.Type().Equals(cty.String) {
			fail(key, fmt.Errorf("its %s is not a constant or a variable with a value", name))
			return
		}
		*to = v.AsString()
	}
	delete(failed, key)
	found[key] = c
}

// flagAlias is a key as -cluster takes it.
func flagAlias(key string) string {
	if key == "" {
		return "default"
	}
	return strings.ReplaceAll(key, `"`, "")
}

// cluster is the cluster of one provider configuration of a workspace:
// its client, informers and probe, which the hub shares with the other
// workspaces that read it, and what this workspace asks of them.
type cluster struct {
	key, name string
	conn      connection
	client    *kube.Client
	shared    *sharedCluster
	// snapshot is check's one pass of LISTs, in place of informers.
	snapshot *kube.Cache
	// scope is what the workspace's pools ask to watch; watching says the
	// informers covered what it asked once; scopeErr is why the informers
	// of the scope state asks for did not start: the pools outside the
	// running informers' scope are unreadable.
	scope    kube.CacheScope
	watching bool
	scopeErr error

	// changed, resync and answers are how the hub tells the workspace of a
	// change, of informers that replaced others, and of the probe's answer
	// ("" when the cluster answers, else why not).
	changed func(kube.Change)
	resync  func()
	answers func(down string)
}

// cache is what the workspace's pools read now.
func (c *cluster) cache() *kube.Cache {
	if c.snapshot != nil || c.shared == nil {
		return c.snapshot
	}
	return c.shared.currentCache()
}

// unreachable says why the pools of the cluster are not recomputed, or "".
func (c *cluster) unreachable() string {
	if c.shared == nil {
		return ""
	}
	if down := c.shared.downReason(); down != "" {
		return fmt.Sprintf("cluster %s does not answer (%s): not recomputed, left as they are", c.name, down)
	}
	return ""
}

func (c *cluster) describe() string { return c.name + " (" + c.conn.source + ")" }

// probeInterval is how often each cluster is asked whether it is ready, so
// that a cluster that stopped answering has its pools left out of runs
// before a plan fails on them.
const probeInterval = 5 * time.Second

// connect makes the clusters of keys that are not made yet.
func (s *syncer) connect(keys []string) error {
	var blocks map[string]connection
	var failed map[string]error
	for _, key := range keys {
		if _, ok := s.clusters[key]; ok {
			continue
		}
		if blocks == nil && s.opts.Alias == "" {
			var err error
			if blocks, failed, err = providerConnections(s.opts.Dir); err != nil {
				return err
			}
		}
		cl := &cluster{key: key, name: clusterName(key)}
		conn, fromFlag := s.flags[key]
		block, inBlock := blocks[key]
		switch {
		case s.opts.Alias != "" || (key == "" && !fromFlag && (s.opts.DefaultFromFlags || !inBlock)):
			cl.conn, cl.client = connection{source: "-kubeconfig and -context, else the KUBE_* variables, $KUBECONFIG, ~/.kube/config, in-cluster"}, s.client
		case fromFlag:
			cl.conn = conn
		case inBlock:
			cl.conn = block
		case failed[key] != nil:
			return failed[key]
		default:
			return fmt.Errorf("provider %s: no provider block of the root module configures it; give -cluster %s=KUBECONFIG#CONTEXT", cl.name, flagAlias(key))
		}
		id, connect := "default", func() (*kube.Client, error) { return cl.client, nil }
		if cl.client == nil {
			path := s.kubeconfigPath(cl.conn)
			id = path + "#" + cl.conn.context
			connect = func() (*kube.Client, error) {
				client, err := s.newClient(path, cl.conn.context)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", cl.describe(), err)
				}
				return client, nil
			}
		}
		// How the hub tells the workspace, set before the hub's goroutines
		// can see cl.
		s.tell(cl)
		if err := s.hub.join(cl, id, connect); err != nil {
			return err
		}
		s.clusters[key] = cl
		s.metrics.clusterReachable.WithLabelValues(cl.name).Set(1)
		s.log.Info("cluster", "cluster", cl.name, "source", cl.conn.source)
		if s.probing {
			s.hub.probe(cl.shared)
		}
	}
	for key, cl := range s.clusters {
		if !slices.Contains(keys, key) {
			// No pool of state reads it any more.
			s.hub.leave(cl)
			delete(s.clusters, key)
			s.metrics.clusterReachable.DeleteLabelValues(cl.name)
			s.metrics.clusterPools.DeleteLabelValues(cl.name)
		}
	}
	return nil
}

// kubeconfigPath is c's kubeconfig as a path: a relative one is in the
// working directory, as it is for the provider that Terraform runs there.
func (s *syncer) kubeconfigPath(c connection) string {
	path := c.kubeconfig
	if path != "" && !filepath.IsAbs(path) && !strings.HasPrefix(path, "~/") {
		path, _ = filepath.Abs(filepath.Join(s.opts.Dir, path))
	}
	return path
}

// newClient connects with the kubeconfig at path and its context.
func (s *syncer) newClient(path, context string) (*kube.Client, error) {
	loaded, err := kube.DefaultConfigLoader().Load(path, context)
	if err != nil {
		return nil, fmt.Errorf("unable to load the kubeconfig: %w", err)
	}
	return kube.NewClient(loaded.Rest, s.opts.Client)
}

// probe asks every cluster, now and later ones, whether it answers.
func (s *syncer) probe() {
	s.probing = true
	for _, cl := range s.clusters {
		s.hub.probe(cl.shared)
	}
}

// tell sets how the hub tells the workspace of what happens to cl.
func (s *syncer) tell(cl *cluster) {
	cl.changed = func(ch kube.Change) { s.changed(cl.key, ch) }
	cl.resync = func() {
		s.mu.Lock()
		s.all = true
		s.mu.Unlock()
		s.wake()
	}
	cl.answers = func(down string) {
		if down != "" {
			s.metrics.clusterReachable.WithLabelValues(cl.name).Set(0)
			s.log.Warn("cluster does not answer: its pools are left as they are and out of runs", "cluster", cl.name, "error", down)
		} else {
			s.metrics.clusterReachable.WithLabelValues(cl.name).Set(1)
			s.log.Info("cluster answers again", "cluster", cl.name)
		}
		s.mu.Lock()
		for i, in := range s.instances {
			if in.cluster == cl.key {
				s.dirty[i] = &touched{all: true}
			}
		}
		s.mu.Unlock()
		s.wake()
	}
}
