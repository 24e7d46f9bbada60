package traffic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// NginxPath is the nginx binary on PATH, or an error that names what is
// missing and how to get it.
func NginxPath() (string, error) {
	path, err := exec.LookPath("nginx")
	if err != nil {
		return "", errors.New("no nginx on PATH (Debian: apt-get install nginx, which installs /usr/sbin/nginx)")
	}
	return path, nil
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
	opts         NginxOptions
	bin          string
	config       string
	log          string
	upstreamName string
	master       int
	cmd          *exec.Cmd // the guard of the process group (tied.StartTree)
	done         chan struct{}
}

// StartNginx writes DIR/nginx.conf (a master in the foreground with one
// worker, the error log and the temporary directories in Dir, the Upstream
// file included, and a server on 127.0.0.1:PORT and [::1]:PORT that proxies
// to that upstream), checks it with nginx -t, and starts
// `nginx -p DIR/ -e DIR/error.log -c DIR/nginx.conf`. It returns once a
// worker runs. nginx, its worker included, dies with the calling process.
func StartNginx(ctx context.Context, opts NginxOptions) (*Nginx, error) {
	bin, err := NginxPath()
	if err != nil {
		return nil, err
	}
	if opts.Bound == 0 {
		opts.Bound = 20 * time.Second
	}
	name, err := upstreamName(opts.Upstream)
	if err != nil {
		return nil, err
	}
	if opts.Port == 0 {
		if opts.Port, err = freePort(); err != nil {
			return nil, err
		}
	}
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, err
	}
	if opts.Upstream, err = filepath.Abs(opts.Upstream); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "temp"), 0o755); err != nil {
		return nil, err
	}
	n := &Nginx{
		opts: opts, bin: bin, upstreamName: name,
		config: filepath.Join(opts.Dir, "nginx.conf"),
		log:    filepath.Join(opts.Dir, "error.log"),
	}
	if err := os.WriteFile(n.config, []byte(n.mainConfig()), 0o600); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Bound)
	defer cancel()
	if err := n.Check(ctx); err != nil {
		return nil, err
	}
	// A pid file of an nginx gone: the wait below must not take it for the
	// master of this one.
	_ = os.Remove(n.PIDFile())
	cmd := exec.Command(bin, n.flags()...)
	// The master logs to the error log; its standard streams take what it
	// says before it has opened it.
	out, err := os.OpenFile(filepath.Join(opts.Dir, "nginx.out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	// nginx's workers outlive a master killed with SIGKILL, and the master's
	// parent-death signal does not reach them: the whole process group goes
	// with the calling process.
	if err := tied.StartTree(cmd); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("start nginx: %w", err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(n.done)
	}()
	for {
		if n.master == 0 {
			n.master = n.readMaster()
		}
		if n.master != 0 {
			if workers, _ := n.Workers(); len(workers) > 0 {
				return n, nil
			}
		}
		select {
		case <-n.done:
			return nil, fmt.Errorf("nginx exited at start: %s", n.LogTail())
		case <-ctx.Done():
			n.Stop()
			return nil, fmt.Errorf("nginx has no worker after %s (%w): %s", opts.Bound, ctx.Err(), n.LogTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// flags are the command-line flags of every nginx command on this
// configuration: the prefix and the error log in Dir (nginx opens its error
// log before it reads the configuration, by default one of the machine's).
func (n *Nginx) flags(extra ...string) []string {
	return append(extra, "-p", n.opts.Dir+"/", "-e", n.log, "-c", n.config)
}

func (n *Nginx) mainConfig() string {
	// As root, the master would start its workers as nobody, who may not
	// enter the test's temporary directory; they run as the caller.
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n"
	}
	return fmt.Sprintf(`# Written by internal/traffic: the server of the tests; the upstream is the
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
`, n.opts.Dir, n.opts.Upstream, n.opts.Port, n.upstreamName, user)
}

var upstreamLine = regexp.MustCompile(`(?m)^\s*upstream[ \t]+([^\s{]+)`)

// upstreamName is the name of the first upstream block of a file.
func upstreamName(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	m := upstreamLine.FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("%s has no upstream block", path)
	}
	return string(m[1]), nil
}

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

// Port is the server's port.
func (n *Nginx) Port() int { return n.opts.Port }

// URL is the server's address over IPv4 (127.0.0.1) or IPv6 ([::1]).
func (n *Nginx) URL(ipv6 bool) string {
	return loopbackURL(ipv6, n.opts.Port)
}

// PID is the master's pid.
func (n *Nginx) PID() int { return n.master }

// PIDFile is the file the master writes its pid to, which nginx -s reads.
func (n *Nginx) PIDFile() string { return filepath.Join(n.opts.Dir, "nginx.pid") }

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
	n := &Nginx{opts: NginxOptions{Dir: dir}, config: filepath.Join(dir, "nginx.conf"), log: filepath.Join(dir, "error.log")}
	return shellWords(append([]string{bin}, n.flags("-t", "-q")...)) + " && " + shellWords(append([]string{bin}, n.flags("-s", "reload")...))
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

// Check runs nginx -t on the configuration and the upstream file as they are
// now.
func (n *Nginx) Check(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, n.bin, n.flags("-t", "-q")...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("nginx -t: %w\n%s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Reload checks the files, sends SIGHUP to the master (what nginx -s reload
// does), and waits until the workers from before are gone from the current
// ones (shutting down or exited) and a new one runs: from then on every new
// connection gets the new upstream. A configuration that does not check is
// an error, and the running worker goes on as it was.
func (n *Nginx) Reload(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.opts.Bound)
	defer cancel()
	if err := n.Check(ctx); err != nil {
		return err
	}
	before, err := n.Workers()
	if err != nil {
		return err
	}
	logFrom := fileSize(n.log)
	if err := syscall.Kill(n.master, syscall.SIGHUP); err != nil {
		return fmt.Errorf("signal the nginx master: %w", err)
	}
	for {
		now, err := n.Workers()
		if err == nil && len(now) > 0 && !overlap(now, before) {
			return nil
		}
		// A configuration that checked may still fail to load (a port
		// taken meanwhile): the master says so and keeps its workers.
		if tail := readFrom(n.log, logFrom); strings.Contains(tail, "[emerg]") {
			return fmt.Errorf("nginx refused the reload: %s", strings.TrimSpace(tail))
		}
		select {
		case <-n.done:
			return fmt.Errorf("nginx exited during a reload: %s", n.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("nginx reload not done after %s (%w): %s", n.opts.Bound, errors.Join(err, ctx.Err()), n.LogTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Workers are the pids of the master's current workers: its children named
// "nginx: worker process", without those that a reload or a stop told to
// finish ("... is shutting down").
func (n *Nginx) Workers() ([]int, error) {
	children, err := childrenOf(n.master)
	if err != nil {
		return nil, err
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
	return workers, nil
}

// Stop stops nginx (SIGTERM to the master, nginx's fast shutdown; SIGKILL to
// the process group after the bound) and returns once the master has exited;
// its workers exit before it, and the guard ends any that would not.
func (n *Nginx) Stop() {
	if n == nil || n.cmd == nil {
		return
	}
	select {
	case <-n.done:
		return
	default:
	}
	if n.master != 0 {
		_ = syscall.Kill(n.master, syscall.SIGTERM)
	} else {
		tied.KillGroup(n.cmd, syscall.SIGKILL)
	}
	select {
	case <-n.done:
	case <-time.After(n.opts.Bound):
		tied.KillGroup(n.cmd, syscall.SIGKILL)
		<-n.done
	}
}

// GuardPID is the pid of the shell that guards nginx's process group
// (tied.StartTree).
func (n *Nginx) GuardPID() int { return n.cmd.Process.Pid }

// LogTail is the end of nginx's error log, and what it printed before
// opening it.
func (n *Nginx) LogTail() string {
	var all []byte
	for _, name := range []string{"nginx.out", "error.log"} {
		data, err := os.ReadFile(filepath.Join(n.opts.Dir, name))
		if err == nil {
			all = append(all, data...)
		}
	}
	lines := strings.Split(strings.TrimRight(string(all), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

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
