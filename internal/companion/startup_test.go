package companion

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExplainNamesTheRemedy(t *testing.T) {
	for _, tc := range []struct {
		name, cliText, want string
		waitingCannotCure   bool
	}{
		{"a backend never initialised", `Error: Backend initialization required: please run "tofu init"`, "tofu -chdir=/config init -input=false", true},
		{"providers not installed", "Error: Required plugins are not installed", "with the same TF_DATA_DIR", true},
		{"the state Secret forbidden", `secrets "tfstate-default-pools" is forbidden: User "system:serviceaccount:lb-sync:k8s-sync" cannot get resource "secrets"`,
			`resources: ["secrets"], verbs: ["get", "list", "update"]`, false},
		{"the lock Lease forbidden", `leases.coordination.k8s.io "lock-tfstate-default-pools" is forbidden: cannot create resource "leases"`,
			`resources: ["leases"], verbs: ["get", "create", "update"]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cause := errors.New("tofu state pull exited with 1: " + tc.cliText)
			got := explain(cause, "/usr/local/bin/tofu", "/config")
			if !errors.Is(got, cause) || !strings.Contains(got.Error(), tc.want) {
				t.Fatalf("explain = %q, want the cause and %q", got, tc.want)
			}
			if errors.Is(got, errNotInitialised) != tc.waitingCannotCure {
				t.Fatalf("explain = %q: not initialised is %v, want %v", got, !tc.waitingCannotCure, tc.waitingCannotCure)
			}
		})
	}
	coloured := errors.New("tofu state pull exited with 1: \x1b[31m│\x1b[0m \x1b[1mError:\x1b[0m Backend initialization required")
	if got := explain(coloured, "tofu", "."); strings.Contains(got.Error(), "\x1b") || !errors.Is(got, coloured) || !errors.Is(got, errNotInitialised) {
		t.Fatalf("explain of the CLI's coloured text = %q", got)
	}
	named := errors.New(`lease a/b: add the RBAC rule {...}: leases.coordination.k8s.io "b" is forbidden`)
	if got := explain(named, "tofu", "."); got.Error() != named.Error() {
		t.Fatalf("an error that names its rule got another remedy: %q", got)
	}
	other := errors.New("plan failed: connection refused")
	if got := explain(other, "tofu", "."); got.Error() != other.Error() {
		t.Fatalf("an error without a known cause changed: %q", got)
	}
}

func TestCheckDataDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TF_DATA_DIR", "")
	if err := checkDataDir("tofu", dir, nil); err != nil {
		t.Fatalf("without TF_DATA_DIR: %v", err)
	}
	t.Setenv("TF_DATA_DIR", "data")
	err := checkDataDir("/usr/local/bin/tofu", dir, nil)
	if err == nil || !strings.Contains(err.Error(), "is not initialised: TF_DATA_DIR "+filepath.Join(dir, "data")) ||
		!strings.Contains(err.Error(), "tofu -chdir="+dir+" init") {
		t.Fatalf("a TF_DATA_DIR that does not exist: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkDataDir("tofu", dir, nil); err != nil {
		t.Fatalf("an initialised TF_DATA_DIR: %v", err)
	}
}

func TestCheckTempDir(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	if err := checkTempDir(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	if err := checkTempDir(); err == nil || !strings.Contains(err.Error(), "is not writable") || !strings.Contains(err.Error(), "emptyDir") {
		t.Fatalf("a temporary directory that cannot be written: %v", err)
	}
}

func TestCheckServiceAccount(t *testing.T) {
	if _, err := os.Stat(serviceAccountDir); err == nil {
		t.Skip("this test runs outside a pod: " + serviceAccountDir + " exists here")
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if err := checkServiceAccount(""); err != nil {
		t.Fatalf("outside a pod: %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	if err := checkServiceAccount("/some/kubeconfig"); err != nil {
		t.Fatalf("with -kubeconfig: %v", err)
	}
	err := checkServiceAccount("")
	if err == nil || !strings.Contains(err.Error(), "ServiceAccount token cannot be read") || !strings.Contains(err.Error(), "automountServiceAccountToken") {
		t.Fatalf("in a pod without its token: %v", err)
	}
}

func TestHelpNamesTheExitCodes(t *testing.T) {
	for _, command := range Commands {
		var stderr bytes.Buffer
		if code := Main(command, []string{"-h"}, &bytes.Buffer{}, &stderr); code != exitOK {
			t.Errorf("%s -h exited %d", command, code)
		}
		if !strings.Contains(stderr.String(), "Exit codes: 0 ") || !strings.Contains(stderr.String(), "; 1 ") || !strings.Contains(stderr.String(), "-chdir") {
			t.Errorf("%s -h does not name the exit codes and flags:\n%s", command, stderr.String())
		}
	}
}

func TestAPodIsNamedWithItsUID(t *testing.T) {
	for _, args := range [][]string{{"-pod-name", "sync-0"}, {"-pod-uid", "0b0c"}} {
		var stderr bytes.Buffer
		if code := Main("sync", args, &bytes.Buffer{}, &stderr); code != exitError || !strings.Contains(stderr.String(), "give both") {
			t.Errorf("sync %v exited %d: %s", args, code, stderr.String())
		}
	}
}

// The pod owns a replica's member Lease, which only -workspaces with
// -leader-elect has: elsewhere the pod's name would be ignored.
func TestAPodIsNamedOnlyWhereItOwnsAMemberLease(t *testing.T) {
	pod := []string{"-pod-name", "sync-0", "-pod-uid", "0b0c"}
	for _, args := range [][]string{
		pod,
		append([]string{"-leader-elect"}, pod...),
		append([]string{"-workspaces", "workspaces.yaml"}, pod...),
	} {
		var stderr bytes.Buffer
		if code := Main("sync", args, &bytes.Buffer{}, &stderr); code != exitError || !strings.Contains(stderr.String(), "-pod-name \"sync-0\": only with -workspaces and -leader-elect") {
			t.Errorf("sync %v exited %d: %s", args, code, stderr.String())
		}
	}
}
