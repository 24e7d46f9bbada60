package companion

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Checks made before anything starts, so that a companion that cannot work
// (in a pod: a token not mounted, a read-only /tmp, an init container that
// did not run, a Role without the backend's rights) says what and what to do,
// and exits 1, instead of failing later or retrying for ever.

// serviceAccountDir is where the kubelet mounts the pod's ServiceAccount.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// checkTempDir: sync writes its saved plans under the temporary directory.
func checkTempDir() error {
	dir, err := os.MkdirTemp("", "k8s-sync-start-")
	if err != nil {
		return fmt.Errorf("the temporary directory %s is not writable (%w): sync writes its saved plans there; mount a writable volume there (an emptyDir at /tmp) or set TMPDIR", os.TempDir(), err)
	}
	return os.Remove(dir)
}

// checkDataDir: a TF_DATA_DIR that does not exist is a configuration that
// was not initialised there (the chart's init container writes it).
func checkDataDir(cli, dir string, env []string) error {
	data := dataDir(env)
	if data == "" {
		return nil
	}
	if !filepath.IsAbs(data) {
		data = filepath.Join(dir, data)
	}
	if _, err := os.Stat(data); err != nil {
		return fmt.Errorf("the configuration in %s is not initialised: TF_DATA_DIR %s: %w; %s", dir, data, err, initRemedy(cli, dir))
	}
	return nil
}

// dataDir is TF_DATA_DIR as the CLI gets it: env's, else the process's.
func dataDir(env []string) string {
	for _, kv := range slices.Backward(env) {
		if v, ok := strings.CutPrefix(kv, "TF_DATA_DIR="); ok {
			return v
		}
	}
	return os.Getenv("TF_DATA_DIR")
}

func initRemedy(cli, dir string) string {
	return fmt.Sprintf("run `%s -chdir=%s init -input=false` with the same TF_DATA_DIR before the companion (the chart's init container does)", filepath.Base(cli), dir)
}

// checkServiceAccount: in a pod, with no kubeconfig to use instead, the
// ServiceAccount's token must be there and readable by this user.
func checkServiceAccount(kubeconfig string) error {
	if kubeconfig != "" || os.Getenv("KUBECONFIG") != "" || os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil
	}
	if home, err := os.UserHomeDir(); err == nil {
		if _, err := os.Stat(filepath.Join(home, ".kube", "config")); err == nil {
			return nil
		}
	}
	token := filepath.Join(serviceAccountDir, "token")
	f, err := os.Open(token)
	if err != nil {
		return fmt.Errorf("the pod's ServiceAccount token cannot be read (%w): keep automountServiceAccountToken true (or mount a projected token at %s), readable by the container's user (fsGroup)", err, serviceAccountDir)
	}
	defer f.Close()
	if n, err := f.Read(make([]byte, 1)); n == 0 {
		return fmt.Errorf("the pod's ServiceAccount token %s is empty (%w): the kubelet writes it; check the pod's projected volume", token, err)
	}
	return nil
}

// stateFirst is what check says when it cannot connect to the cluster but
// the configuration has no state or is not initialised: that comes first.
// It pulls the state through the CLI, bounded in time; any other failure of
// the pull (the backend's own connection) gives nil: the cluster's error
// says more.
func stateFirst(ctx context.Context, cli, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "state", "pull")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	switch {
	case err != nil:
		pullErr := fmt.Errorf("%s state pull: %w: %s", filepath.Base(cli), err, lastLines(stderr.String(), 12))
		if explained := explain(pullErr, cli, dir); errors.Is(explained, errNotInitialised) {
			return explained
		}
	case len(strings.TrimSpace(string(out))) == 0:
		return errNoState
	}
	return nil
}

// errNotInitialised marks explain's errors of a configuration not
// initialised for this CLI.
var errNotInitialised = errors.New("the configuration is not initialised for this CLI")

// explain adds the remedy to an error whose cause the CLI's own text tells:
// a configuration not initialised for this CLI, or a backend's Secret or
// lock Lease that the identity may not use.
func explain(err error, cli, dir string) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if clean := ansiEscape.ReplaceAllString(text, ""); clean != text {
		// The CLI's colours (state pull has no -no-color) in a log line.
		err = &cleaned{text: clean, cause: err}
		text = clean
	}
	switch {
	case strings.Contains(text, "add the RBAC rule"):
		return err
	case strings.Contains(text, "Backend initialization required"),
		strings.Contains(text, "Required plugins are not installed"),
		strings.Contains(text, "Inconsistent dependency lock file"),
		strings.Contains(text, "Module not installed"):
		return fmt.Errorf("%w\n\n%w (%s): %s", err, errNotInitialised, dir, initRemedy(cli, dir))
	case strings.Contains(text, "forbidden") && strings.Contains(text, `"secrets"`):
		return fmt.Errorf("%w\n\nthe state's backend cannot read or write its Secret: add the RBAC rule "+
			`{apiGroups: [""], resources: ["secrets"], verbs: ["get", "list", "update"]}`+
			" in the backend's namespace (the chart's Role has it with backend.kubernetes)", err)
	case strings.Contains(text, "forbidden") && strings.Contains(text, `"leases"`):
		return fmt.Errorf("%w\n\nthe state's backend cannot take its lock: add the RBAC rule "+
			`{apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"]}`+
			" in the backend's namespace", err)
	}
	return err
}

var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*m")

// cleaned is an error with the terminal escapes of its text removed.
type cleaned struct {
	text  string
	cause error
}

func (c *cleaned) Error() string { return c.text }
func (c *cleaned) Unwrap() error { return c.cause }

// Exit codes, as -h gives them.
const (
	checkExitCodes = "Exit codes: 0 every pool in state matches the cluster; 2 one differs (named on stdout, with the members\n" +
		"added and removed); 1 an error (on stderr: no initialised configuration, no state, no cluster, a missing RBAC rule...)."
	syncExitCodes = "Exit codes: 0 stopped by SIGTERM or SIGINT (a running CLI command is let end, up to -stop-timeout); 1 not\n" +
		"started (the reason on stderr: no initialised configuration, no state, no cluster, a missing RBAC rule, an unwritable\n" +
		"temporary directory...) or stopped on an error."
)

// usage is a subcommand's -h: what it does, its exit codes, its flags.
func usage(name, what, codes string, printDefaults func(), out io.Writer) func() {
	return func() {
		fmt.Fprintf(out, "Usage: terraform-provider-k8s %s [flags]\n\n%s\n\n%s\n\nFlags:\n", name, what, codes)
		printDefaults()
	}
}

// parsed says how a subcommand ends after its flags were parsed: -h is not
// an error.
func parsed(err error) (int, bool) {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK, true
	}
	return exitError, err != nil
}
