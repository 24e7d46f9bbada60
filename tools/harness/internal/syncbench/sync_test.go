package syncbench

import (
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/textcheck"
)

func TestSyncRowsGiveVerdicts(t *testing.T) {
	r := &Results{
		quiet:      200 * time.Millisecond,
		latency:    []float64{0.1, 0.2, 0.3, 1.4},
		detection:  []float64{0.1, 0.2, 0.3, 1.4},
		idleSlices: []float64{0.1, 0.2},
		idle:       60, idleCPU: 0.9, peakRSS: 160, syncWall: 12.5, syncCPU: 9, syncChildCPU: 1,
		checks: []*checkVsPlan{{title: "500 `k8s_ready_endpoints`", target: 0.2, checkWall: []float64{1, 1, 1}, checkCPU: []float64{1, 1, 1}, planWall: []float64{10, 10, 10}, planCPU: []float64{4, 4, 4},
			pullWall: []float64{0.6, 0.7, 0.8}, pullCPU: []float64{0.5, 0.5, 0.5}}},
	}
	rows := syncTargetRows(r)
	want := []string{
		"| 0.250 s | ≤ 1 s | **pass** (75 % under) |",
		"| 1.400 s | ≤ 1 s | **miss** by 0.40 s (40 % over) |",
		"| 1.50 % of a core | < 1 % | **miss** by 0.50 % of a core |",
		"| 160.0 MiB | ≤ 150 MiB | **miss** by 10.00 MiB (7 % over) |",
		"| 12.5 s; 9.00 s + 1.00 s | — | |",
		"| 0.100× | ≤ 0.2× | **pass** (50 % under) |",
		"| 0.250× | — | |",
		"| 0.700 s (70 % of check, 0.070× plan); 0.300 s (0.030× plan) | — | |",
	}
	textcheck.RowSuffixes(t, rows, want...)
	r.idleCPU = 0.3
	if row := syncTargetRows(r)[2]; !strings.HasSuffix(row, "| 0.50 % of a core | < 1 % | **pass** (50 % under) |") {
		t.Errorf("idle row = %q", row)
	}
	if Section(nil) != "" {
		t.Error("no results gave a section")
	}
	if s := Section(r); !strings.Contains(s, "## Companion") || !strings.Contains(s, "by sixths: 0.10, 0.20 s") || !strings.Contains(s, "| 500 `k8s_ready_endpoints` | 1.000") ||
		!strings.Contains(s, "| 0.100× | 0.250× | 0.700 (0.60–0.80) | 0.500 | 0.300, 0.500 |") {
		t.Errorf("section:\n%s", s)
	}
}
