package kube

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// InlineConfig is a connection given in the provider configuration rather than
// in a kubeconfig file: what managed clusters (EKS, GKE, AKS) expose as outputs.
type InlineConfig struct {
	Host string
	// CACertificate, ClientCertificate and ClientKey are PEM.
	CACertificate     string
	Token             string
	ClientCertificate string
	ClientKey         string
	Insecure          bool
	// InsecureSet says that insecure was given, true or false: KUBE_INSECURE
	// is then not read.
	InsecureSet   bool
	TLSServerName string
	ProxyURL      string
	Exec          *ExecConfig
}

// ExecConfig runs a credential plugin, such as `aws eks get-token`, that
// prints an ExecCredential.
type ExecConfig struct {
	APIVersion string
	Command    string
	Args       []string
	Env        map[string]string
}

// ExecAPIVersions are the ExecCredential versions client-go speaks.
var ExecAPIVersions = []string{"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"}

// InlineSource names an inline configuration in logs, without any secret.
func InlineSource(host string) string { return "provider arguments, host " + host }

// LoadInline checks the connection given by arguments, c, whose host is set,
// with the credential variables (KUBE_TOKEN, KUBE_CLUSTER_CA_CERT_DATA...)
// filling what it leaves unset, each only where its argument could go
// beside those given; the kubeconfig variables and KUBE_HOST are not read.
// It contacts nothing. A variable whose value is invalid is an *EnvError.
func (l ConfigLoader) LoadInline(c InlineConfig) (LoadedConfig, error) {
	return loadInline(newEnvironment(l.Getenv), c, InlineSource(c.Host))
}

// loadFromVariables connects with KUBE_HOST and the credential variables
// alone, as the hashicorp/kubernetes provider does without a kubeconfig.
func loadFromVariables(e *environment) (LoadedConfig, error) {
	host, err := e.host()
	if err != nil {
		return LoadedConfig{}, err
	}
	return loadInline(e, InlineConfig{Host: host}, EnvHost+" "+host)
}

func loadInline(e *environment, c InlineConfig, source string) (LoadedConfig, error) {
	filled, err := e.credentials(c)
	if err != nil {
		return LoadedConfig{}, err
	}
	loaded, err := filled.Load()
	if err != nil {
		return LoadedConfig{}, err
	}
	loaded.Source = withVariables(source, e, e.used(credentialVariables...))
	return loaded, nil
}

// credentialVariables are the variables of the arguments that go with host.
var credentialVariables = []string{EnvToken, EnvClusterCA, EnvClientCert, EnvClientKey, EnvInsecure, EnvTLSServerName, EnvProxyURL}

// Load checks the inline configuration and turns it into a client
// configuration. It contacts nothing.
func (c InlineConfig) Load() (LoadedConfig, error) {
	if err := ValidateHost(c.Host); err != nil {
		return LoadedConfig{}, err
	}
	cfg := &rest.Config{
		Host:        c.Host,
		BearerToken: c.Token,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure:   c.Insecure,
			ServerName: c.TLSServerName,
			CAData:     []byte(c.CACertificate),
			CertData:   []byte(c.ClientCertificate),
			KeyData:    []byte(c.ClientKey),
		},
	}
	for what, pemText := range map[string]string{"cluster_ca_certificate": c.CACertificate, "client_certificate": c.ClientCertificate} {
		if err := ValidateCertificatePEM(pemText); pemText != "" && err != nil {
			return LoadedConfig{}, fmt.Errorf("%s: %w", what, err)
		}
	}
	if c.ClientCertificate != "" || c.ClientKey != "" {
		if _, err := tls.X509KeyPair([]byte(c.ClientCertificate), []byte(c.ClientKey)); err != nil {
			return LoadedConfig{}, fmt.Errorf("client_certificate and client_key do not make a key pair: %w", err)
		}
	}
	if c.ProxyURL != "" {
		if err := ValidateProxyURL(c.ProxyURL); err != nil {
			return LoadedConfig{}, fmt.Errorf("proxy_url: %w", err)
		}
		u, _ := url.Parse(c.ProxyURL)
		cfg.Proxy = http.ProxyURL(u)
	}
	if c.Exec != nil {
		if !slices.Contains(ExecAPIVersions, c.Exec.APIVersion) {
			return LoadedConfig{}, fmt.Errorf("exec api_version %q is not one of %v", c.Exec.APIVersion, ExecAPIVersions)
		}
		cfg.ExecProvider = &clientcmdapi.ExecConfig{
			APIVersion: c.Exec.APIVersion,
			Command:    c.Exec.Command,
			Args:       c.Exec.Args,
			// Terraform has no terminal to offer a plugin that asks questions.
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}
		for _, name := range slices.Sorted(maps.Keys(c.Exec.Env)) {
			cfg.ExecProvider.Env = append(cfg.ExecProvider.Env, clientcmdapi.ExecEnvVar{Name: name, Value: c.Exec.Env[name]})
		}
	}
	return LoadedConfig{Rest: cfg, Source: InlineSource(c.Host)}, nil
}

// ValidateHost checks that host is an http(s) URL with a host name.
func ValidateHost(host string) error {
	u, err := url.Parse(host)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("host %q is not a URL such as https://203.0.113.10:6443", host)
	}
	return nil
}

// ValidateProxyURL checks that proxy is a URL with a host name.
func ValidateProxyURL(proxy string) error {
	u, err := url.Parse(proxy)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not a URL such as http://proxy.example:3128", proxy)
	}
	return nil
}

// ValidateCertificatePEM checks that text holds at least one PEM certificate.
func ValidateCertificatePEM(text string) error {
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return errors.New("not PEM: expected -----BEGIN CERTIFICATE-----")
	}
	if block.Type != "CERTIFICATE" {
		return fmt.Errorf("a PEM %q block where a CERTIFICATE was expected", block.Type)
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return fmt.Errorf("not a certificate: %w", err)
	}
	return nil
}
