package kube

import (
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// certificate is a throwaway self-signed certificate and its key, in PEM.
func certificate(t *testing.T, name string) (certPEM, keyPEM string) {
	t.Helper()
	certPEM, keyPEM, err := testcluster.SelfSigned(name)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// twoUsers is a kubeconfig with contexts blue and green, clusters blue,
// green and spare, and users alice and bob (tokens alice-token, bob-token),
// blue current; cluster blue has a CA.
func twoUsers(ca string) string {
	return `apiVersion: v1
kind: Config
current-context: blue
clusters:
- name: blue
  cluster:
    server: https://blue.example:6443
    certificate-authority-data: ` + base64.StdEncoding.EncodeToString([]byte(ca)) + `
- name: green
  cluster:
    server: https://green.example:6443
- name: spare
  cluster:
    server: https://spare.example:6443
users:
- name: alice
  user: {token: alice-token}
- name: bob
  user: {token: bob-token}
contexts:
- name: blue
  context: {cluster: blue, user: alice}
- name: green
  context: {cluster: green, user: bob}
`
}

// want is what a loaded configuration must hold, field by field (a zero
// value: none); source and never are checked by substring.
type want struct {
	host, token, serverName, proxy string
	ca, clientCert                 string
	insecure                       bool
	// source must be in the configuration's source; never must not.
	source, never []string
}

func (w want) check(t *testing.T, got LoadedConfig) {
	t.Helper()
	if got.Rest.Host != w.host {
		t.Errorf("host = %s, want %s", got.Rest.Host, w.host)
	}
	if got.Rest.BearerToken != w.token {
		t.Errorf("token = %q, want %q", got.Rest.BearerToken, w.token)
	}
	if got.Rest.Insecure != w.insecure {
		t.Errorf("insecure = %v, want %v", got.Rest.Insecure, w.insecure)
	}
	if string(got.Rest.CAData) != w.ca {
		t.Errorf("CA data = %.40q, want %.40q", got.Rest.CAData, w.ca)
	}
	if string(got.Rest.CertData) != w.clientCert {
		t.Errorf("client certificate = %.40q, want %.40q", got.Rest.CertData, w.clientCert)
	}
	if got.Rest.ServerName != w.serverName {
		t.Errorf("server name = %q, want %q", got.Rest.ServerName, w.serverName)
	}
	proxy := ""
	if got.Rest.Proxy != nil {
		req, _ := http.NewRequest(http.MethodGet, w.host, nil)
		if u, err := got.Rest.Proxy(req); err == nil && u != nil {
			proxy = u.String()
		}
	}
	if proxy != w.proxy {
		t.Errorf("proxy = %q, want %q", proxy, w.proxy)
	}
	for _, s := range w.source {
		if !strings.Contains(got.Source, s) {
			t.Errorf("source %q does not say %q", got.Source, s)
		}
	}
	for _, s := range append(w.never, "-token", "PRIVATE KEY") {
		if strings.Contains(got.Source, s) {
			t.Errorf("source %q holds %q", got.Source, s)
		}
	}
}

func TestLoadReadsTheVariablesOfTheKubernetesProvider(t *testing.T) {
	home := t.TempDir()
	ca, _ := certificate(t, "kubeconfig-ca")
	envCA, _ := certificate(t, "variable-ca")
	cert, key := certificate(t, "client")
	homeConfig := writeFile(t, home, ".kube/config", kubeconfig("home", "home"))
	given := writeFile(t, home, "given.yaml", kubeconfig("given", "given"))
	fromPath := writeFile(t, home, "path.yaml", twoUsers(ca))
	first := writeFile(t, home, "paths/first.yaml", kubeconfig("first", "first", "shared"))
	second := writeFile(t, home, "paths/second.yaml", kubeconfig("second", "second", "shared"))
	kubeconfigEnv := writeFile(t, home, "env.yaml", twoUsers(ca))
	missing := filepath.Join(home, "missing.yaml")
	list := func(files ...string) string { return strings.Join(files, string(os.PathListSeparator)) }
	inCluster := func() (*rest.Config, error) {
		return &rest.Config{Host: "https://10.96.0.1:443", BearerToken: "pod"}, nil
	}
	blue := want{host: "https://blue.example:6443", token: "alice-token", ca: ca}

	tests := []struct {
		name          string
		path, context string
		env           map[string]string
		inCluster     func() (*rest.Config, error)
		home          string // default: a home with ~/.kube/config
		want          want
	}{
		{name: "KUBE_CONFIG_PATH is read when no kubeconfig is given",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath},
			want: want{host: blue.host, token: blue.token, ca: ca, source: []string{"KUBE_CONFIG_PATH " + fromPath + ", context blue"}}},
		{name: "KUBE_CONFIG_PATH wins over $KUBECONFIG and ~/.kube/config",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBECONFIG": given},
			want: blue},
		{name: "a kubeconfig given wins over KUBE_CONFIG_PATH, which is then named as not read", path: given,
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath},
			want: want{host: "https://given.example:6443", token: "secret-token", source: []string{"set but not read: KUBE_CONFIG_PATH"}}},
		{name: "a leading ~/ in KUBE_CONFIG_PATH is the home directory",
			env:  map[string]string{"KUBE_CONFIG_PATH": "~/path.yaml"},
			want: blue},
		{name: "KUBE_CONFIG_PATH wins over KUBE_CONFIG_PATHS",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_CONFIG_PATHS": first},
			want: blue},
		{name: "the files of KUBE_CONFIG_PATHS are merged in order, the first one's current context wins",
			env:  map[string]string{"KUBE_CONFIG_PATHS": list(first, second)},
			want: want{host: "https://first.example:6443", token: "secret-token", source: []string{"KUBE_CONFIG_PATHS " + list(first, second)}}},
		{name: "missing files in KUBE_CONFIG_PATHS are skipped, as in $KUBECONFIG",
			env:  map[string]string{"KUBE_CONFIG_PATHS": list(missing, second)},
			want: want{host: "https://second.example:6443", token: "secret-token"}},
		{name: "KUBE_CONFIG_PATHS wins over $KUBECONFIG",
			env:  map[string]string{"KUBE_CONFIG_PATHS": second, "KUBECONFIG": given},
			want: want{host: "https://second.example:6443", token: "secret-token"}},
		{name: "an empty variable is unset",
			env:  map[string]string{"KUBE_CONFIG_PATH": "", "KUBE_HOST": "", "KUBE_CTX": ""},
			want: want{host: "https://home.example:6443", token: "secret-token", source: []string{homeConfig + ", context home"}}},
		{name: "KUBE_CTX chooses the context of KUBE_CONFIG_PATH",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_CTX": "green"},
			want: want{host: "https://green.example:6443", token: "bob-token", source: []string{"context green (KUBE_CTX)"}}},
		{name: "KUBE_CTX chooses a context among the files of KUBE_CONFIG_PATHS",
			env:  map[string]string{"KUBE_CONFIG_PATHS": list(first, second), "KUBE_CTX": "second"},
			want: want{host: "https://second.example:6443", token: "secret-token"}},
		{name: "KUBE_CTX chooses the context of $KUBECONFIG too",
			env:  map[string]string{"KUBECONFIG": kubeconfigEnv, "KUBE_CTX": "green"},
			want: want{host: "https://green.example:6443", token: "bob-token"}},
		{name: "KUBE_CTX chooses the context of a kubeconfig given", path: kubeconfigEnv,
			env:  map[string]string{"KUBE_CTX": "green"},
			want: want{host: "https://green.example:6443", token: "bob-token"}},
		{name: "a context given wins over KUBE_CTX", context: "blue",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_CTX": "green"},
			want: blue},
		{name: "KUBE_CTX_CLUSTER replaces the cluster of the context",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_CTX_CLUSTER": "spare"},
			want: want{host: "https://spare.example:6443", token: "alice-token", source: []string{"with KUBE_CTX_CLUSTER"}}},
		{name: "KUBE_CTX_AUTH_INFO replaces the user of the context",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_CTX_AUTH_INFO": "bob"},
			want: want{host: blue.host, token: "bob-token", ca: ca}},
		{name: "KUBE_CTX_CLUSTER and KUBE_CTX_AUTH_INFO change no context given", context: "blue",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_CTX_CLUSTER": "spare", "KUBE_CTX_AUTH_INFO": "bob"},
			want: blue},
		{name: "KUBE_HOST and the credential variables connect without a kubeconfig, ~/.kube/config unread",
			env: map[string]string{"KUBE_HOST": "https://203.0.113.10:6443", "KUBE_TOKEN": "variable-token",
				"KUBE_CLUSTER_CA_CERT_DATA": envCA, "KUBE_TLS_SERVER_NAME": "api.internal", "KUBE_PROXY_URL": "http://proxy.example:3128"},
			want: want{host: "https://203.0.113.10:6443", token: "variable-token", ca: envCA, serverName: "api.internal",
				proxy: "http://proxy.example:3128", source: []string{"KUBE_HOST https://203.0.113.10:6443, with KUBE_TOKEN, KUBE_CLUSTER_CA_CERT_DATA"},
				never: []string{homeConfig}}},
		{name: "KUBE_HOST with a client certificate from KUBE_CLIENT_CERT_DATA and KUBE_CLIENT_KEY_DATA",
			env:  map[string]string{"KUBE_HOST": "https://203.0.113.10:6443", "KUBE_CLIENT_CERT_DATA": cert, "KUBE_CLIENT_KEY_DATA": key},
			want: want{host: "https://203.0.113.10:6443", clientCert: cert}},
		{name: "KUBE_INSECURE true drops KUBE_CLUSTER_CA_CERT_DATA, as client-go does for the kubernetes provider",
			env:  map[string]string{"KUBE_HOST": "https://203.0.113.10:6443", "KUBE_INSECURE": "true", "KUBE_CLUSTER_CA_CERT_DATA": envCA},
			want: want{host: "https://203.0.113.10:6443", insecure: true}},
		{name: "KUBE_INSECURE false keeps the verification", env: map[string]string{"KUBE_HOST": "https://203.0.113.10:6443", "KUBE_INSECURE": "0"},
			want: want{host: "https://203.0.113.10:6443"}},
		{name: "KUBE_CONFIG_PATH wins over KUBE_HOST, which overrides its server, as in the kubernetes provider",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_HOST": "https://203.0.113.10:6443"},
			want: want{host: "https://203.0.113.10:6443", token: "alice-token", ca: ca, source: []string{"KUBE_CONFIG_PATH", "with KUBE_HOST"}}},
		{name: "KUBE_TOKEN and KUBE_CLUSTER_CA_CERT_DATA override the user and CA of KUBE_CONFIG_PATH",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_TOKEN": "variable-token", "KUBE_CLUSTER_CA_CERT_DATA": envCA},
			want: want{host: blue.host, token: "variable-token", ca: envCA}},
		{name: "KUBE_INSECURE true drops the CA of KUBE_CONFIG_PATH's cluster",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_INSECURE": "true"},
			want: want{host: blue.host, token: "alice-token", insecure: true}},
		{name: "KUBE_PROXY_URL is used when the cluster of KUBE_CONFIG_PATH names no proxy",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_PROXY_URL": "socks5://127.0.0.1:1080"},
			want: want{host: blue.host, token: "alice-token", ca: ca, proxy: "socks5://127.0.0.1:1080"}},
		{name: "KUBE_HOST is not read when a kubeconfig is given", path: given,
			env:  map[string]string{"KUBE_HOST": "https://203.0.113.10:6443", "KUBE_TOKEN": "variable-token"},
			want: want{host: "https://given.example:6443", token: "secret-token", source: []string{"set but not read: KUBE_HOST, KUBE_TOKEN"}}},
		{name: "KUBE_HOST is not read when a context is given", context: "home",
			env:  map[string]string{"KUBE_HOST": "https://203.0.113.10:6443"},
			want: want{host: "https://home.example:6443", token: "secret-token"}},
		{name: "the credential variables do not change $KUBECONFIG's user, which the kubernetes provider never reads",
			env:  map[string]string{"KUBECONFIG": kubeconfigEnv, "KUBE_TOKEN": "variable-token", "KUBE_INSECURE": "true"},
			want: want{host: blue.host, token: "alice-token", ca: ca, source: []string{"set but not read: KUBE_TOKEN, KUBE_INSECURE"}}},
		{name: "the credential variables do not go to the service account",
			env:       map[string]string{"KUBE_TOKEN": "variable-token"},
			inCluster: inCluster, home: t.TempDir(),
			want: want{host: "https://10.96.0.1:443", token: "pod", source: []string{InClusterSource, "set but not read: KUBE_TOKEN"}},
		},
		{name: "a variable that is not read is not checked", path: given,
			env:  map[string]string{"KUBE_INSECURE": "maybe", "KUBE_HOST": "not a url", "KUBE_CLUSTER_CA_CERT_DATA": "not PEM"},
			want: want{host: "https://given.example:6443", token: "secret-token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.path != "" || tt.env["KUBE_CONFIG_PATH"] != "" {
				// A kubeconfig given or named may never be read from the home
				// directory's, which exists here.
				tt.want.never = append(tt.want.never, "default kubeconfig")
			}
			if tt.home == "" {
				tt.home = home
			}
			got, err := loader(t, tt.home, tt.env, tt.inCluster).Load(tt.path, tt.context)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.check(t, got)
		})
	}
}

