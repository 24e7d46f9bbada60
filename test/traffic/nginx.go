package traffic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/tied"
)

// NginxPath is the nginx binary on PATH, or an error that names what is
// missing and how to get it.
func NginxPath() (string, error) {
	return lookPath("nginx", "apt-get install nginx, which installs /usr/sbin/nginx")
}

// NginxOptions say what to run.
type NginxOptions struct {
	// Dir holds the configuration (nginx.conf), the error log, nginx.pid
	// (written by the master) and nginx's temporary directories: nginx runs
	// with Dir as its prefix, and touches nothing of the machine's.
	Dir string
	// Upstream is the rendered upstream file (one `upstream NAME` block and
	// its servers, as examples/pools/nginx renders it). nginx reads it anew
	// on each reload: rewrite it, then Reload.
	Upstream string
	// Port of the server on 127.0.0.1 and [::1]; 0 picks a free one.
	Port int
	// Bound of each start, reload and stop; 0 is 20 s.
	Bound time.Duration
}

// Nginx is a running nginx: a master that does not daemonize and one
// worker. A reload (SIGHUP to the master) checks the configuration, starts a
// new worker on the sockets the master holds and asks the old one to
// finish the connections it has, so a reload drops nothing.
type Nginx struct {
	*lbProcess
	opts   NginxOptions
	master int
}

// StartNginx writes DIR/nginx.conf (a master in the foreground with one
// worker, the error log and the temporary directories in Dir, the Upstream
// file included, and a server on 127.0.0.1:PORT and [::1]:PORT that proxies
// to that upstream), checks it with nginx -t, and starts
// `nginx -p DIR/ -e DIR/error.log -c DIR/nginx.conf`. It returns once a
// worker runs. nginx, its worker included, dies with the calling process.
func StartNginx(ctx context.Context, opts NginxOptions) (*Nginx, error) {
	bin, name, err := prepareStart(NginxPath, &opts.Dir, &opts.Port, &opts.Bound, &opts.Upstream, upstreamLine, "upstream block", "temp")
	if err != nil {
		return nil, err
	}
	n := newNginx(bin, opts)
	n.pool = name
	// A pid file of an nginx gone: the wait for the master must not take
	// it for the master of this one.
	_ = os.Remove(n.PIDFile())
	// The master logs to the error log; its standard streams (nginx.out)
	// take what it says before it has opened it. nginx's workers outlive a
	// master killed with SIGKILL, and the master's parent-death signal does
	// not reach them: the whole process group goes with the calling process
	// (tied.StartTree).
	if err := n.start(ctx, n.mainConfig(), n.flags(), n.logs[0], true, nil, nil); err != nil {
		return nil, err
	}
	return n, nil
}

func newNginx(bin string, opts NginxOptions) *Nginx {
	n := &Nginx{opts: opts}
	n.lbProcess = &lbProcess{
		name: "nginx", bin: bin, dir: opts.Dir, port: opts.Port, bound: opts.Bound,
		config: filepath.Join(opts.Dir, "nginx.conf"),
		logs:   []string{filepath.Join(opts.Dir, "nginx.out"), filepath.Join(opts.Dir, "error.log")},
		kind:   n,
	}
	return n
}

// flags are the command-line flags of every nginx command on this
// configuration: the prefix and the error log in Dir (nginx opens its error
// log before it reads the configuration, by default one of the machine's).
func (n *Nginx) flags(extra ...string) []string {
	return append(extra, "-p", n.opts.Dir+"/", "-e", n.errorLog(), "-c", n.config)
}

func (n *Nginx) errorLog() string { return n.logs[1] }

func (n *Nginx) mainConfig() string {
	// As root, the master would start its workers as nobody, who may not
	// enter the test's temporary directory; they run as the caller.
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n"
	}
	return fmt.Sprintf(`# Written by test/traffic: the server of the tests; the upstream is the
# file Terraform rendered (%[2]s), included below.
daemon off;
master_process on;
worker_processes 1;
%[5]spid %[1]s/nginx.pid;
error_log %[1]s/error.log notice;
# After a reload, old workers finish their connections within this bound.
worker_shutdown_timeout 30s;

events {
    worker_connections 1024;
}

http {
    access_log off;
    client_body_temp_path %[1]s/temp/client_body;
    proxy_temp_path %[1]s/temp/proxy;
    fastcgi_temp_path %[1]s/temp/fastcgi;
    uwsgi_temp_path %[1]s/temp/uwsgi;
    scgi_temp_path %[1]s/temp/scgi;

    include %[2]s;

    server {
        listen 127.0.0.1:%[3]d;
        listen [::1]:%[3]d;
        location / {
            # A connection refused by a server is retried on the next one
            # (proxy_next_upstream error timeout, nginx's default), as
            # production configurations do.
            proxy_pass http://%[4]s;
            proxy_connect_timeout 2s;
            proxy_read_timeout 30s;
        }
    }
}
`, n.opts.Dir, n.opts.Upstream, n.opts.Port, n.pool, user)
}

var upstreamLine = regexp.MustCompile(`(?m)^\s*upstream[ \t]+([^\s{]+)`)

