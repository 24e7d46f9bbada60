// Package traffic sends real requests in the tests, the demo and the bench:
// an HAProxy started on a backend that Terraform rendered, and an nginx on
// an upstream it rendered, each reloaded the way production reloads it, and
// a bounded load client. Requests go only to
// loopback and to the test pods' addresses (10.244.0.0/16, fd00:10:244::/48),
// which live in network namespaces the tests create
// (internal/testcluster/podnet.go).
package traffic

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigie/terraform-provider-k8s/internal/tied"
)

// HAProxyPath is the haproxy binary on PATH, or an error that names what is
// missing and how to get it.
func HAProxyPath() (string, error) {
	path, err := exec.LookPath("haproxy")
	if err != nil {
		return "", errors.New("no haproxy on PATH (Debian: apt-get install haproxy)")
	}
	return path, nil
}

// HAProxyOptions say what to run.
type HAProxyOptions struct {
	// Dir holds the configuration, the log, haproxy.pid (the master's pid)
	// and the master socket (in a temporary directory of its own when the
	// path would be too long for a unix socket).
	Dir string
	// Backend is the rendered backend file (one `backend NAME` section and
	// its servers, as examples/pools/haproxy renders it). HAProxy reads it
	// anew on each reload: rewrite it, then Reload.
	Backend string
	// Port of the frontend on 127.0.0.1 and [::1]; 0 picks a free one.
	Port int
	// Bound of each start, reload and stop; 0 is 20 s.
	Bound time.Duration
	// Defaults are extra lines of the defaults section, e.g.
	// "default-server inter 500ms fall 2 rise 1" for faster health checks.
	Defaults []string
}

// HAProxy is a running HAProxy in master-worker mode: a reload starts new
// workers on the sockets the master holds, and the old workers finish the
// connections they have, so a reload drops nothing.
type HAProxy struct {
	opts        HAProxyOptions
	bin         string
	config      string
	socket      string
	socketDir   string
	log         string
	backendName string
	cmd         *exec.Cmd
	done        chan struct{}
}

