package syncbench

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/textcheck"
)

func TestScaleSizesAreAscendingPositiveNumbers(t *testing.T) {
	for _, tt := range []struct {
		text string
		want sizeList
		err  bool
	}{
		{"5000,20000,50000", sizeList{5000, 20000, 50000}, false},
		{" 500, 2000 ", sizeList{500, 2000}, false},
		{"", nil, false},
		{"0", nil, false},
		{"2000,500", nil, true},
		{"500,500", nil, true},
		{"500,-1", nil, true},
		{"5k", nil, true},
	} {
		got, err := parseSizes(tt.text)
		if (err != nil) != tt.err || !slices.Equal(got, tt.want) {
			t.Errorf("parseSizes(%q) = %v, %v; want %v, error %v", tt.text, got, err, tt.want, tt.err)
		}
	}
	var l sizeList
	if err := l.Set("5000,20000"); err != nil || l.String() != "5000,20000" {
		t.Errorf("Set then String = %q, %v", l.String(), err)
	}
}

func TestTheScaleConfigurationReadsEachNamespaceOnceAndTheSinglesOfTheFirst(t *testing.T) {
	config := scaleConfig(12000)
	textcheck.Contains(t, "configuration", config,
		"data \"k8s_services\" \"scale_00\" {\n  namespace = \"bench-scale-00\"",
		"data \"k8s_services\" \"scale_02\" {\n  namespace = \"bench-scale-02\"",
		"singles = toset([\"fleet-0000\", \"fleet-0001\", ",
		"\"fleet-0099\"])",
		"for_each  = local.singles\n  namespace = \"bench-scale-00\"\n  service   = each.key",
		"sum([for s in data.k8s_services.scale_02.services : length(s.endpoints)]),",
		"sum([for s in data.k8s_ready_endpoints.single : length(s.endpoints)]),",
	)
	if strings.Contains(config, "scale_03") || strings.Contains(config, "fleet-0100") {
		t.Errorf("configuration reads more than 3 namespaces and 100 singles:\n%s", config)
	}
	for _, tt := range []struct{ services, namespaces, endpoints int }{
		{500, 1, 6000}, {5000, 1, 51000}, {5001, 2, 51010}, {50000, 10, 501000},
	} {
		if got := syncScaleNamespaces(tt.services); got != tt.namespaces {
			t.Errorf("%d Services fill %d namespaces, want %d", tt.services, got, tt.namespaces)
		}
		if got := scaleEndpoints(tt.services); got != tt.endpoints {
			t.Errorf("%d Services: %d endpoints summed, want %d", tt.services, got, tt.endpoints)
		}
	}
}

func TestEachScaleChangeIsInAnotherServiceOfAFleetOrOfASingle(t *testing.T) {
	for _, n := range []int{500, 12000, 50000} {
		seen := map[string]bool{}
		for i := range 20 {
			ns, svc, e, single := scaleChange(n, i)
			key := fmt.Sprintf("%s/%s/%d", ns, svc, e)
			if seen[key] {
				t.Errorf("n %d: change %d repeats %s", n, i, key)
			}
			seen[key] = true
			var index int
			if _, err := fmt.Sscanf(svc, "fleet-%d", &index); err != nil {
				t.Fatalf("n %d, change %d: Service %q", n, i, svc)
			}
			isSingle := ns == syncScaleNamespace(0) && index < syncScaleSingles
			if single != isSingle || single != (i%2 == 1) {
				t.Errorf("n %d, change %d: %s/%s said single %v, a single's Service %v", n, i, ns, svc, single, isSingle)
			}
			last := syncScaleNamespaces(n) - 1
			if !single && (ns != syncScaleNamespace(last) || index >= n-last*syncScaleNamespaceSize) {
				t.Errorf("n %d, change %d: %s/%s is not a Service of the last namespace", n, i, ns, svc)
			}
			if e < 0 || e >= syncFleetEndpoints {
				t.Errorf("n %d, change %d: endpoint %d", n, i, e)
			}
		}
	}
}

