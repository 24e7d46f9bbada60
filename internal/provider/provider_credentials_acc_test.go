package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each way into the cluster without a kubeconfig, against the real API server.

// caPEM is the CA that the cluster's API server certificate chains to.
func (c *testCluster) caPEM(t *testing.T) string {
	t.Helper()
	if len(c.rest.CAData) > 0 {
		return string(c.rest.CAData)
	}
	if c.rest.CAFile == "" {
		t.Skip("the cluster's kubeconfig names no CA")
	}
	data, err := os.ReadFile(c.rest.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// readsWeb checks that the read gave the one ready pod that
// webWithOneReadyPod made at 10.244.12.1.
var readsWeb = []statecheck.StateCheck{expectEndpoints(podEndpoint("10.244.12.1", 8080, "IPv4", "web-1"))}

// expectReadsWeb reads web in ns with the provider block given, and
// expects readsWeb.
func expectReadsWeb(t *testing.T, ns, provider string) {
	t.Helper()
	parallelSteps(t, resource.TestStep{Config: provider + dataSource(ns, ""), ConfigStateChecks: readsWeb})
}

func TestAccInlineHostTokenAndCA(t *testing.T) {
	c, ns := oneReadyPod(t, "10.244.12.1")
	token := c.identityToken(t, ns, "inline", documentedRole)
	otherCA, _ := selfSignedPEM(t, "not-this-cluster")
	inline := func(ca string) string {
		return fmt.Sprintf(`
provider "k8s" {
  host                   = %q
  cluster_ca_certificate = %q
  token                  = %q
}`, c.rest.Host, ca, token) + dataSource(ns, "")
	}
	parallelSteps(t,
		resource.TestStep{Config: inline(c.caPEM(t)), ConfigStateChecks: readsWeb},
		resource.TestStep{
			Config: inline(otherCA),
			ExpectError: phrase("Unable to Read Service", "TLS certificate was not accepted",
				fmt.Sprintf("get service %s/web:", ns), "certificate signed by unknown authority"),
		},
	)
}

func TestAccInlineClientCertificate(t *testing.T) {
	c := accCluster(t)
	// The local control plane has a client certificate for user cert-user;
	// another cluster would need its own signer.
	dir := filepath.Dir(c.kubeconfig)
	cert, errCert := os.ReadFile(filepath.Join(dir, "cert-user.crt"))
	key, errKey := os.ReadFile(filepath.Join(dir, "cert-user.key"))
	if errCert != nil || errKey != nil {
		t.Skip("no client certificate beside the kubeconfig (cert-user.crt, cert-user.key); the local control plane has one")
	}
	ns := c.namespace(t)
	c.webWithOneReadyPod(t, ns, "10.244.12.1")
	c.grantDocumentedRole(t, ns, rbacUser("cert-user"))
	expectReadsWeb(t, ns, fmt.Sprintf(`
provider "k8s" {
  host                   = %q
  cluster_ca_certificate = %q
  client_certificate     = %q
  client_key             = %q
}`, c.rest.Host, c.caPEM(t), cert, key))
}

func TestAccInlineExecPlugin(t *testing.T) {
	c, ns := oneReadyPod(t, "10.244.12.1")
	token := c.identityToken(t, ns, "exec", documentedRole)
	// A credential plugin as small as they come: it checks its argument and
	// prints an ExecCredential with the token it is given in its environment.
	plugin := filepath.Join(t.TempDir(), "get-token")
	writeText(t, plugin, `#!/bin/sh
[ "$1" = "get-token" ] || { echo "usage: get-token --cluster NAME" >&2; exit 2; }
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}\n' "$ACC_TOKEN"
`)
	if err := os.Chmod(plugin, 0o700); err != nil {
		t.Fatal(err)
	}
	expectReadsWeb(t, ns, fmt.Sprintf(`
provider "k8s" {
  host                   = %q
  cluster_ca_certificate = %q
  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = %q
    args        = ["get-token", "--cluster", "acc"]
    env         = { ACC_TOKEN = %q }
  }
}`, c.rest.Host, c.caPEM(t), plugin, token))
}

// TestAccHostFromAResourceNotYetCreated is the configuration of a cluster made
// in the same apply: the provider's host is unknown while planning.
func TestAccHostFromAResourceNotYetCreated(t *testing.T) {
	c, ns := oneReadyPod(t, "10.244.12.1")
	token := c.identityToken(t, ns, "later", documentedRole)
	config := func(dataSourceExtra string) string {
		return fmt.Sprintf(`
resource "terraform_data" "cluster" {
  input = %q
}
provider "k8s" {
  host                   = terraform_data.cluster.output
  cluster_ca_certificate = %q
  token                  = %q
}`, c.rest.Host, c.caPEM(t), token) + dataSource(ns, dataSourceExtra)
	}
	parallelSteps(t,
		resource.TestStep{
			Config:      config(""),
			ExpectError: phrase("Provider Configuration Not Known", "depends_on"),
		},
		resource.TestStep{
			Config: config("depends_on = [terraform_data.cluster]"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectUnknownValue("data.k8s_ready_endpoints.web", tfjsonpath.New("endpoints")),
			}},
			ConfigStateChecks: readsWeb,
		},
	)
}

// grantDocumentedRole binds the documented Role to subject in namespace.
func (c *testCluster) grantDocumentedRole(t *testing.T, namespace string, subject rbacv1.Subject) {
	t.Helper()
	ctx := c.ctx(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "ready-endpoints"}, Rules: documentedRole}
	if _, err := c.client.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "ready-endpoints-" + subject.Name},
		Subjects:   []rbacv1.Subject{subject},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
	}
	if _, err := c.client.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func rbacUser(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}
