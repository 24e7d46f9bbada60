package provider

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// Each variable of the hashicorp/kubernetes provider, against the real API
// server. The tests set the process's environment, which the provider served
// in the test process reads, so none of them runs in parallel.

// variables replaces the KUBE_* variables and $KUBECONFIG with vars (any
// other unset) for the steps that follow; isolateFromMachine restores them
// after the test.
func variables(vars map[string]string) func() {
	return func() {
		for _, name := range append([]string{"KUBECONFIG"}, kube.EnvVariables...) {
			_ = os.Setenv(name, vars[name])
		}
	}
}

// deadKubeconfig is a kubeconfig whose one context, dead, current, points at
// a port where nothing listens.
func deadKubeconfig() *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["nobody"] = &clientcmdapi.AuthInfo{Token: "not-a-token"}
	cfg.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: "nobody"}
	cfg.CurrentContext = "dead"
	return cfg
}

func writeConfig(t *testing.T, cfg *clientcmdapi.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// envKubeconfig writes deadKubeconfig with two more contexts: acc reads the
// cluster as reader (with token), acc-nobody as nobody, whose token the API
// server refuses.
func (c *testCluster) envKubeconfig(t *testing.T, token string) string {
	t.Helper()
	cfg := deadKubeconfig()
	cfg.Clusters["acc"] = &clientcmdapi.Cluster{Server: c.rest.Host, CertificateAuthorityData: []byte(c.caPEM(t)), TLSServerName: c.rest.ServerName}
	cfg.AuthInfos["reader"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["acc"] = &clientcmdapi.Context{Cluster: "acc", AuthInfo: "reader"}
	cfg.Contexts["acc-nobody"] = &clientcmdapi.Context{Cluster: "acc", AuthInfo: "nobody"}
	return writeConfig(t, cfg)
}

// envFixture is a namespace with web's one ready pod, a token that may read
// it, the kubeconfig of envKubeconfig, and deadKubeconfig, for $KUBECONFIG:
// read instead of a variable, it fails.
type envFixture struct {
	c                        *testCluster
	ns, token, path, deadEnv string
}

func newEnvFixture(t *testing.T) envFixture {
	c := accCluster(t)
	isolateFromMachine(t)
	ns := c.namespace(t)
	c.webWithOneReadyPod(t, ns, "10.244.12.1")
	token := c.identityToken(t, ns, "env", documentedRole)
	return envFixture{c: c, ns: ns, token: token, path: c.envKubeconfig(t, token), deadEnv: writeConfig(t, deadKubeconfig())}
}

// step reads web with the provider block given, after setting vars.
func (f envFixture) step(provider string, vars map[string]string) resource.TestStep {
	return resource.TestStep{PreConfig: variables(vars), Config: provider + dataSource(f.ns, ""), ConfigStateChecks: readsWeb}
}

const bareProvider = `provider "k8s" {}`

func TestAccEnvKubeConfigPathAndKubeCtx(t *testing.T) {
	f := newEnvFixture(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviderFactories,
		Steps: []resource.TestStep{
			{
				PreConfig: variables(map[string]string{"KUBE_CONFIG_PATH": f.path, "KUBE_CTX": "purple"}),
				Config:    bareProvider + dataSource(f.ns, ""),
				ExpectError: phrase("Unable to Load Kubeconfig", "KUBE_CONFIG_PATH "+f.path, `for context "purple" (from KUBE_CTX)`,
					"contexts in the kubeconfig: acc, acc-nobody, dead"),
			},
			// $KUBECONFIG has no context acc: KUBE_CONFIG_PATH wins over it.
			// Last, so that the test's destroy configures the provider.
			f.step(bareProvider, map[string]string{"KUBE_CONFIG_PATH": f.path, "KUBE_CTX": "acc", "KUBECONFIG": f.deadEnv}),
		},
	})
}

func TestAccEnvKubeConfigPathsAndTheContextsClusterAndUser(t *testing.T) {
	f := newEnvFixture(t)
	missing := filepath.Join(t.TempDir(), "missing.kubeconfig")
	paths := missing + string(os.PathListSeparator) + f.deadEnv + string(os.PathListSeparator) + f.path
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviderFactories,
		Steps: []resource.TestStep{
			// The files are merged: the current context, dead, is the first
			// file's; its cluster and user come from the last file.
			f.step(bareProvider, map[string]string{"KUBE_CONFIG_PATHS": paths, "KUBE_CTX_CLUSTER": "acc", "KUBE_CTX_AUTH_INFO": "reader"}),
			f.step(bareProvider, map[string]string{"KUBE_CONFIG_PATHS": paths, "KUBE_CTX": "acc"}),
		},
	})
}

func TestAccEnvKubeTokenOverridesTheUserOfKubeConfigPath(t *testing.T) {
	f := newEnvFixture(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviderFactories,
		Steps: []resource.TestStep{
			f.step(bareProvider, map[string]string{"KUBE_CONFIG_PATH": f.path, "KUBE_CTX": "acc-nobody", "KUBE_TOKEN": f.token}),
			{
				PreConfig:   variables(map[string]string{"KUBE_CONFIG_PATH": f.path, "KUBE_CTX": "acc-nobody"}),
				Config:      bareProvider + dataSource(f.ns, ""),
				ExpectError: phrase("Unable to Read Service", "Unauthorized"),
			},
		},
	})
}

