package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// RusageWrap runs `rusage-wrap LOG PROGRAM [ARGS...]`: PROGRAM with the
// wrapper's standard streams and environment, so that Terraform talks to it
// as to the provider itself, and appends to LOG, when it exits, what the
// kernel accounted to it:
//
//	PEAK_RSS_KIB USER_CPU_US SYSTEM_CPU_US WALL_MS
//
// Terraform starts a provider several times per command, and only the parent
// of a process can read its totals once it has gone; sampling /proc would
// miss short-lived processes and the last moments of the others.
func RusageWrap(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: harness rusage-wrap LOG PROGRAM [ARGS...]")
		return 2
	}
	log, program := args[0], args[1]
	cmd := exec.Command(program, args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "harness rusage-wrap:", err)
		return 1
	}
	// Terraform stops its providers with signals too (on interrupt); they
	// must reach the provider, not only this wrapper.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		for s := range signals {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		fmt.Fprintln(os.Stderr, "harness rusage-wrap:", err)
		return 1
	}
	if usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		// One short write with O_APPEND: concurrent wrappers do not interleave.
		line := fmt.Sprintf("%d %d %d %d\n", usage.Maxrss, usage.Utime.Nano()/1000, usage.Stime.Nano()/1000, time.Since(start).Milliseconds())
		if f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			_, _ = f.WriteString(line)
			_ = f.Close()
		}
	}
	return cmd.ProcessState.ExitCode()
}
