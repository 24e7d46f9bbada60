package traffic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/tied"
)

// lbProcess is a running load balancer: a master that holds the listening
// sockets and workers that serve, reloaded gracefully (new workers on the
// same sockets, the old ones finishing their connections). HAProxy and nginx
// embed it and bring what differs between them, their commands and how
// they tell their workers (lbKind).
type lbProcess struct {
	name  string // haproxy, nginx: in errors
	bin   string
	dir   string
	port  int
	bound time.Duration
	// config is the main configuration file that the load balancer is
	// started with; checkArgs are the flags of its check.
	config string
	// pool is the name of the pool file's first section (HAProxy's
	// backend, nginx's upstream).
	pool string
	// logs are the files whose end LogTail shows, in this order.
	logs []string
	kind lbKind
	cmd  *exec.Cmd
	done chan struct{}
}

// lbKind is what HAProxy and nginx do each their own way.
type lbKind interface {
	// checkArgs are the flags of the check of the files as they are now
	// (haproxy -c, nginx -t).
	checkArgs() []string
	// state is the load balancer's current workers; an error while the
	// master cannot say (not started yet, re-executing for a reload).
	state(ctx context.Context) (lbState, error)
	// signalReload asks the master to reload.
	signalReload() error
	// reloaded says whether a reload asked for at before is done, or an
	// error if the load balancer refused it.
	reloaded(before, now lbState) (bool, error)
	// stop asks the master to stop, or kills it if it cannot be asked.
	stop()
}

// lbState is what a load balancer says of its workers at one moment.
type lbState struct {
	workers []int
	// reloads and failedReloads are counted by HAProxy's master; logSize is
	// the size of nginx's error log, from where a reload's errors are read.
	reloads, failedReloads int
	logSize                int64
}

// lookPath is the program on PATH, or an error that names what is missing
// and how to get it.
func lookPath(name, install string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("no %s on PATH (Debian: %s)", name, install)
	}
	return path, nil
}

// prepareStart prepares the start of a load balancer: its binary (find),
// its directory and pool file made absolute, the port (0: a free one) and
// the bound (0: 20 s) set, the name of the pool file's first section (the
// first match of section, a what), and the directory created with its
// subdirectory sub.
func prepareStart(find func() (string, error), dir *string, port *int, bound *time.Duration, pool *string, section *regexp.Regexp, what, sub string) (bin, name string, err error) {
	if bin, err = find(); err != nil {
		return "", "", err
	}
	if *bound == 0 {
		*bound = 20 * time.Second
	}
	if *port == 0 {
		if *port, err = freePort(); err != nil {
			return "", "", err
		}
	}
	for _, path := range []*string{dir, pool} {
		if *path, err = filepath.Abs(*path); err != nil {
			return "", "", err
		}
	}
	data, err := os.ReadFile(*pool)
	if err != nil {
		return "", "", err
	}
	m := section.FindSubmatch(data)
	if m == nil {
		return "", "", fmt.Errorf("%s has no %s", *pool, what)
	}
	return bin, string(m[1]), os.MkdirAll(filepath.Join(*dir, sub), 0o755)
}

// start writes the main configuration, checks it, starts cmd with its
// output appended to out (in its own process group that dies with the
// caller: tied.StartTree when tree, else tied.Start) and returns once a
// worker runs. afterStart runs once the process has started; onExit once it
// has exited.
func (p *lbProcess) start(ctx context.Context, configText string, args []string, out string, tree bool, afterStart func() error, onExit func()) error {
	if err := os.WriteFile(p.config, []byte(configText), 0o600); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.bound)
	defer cancel()
	if err := p.Check(ctx); err != nil {
		return err
	}
	log, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	startTied := tied.Start
	if tree {
		startTied = tied.StartTree
	}
	if err := startTied(cmd); err != nil {
		_ = log.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		if onExit != nil {
			onExit()
		}
		close(p.done)
	}()
	if afterStart != nil {
		if err := afterStart(); err != nil {
			tied.KillGroup(cmd, syscall.SIGKILL)
			<-p.done
			return err
		}
	}
	err = p.waitFor(ctx, 50*time.Millisecond, func() (bool, error) {
		s, err := p.kind.state(ctx)
		return err == nil && len(s.workers) > 0, err
	})
	if err != nil {
		p.Stop()
		return fmt.Errorf("%s has no worker at start: %w", p.name, err)
	}
	return nil
}

