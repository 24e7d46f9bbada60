// Package syncproc runs the sync companion (`terraform-provider-k8s sync`)
// as a process and follows it by its structured log (-log-format=json):
// the one way the companion's acceptance tests, the rollout test and the
// benches drive it and wait for what it does, keyed on each line's message
// and fields rather than on its text.
package syncproc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Event is one line of the companion's log.
type Event struct {
	Time time.Time
	Msg  string
	// Fields are the line's attributes, as JSON decodes them.
	Fields map[string]any
}

// Str is the attribute key as a string ("" when absent).
func (e Event) Str(key string) string {
	switch v := e.Fields[key].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// Matches says whether e has message msg and, for each key of fields, an
// attribute that contains its value.
func (e Event) Matches(msg string, fields map[string]string) bool {
	if e.Msg != msg {
		return false
	}
	for k, v := range fields {
		if !strings.Contains(e.Str(k), v) {
			return false
		}
	}
	return true
}

// Process is a running companion.
type Process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  []Event
	raw  []string
	more chan struct{}
	done chan struct{}
	code int
}

// Options say how the process is started.
type Options struct {
	// Env is added to the environment.
	Env []string
	// Dir is its working directory; "" for this process's.
	Dir string
	// Output, when set, also receives every line of the log.
	Output io.Writer
}

// Start starts binary with args (a subcommand and its flags;
// -log-format=json is added), killed if this process dies.
func Start(binary string, args []string, o Options) (*Process, error) {
	cmd := exec.Command(binary, append(args, "-log-format", "json")...)
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.Dir = o.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, more: make(chan struct{}), done: make(chan struct{})}
	go p.read(stderr, o.Output)
	return p, nil
}

func (p *Process) read(r io.Reader, out io.Writer) {
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if out != nil {
			fmt.Fprintln(out, line)
		}
		p.mu.Lock()
		p.raw = append(p.raw, line)
		if e, ok := Parse(line); ok {
			p.log = append(p.log, e)
		}
		close(p.more)
		p.more = make(chan struct{})
		p.mu.Unlock()
	}
	_ = p.cmd.Wait()
	p.mu.Lock()
	p.code = p.cmd.ProcessState.ExitCode()
	p.mu.Unlock()
	close(p.done)
}

// Parse reads a line of slog's JSON handler: time, level, msg, then the
// attributes.
func Parse(line string) (Event, bool) {
	var fields map[string]any
	if json.Unmarshal([]byte(line), &fields) != nil {
		return Event{}, false
	}
	msg, _ := fields["msg"].(string)
	at, _ := fields["time"].(string)
	t, err := time.Parse(time.RFC3339Nano, at)
	if msg == "" || err != nil {
		return Event{}, false
	}
	return Event{Time: t, Msg: msg, Fields: fields}, true
}

// Events are the lines of the log so far that match msg and fields (every
// line for an empty msg).
func (p *Process) Events(msg string, fields map[string]string) []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Event
	for _, e := range p.log {
		if msg == "" || e.Matches(msg, fields) {
			out = append(out, e)
		}
	}
	return out
}

// Count is how many lines so far match msg and fields.
func (p *Process) Count(msg string, fields map[string]string) int {
	return len(p.Events(msg, fields))
}

// Wait waits for the n-th line that matches msg and fields and gives it;
// an error when the process exits first or ctx ends.
func (p *Process) Wait(ctx context.Context, msg string, n int, fields map[string]string) (Event, error) {
	for {
		p.mu.Lock()
		more := p.more
		p.mu.Unlock()
		if found := p.Events(msg, fields); len(found) >= n {
			return found[n-1], nil
		}
		select {
		case <-more:
		case <-p.done:
			if found := p.Events(msg, fields); len(found) >= n {
				return found[n-1], nil
			}
			return Event{}, fmt.Errorf("the companion exited (%d) before %d line(s) %q %v", p.ExitCode(), n, msg, fields)
		case <-ctx.Done():
			return Event{}, fmt.Errorf("no %d line(s) %q %v: %w", n, msg, fields, ctx.Err())
		}
	}
}

// Log is the whole log so far, as written.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.raw, "\n")
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitCode is the process's exit code, once Done.
func (p *Process) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code
}

// Pid is the process's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop sends SIGTERM and waits for the exit, killing the process after
// bound; it gives the exit code.
func (p *Process) Stop(bound time.Duration) int {
	select {
	case <-p.done:
		return p.ExitCode()
	default:
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(bound):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.ExitCode()
}

// Idle waits until no line has been written and every run started has
// ended, for quiet; an error when ctx ends first.
func (p *Process) Idle(ctx context.Context, quiet time.Duration) error {
	last, since := -1, time.Now()
	for {
		p.mu.Lock()
		n := len(p.raw)
		p.mu.Unlock()
		if n != last || p.Count("run started", nil) != p.Count("run ended", nil) {
			last, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the companion did not settle: %w", ctx.Err())
		case <-p.done:
			return fmt.Errorf("the companion exited (%d)", p.ExitCode())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
