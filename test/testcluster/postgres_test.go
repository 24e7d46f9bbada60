package testcluster

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These tests start a real PostgreSQL server (a few seconds, no build), so
// they run with the unit tests wherever the server is installed; without it
// they are skipped and say how to install it.
func startPostgres(t *testing.T, dir string) *Postgres {
	t.Helper()
	if _, err := PostgresBinaries(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := StartPostgres(ctx, PostgresOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func TestPostgresServesTheSuperuserOnLoopbackAndKeepsItsDataAcrossARestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pg")
	p := startPostgres(t, dir)
	ctx := context.Background()
	pid := p.server.pid()
	if os.Geteuid() == 0 {
		status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		if want := "Uid:\t" + strconv.Itoa(int(p.cred.Uid)); !strings.Contains(string(status), want) {
			t.Errorf("postgres (pid %d) does not run as the postgres user (%s):\n%s", pid, want, status)
		}
	}
	if user, err := p.Exec(ctx, "postgres", "SELECT current_user"); err != nil || user != PostgresUser {
		t.Fatalf("current_user %q, %v; want %s", user, err, PostgresUser)
	}
	if err := p.CreateDatabase(ctx, "states"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, "states", "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before the restart')"); err != nil {
		t.Fatal(err)
	}
	// Only TCP on 127.0.0.1: no socket file anywhere in its directory.
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type()&os.ModeSocket != 0 {
			t.Errorf("a Unix socket %s", path)
		}
		return nil
	})

	p.StopServer()
	if alive(pid) {
		t.Fatalf("postgres (pid %d) still runs after StopServer", pid)
	}
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p.Port), time.Second); err == nil {
		conn.Close()
		t.Fatalf("port %d still accepts connections after StopServer", p.Port)
	}
	if _, err := p.Exec(ctx, "states", "SELECT 1"); err == nil {
		t.Fatal("a query worked with the server stopped")
	}
	port := p.Port
	if err := p.StartServer(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Port != port {
		t.Errorf("port %d after the restart, want %d", p.Port, port)
	}
	if v, err := p.Exec(ctx, "states", "SELECT v FROM kept"); err != nil || v != "before the restart" {
		t.Errorf("after the restart: %q, %v", v, err)
	}
	if err := p.StartServer(ctx); err == nil || !strings.Contains(err.Error(), "running") {
		t.Errorf("a second start of a running server: %v, want an error saying it runs", err)
	}

	pid = p.server.pid()
	p.Stop()
	if alive(pid) {
		t.Errorf("postgres (pid %d) still runs after Stop", pid)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		t.Errorf("a given directory is kept: %v", err)
	}
}

func TestPostgresAsksTCPClientsForThePassword(t *testing.T) {
	p := startPostgres(t, "")
	psql := filepath.Join(p.bin, "psql")
	for _, tt := range []struct {
		name, password, want string
	}{
		{"no password", "", "no password supplied"},
		{"a wrong one", "wrong", "password authentication failed for user \"" + PostgresUser + "\""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(psql, "--no-password", "--host=127.0.0.1", "--port="+strconv.Itoa(p.Port), "--username="+p.User, "--dbname=postgres", "--command=SELECT 1")
			cmd.Env = append(os.Environ(), "PGPASSWORD="+tt.password)
			if tt.password == "" {
				cmd.Env = append(os.Environ(), "PGPASSFILE=/nonexistent")
			}
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Errorf("psql with %s: %v, want a refusal with %q:\n%s", tt.name, err, tt.want, out)
			}
		})
	}
	// A rotated password: the old one is refused, the new one works.
	old := p.Password
	if err := p.SetPassword(context.Background(), "it's rotated"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(context.Background(), "postgres", "SELECT 1"); err != nil {
		t.Errorf("the new password: %v", err)
	}
	p.Password = old
	if _, err := p.Exec(context.Background(), "postgres", "SELECT 1"); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Errorf("the old password after SetPassword: %v, want it refused", err)
	}
	if !p.removeDir {
		t.Fatal("no directory given: a temporary one, removed by Stop")
	}
	p.Stop()
	if _, err := os.Stat(p.Dir); !os.IsNotExist(err) {
		t.Errorf("the temporary directory %s is left after Stop: %v", p.Dir, err)
	}
}
