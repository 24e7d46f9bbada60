// Command harness drives the project's local tooling: the local control plane
// (internal/testcluster) for make cluster-up, cluster-down and demo, the
// pinned CLIs of the acceptance tests, and make bench. It is a module of its
// own under tools/, like the other build-only modules, so that `go install
// ./...` of the provider never installs it; the Makefile builds it into bin/.
//
//	harness up [-dir .cluster] [-version v1.X.Y] [-audit]   start the control plane in the background
//	harness down [-dir .cluster]                            stop it and delete its state
//	harness cli NAME                                        print the path of an acceptance-test CLI (building it if needed)
//	harness helm                                            print the path of helm (building it from tools/helm if needed)
//	harness demo -kubeconfig FILE [-namespace demo] [-network [-hold FILE]]
//	                                                        the demo's Service and pods in every state (-network: pods that answer)
//	harness haproxy -dir DIR -backend FILE [-ready FILE]    HAProxy on a rendered backend until stopped; SIGHUP reloads
//	harness bench [flags]                                   measure; writes bench/results.md (see bench/README.md)
//	harness bench-sync [flags]                              the sync companion's part alone (bench -only sync)
//	harness pin VERSION                                     rewrite tools/cluster for another Kubernetes version
//	harness build-control-plane [-version v1.X.Y]           build (or find) the control plane binaries
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigie/terraform-provider-k8s/internal/testcluster"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	if os.Args[1] == "rusage-wrap" {
		// Before any signal handling of its own: it forwards signals to the
		// program it wraps.
		os.Exit(rusageWrap(os.Args[2:]))
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

func run(command string, args []string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var err error
	switch command {
	case "up":
		err = up(ctx, args)
	case "serve":
		err = serve(ctx, args)
	case "down":
		err = down(args)
	case "cli":
		err = cli(ctx, args)
	case "helm":
		err = helm(ctx)
	case "demo":
		err = demo(ctx, args)
	case "haproxy":
		err = haproxy(ctx, args)
	case "bench":
		err = bench(ctx, args)
	case "bench-sync":
		err = bench(ctx, append([]string{"-only", "sync"}, args...))
	case "pin":
		err = pin(ctx, args)
	case "build-control-plane":
		err = buildControlPlane(ctx, args)
	default:
		usage()
	}
	return err
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: harness up|down|cli|helm|demo|haproxy|bench|bench-sync|pin|build-control-plane [flags]  (see tools/harness/main.go)`)
	os.Exit(2)
}

func repoRoot() string {
	root, err := testcluster.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
	return root
}

type clusterFlags struct {
	dir, version string
	audit        bool
}

func parseClusterFlags(name string, args []string, withStart bool) clusterFlags {
	var f clusterFlags
	flags := flag.NewFlagSet(name, flag.ExitOnError)
	flags.StringVar(&f.dir, "dir", filepath.Join(repoRoot(), ".cluster"), "state directory of the local control plane")
	if withStart {
		flags.StringVar(&f.version, "version", os.Getenv("K8S_TF_K8S_VERSION"), "Kubernetes version (default: the one pinned in tools/cluster/go.mod)")
		flags.BoolVar(&f.audit, "audit", false, "write an audit log (one line per request) to DIR/audit.log")
	}
	_ = flags.Parse(args)
	return f
}

// The control plane started by `up` must outlive the command, but its
// daemons die with the process that started them. So `up` starts a
// supervisor (`serve`, in a session of its own) that runs the control plane
// until `down` sends it SIGTERM, and waits until it says ready.
const pidFile = "harness.pid"

func up(ctx context.Context, args []string) error {
	f := parseClusterFlags("up", args, true)
	if pid, ok := supervisor(f.dir); ok {
		fmt.Printf("cluster already running (supervisor pid %d); make cluster-down stops it\n", pid)
		printSummary(f.dir)
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.dir), 0o755); err != nil {
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
	serveArgs := []string{"serve", "-dir", f.dir, "-version", f.version}
	if f.audit {
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
	printSummary(f.dir)
	return nil
}

func printSummary(dir string) {
	kubeconfig := filepath.Join(dir, testcluster.KubeconfigFile)
	fmt.Printf("kubeconfig: %s\n", kubeconfig)
	if server, err := os.ReadFile(filepath.Join(dir, "server")); err == nil {
		fmt.Printf("API server: %s\n", strings.TrimSpace(string(server)))
	}
}

// serve runs the control plane until SIGTERM or SIGINT. Its stdout is the
// pipe `up` waits on: "ready" once the cluster is, then closed.
func serve(ctx context.Context, args []string) error {
	f := parseClusterFlags("serve", args, true)
	cluster, err := testcluster.Start(ctx, testcluster.Options{Dir: f.dir, Version: f.version, Audit: f.audit, Log: os.Stderr})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	if err := os.WriteFile(filepath.Join(f.dir, "server"), []byte(cluster.Server+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(f.dir, pidFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
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

func down(args []string) error {
	f := parseClusterFlags("down", args, false)
	if pid, ok := supervisor(f.dir); ok {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		// The supervisor stops the daemons within their bounds; past this
		// one it is killed, and its daemons die with it.
		deadline := time.Now().Add(60 * time.Second)
		for {
			if _, ok := supervisor(f.dir); !ok {
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
	if _, err := os.Stat(f.dir); err == nil {
		if err := os.RemoveAll(f.dir); err != nil {
			return err
		}
		fmt.Printf("removed %s\n", f.dir)
	}
	return nil
}

func buildControlPlane(ctx context.Context, args []string) error {
	f := parseClusterFlags("build-control-plane", args, true)
	bin, version, err := testcluster.Binaries(ctx, repoRoot(), f.version, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Kubernetes %s control plane in %s\n", version, bin)
	fmt.Println(bin)
	return nil
}

// pin rewrites tools/cluster for another Kubernetes version: the one place
// where the pinned version is written.
func pin(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: harness pin v1.X.Y")
	}
	root := repoRoot()
	tmp, err := os.MkdirTemp("", "pin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := testcluster.GenerateModule(ctx, tmp, root, args[0]); err != nil {
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
	fmt.Printf("tools/cluster now pins Kubernetes %s\n", args[0])
	return nil
}
