// Package traffic sends real requests in the tests, the demo and the bench:
// an HAProxy started on a backend that Terraform rendered, and an nginx on
// an upstream it rendered, each reloaded the way production reloads it, and
// a bounded load client. Requests go only to
// loopback and to the test pods' addresses (10.244.0.0/16, fd00:10:244::/48),
// which live in network namespaces the tests create
// (test/testcluster/podnet.go).
package traffic

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/tied"
)

// HAProxyPath is the haproxy binary on PATH, or an error that names what is
// missing and how to get it.
func HAProxyPath() (string, error) { return lookPath("haproxy", "apt-get install haproxy") }

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
	// Port of the frontend on 127.0.0.1 and [::1] and Bound of each start,
	// reload and stop: as NginxOptions'.
	Port  int
	Bound time.Duration
	// Defaults are extra lines of the defaults section, e.g.
	// "default-server inter 500ms fall 2 rise 1" for faster health checks.
	Defaults []string
}

// HAProxyLostSockets is what HAProxy's master logs when a reload could not
// take over the old worker's listening sockets: it asks the worker for them
// over their socketpair and gives up after a second (a worker stopped, or
// not scheduled, for that long), and the new worker binds sockets of its own.
// The connections waiting on the old worker's sockets are then reset as it
// closes them: a reload that is not seamless, whatever the pool.
const HAProxyLostSockets = "Failed to get the sockets from the old process"

// HAProxy is a running HAProxy in master-worker mode: a reload starts new
// workers on the sockets the master holds, and the old workers finish the
// connections they have, so a reload drops nothing.
type HAProxy struct {
	*lbProcess
	opts HAProxyOptions
	// socket is the master CLI, stats the runtime API of the workers.
	socket, stats string
}

