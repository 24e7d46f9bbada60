package testcluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one daemon of the control plane. It runs in a process group of
// its own, so that a Ctrl-C meant for the test run reaches the harness, which
// stops the daemons in order, and so that stopping it stops anything it
// started; and it gets SIGKILL when the harness dies (parent-death signal), so
// that no run leaves daemons behind, even one killed outright. The signal
// follows the thread that forked the daemon, not the process, so every
// daemon is forked by the one thread of startThread.
type process struct {
	name    string
	logPath string
	args    []string
	// cred, when set, is the user the daemon runs as (PostgreSQL refuses
	// root); dir, when set, its working directory.
	cred    *syscall.Credential
	dir     string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error
}

func startProcess(dir, bin, name string, args []string) (*process, error) {
	p := &process{name: name, logPath: filepath.Join(dir, name+".log"), args: args}
	return p, p.start(bin)
}

func (p *process) start(bin string) error {
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(bin, p.name), p.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = p.dir
	// Go sets the parent-death signal after the change of user, which would
	// otherwise clear it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	if err := startOnLockedThread(cmd); err != nil {
		_ = log.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.done, p.waitErr = cmd, make(chan struct{}), nil
	go func() {
		err := cmd.Wait()
		_ = log.Close()
		p.waitErr = err
		close(p.done)
	}()
	return nil
}

// starts are the daemons to fork on startThread.
var (
	starts           = make(chan startRequest)
	startThreadReady sync.Once
)

type startRequest struct {
	cmd  *exec.Cmd
	done chan<- error
}

// startOnLockedThread starts cmd from startThread. Linux sends a daemon its
// parent-death signal when the thread that forked it ends, and the Go runtime
// ends a thread when a goroutine locked to it returns, which any goroutine
// (or a library) may do: a daemon forked from an ordinary goroutine could be
// killed while the harness runs on (golang/go#27505).
func startOnLockedThread(cmd *exec.Cmd) error {
	startThreadReady.Do(func() { go startThread() })
	done := make(chan error, 1)
	starts <- startRequest{cmd: cmd, done: done}
	return <-done
}

// startThread forks every daemon from one thread that lives as long as the
// process: its goroutine holds the thread and never returns.
func startThread() {
	runtime.LockOSThread()
	for req := range starts {
		req.done <- req.cmd.Start()
	}
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, then SIGKILL if the process is
// still there after bound, and returns once it has been reaped.
func (p *process) stop(bound time.Duration) {
	if p == nil || p.cmd == nil {
		return
	}
	if done, _ := p.exited(); done {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(bound):
		p.kill()
	}
}

// kill ends the process group at once, as a crash would, and waits for it.
func (p *process) kill() {
	if p == nil || p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// pid of the running process.
func (p *process) pid() int { return p.cmd.Process.Pid }

// logTail is the end of the process's log, for errors.
func (p *process) logTail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// errPortTaken says a daemon found one of its ports taken: another process
// bound it between the harness choosing it and the daemon starting.
var errPortTaken = errors.New("a port was taken meanwhile")

// died is the error of a daemon that exited before it was ready.
func (p *process) died() error {
	tail := p.logTail()
	err := fmt.Errorf("%s exited before it was ready (%w); end of %s:\n%s", p.name, p.waitErr, p.logPath, tail)
	if bytes.Contains(bytes.ToLower([]byte(tail)), []byte("address already in use")) {
		return errors.Join(errPortTaken, err)
	}
	return err
}

// ChildTestLine runs the test binary again for the one test run (with
// -test.v), env added to this process's environment (what turns that
// test's part on in the child), and reads the child's standard output until
// a line that starts with prefix: it returns the child and the rest of that
// line, "" when the child ended, or was killed after bound, without one.
// The child's standard error is this process's; cleanup (a test's
// t.Cleanup) kills and reaps it.
func ChildTestLine(cleanup func(func()), bound time.Duration, run, prefix string, env ...string) (*exec.Cmd, string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.AfterFunc(bound, func() { _ = cmd.Process.Kill() })
	defer deadline.Stop()
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), prefix); ok {
			return cmd, rest, nil
		}
	}
	return cmd, "", nil
}