// StartHAProxy writes DIR/haproxy.cfg (global settings, defaults and a
// frontend on 127.0.0.1:PORT and [::1]:PORT whose default backend is the one
// of the Backend file), checks it with haproxy -c, and starts
// `haproxy -W -db -S master.sock -f DIR/haproxy.cfg -f BACKEND`. It
// returns once a worker serves. HAProxy dies with the calling process.
func StartHAProxy(ctx context.Context, opts HAProxyOptions) (*HAProxy, error) {
	bin, err := HAProxyPath()
	if err != nil {
		return nil, err
	}
	if opts.Bound == 0 {
		opts.Bound = 20 * time.Second
	}
	name, err := backendName(opts.Backend)
	if err != nil {
		return nil, err
	}
	if opts.Port == 0 {
		if opts.Port, err = freePort(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	// HAProxy takes a master socket path of at most 97 bytes (a unix
	// socket's 107, less the suffix of the temporary name it binds first):
	// in Dir when it fits, else in a temporary directory of its own.
	socketDir := ""
	if len(filepath.Join(opts.Dir, "master.sock")) > 97 {
		if socketDir, err = os.MkdirTemp("", "haproxy-"); err != nil {
			return nil, err
		}
	}
	h := &HAProxy{
		opts: opts, bin: bin, backendName: name, socketDir: socketDir,
		config: filepath.Join(opts.Dir, "haproxy.cfg"),
		socket: filepath.Join(cmp.Or(socketDir, opts.Dir), "master.sock"),
		log:    filepath.Join(opts.Dir, "haproxy.log"),
	}
	started := false
	defer func() {
		if !started && socketDir != "" {
			_ = os.RemoveAll(socketDir)
		}
	}()
	if err := os.WriteFile(h.config, []byte(h.frontendConfig()), 0o600); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Bound)
	defer cancel()
	if err := h.Check(ctx); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(h.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-W", "-db", "-S", h.socket, "-f", h.config, "-f", opts.Backend)
	cmd.Stdout, cmd.Stderr = log, log
	if err := tied.Start(cmd); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("start haproxy: %w", err)
	}
	h.cmd, h.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		if socketDir != "" {
			_ = os.RemoveAll(socketDir)
		}
		close(h.done)
	}()
	// For a reload command run by someone else (a provisioner, a companion):
	// kill -USR2 "$(cat DIR/haproxy.pid)".
	if err := os.WriteFile(filepath.Join(opts.Dir, "haproxy.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		tied.KillGroup(cmd, syscall.SIGKILL)
		<-h.done
		return nil, err
	}
	for {
		procs, err := h.processes(ctx)
		if err == nil && len(procs.workers) > 0 {
			started = true
			return h, nil
		}
		select {
		case <-h.done:
			return nil, fmt.Errorf("haproxy exited at start: %s", h.LogTail())
		case <-ctx.Done():
			h.Stop()
			return nil, fmt.Errorf("haproxy has no worker after %s (%w): %s", opts.Bound, errors.Join(err, ctx.Err()), h.LogTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (h *HAProxy) frontendConfig() string {
	var extra strings.Builder
	for _, line := range h.opts.Defaults {
		extra.WriteString("    " + line + "\n")
	}
	return fmt.Sprintf(`# Written by internal/traffic: the frontend of the tests; the backend is the
# file Terraform rendered (%s), loaded after this one.
global
    nbthread 1
    # After a reload, old workers finish their connections within this bound.
    hard-stop-after 30s

defaults
    mode http
    option http-server-close
    # A connection refused by a server is retried on another one, as
    # production configurations do.
    retries 3
    option redispatch 1
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    timeout http-keep-alive 5s
%[4]s
frontend traffic
    bind 127.0.0.1:%[2]d
    bind [::1]:%[2]d
    default_backend %[3]s
`, h.opts.Backend, h.opts.Port, h.backendName, extra.String())
}

var backendLine = regexp.MustCompile(`(?m)^backend[ \t]+(\S+)`)

// backendName is the name of the first backend section of a file.
func backendName(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	m := backendLine.FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("%s has no backend section", path)
	}
	return string(m[1]), nil
}

// freePort is a port free on both 127.0.0.1 and [::1].
func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			_ = l.Close()
			return 0, fmt.Errorf("listener address %v is not TCP", l.Addr())
		}
		port := addr.Port
		l6, err6 := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(port)))
		_ = l.Close()
		if err6 == nil {
			_ = l6.Close()
			return port, nil
		}
	}
	return 0, errors.New("no port free on both 127.0.0.1 and [::1]")
}

// Port is the frontend's port.
func (h *HAProxy) Port() int { return h.opts.Port }

// URL is the frontend's address over IPv4 (127.0.0.1) or IPv6 ([::1]).
func (h *HAProxy) URL(ipv6 bool) string { return loopbackURL(ipv6, h.opts.Port) }

