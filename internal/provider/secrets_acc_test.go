package provider

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestAccSecretsStayOutOfTraceLogs reads the cluster with the provider
// binary under TF_LOG=TRACE, with a test identity's token given inline and in
// a kubeconfig, and with a client key where the cluster has one, then looks
// for each secret in everything Terraform and the provider logged.
func TestAccSecretsStayOutOfTraceLogs(t *testing.T) {
	c, ns := oneReadyPod(t, "10.244.12.1")
	token := c.identityToken(t, ns, "traced", documentedRole)
	kubeconfig := c.writeKubeconfig(t, "traced", &clientcmdapi.AuthInfo{Token: token}, c.rest.Host)
	kubeconfigContent, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"token": token}
	providers := map[string]string{
		"inline":     fmt.Sprintf("host = %q\n  cluster_ca_certificate = %q\n  token = %q", c.rest.Host, c.caPEM(t), token),
		"kubeconfig": fmt.Sprintf("kubeconfig = %q", kubeconfig),
	}
	dir := filepath.Dir(c.kubeconfig)
	if key, err := os.ReadFile(filepath.Join(dir, "cert-user.key")); err == nil {
		cert, err := os.ReadFile(filepath.Join(dir, "cert-user.crt"))
		if err != nil {
			t.Fatal(err)
		}
		c.grantDocumentedRole(t, ns, rbacUser("cert-user"))
		providers["client certificate"] = fmt.Sprintf("host = %q\n  cluster_ca_certificate = %q\n  client_certificate = %q\n  client_key = %q",
			c.rest.Host, c.caPEM(t), cert, key)
		secrets["client key"] = string(pemBody(key))
	}

	for name, provider := range providers {
		t.Run(name, func(t *testing.T) {
			work := t.TempDir()
			logPath := filepath.Join(work, "trace.log")
			run := terraformWithBuiltProvider(t, work, fmt.Sprintf(`
terraform {
  required_providers {
    k8s = { source = "vigie/k8s" }
  }
}
provider "k8s" {
  %s
}
data "k8s_ready_endpoints" "web" {
  namespace = %q
  service   = "web"
}
output "count" {
  value = length(data.k8s_ready_endpoints.web.endpoints)
}
`, provider, ns), "TF_LOG=TRACE", "TF_LOG_PATH="+logPath)
			log, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(log, []byte("terraform-provider-k8s")) || !bytes.Contains(run.outputs, []byte(`"value": 1`)) {
				t.Fatalf("the read did not happen as expected, or was not traced (log %d bytes):\n%s", len(log), run.outputs)
			}
			for what, secret := range secrets {
				if bytes.Contains(log, []byte(secret)) || bytes.Contains(run.apply, []byte(secret)) {
					t.Errorf("the %s appears in the TRACE log or the apply output", what)
				}
			}
			if name == "kubeconfig" && bytes.Contains(log, kubeconfigContent[:min(len(kubeconfigContent), 200)]) {
				t.Error("the kubeconfig's content appears in the TRACE log")
			}
		})
	}
}

// pemBody is the base64 body of a PEM block, the part that must stay secret.
func pemBody(pemText []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(pemText), []byte("\n"))
	if len(lines) < 3 {
		return pemText
	}
	return bytes.Join(lines[1:len(lines)-1], nil)[:40]
}
