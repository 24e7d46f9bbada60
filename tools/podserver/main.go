// Command podserver is what runs in a pod with a real network
// (test/testcluster/podnet.go builds it and starts it; nobody runs it by
// hand):
//
//	podserver serve -name POD -health FILE -port 8080 [-port 8443]
//	podserver keep -owner PID -network K [-dir DIR]
//	podserver sweep
//
// serve, inside the pod's network namespace, answers every path with the
// pod's name (body and X-Pod header, and the address it was reached at), and
// /healthz as FILE says: 200 while it holds "ready", 503 otherwise ("not-ready",
// "terminating"), so that a test flips the pod's readiness at runtime by
// writing one word. It prints "listening" once every port is bound.
//
// keep removes the network namespaces, bridge and links of one network of a
// test process when that process ends, however it ends: it waits for its
// standard input to close (the kernel closes the pipe when the process dies,
// even by SIGKILL) and then deletes them with ip(8). A line "release" first
// means the process removed them itself.
//
// sweep removes what keepers could not (a keeper killed too): the namespaces
// and links named after a process that no longer exists.
//
// The names, shared with test/testcluster/podnet.go:
//
//	network namespace  k8stc-<pid>-<network>-<pod number>
//	bridge             k8stc<pid>b<network>
//	host end of veth   kv<pid>x<pod number>
//
// serve and keep exit when their standard input closes, so neither outlives
// the test process.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: podserver serve|keep [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "keep":
		err = keep(os.Args[2:])
	case "sweep":
		err = sweep()
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "podserver:", err)
		os.Exit(1)
	}
}

type ports []int

func (p *ports) String() string { return fmt.Sprint(*p) }
func (p *ports) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q: not in 1-65535", s)
	}
	*p = append(*p, n)
	return nil
}

func serve(args []string) error {
	flags := flag.NewFlagSet("serve", flag.ContinueOnError)
	name := flags.String("name", "", "the pod's name")
	health := flags.String("health", "", "file whose content decides /healthz: ready, not-ready or terminating")
	var listen ports
	flags.Var(&listen, "port", "port to serve on every address of the namespace (repeat for several)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *name == "" || *health == "" || len(listen) == 0 {
		return errors.New("serve needs -name, -health and at least one -port")
	}
	handler := http.NewServeMux()
	handler.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		state, err := os.ReadFile(*health)
		word := strings.TrimSpace(string(state))
		if err != nil {
			word = "unknown"
		}
		w.Header().Set("X-Pod", *name)
		if word != "ready" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, word)
	})
	handler.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Pod", *name)
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		fmt.Fprintf(w, "%s at %v\n", *name, local)
	})
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second}
	var listeners []net.Listener
	for _, port := range listen {
		// One socket for both families: [::] takes IPv4 too (bindv6only is 0
		// in a fresh namespace).
		l, err := net.Listen("tcp", net.JoinHostPort("::", strconv.Itoa(port)))
		if err != nil {
			return err
		}
		listeners = append(listeners, l)
	}
	errs := make(chan error, len(listeners))
	for _, l := range listeners {
		go func() { errs <- server.Serve(l) }()
	}
	fmt.Println("listening")
	stop := stopped()
	select {
	case err := <-errs:
		return err
	case <-stop:
	}
	// As a pod given SIGTERM: finish what is in flight, briefly.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = server.Shutdown(ctx)
	return nil
}

// stopped is closed on SIGTERM or SIGINT, or when standard input closes: the
// parent is gone.
func stopped() <-chan struct{} {
	done := make(chan struct{})
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	go func() {
		select {
		case <-signals:
		case <-eof:
		}
		close(done)
	}()
	return done
}

func keep(args []string) error {
	flags := flag.NewFlagSet("keep", flag.ContinueOnError)
	owner := flags.Int("owner", 0, "pid of the test process")
	network := flags.Int("network", -1, "number of the network in that process")
	dir := flags.String("dir", "", "directory of the pods' health files, removed too (named k8stc-pods-*)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *owner <= 0 || *network < 0 {
		return errors.New("keep needs -owner and -network")
	}
	// A Ctrl-C or SIGTERM meant for the test run must not stop the keeper
	// before the test process has gone: only the end of its input does.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	fmt.Println("keeping")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "release" {
			return nil
		}
	}
	bridge := fmt.Sprintf("k8stc%db%d", *owner, *network)
	vethPrefix := fmt.Sprintf("kv%dx", *owner)
	netnsPrefix := fmt.Sprintf("k8stc-%d-%d-", *owner, *network)
	err := removeAll(func(netns string) bool { return strings.HasPrefix(netns, netnsPrefix) }, func(link string) bool {
		// Every veth of the process: it is gone, so none is in use.
		return link == bridge || strings.HasPrefix(link, vethPrefix)
	})
	if *dir != "" && strings.HasPrefix(filepath.Base(*dir), "k8stc-pods-") {
		err = errors.Join(err, os.RemoveAll(*dir))
	}
	return err
}

var (
	netnsName  = regexp.MustCompile(`^k8stc-([0-9]+)-`)
	bridgeName = regexp.MustCompile(`^k8stc([0-9]+)b[0-9]+$`)
	vethName   = regexp.MustCompile(`^kv([0-9]+)x[0-9]+$`)
)

// sweep removes the namespaces and links of test processes that are gone.
func sweep() error {
	dead := func(name string, pattern *regexp.Regexp) bool {
		m := pattern.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, err := strconv.Atoi(m[1])
		return err == nil && pid > 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	return removeAll(func(netns string) bool { return dead(netns, netnsName) }, func(link string) bool {
		return dead(link, bridgeName) || dead(link, vethName)
	})
}

// removeAll deletes the namespaces that match, after killing what runs in
// them, then the host links that match.
func removeAll(netnsMatches, linkMatches func(string) bool) error {
	var errs []error
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if !netnsMatches(e.Name()) {
			continue
		}
		if out, err := exec.Command("ip", "netns", "pids", e.Name()).Output(); err == nil {
			for _, field := range strings.Fields(string(out)) {
				if pid, err := strconv.Atoi(field); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if out, err := exec.Command("ip", "netns", "delete", e.Name()).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns delete %s: %w: %s", e.Name(), err, out))
		}
	}
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		if !linkMatches(l.Name()) {
			continue
		}
		if out, err := exec.Command("ip", "link", "delete", l.Name()).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find") {
			errs = append(errs, fmt.Errorf("ip link delete %s: %w: %s", l.Name(), err, out))
		}
	}
	return errors.Join(errs...)
}