func loopbackURL(ipv6 bool, port int) string {
	host := "127.0.0.1"
	if ipv6 {
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/"
}

// PID is the master's pid.
func (h *HAProxy) PID() int { return h.cmd.Process.Pid }

// ReloadCommand is a shell command that reloads this HAProxy (what a
// companion or a local-exec provisioner runs after rewriting the backend):
// a check of the files, then SIGUSR2 to the master, which starts new workers
// on the sockets it holds while the old ones finish their connections. It
// returns before the new workers serve; nothing is dropped meanwhile.
func (h *HAProxy) ReloadCommand() string {
	return fmt.Sprintf("%s -c -q -f %s -f %s && kill -USR2 %d", h.bin, h.config, h.opts.Backend, h.PID())
}

// Check runs haproxy -c on the configuration and the backend file as they
// are now.
func (h *HAProxy) Check(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, h.bin, "-c", "-f", h.config, "-f", h.opts.Backend).CombinedOutput()
	if err != nil {
		return fmt.Errorf("haproxy -c: %w\n%s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Reload checks the files, signals the master, and waits until the old
// workers are gone from its list of current workers and a new one is there:
// from then on every new connection gets the new backend. A configuration
// that does not check is an error, and the running workers go on as they
// were.
func (h *HAProxy) Reload(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.opts.Bound)
	defer cancel()
	if err := h.Check(ctx); err != nil {
		return err
	}
	// While another reload is under way (a provisioner's ReloadCommand), the
	// master re-executes and its socket refuses connections for a moment.
	before, err := h.processes(ctx)
	for err != nil {
		select {
		case <-h.done:
			return fmt.Errorf("haproxy exited: %s", h.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("haproxy master not answering after %s (%w): %s", h.opts.Bound, errors.Join(err, ctx.Err()), h.LogTail())
		case <-time.After(20 * time.Millisecond):
		}
		before, err = h.processes(ctx)
	}
	if err := syscall.Kill(h.PID(), syscall.SIGUSR2); err != nil {
		return fmt.Errorf("signal the haproxy master: %w", err)
	}
	for {
		now, err := h.processes(ctx)
		if err == nil {
			if now.failedReloads > before.failedReloads {
				return fmt.Errorf("haproxy refused the reload: %s", h.LogTail())
			}
			if now.reloads > before.reloads && len(now.workers) > 0 && !overlap(now.workers, before.workers) {
				return nil
			}
		}
		select {
		case <-h.done:
			return fmt.Errorf("haproxy exited during a reload: %s", h.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("haproxy reload not done after %s (%w): %s", h.opts.Bound, errors.Join(err, ctx.Err()), h.LogTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func overlap(a, b []int) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

type processList struct {
	reloads, failedReloads int
	workers, oldWorkers    []int
}

var masterLine = regexp.MustCompile(`^\d+\s+master\s+(\d+)\s+\[failed:\s*(\d+)\]`)

// processes asks the master CLI (`show proc`) for the workers.
func (h *HAProxy) processes(ctx context.Context) (processList, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", h.socket)
	if err != nil {
		return processList{}, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	// The master answers once the client has said all it will say.
	if _, err := io.WriteString(conn, "show proc\n"); err != nil {
		return processList{}, err
	}
	if unix, ok := conn.(*net.UnixConn); ok {
		if err := unix.CloseWrite(); err != nil {
			return processList{}, err
		}
	}
	var list processList
	section := ""
	lines := bufio.NewScanner(conn)
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "# ") {
			section = strings.TrimPrefix(line, "# ")
			continue
		}
		if m := masterLine.FindStringSubmatch(line); m != nil {
			list.reloads, _ = strconv.Atoi(m[1])
			list.failedReloads, _ = strconv.Atoi(m[2])
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[1] != "worker" {
			continue
		}
		pid, err := strconv.Atoi(fields[0])
		if err != nil {
			continue
		}
		switch section {
		case "workers":
			list.workers = append(list.workers, pid)
		case "old workers":
			list.oldWorkers = append(list.oldWorkers, pid)
		}
	}
	if err := lines.Err(); err != nil {
		return processList{}, err
	}
	return list, nil
}

// Workers are the pids of the current and the old workers.
func (h *HAProxy) Workers(ctx context.Context) (current, old []int, err error) {
	list, err := h.processes(ctx)
	return list.workers, list.oldWorkers, err
}

// Stop stops HAProxy (SIGTERM to its process group, SIGKILL after the
// bound) and returns once the master has exited; its workers exit with it.
func (h *HAProxy) Stop() {
	if h == nil || h.cmd == nil {
		return
	}
	select {
	case <-h.done:
		return
	default:
	}
	tied.KillGroup(h.cmd, syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(h.opts.Bound):
		tied.KillGroup(h.cmd, syscall.SIGKILL)
		<-h.done
	}
}

// LogTail is the end of HAProxy's log.
func (h *HAProxy) LogTail() string {
	data, err := os.ReadFile(h.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}
