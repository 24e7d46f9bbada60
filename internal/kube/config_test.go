package kube

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func kubeconfig(current string, contexts ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\ncurrent-context: " + current + "\nclusters:\n")
	for _, c := range contexts {
		b.WriteString("- name: " + c + "\n  cluster:\n    server: https://" + c + ".example:6443\n")
	}
	b.WriteString("users:\n- name: someone\n  user:\n    token: secret-token\ncontexts:\n")
	for _, c := range contexts {
		b.WriteString("- name: " + c + "\n  context:\n    cluster: " + c + "\n    user: someone\n")
	}
	return b.String()
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// loader looks at a fake home and at env as its whole environment ($KUBECONFIG
// and the KUBE_* variables unset unless env sets them); its service account
// is absent unless inCluster is given.
func loader(t *testing.T, home string, env map[string]string, inCluster func() (*rest.Config, error)) ConfigLoader {
	t.Helper()
	if inCluster == nil {
		inCluster = func() (*rest.Config, error) { return nil, rest.ErrNotInCluster }
	}
	return ConfigLoader{
		HomeDir:   func() (string, error) { return home, nil },
		InCluster: inCluster,
		Getenv:    func(name string) string { return env[name] },
	}
}

func TestLoadFindsTheCluster(t *testing.T) {
	home := t.TempDir()
	writeFile(t, home, ".kube/config", kubeconfig("home", "home"))
	explicit := writeFile(t, home, "clusters/explicit.yaml", kubeconfig("blue", "blue", "green"))
	first := writeFile(t, home, "env/first.yaml", kubeconfig("first", "first", "shared"))
	second := writeFile(t, home, "env/second.yaml", kubeconfig("second", "second", "shared"))
	missing := filepath.Join(home, "env/missing.yaml")
	inCluster := func() (*rest.Config, error) { return &rest.Config{Host: "https://10.96.0.1:443"}, nil }

	tests := []struct {
		name      string
		path      string
		context   string
		env       map[string]string
		inCluster func() (*rest.Config, error)
		wantHost  string
		wantFrom  string
	}{
		{name: "an explicit path is read, with its current context", path: explicit,
			wantHost: "https://blue.example:6443", wantFrom: explicit + ", context blue"},
		{name: "a leading ~/ is the home directory", path: "~/clusters/explicit.yaml", context: "green",
			wantHost: "https://green.example:6443", wantFrom: explicit + ", context green"},
		{name: "an explicit path wins over $KUBECONFIG", path: explicit, env: map[string]string{"KUBECONFIG": first},
			wantHost: "https://blue.example:6443"},
		{name: "the files of $KUBECONFIG are merged, the first one's current context wins",
			env:      map[string]string{"KUBECONFIG": first + string(os.PathListSeparator) + second},
			wantHost: "https://first.example:6443"},
		{name: "a context from the second file of $KUBECONFIG can be chosen", context: "second",
			env:      map[string]string{"KUBECONFIG": first + string(os.PathListSeparator) + second},
			wantHost: "https://second.example:6443"},
		{name: "a file named twice in $KUBECONFIG is read once, and an empty entry is no file",
			env:      map[string]string{"KUBECONFIG": first + string(os.PathListSeparator) + string(os.PathListSeparator) + first},
			wantHost: "https://first.example:6443", wantFrom: "$KUBECONFIG " + first + ", context first"},
		{name: "missing files in $KUBECONFIG are skipped, as kubectl does",
			env:      map[string]string{"KUBECONFIG": missing + string(os.PathListSeparator) + second},
			wantHost: "https://second.example:6443"},
		{name: "without a path or $KUBECONFIG, ~/.kube/config is read",
			wantHost: "https://home.example:6443", wantFrom: filepath.Join(home, ".kube/config") + ", context home"},
		{name: "~/.kube/config wins over the service account", inCluster: inCluster,
			wantHost: "https://home.example:6443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loader(t, home, tt.env, tt.inCluster).Load(tt.path, tt.context)
			if err != nil {
				t.Fatal(err)
			}
			if got.Rest.Host != tt.wantHost {
				t.Errorf("host = %s, want %s", got.Rest.Host, tt.wantHost)
			}
			if tt.wantFrom != "" && !strings.HasSuffix(got.Source, tt.wantFrom) {
				t.Errorf("source = %q, want it to end with %q", got.Source, tt.wantFrom)
			}
			if strings.Contains(got.Source, "secret-token") {
				t.Error("the source description holds the token")
			}
		})
	}
}