func TestLoadFailsOnABadVariableNamingIt(t *testing.T) {
	home := t.TempDir()
	writeFile(t, home, ".kube/config", kubeconfig("home", "home"))
	ca, _ := certificate(t, "ca")
	cert, _ := certificate(t, "client")
	_, otherKey := certificate(t, "other")
	fromPath := writeFile(t, home, "path.yaml", twoUsers(ca))
	host := "https://203.0.113.10:6443"

	tests := []struct {
		name    string
		context string
		env     map[string]string
		inCl    bool
		wantVar string // the *EnvError's variable; empty for a *LoadError
		want    []string
	}{
		{name: "a KUBE_HOST that is not a URL", env: map[string]string{"KUBE_HOST": "203.0.113.10:6443"},
			wantVar: "KUBE_HOST", want: []string{`"203.0.113.10:6443" is not a URL`}},
		{name: "a KUBE_HOST that is not a URL over KUBE_CONFIG_PATH", env: map[string]string{"KUBE_HOST": "::", "KUBE_CONFIG_PATH": fromPath},
			wantVar: "KUBE_HOST"},
		{name: "a KUBE_CLUSTER_CA_CERT_DATA that is not PEM", env: map[string]string{"KUBE_HOST": host, "KUBE_CLUSTER_CA_CERT_DATA": "LS0tLS1CRUdJTi..."},
			wantVar: "KUBE_CLUSTER_CA_CERT_DATA", want: []string{"not PEM"}},
		{name: "a KUBE_CLUSTER_CA_CERT_DATA that is not PEM over KUBE_CONFIG_PATH",
			env:     map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_CLUSTER_CA_CERT_DATA": "nope"},
			wantVar: "KUBE_CLUSTER_CA_CERT_DATA"},
		{name: "a KUBE_INSECURE that is not a boolean", env: map[string]string{"KUBE_HOST": host, "KUBE_INSECURE": "yes"},
			wantVar: "KUBE_INSECURE", want: []string{`"yes" is not a boolean`}},
		{name: "a KUBE_CLIENT_CERT_DATA without KUBE_CLIENT_KEY_DATA", env: map[string]string{"KUBE_HOST": host, "KUBE_CLIENT_CERT_DATA": cert},
			wantVar: "KUBE_CLIENT_CERT_DATA", want: []string{"without KUBE_CLIENT_KEY_DATA"}},
		{name: "a KUBE_CLIENT_KEY_DATA without KUBE_CLIENT_CERT_DATA", env: map[string]string{"KUBE_HOST": host, "KUBE_CLIENT_KEY_DATA": otherKey},
			wantVar: "KUBE_CLIENT_KEY_DATA", want: []string{"without KUBE_CLIENT_CERT_DATA"}},
		{name: "a client certificate and a key that are not a pair",
			env:     map[string]string{"KUBE_HOST": host, "KUBE_CLIENT_CERT_DATA": cert, "KUBE_CLIENT_KEY_DATA": otherKey},
			wantVar: "KUBE_CLIENT_CERT_DATA and KUBE_CLIENT_KEY_DATA", want: []string{"not a key pair"}},
		{name: "a KUBE_PROXY_URL that is not a URL", env: map[string]string{"KUBE_HOST": host, "KUBE_PROXY_URL": "proxy:3128"},
			wantVar: "KUBE_PROXY_URL", want: []string{"is not a URL"}},
		{name: "a KUBE_CTX missing from the kubeconfig names the variable and the contexts there are",
			env:  map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_CTX": "purple"},
			want: []string{`context "purple" (KUBE_CTX)`, `context "purple" not found`, "blue, green", "KUBE_CONFIG_PATH " + fromPath}},
		{name: "a KUBE_CTX missing from ~/.kube/config", env: map[string]string{"KUBE_CTX": "purple"},
			want: []string{`context "purple" (KUBE_CTX)`, "contexts in the kubeconfig: home"}},
		{name: "a KUBE_CTX_CLUSTER missing from the kubeconfig", env: map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_CTX_CLUSTER": "gone"},
			wantVar: "KUBE_CTX_CLUSTER", want: []string{`cluster "gone" not found`, "blue, green, spare"}},
		{name: "a KUBE_CTX_AUTH_INFO missing from the kubeconfig", env: map[string]string{"KUBE_CONFIG_PATH": fromPath, "KUBE_CTX_AUTH_INFO": "carol"},
			wantVar: "KUBE_CTX_AUTH_INFO", want: []string{`user "carol" not found`, "alice, bob"}},
		{name: "a KUBE_CONFIG_PATH that does not exist is an error, not a reason to read ~/.kube/config",
			env:  map[string]string{"KUBE_CONFIG_PATH": filepath.Join(home, "gone.yaml")},
			want: []string{"KUBE_CONFIG_PATH " + filepath.Join(home, "gone.yaml") + ": no such file or directory", "no kubeconfig file found"}},
		{name: "a KUBE_CONFIG_PATHS of missing files only is an error",
			env:  map[string]string{"KUBE_CONFIG_PATHS": filepath.Join(home, "a.yaml") + string(os.PathListSeparator) + filepath.Join(home, "b.yaml")},
			want: []string{"KUBE_CONFIG_PATHS " + filepath.Join(home, "a.yaml"), "KUBE_CONFIG_PATHS " + filepath.Join(home, "b.yaml"), "no kubeconfig file found"}},
		{name: "a KUBE_CTX without any kubeconfig is an error, not the service account", env: map[string]string{"KUBE_CTX": "blue"},
			inCl: true, want: []string{`context "blue" (KUBE_CTX)`, "a context is set but no kubeconfig file was found"}},
		{name: "a KUBE_CTX_CLUSTER without any kubeconfig is an error, not the service account", env: map[string]string{"KUBE_CTX_CLUSTER": "blue"},
			inCl: true, want: []string{"KUBE_CTX_CLUSTER set, but no kubeconfig file was found"}},
		{name: "an error names the variables set but not read", env: map[string]string{"KUBE_CTX": "purple", "KUBE_TOKEN": "x"},
			want: []string{`context "purple" (KUBE_CTX)`, "(set but not read: KUBE_TOKEN)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := home
			if tt.inCl {
				dir = t.TempDir() // no ~/.kube/config
			}
			var inCluster func() (*rest.Config, error)
			if tt.inCl {
				inCluster = func() (*rest.Config, error) { return &rest.Config{Host: "https://10.96.0.1:443"}, nil }
			}
			got, err := loader(t, dir, tt.env, inCluster).Load("", tt.context)
			if err == nil {
				t.Fatalf("loaded %s from %s, want an error", got.Rest.Host, got.Source)
			}
			var envErr *EnvError
			switch {
			case tt.wantVar != "" && (!errors.As(err, &envErr) || envErr.Name != tt.wantVar):
				t.Errorf("error %q (%T) does not name the variable %s", err, err, tt.wantVar)
			case tt.wantVar == "" && !errors.As(err, new(*LoadError)):
				t.Errorf("error %T is not a *LoadError: %v", err, err)
			}
			if !strings.Contains(err.Error(), tt.wantVar) {
				t.Errorf("error %q does not name the variable", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "localhost") || strings.Contains(err.Error(), "-token") {
				t.Errorf("error %q names localhost or a token", err)
			}
		})
	}
}

func TestLoadInlineFillsWhatTheArgumentsLeaveUnsetFromTheVariables(t *testing.T) {
	home := t.TempDir()
	ca, _ := certificate(t, "argument-ca")
	envCA, _ := certificate(t, "variable-ca")
	cert, key := certificate(t, "argument-client")
	envCert, envKey := certificate(t, "variable-client")
	host := "https://203.0.113.10:6443"
	credentials := map[string]string{"KUBE_TOKEN": "variable-token", "KUBE_CLIENT_CERT_DATA": envCert, "KUBE_CLIENT_KEY_DATA": envKey}

	tests := []struct {
		name   string
		inline InlineConfig
		env    map[string]string
		want   want
	}{
		{name: "KUBE_TOKEN and KUBE_CLUSTER_CA_CERT_DATA fill token and cluster_ca_certificate", inline: InlineConfig{Host: host},
			env:  map[string]string{"KUBE_TOKEN": "variable-token", "KUBE_CLUSTER_CA_CERT_DATA": envCA},
			want: want{host: host, token: "variable-token", ca: envCA, source: []string{InlineSource(host), "with KUBE_TOKEN, KUBE_CLUSTER_CA_CERT_DATA"}}},
		{name: "a token given wins over KUBE_TOKEN, and a CA given over KUBE_CLUSTER_CA_CERT_DATA",
			inline: InlineConfig{Host: host, Token: "argument-token", CACertificate: ca},
			env:    map[string]string{"KUBE_TOKEN": "variable-token", "KUBE_CLUSTER_CA_CERT_DATA": envCA},
			want:   want{host: host, token: "argument-token", ca: ca, source: []string{"set but not read: KUBE_TOKEN, KUBE_CLUSTER_CA_CERT_DATA"}}},
		{name: "no credential variable is read beside a client certificate given",
			inline: InlineConfig{Host: host, ClientCertificate: cert, ClientKey: key}, env: credentials,
			want: want{host: host, clientCert: cert}},
		{name: "no credential variable is read beside an exec plugin given",
			inline: InlineConfig{Host: host, Exec: &ExecConfig{APIVersion: ExecAPIVersions[0], Command: "get-token"}}, env: credentials,
			want: want{host: host}},
		{name: "no client certificate variable is read beside a token given",
			inline: InlineConfig{Host: host, Token: "argument-token"}, env: credentials,
			want: want{host: host, token: "argument-token"}},
		{name: "KUBE_CLUSTER_CA_CERT_DATA is not read beside insecure = true given",
			inline: InlineConfig{Host: host, Insecure: true, InsecureSet: true}, env: map[string]string{"KUBE_CLUSTER_CA_CERT_DATA": envCA},
			want: want{host: host, insecure: true}},
		{name: "KUBE_INSECURE is not read beside a CA given",
			inline: InlineConfig{Host: host, CACertificate: ca}, env: map[string]string{"KUBE_INSECURE": "true"},
			want: want{host: host, ca: ca}},
		{name: "insecure = false given wins over KUBE_INSECURE, and lets KUBE_CLUSTER_CA_CERT_DATA in",
			inline: InlineConfig{Host: host, InsecureSet: true}, env: map[string]string{"KUBE_INSECURE": "true", "KUBE_CLUSTER_CA_CERT_DATA": envCA},
			want: want{host: host, ca: envCA}},
		{name: "KUBE_TLS_SERVER_NAME and KUBE_PROXY_URL fill tls_server_name and proxy_url",
			inline: InlineConfig{Host: host}, env: map[string]string{"KUBE_TLS_SERVER_NAME": "api.internal", "KUBE_PROXY_URL": "http://proxy.example:3128"},
			want: want{host: host, serverName: "api.internal", proxy: "http://proxy.example:3128"}},
		{name: "a host given: KUBE_HOST and the kubeconfig variables are not read",
			inline: InlineConfig{Host: host, Token: "argument-token"},
			env:    map[string]string{"KUBE_HOST": "https://198.51.100.1:6443", "KUBE_CONFIG_PATH": "/nonexistent", "KUBE_CTX": "blue"},
			want:   want{host: host, token: "argument-token", source: []string{"set but not read: KUBE_CONFIG_PATH, KUBE_CTX, KUBE_HOST"}}},
		{name: "a variable that is not read is not checked",
			inline: InlineConfig{Host: host, CACertificate: ca, Token: "argument-token"}, env: map[string]string{"KUBE_INSECURE": "maybe", "KUBE_TOKEN": "x"},
			want: want{host: host, ca: ca, token: "argument-token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loader(t, home, tt.env, nil).LoadInline(tt.inline)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.check(t, got)
		})
	}

	_, err := loader(t, home, map[string]string{"KUBE_CLUSTER_CA_CERT_DATA": "not PEM"}, nil).LoadInline(InlineConfig{Host: host})
	var envErr *EnvError
	if !errors.As(err, &envErr) || envErr.Name != "KUBE_CLUSTER_CA_CERT_DATA" {
		t.Errorf("a bad KUBE_CLUSTER_CA_CERT_DATA filling an argument gave %v, want an error naming it", err)
	}
}
