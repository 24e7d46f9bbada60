package testcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A throwaway PostgreSQL server on 127.0.0.1, for the tests and the bench of
// Terraform's `pg` backend: the distribution's own server (Debian's
// postgresql package; `make pg-programs` installs it), its data in a
// directory of the caller's, started and stopped like the daemons of the
// control plane (a process group of its own, killed when the harness dies).
// PostgreSQL refuses to run as root: as root, initdb and postgres run as the
// package's user, postgres.

// Postgres is a running (or stopped) PostgreSQL server.
type Postgres struct {
	// Dir holds the data directory (Dir/data) and the log (Dir/postgres.log).
	Dir string
	// Port is its TCP port on 127.0.0.1; it stays the same across StopServer
	// and StartServer.
	Port int
	// User and Password are those of its superuser; the server asks TCP
	// clients for the password (scram-sha-256).
	User, Password string

	bin       string
	cred      *syscall.Credential
	removeDir bool

	mu     sync.Mutex
	server *process
}

// PostgresOptions are the settings of StartPostgres.
type PostgresOptions struct {
	// Dir holds the state; empty is a new temporary directory, removed by
	// Stop; a given one is emptied first and kept. When the server runs as
	// the postgres user, the directories above Dir inside the temporary
	// directory (a test's t.TempDir()) are made searchable by others (o+x).
	Dir string
	// Log receives progress; nil discards it.
	Log io.Writer
}

// PostgresUser is the superuser's name.
const PostgresUser = "tfstate"

// postgresStopBound bounds a fast shutdown before SIGKILL.
const postgresStopBound = 15 * time.Second

// PostgresBinaries is the directory of initdb, postgres and psql: Debian's
// /usr/lib/postgresql/<major>/bin (the newest), else the directory of
// postgres on PATH.
func PostgresBinaries() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		return majorOf(b) - majorOf(a)
	})
	for _, dir := range dirs {
		if isExecutable(filepath.Join(dir, "postgres")) && isExecutable(filepath.Join(dir, "initdb")) {
			return dir, nil
		}
	}
	if path, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(path), nil
	}
	return "", errors.New("PostgreSQL was not found (no /usr/lib/postgresql/*/bin/postgres, no postgres on PATH): " +
		"make pg-programs installs Debian's postgresql package")
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0
}

