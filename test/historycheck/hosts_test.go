package historycheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// host is a made-up host of the form the check refuses. It is assembled
// from parts so that this file, which the check reads too, names none.
const host = "registry." + "example." + "org"

func TestALineThatNamesARegistryHost(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		refused    bool
	}{
		{"a provider's address is refused", `source = "` + host + `/vigie/k8s"`, true},
		{"a host in a path is refused", "/usr/share/providers/" + host + "/hashicorp/aws/5.0.0", true},
		{"a host in upper case is refused", strings.ToUpper(host) + "/hashicorp/aws", true},
		{"a host ending in .io is refused", "registry." + "example." + "io/x", true},
		{"an elided host passes", "provider <host>/hashicorp/aws was not found in any of the search locations", false},
		{"a made-up test host passes", "mirror.test/hashicorp/null/3.2.4/linux_amd64", false},
		{"an example registry of images passes", "REGISTRY=registry.example.com/lb", false},
		{"the word registry passes", "init and plans never reach a registry.", false},
		{"a longer name passes", "myregistry" + ".example." + "org", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RegistryHostLine(tc.line); (len(got) > 0) != tc.refused {
				t.Errorf("RegistryHostLine(%q) = %v, want refused %v", tc.line, got, tc.refused)
			}
		})
	}
}

func TestRegistryHostsNamesEveryFileAndLineThatNamesOne(t *testing.T) {
	root := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := writerIn(t, root)
	git("init", "-q")
	write(".gitignore", "/bin/\n")
	write("tools/image/main.go", "package main\n\nvar hosts = []string{\""+host+"\"}\n")
	write("scripts/mirror.sh", "#!/bin/sh\nhost=$(scripts/registry-host.sh tofu)\n")
	write("docs/guide.md", "fine\n\n`provider "+host+"/hashicorp/aws was not found`\n")
	write("gone.txt", host+"\n")
	git("add", ".")
	git("commit", "-q", "-m", "files")
	if err := os.Remove(filepath.Join(root, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	write("new_test.go", "package main\n// not yet added: "+host+"\n")
	write("bin/image/cli.tfrc", host+": ignored by git, not read\n")

	files, err := RepositoryFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	found, err := RegistryHosts(root, files)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, fmt.Sprintf("%s:%d", f.File, f.Line))
	}
	want := []string{"docs/guide.md:3", "new_test.go:2", "tools/image/main.go:3"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("findings at %v, want %v (%v)", got, want, found)
	}
}
