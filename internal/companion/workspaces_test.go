package companion

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

func TestAWorkspacesFileGivesEachItsSettingsAndTheFlagsTheRest(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"team-a", "team-b"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, dir, map[string]string{"workspaces.yaml": `
workspaces:
  - name: team-a
    dir: team-a
    settle_quiet: 1s
    settle_max: 4s
    max_shrink: 0.3
    allow: [terraform_data.pool]
    env:
      TF_DATA_DIR: /data/team-a
  - name: team-b
    dir: team-b
    target_changed: false
`})
	defaults := DefaultSyncOptions()
	defaults.Env = []string{"PG_CONN_STR=x"}
	got, err := loadWorkspaces(filepath.Join(dir, "workspaces.yaml"), defaults)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].name != "team-a" || got[1].name != "team-b" {
		t.Fatalf("workspaces %+v, want team-a and team-b", got)
	}
	a, b := got[0].opts, got[1].opts
	if a.Dir != filepath.Join(dir, "team-a") || a.Quiet != time.Second || a.MaxWait != 4*time.Second || a.MaxShrink != 0.3 ||
		!slices.Equal(a.Allowed, []string{"terraform_data.pool"}) || !slices.Equal(a.Env, []string{"PG_CONN_STR=x", "TF_DATA_DIR=/data/team-a"}) {
		t.Errorf("team-a: %+v", a)
	}
	if b.Quiet != defaults.Quiet || b.MaxShrink != defaults.MaxShrink || b.TargetChanged || !slices.Equal(b.Env, defaults.Env) {
		t.Errorf("team-b: %+v: want the flags' settings but target_changed", b)
	}
	if dataDir(a.Env) != "/data/team-a" {
		t.Errorf("team-a's TF_DATA_DIR: %q", dataDir(a.Env))
	}
}

func TestADirectoryOfWorkspacesFilesIsOneList(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, dir, map[string]string{
		"one.yaml":  "workspaces: [{name: a, dir: a}]",
		"two.json":  `{"workspaces": [{"name": "b", "dir": "b"}]}`,
		"notes.txt": "not read",
	})
	got, err := loadWorkspaces(dir, DefaultSyncOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].name != "a" || got[1].name != "b" {
		t.Fatalf("workspaces %+v, want a and b", got)
	}
}

func TestABadWorkspacesFileIsAnErrorNamingWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"an unknown attribute", "workspaces: [{name: a, dir: a, settle: 1s}]", `unknown field "settle"`},
		{"a name that cannot name a Lease", "workspaces: [{name: Team_A, dir: a}]", `name "Team_A"`},
		{"no dir", "workspaces: [{name: a}]", "dir: give the working directory"},
		{"a name that would be a replica's Lease", "workspaces: [{name: member-a, dir: a}]", "would be the Lease of a replica"},
		{"a dir that does not exist", "workspaces: [{name: a, dir: nowhere}]", "is not a directory"},
		{"two workspaces of one name", "workspaces: [{name: a, dir: a}, {name: a, dir: a}]", `workspace "a" is also in`},
		{"a duration that is not one", "workspaces: [{name: a, dir: a, settle_quiet: 5}]", "a duration is a string"},
		{"a settle window upside down", "workspaces: [{name: a, dir: a, settle_quiet: 5s, settle_max: 1s}]", "-settle-quiet"},
		{"no workspace", "workspaces: []", "lists no workspace"},
		{"not YAML", "workspaces: [", "workspaces.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, dir, map[string]string{"workspaces.yaml": tc.file})
			_, err := loadWorkspaces(filepath.Join(dir, "workspaces.yaml"), DefaultSyncOptions())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one that says %q", err, tc.want)
			}
		})
	}
}

func TestTheUnionOfScopesCoversEach(t *testing.T) {
	got := normalScope(unionOf([]kube.CacheScope{{Namespaces: []string{"b", "a"}}, {Namespaces: []string{"a"}, Nodes: true, PodNamespaces: []string{"c"}}}))
	if !slices.Equal(got.Namespaces, []string{"a", "b"}) || !got.Nodes || !slices.Equal(got.PodNamespaces, []string{"c"}) {
		t.Errorf("union %+v", got)
	}
	if got := unionOf([]kube.CacheScope{{Namespaces: []string{"a"}}, {Namespaces: []string{""}}}); !slices.Equal(got.Namespaces, []string{""}) {
		t.Errorf("union with every namespace: %+v, want every namespace alone", got)
	}
}

func TestInformersOfAScopeCoverItsParts(t *testing.T) {
	all := kube.CacheScope{Namespaces: []string{""}, PodNamespaces: []string{"a"}}
	for _, tc := range []struct {
		scope, wants kube.CacheScope
		covers       bool
	}{
		{kube.CacheScope{Namespaces: []string{"a", "b"}}, kube.CacheScope{Namespaces: []string{"b"}}, true},
		{kube.CacheScope{Namespaces: []string{"a"}}, kube.CacheScope{Namespaces: []string{"a", "b"}}, false},
		{all, kube.CacheScope{Namespaces: []string{"z"}, PodNamespaces: []string{"a"}}, true},
		{all, kube.CacheScope{PodNamespaces: []string{"b"}}, false},
		{all, kube.CacheScope{Nodes: true}, false},
	} {
		if got := covers(tc.scope, tc.wants); got != tc.covers {
			t.Errorf("%+v covers %+v: %v, want %v", tc.scope, tc.wants, got, tc.covers)
		}
	}
}
