package kube

import (
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
)

// The connection variables of the hashicorp/kubernetes provider, which users
// bring in their pipelines. Each stands for an argument of that provider; an
// empty variable is unset, as there. Load and LoadInline say when each is
// read.
const (
	EnvConfigPath      = "KUBE_CONFIG_PATH"
	EnvConfigPaths     = "KUBE_CONFIG_PATHS"
	EnvContext         = "KUBE_CTX"
	EnvContextCluster  = "KUBE_CTX_CLUSTER"
	EnvContextAuthInfo = "KUBE_CTX_AUTH_INFO"
	EnvHost            = "KUBE_HOST"
	EnvToken           = "KUBE_TOKEN"
	EnvClusterCA       = "KUBE_CLUSTER_CA_CERT_DATA"
	EnvClientCert      = "KUBE_CLIENT_CERT_DATA"
	EnvClientKey       = "KUBE_CLIENT_KEY_DATA"
	EnvInsecure        = "KUBE_INSECURE"
	EnvTLSServerName   = "KUBE_TLS_SERVER_NAME"
	EnvProxyURL        = "KUBE_PROXY_URL"
)

// EnvVariables are the variables read, in the order the documentation gives
// them. KUBE_USER and KUBE_PASSWORD (basic authentication, which Kubernetes
// removed in v1.19) are not among them.
var EnvVariables = []string{
	EnvConfigPath, EnvConfigPaths, EnvContext, EnvContextCluster, EnvContextAuthInfo,
	EnvHost, EnvToken, EnvClusterCA, EnvClientCert, EnvClientKey, EnvInsecure, EnvTLSServerName, EnvProxyURL,
}

// EnvError is a variable whose value cannot be used.
type EnvError struct {
	// Name is the variable (or, for a pair that does not match, both).
	Name string
	Err  error
}

func (e *EnvError) Error() string { return e.Name + ": " + e.Err.Error() }

func (e *EnvError) Unwrap() error { return e.Err }

// environment is the variables one load looks at. It remembers which it
// read, so that the source of a configuration can name the variables that
// were set and not read.
type environment struct {
	getenv func(string) string
	read   map[string]bool
}

func newEnvironment(getenv func(string) string) *environment {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return &environment{getenv: getenv, read: map[string]bool{}}
}

// get reads a variable, which then counts as used.
func (e *environment) get(name string) string {
	e.read[name] = true
	return e.getenv(name)
}

// unread lists the variables that are set but were not read.
func (e *environment) unread() []string {
	var names []string
	for _, name := range EnvVariables {
		if !e.read[name] && e.getenv(name) != "" {
			names = append(names, name)
		}
	}
	return names
}

// used lists the variables that were read and set, among names.
func (e *environment) used(names ...string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !e.read[n] || e.getenv(n) == "" })
}