// twenty are latencies of 0.01 to 0.20 s, shuffled: p50 0.10, p99 0.20.
func twenty() []float64 {
	var v []float64
	for i := range 20 {
		v = append(v, float64((i*7)%20+1)/100)
	}
	return v
}

func scaleFixture() *scaleResults {
	done := func(rss, idleCPU float64, latency []float64) *scaleRun {
		return &scaleRun{noLimit: "-memory-limit-mib 0", watching: 4, compared: 9.5, syncCPU: 6, syncChildCPU: 1, idle: 60, idleCPU: idleCPU,
			rssCompared: rss - 10, peakRSS: rss, latency: latency, detection: latency, reached: stageChanges}
	}
	return &scaleResults{quiet: 200 * time.Millisecond, changes: 20, wait: 10 * time.Minute, baseline: "6a43b01", points: []*scalePoint{
		{services: 500, namespaces: 1, created: 500, create: 3, apply: 10, stateMB: 3,
			current: done(40, 0.06, []float64{0.01, 0.02}), base: done(80, 0.06, []float64{0.02, 0.04})},
		{services: 2000, namespaces: 1, created: 1500, create: 9, apply: 30, stateMB: 12,
			current: func() *scaleRun { r := done(160, 0.3, twenty()); r.overdue = 1; return r }(), base: &scaleRun{timeout: "no 1 line(s) \"watching\": context deadline exceeded", reached: stageStarted}},
	}}
}

func TestScaleRowsGiveTheTargetsAtTheLargestSize(t *testing.T) {
	res := scaleFixture()
	rows := scaleTargetRows(res)
	want := []string{
		"| 160.0 MiB | ≤ 150 MiB | **miss** by 10.00 MiB (7 % over) |",
		"| 0.200 s (p50 0.100 s) | ≤ 0.100 s | **miss** by 0.10 s (100 % over) |",
		"| 0.50 % of a core | < 1 % | **pass** (50 % under) |",
		"| 4.0 s; 9.5 s | stated | |",
	}
	textcheck.RowSuffixes(t, rows, want...)
	if !strings.Contains(rows[1], "p99 (nearest rank) of 20 changes; 1 of them met the loop reading state |") {
		t.Errorf("the latency row does not count the overdue change: %q", rows[1])
	}
	if !strings.Contains(rows[0], "at 2000 Services x 10 endpoints (the target is at 50000), no memory limit (-memory-limit-mib 0)") {
		t.Errorf("row 0 does not say the size and the limit: %q", rows[0])
	}

	// Within the bounds.
	res.points[1].current.peakRSS, res.points[1].current.latency = 120, []float64{0.02, 0.09, 0.05}
	rows = scaleTargetRows(res)
	if !strings.HasSuffix(rows[0], "| **pass** (20 % under) |") || !strings.HasSuffix(rows[1], "| 0.090 s (p50 0.050 s) | ≤ 0.100 s | **pass** (10 % under) |") {
		t.Errorf("rows within the bounds:\n%s", strings.Join(rows, "\n"))
	}

	// This build timed out before its first comparison: no figure passes.
	res.points[1].current = &scaleRun{noLimit: "-memory-limit-mib 0", watching: 300, peakRSS: 90, timeout: "the companion's CPU did not settle within 10m0s", reached: stageWatching}
	rows = scaleTargetRows(res)
	for i, w := range []string{
		"| 90.0 MiB | ≤ 150 MiB | **miss**: not measured to the end (timeout: the companion's CPU did not settle within 10m0s) |",
		"| 0 of 20 changes measured | ≤ 0.100 s | **miss** (timeout: the companion's CPU did not settle within 10m0s) |",
		"| not measured | < 1 % | **miss** (timeout: the companion's CPU did not settle within 10m0s) |",
		"| 300.0 s; not within 10m0s | stated | |",
	} {
		if !strings.HasSuffix(rows[i], w) {
			t.Errorf("row %d = %q, want it to end with %q", i, rows[i], w)
		}
	}
	if scaleTargetRows(&scaleResults{}) != nil || scaleTargetRows(nil) != nil || scaleSection(&scaleResults{}) != "" {
		t.Error("no curve gave rows or a section")
	}
}