// StartHAProxy writes DIR/haproxy.cfg (global settings, defaults and a
// frontend on 127.0.0.1:PORT and [::1]:PORT whose default backend is the one
// of the Backend file; the lines examples/pools/haproxy/haproxy.cfg asks:
// a runtime API socket, a server-state-file that the workers of a reload
// load, v6only on the IPv6 bind), checks it with haproxy -c, and starts
// `haproxy -W -db -S master.sock -f DIR/haproxy.cfg -f BACKEND`. It
// returns once a worker serves. HAProxy dies with the calling process.
func StartHAProxy(ctx context.Context, opts HAProxyOptions) (*HAProxy, error) {
	bin, name, err := prepareStart(HAProxyPath, &opts.Dir, &opts.Port, &opts.Bound, &opts.Backend, backendLine, "backend section", "")
	if err != nil {
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
	log := filepath.Join(opts.Dir, "haproxy.log")
	h := &HAProxy{opts: opts, socket: filepath.Join(cmp.Or(socketDir, opts.Dir), "master.sock"),
		stats: filepath.Join(cmp.Or(socketDir, opts.Dir), "admin.sock")}
	h.lbProcess = &lbProcess{
		name: "haproxy", bin: bin, dir: opts.Dir, port: opts.Port, bound: opts.Bound, pool: name,
		config: filepath.Join(opts.Dir, "haproxy.cfg"), logs: []string{log}, kind: h,
	}
	removeSocketDir := func() {
		if socketDir != "" {
			_ = os.RemoveAll(socketDir)
		}
	}
	// For a reload command run by someone else (a provisioner, a companion):
	// kill -USR2 "$(cat DIR/haproxy.pid)".
	writePID := func() error {
		return os.WriteFile(h.PIDFile(), []byte(strconv.Itoa(h.PID())+"\n"), 0o600)
	}
	args := []string{"-W", "-db", "-S", h.socket, "-f", h.config, "-f", opts.Backend}
	if err := h.start(ctx, h.frontendConfig(), args, log, false, writePID, removeSocketDir); err != nil {
		if h.cmd == nil {
			removeSocketDir()
		}
		return nil, err
	}
	return h, nil
}

func (h *HAProxy) frontendConfig() string {
	var extra strings.Builder
	for _, line := range h.opts.Defaults {
		extra.WriteString("    " + line + "\n")
	}
	return fmt.Sprintf(`# Written by test/traffic: the frontend of the tests; the backend is the
# file Terraform rendered (%s), loaded after this one.
global
    nbthread 1
    stats socket %[5]s mode 600 level admin
    # Written by SaveStateCommand before a reload, read by the new workers.
    server-state-file %[6]s
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
    load-server-state-from-file global
%[4]s
frontend traffic
    bind 127.0.0.1:%[2]d
    # The kernel makes a socket bound to ::1 v6only: said here, a reload's
    # new worker takes it over from the old one instead of binding its own
    # (HAProxy 2.6), and nothing waiting on it is reset.
    bind [::1]:%[2]d v6only
    default_backend %[3]s
`, h.opts.Backend, h.opts.Port, h.pool, extra.String(), h.stats, h.ServerStateFile())
}

var backendLine = regexp.MustCompile(`(?m)^backend[ \t]+(\S+)`)

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

// CheckCommand is the shell command that checks this HAProxy's files as
// they are (haproxy -c): the check_command of examples/pools/haproxy.
func (h *HAProxy) CheckCommand() string {
	return shellWords(append([]string{h.bin, "-q"}, h.checkArgs()...))
}

// SignalCommand is the shell command that reloads this HAProxy without a
// check: SIGUSR2 to the master, read from its pid file.
func (h *HAProxy) SignalCommand() string {
	return "kill -USR2 \"$(cat " + shellWords([]string{h.PIDFile()}) + ")\""
}

// ServerStateFile is the server-state-file of this HAProxy's configuration.
func (h *HAProxy) ServerStateFile() string { return filepath.Join(h.opts.Dir, "server-state") }

// SaveStateCommand is the shell command that saves what the workers' health
// checks learned into ServerStateFile (show servers state on the runtime
// API, with socat): the save_state_command of examples/pools/haproxy.
func (h *HAProxy) SaveStateCommand() string {
	return "echo 'show servers state' | socat stdio " + shellWords([]string{"unix-connect:" + h.stats}) + " > " + shellWords([]string{h.ServerStateFile()})
}

func (h *HAProxy) checkArgs() []string {
	return []string{"-c", "-f", h.config, "-f", h.opts.Backend}
}

func (h *HAProxy) signalReload() error { return syscall.Kill(h.PID(), syscall.SIGUSR2) }

// reloaded: the master counts one reload more, none failed, and its current
// workers are all new.
func (h *HAProxy) reloaded(before, now lbState) (bool, error) {
	if now.failedReloads > before.failedReloads {
		return false, refusedError{"haproxy refused the reload: " + h.LogTail()}
	}
	return now.reloads > before.reloads && len(now.workers) > 0 && !overlap(now.workers, before.workers), nil
}

func (h *HAProxy) stop() { tied.KillGroup(h.cmd, syscall.SIGTERM) }

var masterLine = regexp.MustCompile(`^\d+\s+master\s+(\d+)\s+\[failed:\s*(\d+)\]`)

// state asks the master CLI (`show proc`) for the workers. While a reload
// is under way, the master re-executes and its socket refuses connections
// for a moment.
func (h *HAProxy) state(ctx context.Context) (lbState, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", h.socket)
	if err != nil {
		return lbState{}, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	// The master answers once the client has said all it will say.
	if _, err := io.WriteString(conn, "show proc\n"); err != nil {
		return lbState{}, err
	}
	if unix, ok := conn.(*net.UnixConn); ok {
		if err := unix.CloseWrite(); err != nil {
			return lbState{}, err
		}
	}
	var list lbState
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
		if section == "workers" {
			list.workers = append(list.workers, pid)
		}
	}
	if err := lines.Err(); err != nil {
		return lbState{}, err
	}
	return list, nil
}