// readMaster is the pid nginx wrote to its pid file once it is the master
// of this Nginx (a child of the guard), else 0.
func (n *Nginx) readMaster() int {
	data, err := os.ReadFile(n.PIDFile())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || parentOf(pid) != n.cmd.Process.Pid {
		return 0
	}
	return pid
}

// PID is the master's pid.
func (n *Nginx) PID() int { return n.master }

// ReloadCommand is a shell command that reloads this nginx (what a
// companion or a local-exec provisioner runs after rewriting the upstream):
// NginxReloadCommand on its binary and directory.
func (n *Nginx) ReloadCommand() string {
	return NginxReloadCommand(n.bin, n.opts.Dir)
}

// NginxReloadCommand is the shell command that reloads the nginx that
// StartNginx runs in dir with binary bin: nginx -t on the configuration and
// the upstream as they are, then nginx -s reload, which sends SIGHUP to the
// master named in the pid file. It returns before the new worker serves;
// nothing is dropped meanwhile.
func NginxReloadCommand(bin, dir string) string {
	check, signal := NginxCommands(bin, dir)
	return check + " && " + signal
}

// NginxCommands are the shell commands that check (nginx -t) and reload
// (nginx -s reload) the nginx that StartNginx runs in dir with binary bin:
// the check_command and reload_command of examples/pools/nginx.
func NginxCommands(bin, dir string) (check, signal string) {
	n := newNginx(bin, NginxOptions{Dir: dir})
	return n.CheckCommand(), n.SignalCommand()
}

// CheckCommand is the shell command that checks this nginx's files as they
// are (nginx -t): the check_command of examples/pools/nginx.
func (n *Nginx) CheckCommand() string {
	return shellWords(append([]string{n.bin}, n.flags("-t", "-q")...))
}

// SignalCommand is the shell command that reloads this nginx without a
// check of its own: nginx -s reload, SIGHUP to the master of the pid file.
func (n *Nginx) SignalCommand() string {
	return shellWords(append([]string{n.bin}, n.flags("-s", "reload")...))
}

// shellWords quotes each word for sh where it needs it.
func shellWords(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,") == "" {
			quoted[i] = w
		} else {
			quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}

func (n *Nginx) checkArgs() []string { return n.flags("-t", "-q") }

// signalReload sends SIGHUP to the master, what nginx -s reload does.
func (n *Nginx) signalReload() error { return syscall.Kill(n.master, syscall.SIGHUP) }

// reloaded: the workers from before are gone from the current ones
// (shutting down or exited) and a new one runs. A configuration that
// checked may still fail to load (a port taken meanwhile): the master says
// so in its error log and keeps its workers.
func (n *Nginx) reloaded(before, now lbState) (bool, error) {
	if tail := readFrom(n.errorLog(), before.logSize); strings.Contains(tail, "[emerg]") {
		return false, refusedError{"nginx refused the reload: " + strings.TrimSpace(tail)}
	}
	return len(now.workers) > 0 && !overlap(now.workers, before.workers), nil
}

// stop sends SIGTERM to the master (nginx's fast shutdown), or SIGKILL to
// the process group before the master is known.
func (n *Nginx) stop() {
	if n.master != 0 {
		_ = syscall.Kill(n.master, syscall.SIGTERM)
	} else {
		tied.KillGroup(n.cmd, syscall.SIGKILL)
	}
}

// state is the master's current workers: its children named "nginx: worker
// process", without those that a reload or a stop told to finish ("... is
// shutting down"); an error until the master has written its pid file.
func (n *Nginx) state(context.Context) (lbState, error) {
	if n.master == 0 {
		n.master = n.readMaster()
	}
	if n.master == 0 {
		return lbState{}, errors.New("no nginx master in " + n.PIDFile() + " yet")
	}
	logSize := fileSize(n.errorLog())
	children, err := childrenOf(n.master)
	if err != nil {
		return lbState{}, err
	}
	var workers []int
	for _, pid := range children {
		title, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		title = bytes.TrimRight(title, "\x00 ")
		if bytes.HasPrefix(title, []byte("nginx: worker process")) && !bytes.Contains(title, []byte("shutting down")) {
			workers = append(workers, pid)
		}
	}
	return lbState{workers: workers, logSize: logSize}, nil
}

// GuardPID is the pid of the shell that guards nginx's process group
// (tied.StartTree).
func (n *Nginx) GuardPID() int { return n.cmd.Process.Pid }

func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// readFrom is a file from offset on ("" when it cannot be read).
func readFrom(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) < offset {
		return ""
	}
	return string(data[offset:])
}

// parentOf is the parent pid of a process, from /proc/PID/stat, or 0.
func parentOf(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// After the command name in parentheses: state, then the parent pid.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// childrenOf lists the children of a single-threaded process: from
// /proc/PID/task/PID/children where the kernel has it, else by the parent
// pid of every process.
func childrenOf(pid int) ([]int, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("no process %d", pid)
	}
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); err == nil {
		var children []int
		for _, field := range strings.Fields(string(data)) {
			if child, err := strconv.Atoi(field); err == nil {
				children = append(children, child)
			}
		}
		return children, nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var children []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err == nil && parentOf(child) == pid {
			children = append(children, child)
		}
	}
	return children, nil
}