func TestAccEnvKubeHostTokenCAAndTLSServerName(t *testing.T) {
	f := newEnvFixture(t)
	otherCA, _ := selfSignedPEM(t, "not-this-cluster")
	host := func(extra map[string]string) map[string]string {
		vars := map[string]string{"KUBE_HOST": f.c.rest.Host, "KUBE_TOKEN": f.token, "KUBE_CLUSTER_CA_CERT_DATA": f.c.caPEM(t),
			"KUBE_TLS_SERVER_NAME": "kubernetes.default", "KUBECONFIG": f.deadEnv}
		for k, v := range extra {
			vars[k] = v
		}
		return vars
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviderFactories,
		Steps: []resource.TestStep{
			// KUBE_HOST wins over $KUBECONFIG, whose server is dead.
			f.step(bareProvider, host(nil)),
			{
				PreConfig:   variables(host(map[string]string{"KUBE_TLS_SERVER_NAME": "elsewhere.example"})),
				Config:      bareProvider + dataSource(f.ns, ""),
				ExpectError: phrase("Unable to Read Service", "not elsewhere.example"),
			},
			{
				PreConfig:   variables(host(map[string]string{"KUBE_CLUSTER_CA_CERT_DATA": otherCA})),
				Config:      bareProvider + dataSource(f.ns, ""),
				ExpectError: phrase("Unable to Read Service", "certificate signed by unknown authority"),
			},
		},
	})
}

func TestAccEnvKubeClientCertData(t *testing.T) {
	f := newEnvFixture(t)
	dir := filepath.Dir(f.c.kubeconfig)
	cert, errCert := os.ReadFile(filepath.Join(dir, "cert-user.crt"))
	key, errKey := os.ReadFile(filepath.Join(dir, "cert-user.key"))
	if errCert != nil || errKey != nil {
		t.Skip("no client certificate beside the kubeconfig (cert-user.crt, cert-user.key); the local control plane has one")
	}
	f.c.grantDocumentedRole(t, f.ns, rbacUser("cert-user"))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviderFactories,
		Steps: []resource.TestStep{f.step(bareProvider, map[string]string{"KUBE_HOST": f.c.rest.Host,
			"KUBE_CLUSTER_CA_CERT_DATA": f.c.caPEM(t), "KUBE_CLIENT_CERT_DATA": string(cert), "KUBE_CLIENT_KEY_DATA": string(key)})},
	})
}

func TestAccEnvKubeInsecure(t *testing.T) {
	f := newEnvFixture(t)
	vars := func(insecure string) map[string]string {
		return map[string]string{"KUBE_HOST": f.c.rest.Host, "KUBE_TOKEN": f.token, "KUBE_INSECURE": insecure}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviderFactories,
		Steps: []resource.TestStep{
			f.step(bareProvider, vars("true")),
			{
				PreConfig:   variables(vars("false")),
				Config:      bareProvider + dataSource(f.ns, ""),
				ExpectError: phrase("Unable to Read Service", "certificate signed by unknown authority"),
			},
		},
	})
}

func TestAccEnvKubeProxyURL(t *testing.T) {
	f := newEnvFixture(t)
	proxy := startConnectProxy(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviderFactories,
		Steps: []resource.TestStep{f.step(bareProvider, map[string]string{"KUBE_HOST": f.c.rest.Host, "KUBE_TOKEN": f.token,
			"KUBE_CLUSTER_CA_CERT_DATA": f.c.caPEM(t), "KUBE_PROXY_URL": proxy.URL})},
	})
	if n := proxy.tunnels(); n == 0 {
		t.Error("the proxy of KUBE_PROXY_URL tunnelled no connection")
	}
}

func TestAccEnvArgumentsWinOverTheVariables(t *testing.T) {
	f := newEnvFixture(t)
	otherCA, _ := selfSignedPEM(t, "not-this-cluster")
	// Each would break the read if it were read.
	wrong := map[string]string{"KUBE_CONFIG_PATH": f.deadEnv, "KUBE_CTX": "dead", "KUBE_CTX_CLUSTER": "dead",
		"KUBE_HOST": "https://127.0.0.1:1", "KUBE_TOKEN": "not-a-token", "KUBE_CLUSTER_CA_CERT_DATA": otherCA, "KUBE_INSECURE": "maybe",
		"KUBE_TLS_SERVER_NAME": "elsewhere.example", "KUBE_PROXY_URL": "http://127.0.0.1:1"}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviderFactories,
		Steps: []resource.TestStep{
			f.step(kubeconfigProviderWithContext(f.path, "acc"), wrong),
			f.step(inlineProvider(f.c.rest.Host, f.c.caPEM(t), f.token, `tls_server_name = "kubernetes.default"`+"\n"+
				`proxy_url = "`+startConnectProxy(t).URL+`"`), wrong),
		},
	})
}

func kubeconfigProviderWithContext(path, context string) string {
	return fmt.Sprintf("provider \"k8s\" {\n  kubeconfig = %q\n  context    = %q\n}\n", path, context)
}

func inlineProvider(host, ca, token, extra string) string {
	return fmt.Sprintf("provider \"k8s\" {\n  host                   = %q\n  cluster_ca_certificate = %q\n  token                  = %q\n  %s\n}\n",
		host, ca, token, extra)
}

// connectProxy is an HTTP proxy that tunnels CONNECT requests, counting them.
type connectProxy struct {
	*httptest.Server
	mu    sync.Mutex
	n     int
	conns []net.Conn
}

func (p *connectProxy) tunnels() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func startConnectProxy(t *testing.T) *connectProxy {
	p := &connectProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		upstream, err := net.DialTimeout("tcp", r.Host, 5*time.Second)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		client, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			upstream.Close()
			return
		}
		p.mu.Lock()
		p.n++
		p.conns = append(p.conns, client, upstream)
		p.mu.Unlock()
		_, _ = io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() { _, _ = io.Copy(upstream, client); upstream.Close() }()
		go func() { _, _ = io.Copy(client, upstream); client.Close() }()
	}))
	t.Cleanup(func() {
		p.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}
