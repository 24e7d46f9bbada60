package syncbench

import (
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/textcheck"
)

func TestTheTwoClusterConfigurationReadsEachClusterThroughItsAlias(t *testing.T) {
	config := clustersConfig(map[string]string{"blue": "/k/blue", "green": "/k/green"})
	textcheck.Contains(t, "configuration", config,
		"alias      = \"blue\"\n  kubeconfig = \"/k/blue\"",
		"alias      = \"green\"\n  kubeconfig = \"/k/green\"",
		"provider  = k8s.blue",
		"provider  = k8s.green",
		"input = concat([for e in data.k8s_ready_endpoints.blue.endpoints : \"blue/${e.address}:${e.port}\"], [for e in data.k8s_ready_endpoints.green.endpoints : \"green/${e.address}:${e.port}\"])",
	)
}

func TestTheTwoClusterRowsGiveEachClusterAndTheRunsOfAChangeInBoth(t *testing.T) {
	res := &clusterLatency{rounds: 3, quiet: 200 * time.Millisecond, latency: map[string][]float64{
		"blue": {1, 2, 3}, "green": {2, 4, 6},
	}, both: []float64{1.5, 1.5, 1.5}, bothRuns: []int{1, 1, 2}}
	rows := strings.Join(clusterLatencyRows(res), "\n")
	textcheck.Contains(t, "rows", rows,
		"a change in blue, median of 3 | 2.000 s (1.00× blue)",
		"a change in green, median of 3 | 4.000 s (2.00× blue)",
		"rounds with exactly one run | 2 of 3 | all | **miss** |",
	)
	section := clusterLatencySection(res)
	if !strings.Contains(section, "| both, within one window | 1.500 (1.50–1.50) | 0.75× | 1, 1, 2 |") {
		t.Errorf("section:\n%s", section)
	}
	if clusterLatencyRows(nil) != nil || clusterLatencySection(&clusterLatency{}) != "" {
		t.Error("rows or a section for nothing measured")
	}
}

func TestTheCompanionBeforeAfterHoldsLatencyAndIdleCPUToFivePerCent(t *testing.T) {
	r := &Results{latency: []float64{0.10, 0.11, 0.12}, baseline: &baselineSync{commit: "c329149",
		latency: []float64{0.10, 0.10, 0.10},
		current: idleRounds{idlePct: []float64{0.30, 0.34}, idle: 60}, base: idleRounds{idlePct: []float64{0.40, 0.40}, idle: 60}}}
	rows := strings.Join(baselineSyncRows(r), "\n")
	textcheck.Contains(t, "rows", rows,
		"| companion detection latency, this build / c329149 (medians of 3 and 3, same rounds) | 0.110 s / 0.100 s = 1.100× | ≤ 1.05× | **miss** by 5.0 % |",
		"0.320 % / 0.400 % of a core = 0.80× (-0.080 % of a core; one clock tick is 0.017 %) | ≤ 1.05×, or within one tick | pass |",
	)
	// Idle at zero before: one tick more is within the resolution, two
	// are not.
	r.baseline.base.idlePct = []float64{0, 0}
	for pct, want := range map[float64]string{100.0 / 6000: "= — (+0.017 % of a core; one clock tick is 0.017 %) | ≤ 1.05×, or within one tick | pass |", 0.034: "**miss** by 0.034 % of a core"} {
		r.baseline.current.idlePct = []float64{pct, pct}
		if rows := strings.Join(baselineSyncRows(r), "\n"); !strings.Contains(rows, want) {
			t.Errorf("idle %.4f %% against 0: rows lack %q:\n%s", pct, want, rows)
		}
	}
	if baselineSyncRows(&Results{latency: []float64{1}}) != nil {
		t.Error("before/after rows without a baseline")
	}
}
