// Package tied starts helper processes of the tests (a pod's server, HAProxy)
// so that they die with the process that started them.
//
// The parent-death signal (Pdeathsig) is delivered when the thread that
// forked the child exits, not the process: a child started from a goroutine
// whose thread the Go runtime later retires (a thread left locked by an
// exited goroutine) would be killed at a random moment. Start forks every
// child from one goroutine locked to its thread for the life of the process,
// so the signal comes exactly when the process dies.
package tied

import (
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
	once.Do(func() { go starter() })
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
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
