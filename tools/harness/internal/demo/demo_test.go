package demo

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The demo waits for the file of -add-pod as long as it holds: until the
// file is there, its bound passes or it is stopped.
func TestWaitForFileEndsWithTheFileTheBoundOrTheContext(t *testing.T) {
	name := filepath.Join(t.TempDir(), "add-pod")
	stopped, cancel := context.WithCancel(t.Context())
	cancel()
	if waitForFile(stopped, name, time.Minute) {
		t.Error("stopped, and no file: waitForFile says it is there")
	}
	start := time.Now()
	if waitForFile(t.Context(), name, 300*time.Millisecond) {
		t.Error("no file: waitForFile says it is there")
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("waitForFile gave up after %s, before its bound", waited)
	}
	go func() {
		time.Sleep(150 * time.Millisecond)
		_ = os.WriteFile(name, nil, 0o600)
	}()
	if !waitForFile(t.Context(), name, time.Minute) {
		t.Error("the file came: waitForFile did not see it")
	}
}
