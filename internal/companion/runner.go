package companion

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
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
	// stateTimeout bounds a read of state (state pull).
	stateTimeout time.Duration
	env          []string
}

// errStopped is a command ended because the companion is stopping.
var errStopped = errors.New("stopped")

// cliExit is a command that exited with a non-zero code.
type cliExit struct {
	args           []string
	code           int
	stderr, stdout string
}

// Error says what the CLI said: its errors (Terraform and OpenTofu write
// them to stderr, from "Error:" on, and warnings to stdout, where they would
// push the errors out of a tail), else the end of what it wrote.
func (e *cliExit) Error() string {
	text := lastLines(e.stderr+e.stdout, 12)
	if i := strings.Index(e.stderr, "Error:"); i >= 0 {
		text = firstLines(e.stderr[i:], 40)
	}
	return fmt.Sprintf("%s exited with %d: %s", strings.Join(e.args, " "), e.code, ansiEscape.ReplaceAllString(text, ""))
}

// firstLines is the first n lines of s, trimmed.
func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// run runs the CLI with args and gives its standard output.
func (c *cli) run(ctx context.Context, args ...string) ([]byte, error) {
	return c.exec(ctx, nil, c.path, args, nil, true)
}

// exec runs path with args in the directory, env added, in a process group
// of its own: a Ctrl-C at the companion's terminal reaches it once, from
// the companion, not twice. When ctx ends, the group gets SIGINT, which
// makes Terraform stop cleanly and release its lock, and is killed after
// stopTimeout; a command that the state lock does not serialise (locked
// false) gets lostLeaseTimeout instead when ctx ended because the Lease was
// lost (see stopBound).
// With out set, the standard output goes there instead, as it comes.
func (c *cli) exec(ctx context.Context, out io.Writer, path string, args, env []string, locked bool) ([]byte, error) {
	cmd := exec.Command(path, args...)
	cmd.Dir = c.dir
	cmd.Env = append(append(os.Environ(), c.env...), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if out != nil {
		cmd.Stdout = out
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w", path, err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		kill := time.NewTimer(c.stopBound(ctx, locked))
		defer kill.Stop()
		select {
		case <-done:
		case <-kill.C:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}()
	err := cmd.Wait()
	close(done)
	name := filepath.Base(path)
	if ctx.Err() != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w", name, args[0], errStopped)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return stdout.Bytes(), &cliExit{args: append([]string{name}, args...), code: exit.ExitCode(), stderr: stderr.String(), stdout: stdout.String()}
	}
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("run %s: %w", path, err)
	}
	return stdout.Bytes(), nil
}

// lostLeaseTimeout bounds a command's stop after the Lease was lost: a new
// leader takes the Lease LeaseDuration after the last renewal it saw, and
// this replica stopped leading RenewDeadline after its own last one, so
// the command must be gone in the difference (5 s by default, less a
// RetryPeriod). Terraform's plan and apply are serialised by the state
// lock and get stopTimeout; a command is serialised by nothing.
const lostLeaseTimeout = time.Second

// stopBound is how long a process has after its SIGINT.
func (c *cli) stopBound(ctx context.Context, locked bool) time.Duration {
	if !locked && errors.Is(context.Cause(ctx), kube.ErrLeaseLost) {
		return lostLeaseTimeout
	}
	return c.stopTimeout
}

// statePull reads the state of the working directory, through its backend,
// as a stream: read gets the CLI's output as it comes, so that a large
// state is never held whole. The whole read is bounded by stateTimeout.
func (c *cli) statePull(ctx context.Context, read func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.stateTimeout)
	defer cancel()
	pr, pw := io.Pipe()
	counted := &countingReader{r: pr}
	readErr := make(chan error, 1)
	go func() {
		err := read(counted)
		// The rest, unread when read stopped early, so that the CLI ends.
		_, _ = io.Copy(io.Discard, counted)
		readErr <- err
	}()
	_, err := c.exec(ctx, pw, c.path, []string{"state", "pull"}, nil, true)
	_ = pw.Close()
	rerr := <-readErr
	if errors.Is(err, errStopped) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("reading state did not end within %s (-state-timeout): %.1f MB read; raise -state-timeout for a state this large",
			c.stateTimeout, float64(counted.n.Load())/1e6)
	}
	if err != nil {
		return err
	}
	if counted.n.Load() == 0 {
		return errNoState
	}
	return rerr
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

var errNoState = errors.New("the working directory has no state: apply the configuration once (terraform apply) before starting the companion")

func (c *cli) lockArg() string {
	return "-lock-timeout=" + strconv.Itoa(int(c.lockTimeout.Seconds())) + "s"
}

// plan writes a saved plan to planFile; changes is false when the plan has
// nothing to do (-detailed-exitcode 0).
func (c *cli) plan(ctx context.Context, planFile string, o planOptions) (changes bool, err error) {
	args := []string{"plan", "-input=false", "-no-color", "-detailed-exitcode", c.lockArg(), "-out=" + planFile}
	if !o.refresh {
		args = append(args, "-refresh=false")
	}
	for _, t := range o.targets {
		args = append(args, "-target="+t)
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
	ResourceChanges []resourceChange `json:"resource_changes"`
	ResourceDrift   []resourceChange `json:"resource_drift"`
}

type resourceChange struct {
	Address string `json:"address"`
	Mode    string `json:"mode"`
	Change  struct {
		Actions []string `json:"actions"`
	} `json:"change"`
}

// show reads the managed resources a saved plan changes, and those whose
// drift it records.
func (c *cli) show(ctx context.Context, planFile string) (planSummary, error) {
	out, err := c.run(ctx, "show", "-json", "-no-color", planFile)
	if err != nil {
		return planSummary{}, err
	}
	var p planJSON
	if err := json.Unmarshal(out, &p); err != nil {
		return planSummary{}, fmt.Errorf("read the saved plan: %w", err)
	}
	return planSummary{changed: managedChanges(p.ResourceChanges), drift: managedChanges(p.ResourceDrift)}, nil
}

// managedChanges are the addresses of the managed resources of changes
// that do something.
func managedChanges(changes []resourceChange) []string {
	var out []string
	for _, rc := range changes {
		if rc.Mode != "managed" {
			continue
		}
		if len(rc.Change.Actions) == 1 && (rc.Change.Actions[0] == "no-op" || rc.Change.Actions[0] == "read") {
			continue
		}
		out = append(out, rc.Address)
	}
	return out
}

// command runs script with sh -c in the working directory.
func (c *cli) command(ctx context.Context, script string, env []string) error {
	_, err := c.exec(ctx, nil, "sh", []string{"-c", script}, env, false)
	return err
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
