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
	"slices"
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
		// A -command may have no arguments.
		return stdout.Bytes(), fmt.Errorf("%s: %w", strings.Join(append([]string{name}, args[:min(len(args), 1)]...), " "), errStopped)
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

// plan writes a saved plan to planFile and says what it changes: changes
// is false when the plan has nothing to do (-detailed-exitcode 0). It reads
// the plan's machine-readable output (-json) as it comes, rather than
// running `show -json` of the saved plan after it: one CLI process, and
// its providers, fewer a run.
func (c *cli) plan(ctx context.Context, planFile string, o planOptions) (changes bool, summary planSummary, err error) {
	args := []string{"plan", "-input=false", "-no-color", "-json", "-detailed-exitcode", c.lockArg(), "-out=" + planFile}
	if !o.refresh {
		args = append(args, "-refresh=false")
	}
	for _, t := range o.targets {
		args = append(args, "-target="+t)
	}
	out, err := c.run(ctx, args...)
	summary, errorsText := readPlanJSON(out)
	var exit *cliExit
	if errors.As(err, &exit) {
		if exit.code == 2 {
			return true, summary, nil
		}
		// The errors, as the CLI writes them without -json, so that they
		// read the same in the log and name their addresses (failing).
		exit.stderr = errorsText + exit.stderr
	}
	return false, summary, err
}

// planMessage is what the companion reads of a line of `plan -json`.
type planMessage struct {
	Type   string `json:"type"`
	Change struct {
		Resource struct {
			Addr string `json:"addr"`
		} `json:"resource"`
		Action string `json:"action"`
	} `json:"change"`
	Diagnostic struct {
		Severity string `json:"severity"`
		Summary  string `json:"summary"`
		Detail   string `json:"detail"`
		Address  string `json:"address"`
	} `json:"diagnostic"`
}

// readPlanJSON reads the lines of `plan -json`: the managed resources the
// plan changes, those whose drift it records, and its errors as the CLI
// writes them without -json ("Error: ...", "with ADDRESS,").
func readPlanJSON(out []byte) (planSummary, string) {
	var s planSummary
	var errs strings.Builder
	for line := range bytes.Lines(out) {
		var m planMessage
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		addr := m.Change.Resource.Addr
		switch m.Type {
		case "planned_change":
			if isManagedAddress(addr) && !slices.Contains([]string{"read", "noop", "no-op", "move"}, m.Change.Action) {
				s.changed = append(s.changed, addr)
			}
		case "resource_drift":
			if isManagedAddress(addr) {
				s.drift = append(s.drift, addr)
			}
		case "diagnostic":
			if m.Diagnostic.Severity != "error" {
				continue
			}
			fmt.Fprintf(&errs, "Error: %s\n\n", m.Diagnostic.Summary)
			if m.Diagnostic.Address != "" {
				fmt.Fprintf(&errs, "  with %s,\n\n", m.Diagnostic.Address)
			}
			if m.Diagnostic.Detail != "" {
				fmt.Fprintf(&errs, "%s\n\n", m.Diagnostic.Detail)
			}
		}
	}
	return s, errs.String()
}

// isManagedAddress says whether an address is a managed resource's (its
// instance's), not a data source's.
func isManagedAddress(addr string) bool {
	parts := strings.Split(withoutKeys(addr), ".")
	for len(parts) > 2 && parts[0] == "module" {
		parts = parts[2:]
	}
	return len(parts) == 2 && parts[0] != "data"
}

// command runs the program and arguments of a -command value (split as
// commandWords splits it, no shell) in the working directory.
func (c *cli) command(ctx context.Context, command string, env []string) error {
	words, err := commandWords(command)
	if err != nil {
		return fmt.Errorf("-command %q: %w", command, err)
	}
	_, err = c.exec(ctx, nil, words[0], words[1:], env, false)
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
