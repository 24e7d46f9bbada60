package kube

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// InClusterSource names the service account of the pod the provider runs in.
const InClusterSource = "in-cluster service account"

// ConfigLoader finds the cluster to connect to. Its fields are the outside
// world it looks at, so tests can replace them.
type ConfigLoader struct {
	// HomeDir gives the directory that a leading "~/" and ~/.kube/config are in.
	HomeDir func() (string, error)
	// InCluster loads the pod's service account, as rest.InClusterConfig does.
	InCluster func() (*rest.Config, error)
	// Getenv reads $KUBECONFIG and the KUBE_* variables (EnvVariables); nil
	// reads none.
	Getenv func(string) string
}

// DefaultConfigLoader looks at the real environment.
func DefaultConfigLoader() ConfigLoader {
	return ConfigLoader{HomeDir: os.UserHomeDir, InCluster: rest.InClusterConfig, Getenv: os.Getenv}
}

// LoadedConfig is a usable client configuration and where it came from.
type LoadedConfig struct {
	Rest *rest.Config
	// Source says where the configuration was found, for logs: the files read
	// and the context used, or InClusterSource, and the variables read or set
	// and not read. It holds no secret.
	Source string
}

// LoadError says why no usable configuration was found, and what was tried.
type LoadError struct {
	// Tried lists each place looked at, with what was found there.
	Tried []string
	// Context is the context asked for, empty for the current one.
	Context string
	// ContextFrom is the variable Context came from (EnvContext), empty when
	// it was given as an argument or flag.
	ContextFrom string
	// Unread are the variables set but not read (EnvVariables).
	Unread []string
	Err    error
}

func (e *LoadError) Error() string {
	ctx := "the current context"
	if e.Context != "" {
		ctx = fmt.Sprintf("context %q", e.Context)
		if e.ContextFrom != "" {
			ctx += " (" + e.ContextFrom + ")"
		}
	}
	msg := fmt.Sprintf("no usable cluster configuration for %s (tried %s): %v", ctx, strings.Join(e.Tried, "; "), e.Err)
	if len(e.Unread) > 0 {
		msg += fmt.Sprintf(" (set but not read: %s)", strings.Join(e.Unread, ", "))
	}
	return msg
}

func (e *LoadError) Unwrap() error { return e.Err }

// Load finds the cluster configuration the way kubectl does, with the
// variables of the hashicorp/kubernetes provider, and one difference: it
// never falls back to localhost. path and contextName are the kubeconfig and
// context the user gave (the provider's arguments, the companion's flags),
// empty when not given; each variable is read only where what was given
// leaves its place, so a given one always wins. The kubeconfig is path (a
// leading "~/" is the home directory), else KUBE_CONFIG_PATH, else the files
// of KUBE_CONFIG_PATHS; else, when neither path nor contextName is given and
// KUBE_HOST is set, the connection is made from KUBE_HOST and the credential
// variables alone, without a kubeconfig; else the files of $KUBECONFIG
// merged in order, else ~/.kube/config, and only when no kubeconfig path was
// given or set and no context is asked for, the pod's service account. The
// context is contextName, else KUBE_CTX, else the kubeconfig's current
// context; when contextName is not given, KUBE_CTX_CLUSTER and
// KUBE_CTX_AUTH_INFO replace its cluster and user. When neither path nor
// contextName is given, KUBE_HOST and the credential variables override the
// server and credentials of a kubeconfig named by KUBE_CONFIG_PATH or
// KUBE_CONFIG_PATHS, as they do in the hashicorp/kubernetes provider; they
// are not read with any other kubeconfig. A variable whose value is invalid
// is an *EnvError; anything else that fails, a *LoadError.
func (l ConfigLoader) Load(path, contextName string) (LoadedConfig, error) {
	e := newEnvironment(l.Getenv)
	loaded, err := l.load(e, path, contextName)
	var loadErr *LoadError
	if errors.As(err, &loadErr) {
		loadErr.Unread = e.unread()
	}
	return loaded, err
}

