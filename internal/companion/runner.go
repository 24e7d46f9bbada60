package companion

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cli runs the terraform (or tofu) CLI in the configuration's directory.
type cli struct {
	path string
	dir  string
	// lockTimeout is how long plan and apply wait for a state lock that
	// someone else holds, rather than fail at once.
	lockTimeout time.Duration
	// stopTimeout bounds the wait for a command after SIGINT.
	stopTimeout time.Duration
	env         []string
}

// errStopped is a command ended because the companion is stopping.
var errStopped = errors.New("stopped")

// cliExit is a command that exited with a non-zero code.
type cliExit struct {
	args   []string
	code   int
	stderr string
}

func (e *cliExit) Error() string {
	return fmt.Sprintf("%s exited with %d: %s", strings.Join(e.args, " "), e.code, lastLines(e.stderr, 12))
}

// run runs the CLI with args and gives its standard output. When ctx ends,
// the CLI gets SIGINT, which makes Terraform stop cleanly and release its
// lock, and is killed only after stopTimeout.
func (c *cli) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.path, args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), c.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A group of its own: a Ctrl-C at the companion's terminal reaches the
	// CLI once, from the companion, not twice.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = c.stopTimeout
	err := cmd.Run()
	if ctx.Err() != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w", filepath.Base(c.path), args[0], errStopped)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return stdout.Bytes(), &cliExit{args: append([]string{filepath.Base(c.path)}, args...), code: exit.ExitCode(), stderr: stderr.String() + stdout.String()}
	}
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("run %s: %w", c.path, err)
	}
	return stdout.Bytes(), nil
}

// statePull is the state of the working directory, through its backend.
func (c *cli) statePull(ctx context.Context) ([]byte, error) {
	out, err := c.run(ctx, "state", "pull")
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return nil, errNoState
	}
	return out, nil
}

var errNoState = errors.New("the working directory has no state: apply the configuration once (terraform apply) before starting the companion")

func (c *cli) lockArg() string {
	return "-lock-timeout=" + strconv.Itoa(int(c.lockTimeout.Seconds())) + "s"
}

// plan writes a saved plan to planFile; changes is false when the plan has
// nothing to do (-detailed-exitcode 0).
func (c *cli) plan(ctx context.Context, planFile string, refresh bool) (changes bool, err error) {
	args := []string{"plan", "-input=false", "-no-color", "-detailed-exitcode", c.lockArg(), "-out=" + planFile}
	if !refresh {
		args = append(args, "-refresh=false")
	}
	_, err = c.run(ctx, args...)
	var exit *cliExit
	if errors.As(err, &exit) && exit.code == 2 {
		return true, nil
	}
	return false, err
}

// planJSON is what the companion reads of `terraform show -json PLAN`.
type planJSON struct {
	ResourceChanges []struct {
		Address string `json:"address"`
		Mode    string `json:"mode"`
		Change  struct {
			Actions []string `json:"actions"`
		} `json:"change"`
	} `json:"resource_changes"`
}

// changedAddresses are the managed resources a saved plan changes.
func (c *cli) changedAddresses(ctx context.Context, planFile string) ([]string, error) {
	out, err := c.run(ctx, "show", "-json", "-no-color", planFile)
	if err != nil {
		return nil, err
	}
	var p planJSON
	if err := json.Unmarshal(out, &p); err != nil {
		return nil, fmt.Errorf("read the saved plan: %w", err)
	}
	var changed []string
	for _, rc := range p.ResourceChanges {
		if rc.Mode != "managed" {
			continue
		}
		if len(rc.Change.Actions) == 1 && (rc.Change.Actions[0] == "no-op" || rc.Change.Actions[0] == "read") {
			continue
		}
		changed = append(changed, rc.Address)
	}
	return changed, nil
}

func (c *cli) apply(ctx context.Context, planFile string) error {
	_, err := c.run(ctx, "apply", "-input=false", "-no-color", c.lockArg(), planFile)
	return err
}

// lastLines is the last n lines of s, trimmed.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