func TestLoadFallsBackToTheServiceAccountOnlyWhenNoKubeconfigExists(t *testing.T) {
	home := t.TempDir()
	l := loader(t, home, nil, func() (*rest.Config, error) { return &rest.Config{Host: "https://10.96.0.1:443"}, nil })
	got, err := l.Load("", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Rest.Host != "https://10.96.0.1:443" || got.Source != InClusterSource {
		t.Errorf("got %s from %q", got.Rest.Host, got.Source)
	}
}

func TestLoadFailsWithWhatItTried(t *testing.T) {
	home := t.TempDir()
	valid := writeFile(t, home, "valid.yaml", kubeconfig("blue", "blue", "green"))
	bad := writeFile(t, home, "bad.yaml", "apiVersion: v1\nclusters: [this is: not yaml")
	noCurrent := writeFile(t, home, "nocurrent.yaml", kubeconfig("", "blue"))
	noServer := writeFile(t, home, "noserver.yaml", `apiVersion: v1
kind: Config
current-context: empty
clusters:
- name: empty
  cluster: {}
users:
- name: someone
  user: {token: secret-token}
contexts:
- name: empty
  context: {cluster: empty, user: someone}
`)
	unknownCluster := writeFile(t, home, "unknowncluster.yaml", `apiVersion: v1
kind: Config
current-context: dangling
contexts:
- name: dangling
  context: {cluster: gone, user: nobody}
`)
	missing := filepath.Join(home, "missing.yaml")

	tests := []struct {
		name    string
		path    string
		context string
		env     map[string]string
		want    []string
	}{
		{name: "an explicit path that does not exist", path: missing,
			want: []string{"kubeconfig " + missing, "no such file or directory", "no kubeconfig file found"}},
		{name: "an explicit path under ~/ that does not exist names the expanded path", path: "~/nope/config",
			want: []string{filepath.Join(home, "nope/config")}},
		{name: "a file that is not a kubeconfig", path: bad,
			want: []string{bad, "yaml"}},
		{name: "a context the kubeconfig does not have", path: valid, context: "purple",
			want: []string{`context "purple" not found`, "blue, green", valid}},
		{name: "a kubeconfig without a current context when none is set", path: noCurrent,
			want: []string{"no current-context; set context", noCurrent}},
		{name: "a context whose cluster has no server is an error, never localhost", path: noServer,
			want: []string{"no server", "empty"}},
		{name: "a context whose cluster is not defined", path: unknownCluster,
			want: []string{"gone"}},
		{name: "$KUBECONFIG naming only missing files is an error, not a reason to use another cluster",
			env:  map[string]string{"KUBECONFIG": missing},
			want: []string{"$KUBECONFIG " + missing, "no kubeconfig file found"}},
		{name: "no kubeconfig and not in a pod names both places",
			want: []string{"default kubeconfig " + filepath.Join(home, ".kube/config"), InClusterSource, "not running in a pod"}},
		{name: "a context with no kubeconfig at all", context: "blue",
			want: []string{`context "blue"`, "a context is set but no kubeconfig file was found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loader(t, home, tt.env, nil).Load(tt.path, tt.context)
			if err == nil {
				t.Fatalf("loaded %s, want an error", got.Rest.Host)
			}
			var loadErr *LoadError
			if !errors.As(err, &loadErr) {
				t.Fatalf("error %T is not a *LoadError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "localhost") || strings.Contains(err.Error(), "secret-token") {
				t.Errorf("error %q names localhost or the token", err)
			}
		})
	}
}