func (l ConfigLoader) load(e *environment, path, contextName string) (LoadedConfig, error) {
	given := path != "" || contextName != ""
	files, origin, err := l.candidates(e, path, given)
	if origin == EnvHost {
		return loadFromVariables(e)
	}
	sel := e.selection(contextName)
	if err != nil {
		return LoadedConfig{}, &LoadError{Tried: []string{origin}, Context: sel.context, ContextFrom: sel.contextFrom, Err: err}
	}
	var present, tried []string
	for _, f := range files {
		if _, statErr := os.Stat(f); statErr == nil {
			present = append(present, f)
		} else {
			tried = append(tried, fmt.Sprintf("%s %s: %v", origin, f, unwrapPathError(statErr)))
		}
	}
	if len(present) == 0 {
		// Only the default location may fall through to the service account:
		// a kubeconfig the user named and cannot be read is an error, not a
		// reason to talk to another cluster.
		if origin != defaultOrigin {
			return LoadedConfig{}, &LoadError{Tried: tried, Context: sel.context, ContextFrom: sel.contextFrom, Err: errors.New("no kubeconfig file found")}
		}
		return l.inCluster(e, tried, sel)
	}
	var overrides *InlineConfig
	if !given && (origin == EnvConfigPath || origin == EnvConfigPaths) {
		host, err := e.host()
		if err != nil {
			return LoadedConfig{}, err
		}
		variables, err := e.credentials(InlineConfig{Host: host})
		if err != nil {
			return LoadedConfig{}, err
		}
		overrides = &variables
	}
	return loadKubeconfig(e, present, origin, sel, overrides)
}

const (
	attrOrigin    = "kubeconfig"
	envOrigin     = "$KUBECONFIG"
	defaultOrigin = "default kubeconfig"
)

// candidates are the kubeconfig files to read and what named them, or
// origin EnvHost when KUBE_HOST, not a kubeconfig, gives the connection.
func (l ConfigLoader) candidates(e *environment, path string, given bool) ([]string, string, error) {
	if path != "" {
		expanded, err := l.expandHome(path)
		return []string{expanded}, attrOrigin, err
	}
	if p := e.get(EnvConfigPath); p != "" {
		expanded, err := l.expandHome(p)
		return []string{expanded}, EnvConfigPath, err
	}
	if list := kubeconfigPaths(e.get(EnvConfigPaths)); len(list) > 0 {
		files := make([]string, 0, len(list))
		for _, f := range list {
			expanded, err := l.expandHome(f)
			if err != nil {
				return nil, EnvConfigPaths, err
			}
			files = append(files, expanded)
		}
		return files, EnvConfigPaths, nil
	}
	if !given && e.get(EnvHost) != "" {
		return nil, EnvHost, nil
	}
	// $KUBECONFIG is split as kubectl splits it. The home file is not
	// clientcmd's, fixed when the package loads: HomeDir decides it here.
	if files := kubeconfigPaths(e.get(clientcmd.RecommendedConfigPathEnvVar)); len(files) > 0 {
		return files, envOrigin, nil
	}
	home, err := l.HomeDir()
	if err != nil {
		return nil, defaultOrigin + " ~/.kube/config", fmt.Errorf("home directory unknown: %w", err)
	}
	return []string{filepath.Join(home, ".kube", "config")}, defaultOrigin, nil
}

func (l ConfigLoader) expandHome(path string) (string, error) {
	if !strings.HasPrefix(path, "~/") {
		return path, nil
	}
	home, err := l.HomeDir()
	if err != nil {
		return "", fmt.Errorf("expand %s: home directory unknown: %w", path, err)
	}
	return filepath.Join(home, path[2:]), nil
}

// selection is the context of the kubeconfig to use, and what replaces its
// cluster and user.
type selection struct {
	context     string
	contextFrom string // EnvContext, or empty when given
	// cluster and authInfo come from KUBE_CTX_CLUSTER and KUBE_CTX_AUTH_INFO.
	cluster, authInfo string
}

// selection is the context given, else the variables': a context given is
// the user's choice of cluster and user, which no variable changes.
func (e *environment) selection(contextName string) selection {
	if contextName != "" {
		return selection{context: contextName}
	}
	s := selection{context: e.get(EnvContext), cluster: e.get(EnvContextCluster), authInfo: e.get(EnvContextAuthInfo)}
	if s.context != "" {
		s.contextFrom = EnvContext
	}
	return s
}

