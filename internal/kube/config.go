package kube

import (
	"errors"
	"fmt"
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
// world it looks at, so tests can replace them; $KUBECONFIG is read from the
// process's environment by clientcmd, as kubectl reads it.
type ConfigLoader struct {
	// HomeDir gives the directory that a leading "~/" and ~/.kube/config are in.
	HomeDir func() (string, error)
	// InCluster loads the pod's service account, as rest.InClusterConfig does.
	InCluster func() (*rest.Config, error)
}

// DefaultConfigLoader looks at the real environment.
func DefaultConfigLoader() ConfigLoader {
	return ConfigLoader{HomeDir: os.UserHomeDir, InCluster: rest.InClusterConfig}
}

// LoadedConfig is a usable client configuration and where it came from.
type LoadedConfig struct {
	Rest *rest.Config
	// Source says where the configuration was found, for logs: the files read
	// and the context used, or InClusterSource. It holds no secret.
	Source string
}

// LoadError says why no usable configuration was found, and what was tried.
type LoadError struct {
	// Tried lists each place looked at, with what was found there.
	Tried []string
	// Context is the context asked for, empty for the current one.
	Context string
	Err     error
}

func (e *LoadError) Error() string {
	ctx := "the current context"
	if e.Context != "" {
		ctx = fmt.Sprintf("context %q", e.Context)
	}
	return fmt.Sprintf("no usable cluster configuration for %s (tried %s): %v", ctx, strings.Join(e.Tried, "; "), e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// Load finds the cluster configuration the way kubectl does, with one
// difference: it never falls back to localhost. The lookup order is the
// explicit path (a leading "~/" is the home directory), else the files of
// $KUBECONFIG merged in order, else ~/.kube/config, and only when no
// kubeconfig path was given or set, the pod's service account. contextName
// empty means the kubeconfig's current context.
func (l ConfigLoader) Load(path, contextName string) (LoadedConfig, error) {
	files, origin, err := l.candidates(path)
	if err != nil {
		return LoadedConfig{}, &LoadError{Tried: []string{origin}, Context: contextName, Err: err}
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
		if path != "" || origin == envOrigin {
			return LoadedConfig{}, &LoadError{Tried: tried, Context: contextName, Err: errors.New("no kubeconfig file found")}
		}
		return l.inCluster(tried, contextName)
	}
	return loadKubeconfig(present, origin, contextName)
}

const (
	attrOrigin    = "kubeconfig"
	envOrigin     = "$KUBECONFIG"
	defaultOrigin = "default kubeconfig"
)

func (l ConfigLoader) candidates(path string) ([]string, string, error) {
	if path != "" {
		expanded, err := l.expandHome(path)
		return []string{expanded}, attrOrigin, err
	}
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "" {
		// clientcmd's default loading rules split $KUBECONFIG as kubectl
		// does, each file once. Their home file is not used: it is fixed
		// when the package loads, and HomeDir decides it here.
		files := slices.DeleteFunc(clientcmd.NewDefaultClientConfigLoadingRules().GetLoadingPrecedence(), func(f string) bool { return f == "" })
		if len(files) > 0 {
			return files, envOrigin, nil
		}
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

func (l ConfigLoader) inCluster(tried []string, contextName string) (LoadedConfig, error) {
	if contextName != "" {
		return LoadedConfig{}, &LoadError{Tried: tried, Context: contextName,
			Err: errors.New("a context is set but no kubeconfig file was found")}
	}
	cfg, err := l.InCluster()
	if err != nil {
		tried = append(tried, fmt.Sprintf("%s: %v", InClusterSource, err))
		return LoadedConfig{}, &LoadError{Tried: tried, Err: errors.New("no kubeconfig file found and not running in a pod")}
	}
	return LoadedConfig{Rest: cfg, Source: InClusterSource}, nil
}

func loadKubeconfig(files []string, origin, contextName string) (LoadedConfig, error) {
	where := fmt.Sprintf("%s %s", origin, strings.Join(files, string(filepath.ListSeparator)))
	fail := func(err error) (LoadedConfig, error) {
		return LoadedConfig{}, &LoadError{Tried: []string{where}, Context: contextName, Err: err}
	}
	// Merged in order, the first file to set a value wins, as with kubectl.
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: files}
	raw, err := rules.Load()
	if err != nil {
		return fail(err)
	}
	if contextName == "" {
		contextName = raw.CurrentContext
		if contextName == "" {
			return fail(errors.New("the kubeconfig has no current-context; set context"))
		}
	}
	kctx, ok := raw.Contexts[contextName]
	if !ok {
		known := make([]string, 0, len(raw.Contexts))
		for name := range raw.Contexts {
			known = append(known, name)
		}
		slices.Sort(known)
		return fail(&UnknownContextError{Name: contextName, Known: known})
	}
	if _, ok := raw.Clusters[kctx.Cluster]; !ok {
		return fail(fmt.Errorf("context %q uses cluster %q, which the kubeconfig does not define", contextName, kctx.Cluster))
	}
	// No cluster defaults: a context without a server is an error here,
	// where clientcmd's defaults would point it at localhost.
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, contextName, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
	if err != nil {
		return fail(err)
	}
	if cfg.Host == "" {
		return fail(fmt.Errorf("context %q has no cluster server", contextName))
	}
	return LoadedConfig{Rest: cfg, Source: fmt.Sprintf("%s, context %s", where, contextName)}, nil
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
