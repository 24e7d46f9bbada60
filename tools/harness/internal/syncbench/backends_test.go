package syncbench

import (
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/textcheck"
)

func TestBackendLatencyIsReportedAsMediansWithTheRatioToLocal(t *testing.T) {
	res := &backendLatency{rounds: 3, quiet: 200 * time.Millisecond,
		latency: map[string][]float64{
			"local":      {1.0, 3.0, 2.0},
			"kubernetes": {2.5, 2.0, 9.0},
			"pg":         {3.0, 1.0, 4.0},
		},
		duration:  map[string][]float64{"local": {0.5, 0.6, 0.7}, "kubernetes": {1, 1, 1}, "pg": {2, 2, 2}},
		extraRuns: map[string]int{"pg": 1},
	}
	rows := backendLatencyRows(res)
	if len(rows) != 3 || !strings.Contains(rows[1], "kubernetes backend, median of 3 | 2.500 s (1.25× local)") ||
		!strings.Contains(rows[2], "pg backend, median of 3 | 3.000 s (1.50× local)") {
		t.Errorf("rows:\n%s", strings.Join(rows, "\n"))
	}
	section := backendLatencySection(res)
	textcheck.Contains(t, "section", section,
		"| local | 2.000 (1.00–3.00) | 1.00× | 0.600 |",
		"| pg | 3.000 (1.00–4.00) | 1.50× | 2.000 |",
		"Runs no change explains: local 0, kubernetes 0, pg 1.",
	)
	if backendLatencyRows(nil) != nil || backendLatencySection(&backendLatency{}) != "" {
		t.Error("nothing measured gives rows or a section")
	}
}