func (l ConfigLoader) inCluster(e *environment, tried []string, sel selection) (LoadedConfig, error) {
	if sel.context != "" || sel.cluster != "" || sel.authInfo != "" {
		err := errNoKubeconfigForContext
		if sel.context == "" {
			err = fmt.Errorf("%s set, but no kubeconfig file was found", strings.Join(e.used(EnvContextCluster, EnvContextAuthInfo), " and "))
		}
		return LoadedConfig{}, &LoadError{Tried: tried, Context: sel.context, ContextFrom: sel.contextFrom, Err: err}
	}
	cfg, err := l.InCluster()
	if err != nil {
		tried = append(tried, fmt.Sprintf("%s: %v", InClusterSource, err))
		return LoadedConfig{}, &LoadError{Tried: tried, Err: errors.New("no kubeconfig file found and not running in a pod")}
	}
	return LoadedConfig{Rest: cfg, Source: withVariables(InClusterSource, e, nil)}, nil
}

// loadKubeconfig reads files with the context of sel; variables, when not
// nil, override its server and credentials.
func loadKubeconfig(e *environment, files []string, origin string, sel selection, variables *InlineConfig) (LoadedConfig, error) {
	where := fmt.Sprintf("%s %s", origin, strings.Join(files, string(filepath.ListSeparator)))
	fail := func(err error) (LoadedConfig, error) {
		return LoadedConfig{}, &LoadError{Tried: []string{where}, Context: sel.context, ContextFrom: sel.contextFrom, Err: err}
	}
	// Merged in order, the first file to set a value wins, as with kubectl.
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: files}
	raw, err := rules.Load()
	if err != nil {
		return fail(err)
	}
	contextName := sel.context
	if contextName == "" {
		contextName = raw.CurrentContext
		if contextName == "" {
			return fail(errors.New("the kubeconfig has no current-context; set context"))
		}
	}
	kctx, ok := raw.Contexts[contextName]
	if !ok {
		return fail(&UnknownContextError{Name: contextName, Known: slices.Sorted(maps.Keys(raw.Contexts))})
	}
	// No cluster defaults: a context without a server is an error here,
	// where clientcmd's defaults would point it at localhost.
	overrides := &clientcmd.ConfigOverrides{}
	if variables != nil {
		overrides = variables.kubeconfigOverrides()
	}
	if sel.cluster != "" {
		if _, ok := raw.Clusters[sel.cluster]; !ok {
			return fail(&EnvError{Name: EnvContextCluster, Err: fmt.Errorf("cluster %q not found (clusters in the kubeconfig: %s)",
				sel.cluster, namesOrNone(raw.Clusters))})
		}
		overrides.Context.Cluster = sel.cluster
	} else if _, ok := raw.Clusters[kctx.Cluster]; !ok {
		return fail(fmt.Errorf("context %q uses cluster %q, which the kubeconfig does not define", contextName, kctx.Cluster))
	}
	if sel.authInfo != "" {
		if _, ok := raw.AuthInfos[sel.authInfo]; !ok {
			return fail(&EnvError{Name: EnvContextAuthInfo, Err: fmt.Errorf("user %q not found (users in the kubeconfig: %s)",
				sel.authInfo, namesOrNone(raw.AuthInfos))})
		}
		overrides.Context.AuthInfo = sel.authInfo
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, contextName, overrides, rules).ClientConfig()
	if err != nil {
		return fail(err)
	}
	if cfg.Host == "" {
		return fail(fmt.Errorf("context %q has no cluster server", contextName))
	}
	source := fmt.Sprintf("%s, context %s", where, contextName)
	if sel.contextFrom != "" {
		source += " (" + sel.contextFrom + ")"
	}
	used := e.used(EnvContextCluster, EnvContextAuthInfo, EnvHost, EnvToken, EnvClusterCA, EnvClientCert, EnvClientKey,
		EnvInsecure, EnvTLSServerName, EnvProxyURL)
	return LoadedConfig{Rest: cfg, Source: withVariables(source, e, used)}, nil
}

// namesOrNone lists the names of a kubeconfig's map, sorted.
func namesOrNone[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// UnknownContextError is a context that the kubeconfig does not define.
type UnknownContextError struct {
	Name  string
	Known []string
}

func (e *UnknownContextError) Error() string {
	known := "none"
	if len(e.Known) > 0 {
		known = strings.Join(e.Known, ", ")
	}
	return fmt.Sprintf("context %q not found (contexts in the kubeconfig: %s)", e.Name, known)
}

// unwrapPathError keeps "no such file or directory" without repeating the path.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
