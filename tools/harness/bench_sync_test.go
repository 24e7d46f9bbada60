package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/internal/syncproc"
)

func TestPercentileIsTheNearestRank(t *testing.T) {
	var fifty []float64
	for i := 50; i >= 1; i-- {
		fifty = append(fifty, float64(i))
	}
	for _, tt := range []struct {
		v    []float64
		p    float64
		want float64
	}{
		{fifty, 99, 50},
		{fifty, 50, 25},
		{fifty, 90, 45},
		{fifty, 100, 50},
		{fifty, 1, 1},
		{[]float64{3}, 99, 3},
		{[]float64{1, 2, 3, 4}, 50, 2},
		{[]float64{1, 2, 3, 4}, 51, 3},
	} {
		if got := percentile(tt.v, tt.p); got != tt.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tt.v, tt.p, got, tt.want)
		}
	}
	if !math.IsNaN(percentile(nil, 99)) {
		t.Error("the percentile of nothing is not NaN")
	}
	if fifty[0] != 50 {
		t.Error("percentile sorted its input")
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis; utime 1234, stime 56,
	// cutime 7, cstime 8.
	stat := "4242 (terraform-provider (k8s) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 56 7 8 20 0 12 0 100 2000000 3000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := parseProcStat([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	if want := (procStat{utime: 1234, stime: 56, cutime: 7, cstime: 8}); got != want {
		t.Fatalf("parseProcStat = %+v, want %+v", got, want)
	}
	if got.self() != 12.90 || got.children() != 0.15 {
		t.Errorf("self %v children %v, want 12.90 and 0.15", got.self(), got.children())
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 12 13 14 15 16"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) gave no error", bad)
		}
	}
}

func TestParseVmHWM(t *testing.T) {
	status := "Name:\tterraform-provi\nVmPeak:\t 1300000 kB\nVmHWM:\t   98304 kB\nVmRSS:\t   90000 kB\n"
	got, err := parseVmHWM([]byte(status))
	if err != nil || got != 98304 {
		t.Fatalf("parseVmHWM = %d, %v; want 98304", got, err)
	}
	if _, err := parseVmHWM([]byte("Name:\tx\nVmRSS:\t 1 kB\n")); err == nil {
		t.Error("no VmHWM line gave no error")
	}
}

func TestChangeLatencyFromTheLogLine(t *testing.T) {
	e, ok := syncproc.Parse(`{"time":"2026-12-01T10:00:01.450000000Z","level":"INFO","msg":"run started","data_sources":"data.k8s_ready_endpoints.lat","settled":"201ms"}`)
	if !ok || e.Msg != "run started" {
		t.Fatalf("Parse = %+v, %v", e, ok)
	}
	written := time.Date(2026, 12, 1, 10, 0, 1, 0, time.UTC)
	lat, det, err := changeLatency(written, e, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(lat-0.25) > 1e-9 || math.Abs(det-0.249) > 1e-9 {
		t.Errorf("latency %v detection %v, want 0.25 and 0.249", lat, det)
	}
	noSettled, _ := syncproc.Parse(`{"time":"2026-12-01T10:00:01Z","msg":"run started"}`)
	if _, _, err := changeLatency(written, noSettled, 0); err == nil {
		t.Error("a line without settled gave no error")
	}
	for _, bad := range []string{"not json", `{"msg":"x"}`, `{"time":"2026-12-01T10:00:01Z"}`} {
		if _, ok := syncproc.Parse(bad); ok {
			t.Errorf("syncproc.Parse(%q) accepted it", bad)
		}
	}
}

func TestSyncRowsGiveVerdicts(t *testing.T) {
	r := &syncResults{
		quiet:      200 * time.Millisecond,
		latency:    []float64{0.1, 0.2, 0.3, 1.4},
		detection:  []float64{0.1, 0.2, 0.3, 1.4},
		idleSlices: []float64{0.1, 0.2},
		idle:       60, idleCPU: 0.9, peakRSS: 160, syncWall: 12.5, syncCPU: 9, syncChildCPU: 1,
		checks: []*checkVsPlan{{title: "500 `k8s_ready_endpoints`", checkWall: []float64{1, 1, 1}, checkCPU: []float64{1, 1, 1}, planWall: []float64{10, 10, 10}, planCPU: []float64{4, 4, 4}}},
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
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), strings.Join(rows, "\n"))
	}
	for i, w := range want {
		if !strings.HasSuffix(rows[i], w) {
			t.Errorf("row %d = %q, want it to end with %q", i, rows[i], w)
		}
	}
	r.idleCPU = 0.3
	if row := syncTargetRows(r)[2]; !strings.HasSuffix(row, "| 0.50 % of a core | < 1 % | **pass** (50 % under) |") {
		t.Errorf("idle row = %q", row)
	}
	if syncSection(nil) != "" {
		t.Error("no results gave a section")
	}
	if s := syncSection(r); !strings.Contains(s, "## Companion") || !strings.Contains(s, "by sixths: 0.10, 0.20 s") || !strings.Contains(s, "| 500 `k8s_ready_endpoints` | 1.000") {
		t.Errorf("section:\n%s", s)
	}
}
