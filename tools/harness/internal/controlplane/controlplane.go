// Package controlplane is the commands of the local control plane
// (test/testcluster): up starts it in the background under a
// supervisor (serve), down stops it and deletes its state, build builds (or
// finds) its binaries, pin rewrites tools/cluster for another Kubernetes
// version.
package controlplane

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// Options are the flags of up, serve and down: the state directory, the
// Kubernetes version ("": the pinned one) and whether to write an audit
// log.
type Options struct {
	Dir, Version string
	Audit        bool
}

// The control plane started by `up` must outlive the command, but its
// daemons die with the process that started them. So `up` starts a
// supervisor (`serve`, in a session of its own) that runs the control plane
// until `down` sends it SIGTERM, and waits until it says ready.
const pidFile = "harness.pid"

// Up starts the control plane of f in the background (its supervisor,
// serve) and prints where it is.
func Up(ctx context.Context, f Options) error {
	if pid, ok := supervisor(f.Dir); ok {
		fmt.Printf("cluster already running (supervisor pid %d); make cluster-down stops it\n", pid)
		printSummary(f.Dir)
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.Dir), 0o755); err != nil {
		return err
	}
	log, err := os.CreateTemp("", "harness-up-*.log")
	if err != nil {
		return err
	}
	defer os.Remove(log.Name())
	defer log.Close()
	ready, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	serveArgs := []string{"serve", "-dir", f.Dir, "-version", f.Version}
	if f.Audit {
		serveArgs = append(serveArgs, "-audit")
	}
	cmd := exec.Command(self, serveArgs...)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = readyW, log, nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	_ = readyW.Close()
	fmt.Fprintln(os.Stderr, "starting the local control plane (the first run builds it: ~7 min on 2 cores)...")
	done := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(ready); done <- b }()
	select {
	case out := <-done:
		if !strings.HasPrefix(string(out), "ready") {
			_ = cmd.Wait()
			logText, _ := os.ReadFile(log.Name())
			return fmt.Errorf("the control plane did not start:\n%s", logText)
		}
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		return ctx.Err()
	}
	logText, _ := os.ReadFile(log.Name())
	os.Stderr.Write(logText)
	_ = cmd.Process.Release()
	printSummary(f.Dir)
	return nil
}

func printSummary(dir string) {
	kubeconfig := filepath.Join(dir, testcluster.KubeconfigFile)
	fmt.Printf("kubeconfig: %s\n", kubeconfig)
	if server, err := os.ReadFile(filepath.Join(dir, "server")); err == nil {
		fmt.Printf("API server: %s\n", strings.TrimSpace(string(server)))
	}
}

// Serve runs the control plane until SIGTERM or SIGINT. Its stdout is the
// pipe `up` waits on: "ready" once the cluster is, then closed.
func Serve(ctx context.Context, f Options) error {
	cluster, err := testcluster.Start(ctx, testcluster.Options{Dir: f.Dir, Version: f.Version, Audit: f.Audit, Log: os.Stderr})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	if err := os.WriteFile(filepath.Join(f.Dir, "server"), []byte(cluster.Server+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(f.Dir, pidFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return err
	}
	fmt.Println("ready")
	_ = os.Stdout.Close()
	// The log of `up` is gone once it returns: later messages go nowhere.
	if devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		_ = syscall.Dup2(int(devnull.Fd()), 2)
	}
	<-ctx.Done()
	return nil
}

// supervisor is the pid of the running `serve` of dir, if any. A pid counts
// only while its command line is a serve of that directory, so that a
// recycled pid is never taken for it.
func supervisor(dir string) (int, bool) {
	text, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(text)))
	if err != nil {
		return 0, false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, false
	}
	argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	return pid, len(argv) > 3 && argv[1] == "serve" && argv[3] == dir
}

// Down stops the control plane of dir, if one runs, and deletes dir.
func Down(dir string) error {
	if pid, ok := supervisor(dir); ok {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		// The supervisor stops the daemons within their bounds; past this
		// one it is killed, and its daemons die with it.
		deadline := time.Now().Add(60 * time.Second)
		for {
			if _, ok := supervisor(dir); !ok {
				break
			}
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				time.Sleep(time.Second)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		fmt.Println("stopped the local control plane")
	} else {
		fmt.Println("no local control plane running")
	}
	if _, err := os.Stat(dir); err == nil {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		fmt.Printf("removed %s\n", dir)
	}
	return nil
}

// Build builds (or finds) the control plane's binaries of Kubernetes
// version ("": the pinned one) and prints their directory.
func Build(ctx context.Context, root, version string) error {
	bin, built, err := testcluster.Binaries(ctx, root, version, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Kubernetes %s control plane in %s\n", built, bin)
	fmt.Println(bin)
	return nil
}

// Pin rewrites tools/cluster for another Kubernetes version: the one place
// where the pinned version is written.
func Pin(ctx context.Context, root, version string) error {
	tmp, err := os.MkdirTemp("", "pin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := testcluster.GenerateModule(ctx, tmp, root, version); err != nil {
		return err
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(tmp, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, "tools", "cluster", name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("tools/cluster now pins Kubernetes %s\n", version)
	return nil
}
