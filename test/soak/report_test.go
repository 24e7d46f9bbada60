package soak

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var updateReports = flag.Bool("soak.update-reports", false, "write the reports of TestTheReports* to testdata")

// sameAsFile compares got with testdata/name (written with -soak.update-reports).
func sameAsFile(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateReports {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gl), len(wl)) {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d:\n got %q\nwant %q", path, i+1, g, w)
		}
	}
}

// singleResult is a result of the single-workspace soak with a bit of
// everything the report shows.
func singleResult() *Result {
	at := time.Date(2026, 12, 2, 13, 20, 0, 0, time.UTC)
	o := Short(2 * time.Minute)
	return &Result{
		Options: o, Start: at, Elapsed: 2*time.Minute + 3*time.Second,
		Changes: 60, Bursts: 20, Seen: 50, Superseded: 9, Lost: 1, Late: 1, FaultAffected: 12,
		Noise: 110, NoiseRuns: 0, NoiseStretch: 12 * time.Second, Windows: 40, Applies: 38, FaultWindows: 6, FaultApplies: 7,
		Runs:          map[string]int{"applied": 38, "failed": 2},
		ShrinkRefused: 1,
		LatencyAll:    []float64{1.2, 1.5, 3.2, 9.8}, LatencyCalm: []float64{1.2, 1.5},
		RunDurations: []float64{2.1, 2.4},
		Faults: []*fault{
			{name: "API server killed and restarted", start: at.Add(10 * time.Second), end: at.Add(22 * time.Second), caughtUp: true, catchUp: 3 * time.Second},
			{name: "leader SIGKILLed", start: at.Add(40 * time.Second), end: at.Add(60 * time.Second), detail: "soak-a-1 killed; soak-b-1 leading 16.2 s later",
				violation: "no replica took over"},
			{name: "a human's apply between runs", start: at.Add(70 * time.Second), end: at.Add(75 * time.Second), err: errors.New("exit 1 | oops"),
				caughtUp: true},
		},
		Checks:           []string{"13:21:00: 0 change(s) pending, the oldest 0.0 s; leader soak-a-1, RSS 40.1 MiB"},
		LeaderIntervals:  []string{"soak-a-1 led 13:19:50.000 to 13:20:40.000", "soak-b-1 led 13:20:56.200 to 13:22:10.000"},
		LeaseTransitions: 1,
		Exits:            []string{"soak-b-1 exited 1 at 13:21:30"},
		Resources:        []resourceLine{{name: "RSS soak-b-1", unit: "MiB", start: 40, end: 41, slopePer10m: 0.5}},
		CPU:              map[string][2]float64{"soak-a-2": {3, 20}, "soak-b-1": {4, 30}},
		LockFree:         false, LockDetail: "pid 7 holds the fcntl lock",
		Notes:      []string{"13:21:01 driver: something"},
		Violations: []string{"lost: soak/svc-01 scaled up at 13:20:30.000 (want [a], state [])"},
	}
}

// The single-workspace soak reports as it did before the many-workspace
// mode (issue 40): the same sections, the same lines.
func TestTheReportsOfTheSingleWorkspaceSoakAreAsBefore(t *testing.T) {
	sameAsFile(t, "report-single.md", singleResult().Markdown("Soak of the companion (short schedule)"))
}