func TestTheScaleCurveHasARowPerSizeAndEachFigureOverTheBaselines(t *testing.T) {
	section := scaleSection(scaleFixture())
	textcheck.Contains(t, "section", section,
		"| Services | namespaces | created (this size's), s | apply, s | state, MB | start → `watching`, s |",
		"| 500 | 1 | 3.0 (500) | 10.0 | 3.0 | 4.0 | 9.5 | 7.00 | 30.0 | 40.0 | 0.100 | 0.010 | 0.020 | 0 | 0 |",
		"| 2000 | 1 | 9.0 (1500) | 30.0 | 12.0 | 4.0 | 9.5 | 7.00 | 150.0 | 160.0 | 0.500 | 0.100 | 0.200 | 1 | 0 |",
		"The baseline's companion (6a43b01) right after this one",
		"p99 of 20 changes is the largest",
		"| 500 | peak RSS, MiB | 40.0 | 80.0 | 0.500× |",
		"| 500 | latency p99, s | 0.020 | 0.040 | 0.500× |",
		"| 500 | idle CPU, % of a core | 0.100 | 0.100 | 1.000× |",
		"| 2000 | start → `watching`, s | 4.0 | timeout | — |",
		"| 2000 | latency p50, s | 0.100 | timeout | — |",
		"Not measured in full: 2000 Services, the baseline: timeout (no 1 line(s) \"watching\": context deadline exceeded).",
	)
	res := scaleFixture()
	res.changes = 200
	if section := scaleSection(res); !strings.Contains(section, "p99 of 200 changes is the 198-th smallest") {
		t.Errorf("the rank of p99 of 200:\n%s", section)
	}
	res.baseline = ""
	for _, p := range res.points {
		p.base = nil
	}
	if section := scaleSection(res); strings.Contains(section, "Before/after") || strings.Contains(section, "baseline") {
		t.Errorf("a curve without a baseline has its table:\n%s", section)
	}
	res.points[0].current = &scaleRun{failed: "the companion exited (1)"}
	if section := scaleSection(res); !strings.Contains(section, "| 500 | 1 | 3.0 (500) | 10.0 | 3.0 | failed | failed |") {
		t.Errorf("a failed run:\n%s", section)
	}
}

func TestAChangeWhoseWindowOutlastedSettleMaxIsOverdue(t *testing.T) {
	quiet := 200 * time.Millisecond
	for _, tt := range []struct {
		latency, detection float64
		want               bool
	}{
		// run started 0.25 s after the write, the window opened after 0.05 s: 0.2 s
		{0.05, 0.05, false},
		// the window closed by -settle-max (2.2 s), 0.3 s after the write
		{2.3, 0.3, false},
		// 9.6 s after the write, the window opened after 0.357 s: 9.24 s
		{9.404, 0.357, true},
	} {
		if got := windowOverdue(tt.latency, tt.detection, quiet); got != tt.want {
			t.Errorf("windowOverdue(%v, %v) = %v, want %v", tt.latency, tt.detection, got, tt.want)
		}
	}
}

func TestSyncPartsAreNamedOnes(t *testing.T) {
	parts, err := parseParts("check, scale")
	if err != nil || len(parts) != 2 || !parts["check"] || !parts["scale"] {
		t.Errorf("parseParts = %v, %v", parts, err)
	}
	if _, err := parseParts("check,sclae"); err == nil {
		t.Error("a misspelt part was accepted")
	}
}
