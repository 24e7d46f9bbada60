package testcluster

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests start `sleep` as a daemon: no control plane, so they run with
// the unit tests.

func startSleep(t *testing.T, dir string) (*process, error) {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep on PATH")
	}
	return startProcess(dir, filepath.Dir(sleep), filepath.Base(sleep), []string{"60"})
}

// The parent-death signal of a daemon is sent when the thread that forked
// it ends, not the process: the Go runtime ends a thread whose goroutine
// exits while locked to it. Two daemons are started so, one after the
// other: the runtime keeps the main thread instead of ending it, and only
// one of the two goroutines can have run there.
func TestADaemonOutlivesTheThreadThatStartedIt(t *testing.T) {
	for i := range 2 {
		var (
			p   *process
			err error
		)
		started := make(chan struct{})
		go func() {
			defer close(started)
			runtime.LockOSThread() // never unlocked: the runtime ends this thread when the goroutine returns
			p, err = startSleep(t, t.TempDir())
		}()
		<-started
		if err != nil {
			t.Fatal(err)
		}
		defer p.stop(5 * time.Second)
		time.Sleep(time.Second) // for the thread's end and the signal, if any
		if done, waitErr := p.exited(); done {
			t.Fatalf("daemon %d died with the thread that started it: %v", i+1, waitErr)
		}
	}
}

// parentEnv makes the test binary the parent of TestADaemonDiesWithItsParentKilledOutright:
// it starts a daemon, prints its pid, and waits to be killed.
const parentEnv = "K8S_TF_TESTCLUSTER_PARENT_DIR"

func TestParentOfADaemon(t *testing.T) {
	dir := os.Getenv(parentEnv)
	if dir == "" {
		t.Skip("the parent process of TestADaemonDiesWithItsParentKilledOutright")
	}
	p, err := startSleep(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("daemon " + strconv.Itoa(p.pid()) + "\n")
	time.Sleep(time.Minute)
}

func TestADaemonDiesWithItsParentKilledOutright(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^TestParentOfADaemon$", "-test.count=1")
	parent.Env = append(os.Environ(), parentEnv+"="+t.TempDir())
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, convErr := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "daemon "))
	if err != nil || convErr != nil {
		_ = parent.Process.Kill()
		t.Fatalf("the parent said %q (%v)", line, err)
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
	if !alive(pid) {
		t.Fatalf("daemon %d is not running while its parent is", pid)
	}
	_ = parent.Process.Signal(syscall.SIGKILL) // as a test run killed outright
	_ = parent.Wait()
	for deadline := time.Now().Add(5 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("daemon %d still runs 5s after its parent was killed", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
