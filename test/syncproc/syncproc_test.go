package syncproc

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fake is a program that writes the lines of a companion's JSON log, and
// one that is not JSON, to stderr, then waits to be stopped.
func fake(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "companion")
	script := `#!/bin/sh
echo '{"time":"2026-12-01T12:00:00.5Z","level":"INFO","msg":"watching","namespaces":"shop"}' >&2
echo 'not json' >&2
echo '{"time":"2026-12-01T12:00:01Z","level":"INFO","msg":"run started","data_sources":"data.k8s_ready_endpoints.web"}' >&2
echo '{"time":"2026-12-01T12:00:02Z","level":"INFO","msg":"run ended","result":"applied","retry":false}' >&2
trap 'exit 3' TERM
while :; do sleep 0.05; done
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAProcessIsFollowedByItsLog(t *testing.T) {
	p, err := Start(fake(t), []string{"sync"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := p.Wait(ctx, "run ended", 1, map[string]string{"result": "applied"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Str("retry") != "false" || !e.Time.Equal(time.Date(2026, 12, 1, 12, 0, 2, 0, time.UTC)) {
		t.Errorf("event %+v", e)
	}
	if n := p.Count("run started", map[string]string{"data_sources": "web"}); n != 1 {
		t.Errorf("%d run started lines naming web, want 1", n)
	}
	if n := p.Count("run ended", map[string]string{"result": "failed"}); n != 0 {
		t.Errorf("%d failed runs, want 0", n)
	}
	if n := len(p.Events("", nil)); n != 3 {
		t.Errorf("%d events, want 3 (the line that is not JSON is not one)", n)
	}
	if err := p.Idle(ctx, 200*time.Millisecond); err != nil {
		t.Error(err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	if _, err := p.Wait(short, "run started", 2, nil); err == nil {
		t.Error("a second run was found")
	}
	if code := p.Stop(5 * time.Second); code != 3 {
		t.Errorf("exit code %d, want 3 (its SIGTERM trap)", code)
	}
	if _, err := p.Wait(context.Background(), "leading", 1, nil); err == nil {
		t.Error("a wait for a line after the exit did not fail")
	}
}
