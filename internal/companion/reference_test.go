package companion

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTheReferenceIsCurrent(t *testing.T) {
	want, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(ReferenceTemplate)))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not what the code gives: run make docs and commit templates/ and docs/", ReferenceTemplate)
	}
}

func TestTheReferenceReadsTheFlagSetsAndTheRegistry(t *testing.T) {
	t.Setenv("K8S_SYNC_TERRAFORM", "tofu")
	text, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// A flag of both subcommands, once under each.
		"| `-request-timeout` | duration | `15s` |",
		// Defaults as the flag set prints them: a string, a bool, a number.
		"| `-listen` | string | `127.0.0.1:9464` |",
		"| `-target-changed` | bool | `true` |",
		"| `-max-shrink` | float | `0.5` |",
		// A zero default is none; the binary's own default, not the one the
		// image's environment sets.
		"| `-identity` | string |  |",
		"| `-terraform` | string | `terraform` |",
		"| `-cpuprofile` | string |  |",
		// Every kind of metric, with its labels.
		"| `k8s_sync_leading` | gauge |  |",
		"| `k8s_sync_runs_total` | counter | `result` |",
		"| `k8s_sync_cluster_reachable` | gauge | `cluster` |",
		"| `k8s_sync_run_duration_seconds` | histogram |  |",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the reference has no %q", want)
		}
	}
	if n := strings.Count(text, "| `-request-timeout` |"); n != 2 {
		t.Errorf("-request-timeout is in the reference %d times, want 2 (sync and check)", n)
	}
	if n := strings.Count(text, "| `-settle-quiet` |"); n != 1 {
		t.Errorf("-settle-quiet is in the reference %d times, want 1 (sync only)", n)
	}
	var reg capture
	newMetrics(&reg)
	if rows := strings.Count(text, "| `k8s_sync_"); rows != len(reg.collectors) {
		t.Errorf("the reference has %d metrics, newMetrics registers %d", rows, len(reg.collectors))
	}
}