// waitFor polls done every interval until it says true, returns an error,
// the process exits or ctx ends. An error of done ends the wait only if it
// is errRefused; others are kept to say why the wait ran out.
func (p *lbProcess) waitFor(ctx context.Context, interval time.Duration, done func() (bool, error)) error {
	for {
		ok, err := done()
		if ok {
			return nil
		}
		var refused refusedError
		if errors.As(err, &refused) {
			return err
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %s", p.name, p.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("not done after %s (%w): %s", p.bound, errors.Join(err, ctx.Err()), p.LogTail())
		case <-time.After(interval):
		}
	}
}

// refusedError is a reload that the load balancer refused.
type refusedError struct{ msg string }

func (e refusedError) Error() string { return e.msg }

// Check runs the load balancer's check on its files as they are now.
func (p *lbProcess) Check(ctx context.Context) error {
	args := p.kind.checkArgs()
	out, err := exec.CommandContext(ctx, p.bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", p.name, args[0], err, bytes.TrimSpace(out))
	}
	return nil
}

// Reload checks the files, signals the master, and waits until the workers
// from before are gone from the current ones and a new one serves: from then
// on every new connection gets the new servers. A configuration that does
// not check, or that the master refuses, is an error, and the running
// workers go on as they were. A reload already under way (a provisioner's
// ReloadCommand) is waited for first.
func (p *lbProcess) Reload(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.bound)
	defer cancel()
	if err := p.Check(ctx); err != nil {
		return err
	}
	var before lbState
	err := p.waitFor(ctx, 20*time.Millisecond, func() (bool, error) {
		s, err := p.kind.state(ctx)
		if err == nil && len(s.workers) == 0 {
			err = errors.New("no worker yet")
		}
		before = s
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("%s master not answering before a reload: %w", p.name, err)
	}
	if err := p.kind.signalReload(); err != nil {
		return fmt.Errorf("signal the %s master: %w", p.name, err)
	}
	err = p.waitFor(ctx, 20*time.Millisecond, func() (bool, error) {
		now, err := p.kind.state(ctx)
		if err != nil {
			return false, err
		}
		return p.kind.reloaded(before, now)
	})
	if err != nil {
		return fmt.Errorf("%s reload: %w", p.name, err)
	}
	return nil
}

// Workers are the pids of the current workers (not those that a reload
// told to finish).
func (p *lbProcess) Workers(ctx context.Context) ([]int, error) {
	s, err := p.kind.state(ctx)
	return s.workers, err
}

// Stop stops the load balancer (the master asked first, SIGKILL to its
// process group after the bound) and returns once the master has exited;
// its workers exit with it.
func (p *lbProcess) Stop() {
	if p == nil || p.cmd == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.kind.stop()
	select {
	case <-p.done:
	case <-time.After(p.bound):
		tied.KillGroup(p.cmd, syscall.SIGKILL)
		<-p.done
	}
}

// PIDFile is the file that holds the master's pid, DIR/NAME.pid: HAProxy's
// is written for a reload command run by someone else; nginx's master
// writes its own, which nginx -s reads.
func (p *lbProcess) PIDFile() string { return filepath.Join(p.dir, p.name+".pid") }

// Port is the port it listens on, on 127.0.0.1 and [::1].
func (p *lbProcess) Port() int { return p.port }

// URL is its address over IPv4 (127.0.0.1) or IPv6 ([::1]).
func (p *lbProcess) URL(ipv6 bool) string {
	host := "127.0.0.1"
	if ipv6 {
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(p.port)) + "/"
}

// LogTail is the end of its logs.
func (p *lbProcess) LogTail() string {
	var all []byte
	for _, name := range p.logs {
		if data, err := os.ReadFile(name); err == nil {
			all = append(all, data...)
		}
	}
	lines := strings.Split(strings.TrimRight(string(all), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
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