// StartPostgres initializes a database cluster in opts.Dir/data and starts
// the server on a free port of 127.0.0.1, TCP only, with durability turned
// off (fsync, synchronous commits: the data is thrown away), and waits until
// it accepts the superuser. A start that loses its port to another process
// is tried again on another.
func StartPostgres(ctx context.Context, opts PostgresOptions) (*Postgres, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	bin, err := PostgresBinaries()
	if err != nil {
		return nil, err
	}
	p := &Postgres{Dir: opts.Dir, User: PostgresUser, bin: bin}
	if p.cred, err = postgresCredential(); err != nil {
		return nil, err
	}
	if p.Dir == "" {
		if p.Dir, err = os.MkdirTemp("", "testpg-"); err != nil {
			return nil, err
		}
		p.removeDir = true
	} else if err := os.RemoveAll(p.Dir); err != nil {
		return nil, err
	}
	if p.Dir, err = filepath.Abs(p.Dir); err != nil {
		return nil, err
	}
	if err := p.initdb(ctx); err != nil {
		p.Stop()
		return nil, fmt.Errorf("initialize PostgreSQL in %s: %w", p.Dir, err)
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		if p.Port, err = freePort(); err != nil {
			p.Stop()
			return nil, err
		}
		err = p.StartServer(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == startTries {
			p.Stop()
			return nil, fmt.Errorf("start PostgreSQL (state in %s): %w", p.Dir, err)
		}
		fmt.Fprintf(opts.Log, "a port was taken meanwhile; starting PostgreSQL again on another\n")
	}
	fmt.Fprintf(opts.Log, "PostgreSQL (%s) ready in %s on 127.0.0.1:%d\n", bin, time.Since(start).Round(100*time.Millisecond), p.Port)
	return p, nil
}

// postgresCredential is the user the server runs as: as root, the postgres
// user of the package; else nil, the caller's own.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root, and there is no postgres user to run it as (%w): make pg-programs installs Debian's postgresql package, which makes it", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (p *Postgres) dataDir() string { return filepath.Join(p.Dir, "data") }

// initdb makes the database cluster: the superuser with a random password,
// asked of TCP clients.
func (p *Postgres) initdb(ctx context.Context) error {
	if err := os.MkdirAll(p.Dir, 0o711); err != nil {
		return err
	}
	if err := p.reachable(); err != nil {
		return err
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	p.Password = hex.EncodeToString(secret)
	pwfile := filepath.Join(p.Dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(p.Password+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pwfile)
	if err := os.Mkdir(p.dataDir(), 0o700); err != nil {
		return err
	}
	for _, path := range []string{pwfile, p.dataDir()} {
		if err := p.chown(path); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, "initdb"), "--pgdata="+p.dataDir(), "--username="+p.User, "--pwfile="+pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "--encoding=UTF8", "--no-locale", "--no-sync")
	cmd.Dir = p.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

func (p *Postgres) chown(path string) error {
	if p.cred == nil {
		return nil
	}
	return os.Chown(path, int(p.cred.Uid), int(p.cred.Gid))
}

// reachable makes Dir and the directories above it inside the temporary
// directory searchable by the postgres user (a test's t.TempDir() is under
// a directory only its owner may enter), and fails naming the first
// directory above that it cannot enter.
func (p *Postgres) reachable() error {
	if p.cred == nil {
		return nil
	}
	tmp, err := filepath.Abs(os.TempDir())
	if err != nil {
		return err
	}
	for dir := p.Dir; ; dir = filepath.Dir(dir) {
		info, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o001 == 0 {
			if dir == tmp || !strings.HasPrefix(dir, tmp+string(filepath.Separator)) {
				return fmt.Errorf("the postgres user cannot enter %s (mode %s): give PostgreSQL a directory under %s, or chmod o+x it", dir, info.Mode().Perm(), tmp)
			}
			if err := os.Chmod(dir, info.Mode().Perm()|0o001); err != nil {
				return err
			}
		}
		if filepath.Dir(dir) == dir {
			return nil
		}
	}
}

// StartServer starts the server (again) on its port, and waits until it
// accepts the superuser.
func (p *Postgres) StartServer(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.server != nil {
		if done, _ := p.server.exited(); !done {
			return errors.New("PostgreSQL is running")
		}
	}
	p.server = &process{name: "postgres", logPath: filepath.Join(p.Dir, "postgres.log"), cred: p.cred, dir: p.Dir, args: []string{
		"-D", p.dataDir(), "-p", strconv.Itoa(p.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB", "-c", "max_connections=50",
	}}
	if err := p.server.start(p.bin); err != nil {
		return err
	}
	err := waitReady(ctx, p.server, func(ctx context.Context) error {
		_, err := p.psql(ctx, "postgres", "SELECT 1")
		return err
	})
	if err != nil {
		p.server.kill()
	}
	return err
}

// StopServer stops the server (a fast shutdown: clients are disconnected,
// open transactions rolled back), keeping its data; StartServer starts it
// again on the same port.
func (p *Postgres) StopServer() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopServer()
}

func (p *Postgres) stopServer() {
	s := p.server
	if s == nil || s.cmd == nil {
		return
	}
	if done, _ := s.exited(); done {
		return
	}
	// SIGINT to the postmaster alone: it stops its children in order.
	_ = syscall.Kill(s.pid(), syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(postgresStopBound):
		s.kill()
	}
}

// Stop stops the server and removes a temporary state directory. It is
// safe to call more than once.
func (p *Postgres) Stop() {
	p.mu.Lock()
	p.stopServer()
	p.mu.Unlock()
	if p.removeDir {
		_ = os.RemoveAll(p.Dir)
	}
}

// ConnString is the URL of database as the superuser, as Terraform's pg
// backend takes it (conn_str).
func (p *Postgres) ConnString(database string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", p.User, p.Password, p.Port, database)
}

// CreateDatabase creates an empty database.
func (p *Postgres) CreateDatabase(ctx context.Context, name string) error {
	_, err := p.Exec(ctx, "postgres", `CREATE DATABASE "`+name+`"`)
	return err
}

// SetPassword changes the superuser's password, as a team rotates the
// credentials of a backend; Exec then uses the new one. Sessions already
// open keep theirs. Not safe for use with other calls at the same time.
func (p *Postgres) SetPassword(ctx context.Context, password string) error {
	quoted := "'" + strings.ReplaceAll(password, "'", "''") + "'"
	if _, err := p.Exec(ctx, "postgres", `ALTER USER "`+p.User+`" PASSWORD `+quoted); err != nil {
		return err
	}
	p.Password = password
	return nil
}

// Exec runs one SQL command in database as the superuser (psql) and gives
// its rows, one per line, fields separated by |.
func (p *Postgres) Exec(ctx context.Context, database, sql string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return p.psql(ctx, database, sql)
}

func (p *Postgres) psql(ctx context.Context, database, sql string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, "psql"), "--no-psqlrc", "--tuples-only", "--no-align", "--quiet",
		"--set=ON_ERROR_STOP=1", "--host=127.0.0.1", "--port="+strconv.Itoa(p.Port), "--username="+p.User, "--dbname="+database, "--command="+sql)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+p.Password, "PGCONNECT_TIMEOUT=5")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("psql %q: %w: %s", sql, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// LogTail is the end of the server's log, for errors.
func (p *Postgres) LogTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.server == nil {
		return ""
	}
	return p.server.logTail()
}
