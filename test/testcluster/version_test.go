package testcluster

import "testing"

func TestPinnedVersionIsReadFromToolsClusterGoMod(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	v, err := PinnedVersion(root)
	if err != nil {
		t.Fatal(err)
	}
	if !versionPattern.MatchString(v) {
		t.Errorf("pinned version %q is not v1.X.Y", v)
	}
}

func TestRequirementFindsRequireLinesOnly(t *testing.T) {
	goMod := []byte(`module x

require k8s.io/api v0.1.0

require (
	k8s.io/kubernetes v1.37.2 // indirect
	go.etcd.io/etcd/server/v3 v3.7.0
)

replace k8s.io/kubernetes => k8s.io/kubernetes v1.0.0
`)
	for module, want := range map[string]string{
		"k8s.io/kubernetes":         "v1.37.2",
		"k8s.io/api":                "v0.1.0",
		"go.etcd.io/etcd/server/v3": "v3.7.0",
		"k8s.io/client-go":          "",
	} {
		if got := requirement(goMod, module); got != want {
			t.Errorf("%s: %q, want %q", module, got, want)
		}
	}
}