// kubeconfigPaths is the path list of $KUBECONFIG or KUBE_CONFIG_PATHS, as
// kubectl splits $KUBECONFIG: each file once, empty entries dropped.
func kubeconfigPaths(list string) []string {
	var files []string
	for _, f := range filepath.SplitList(list) {
		if f != "" && !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	return files
}

// host reads KUBE_HOST, checked as the host argument is.
func (e *environment) host() (string, error) {
	host := e.get(EnvHost)
	if host == "" {
		return "", nil
	}
	if err := ValidateHost(host); err != nil {
		return "", &EnvError{Name: EnvHost, Err: err}
	}
	return host, nil
}

// credentials fills what c, a connection given by arguments, leaves unset
// from the variables, each checked as its argument is. A variable is never
// read where its argument would conflict with one that c sets: with
// insecure, KUBE_CLUSTER_CA_CERT_DATA (and the reverse); with token,
// client_certificate or exec, the credential variables. Among the variables,
// an insecure KUBE_INSECURE drops KUBE_CLUSTER_CA_CERT_DATA, as client-go
// does with the hashicorp/kubernetes provider's overrides.
func (e *environment) credentials(c InlineConfig) (InlineConfig, error) {
	written := c
	if !written.InsecureSet && written.CACertificate == "" {
		if v := e.get(EnvInsecure); v != "" {
			insecure, err := strconv.ParseBool(v)
			if err != nil {
				return c, &EnvError{Name: EnvInsecure, Err: fmt.Errorf("%q is not a boolean: use true or false", v)}
			}
			c.Insecure, c.InsecureSet = insecure, true
		}
	}
	if written.CACertificate == "" && !c.Insecure {
		if v := e.get(EnvClusterCA); v != "" {
			if err := ValidateCertificatePEM(v); err != nil {
				return c, &EnvError{Name: EnvClusterCA, Err: err}
			}
			c.CACertificate = v
		}
	}
	if written.Token == "" && written.ClientCertificate == "" && written.ClientKey == "" && written.Exec == nil {
		c.Token = e.get(EnvToken)
		cert, key, err := e.clientCertificate()
		if err != nil {
			return c, err
		}
		c.ClientCertificate, c.ClientKey = cert, key
	}
	if written.TLSServerName == "" {
		c.TLSServerName = e.get(EnvTLSServerName)
	}
	if written.ProxyURL == "" {
		if v := e.get(EnvProxyURL); v != "" {
			if err := ValidateProxyURL(v); err != nil {
				return c, &EnvError{Name: EnvProxyURL, Err: err}
			}
			c.ProxyURL = v
		}
	}
	return c, nil
}

// clientCertificate reads KUBE_CLIENT_CERT_DATA and KUBE_CLIENT_KEY_DATA,
// which go together.
func (e *environment) clientCertificate() (cert, key string, err error) {
	cert, key = e.get(EnvClientCert), e.get(EnvClientKey)
	switch {
	case cert == "" && key == "":
		return "", "", nil
	case key == "":
		return "", "", &EnvError{Name: EnvClientCert, Err: fmt.Errorf("set without %s", EnvClientKey)}
	case cert == "":
		return "", "", &EnvError{Name: EnvClientKey, Err: fmt.Errorf("set without %s", EnvClientCert)}
	}
	if err := ValidateCertificatePEM(cert); err != nil {
		return "", "", &EnvError{Name: EnvClientCert, Err: err}
	}
	if _, err := tls.X509KeyPair([]byte(cert), []byte(key)); err != nil {
		return "", "", &EnvError{Name: EnvClientCert + " and " + EnvClientKey, Err: fmt.Errorf("not a key pair: %w", err)}
	}
	return cert, key, nil
}

// kubeconfigOverrides are what the variables change in a kubeconfig named by
// KUBE_CONFIG_PATH or KUBE_CONFIG_PATHS, as the hashicorp/kubernetes
// provider changes it: host and credentials replace the context's, and
// KUBE_PROXY_URL is used when the cluster names no proxy.
func (c InlineConfig) kubeconfigOverrides() *clientcmd.ConfigOverrides {
	o := &clientcmd.ConfigOverrides{}
	o.ClusterInfo.Server = c.Host
	o.ClusterInfo.InsecureSkipTLSVerify = c.Insecure
	o.ClusterInfo.TLSServerName = c.TLSServerName
	if c.CACertificate != "" {
		o.ClusterInfo.CertificateAuthorityData = []byte(c.CACertificate)
	}
	o.ClusterDefaults.ProxyURL = c.ProxyURL
	o.AuthInfo.Token = c.Token
	if c.ClientCertificate != "" {
		o.AuthInfo.ClientCertificateData = []byte(c.ClientCertificate)
		o.AuthInfo.ClientKeyData = []byte(c.ClientKey)
	}
	return o
}

// withVariables adds to a source the variables it was read with, and those
// set but not read, for logs. Names only: never a value.
func withVariables(source string, e *environment, used []string) string {
	if len(used) > 0 {
		source += ", with " + strings.Join(used, ", ")
	}
	if unread := e.unread(); len(unread) > 0 {
		source += "; set but not read: " + strings.Join(unread, ", ")
	}
	return source
}

// errNoKubeconfigForContext is a context, cluster or user asked for where no
// kubeconfig was found.
var errNoKubeconfigForContext = errors.New("a context is set but no kubeconfig file was found")
