// Package tied starts helper processes of the tests (a pod's server, HAProxy,
// nginx) so that they die with the process that started them.
//
// The parent-death signal (Pdeathsig) is delivered when the thread that
// forked the child exits, not the process: a child started from a goroutine
// whose thread the Go runtime later retires (a thread left locked by an
// exited goroutine) would be killed at a random moment. Start forks every
// child from one goroutine locked to its thread for the life of the process,
// so the signal comes exactly when the process dies.
package tied

import (
	"errors"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

var (
	requests = make(chan func())
	once     sync.Once
)

func starter() {
	runtime.LockOSThread() // never unlocked: this thread lives as long as the process
	for start := range requests {
		start()
	}
}

// Start starts cmd in a process group of its own (so that a signal to the
// group reaches whatever it forks) with SIGKILL as its parent-death signal,
// from the thread that never exits.
func Start(cmd *exec.Cmd) error {
	return start(cmd, syscall.SIGKILL)
}

// treeGuard is the shell StartTree runs a program under, the program and its
// arguments as "$@". SIGTERM, its parent-death signal, kills the whole
// process group at once; when the program exits, whatever it left in the
// group gets SIGTERM (the shell ignores it by then) and the shell exits with
// the program's status.
const treeGuard = `trap 'kill -KILL 0' TERM
"$@" &
wait $!
status=$?
trap '' TERM
kill -TERM 0
exit $status`

// StartTree is Start for a program whose children outlive it: nginx's
// workers go on serving when their master is killed, and the parent-death
// signal of the master does not reach them (it is not inherited). cmd runs
// under a shell, the leader of the new process group, whose parent-death
// signal is SIGTERM: when the process that started it dies, the shell kills
// the group (the program, its children, itself) with SIGKILL; when the
// program exits, the shell ends what it left in the group. cmd.Process is the
// shell; the program is its only child.
func StartTree(cmd *exec.Cmd) error {
	if cmd.Err != nil {
		return cmd.Err
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		return errors.New("no sh on PATH, which runs the guard of the process group")
	}
	cmd.Args = append([]string{"sh", "-c", treeGuard, "sh", cmd.Path}, cmd.Args[1:]...)
	cmd.Path = sh
	return start(cmd, syscall.SIGTERM)
}

func start(cmd *exec.Cmd, deathSignal syscall.Signal) error {
	once.Do(func() { go starter() })
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = deathSignal
	done := make(chan error, 1)
	requests <- func() { done <- cmd.Start() }
	return <-done
}

// KillGroup sends sig to the process group of a command started by Start.
func KillGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
