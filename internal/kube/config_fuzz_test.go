package kube

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// FuzzLoadKubeconfig feeds arbitrary files to the kubeconfig loader, as a
// user's broken kubeconfig would: it must give a usable configuration or a
// *LoadError, never panic, and never a localhost default. `go test` runs the
// seeds; `make fuzz` searches for more.
func FuzzLoadKubeconfig(f *testing.F) {
	f.Add([]byte(kubeconfig("blue", "blue", "green")), "")
	f.Add([]byte(kubeconfig("blue", "blue", "green")), "green")
	f.Add([]byte(kubeconfig("", "blue")), "purple")
	f.Add([]byte("apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: https://h:1, certificate-authority-data: bm90IGEgY2VydA==}\nusers:\n- name: u\n  user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: nope}}\n"), "")
	f.Add([]byte("apiVersion: v1\nclusters: [this is: not yaml"), "")
	f.Add([]byte("{}"), "")
	f.Add([]byte("current-context: a\ncontexts:\n- name: a\n  context: {cluster: a}\nclusters:\n- name: a\n  cluster: {server: ''}\n"), "")
	f.Add([]byte("current-context: a\ncontexts:\n- name: a\n  context: {cluster: a, user: a}\nclusters:\n- name: a\n  cluster: {server: 'http://[::1'}\nusers:\n- name: a\n  user: {client-certificate: /nonexistent, client-key: /nonexistent}\n"), "a")
	f.Fuzz(func(t *testing.T, content []byte, contextName string) {
		dir := t.TempDir()
		path := filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		l := ConfigLoader{
			HomeDir:   func() (string, error) { return dir, nil },
			InCluster: func() (*rest.Config, error) { return nil, rest.ErrNotInCluster },
		}
		got, err := l.Load(path, contextName)
		if err != nil {
			var loadErr *LoadError
			if !errors.As(err, &loadErr) {
				t.Fatalf("error %T is not a *LoadError: %v", err, err)
			}
			return
		}
		if got.Rest == nil || got.Rest.Host == "" {
			t.Fatalf("loaded a configuration without a server: %+v", got)
		}
		if strings.Contains(got.Rest.Host, "localhost:8080") && !strings.Contains(string(content), "localhost:8080") {
			t.Fatalf("fell back to %s", got.Rest.Host)
		}
	})
}
