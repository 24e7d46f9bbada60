package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/textcheck"
)

// fixedRun is a bench run of 3 rounds as prepare lays it out (sizes 1 and
// 100, the floor, the fleet, the 5,000-endpoint read, the incumbent, the
// validations, and the baseline's plan after each of the three it repeats),
// with made-up measurements: some meet their targets, some miss them.
func fixedRun() *benchRun {
	m := func(title string, reads, fleetReads, perRead int, wall, cpu, rss, server []float64) *measurement {
		starts := []int{}
		if len(cpu) > 0 {
			starts = []int{3, 3, 3}
		}
		return &measurement{title: title, reads: reads, fleetReads: fleetReads, perRead: perRead,
			wall: wall, cpu: cpu, rss: rss, starts: starts, server: server}
	}
	plan100 := m("`terraform plan`, 100 `k8s_ready_endpoints`", 100, 0, 100,
		[]float64{0.62, 0.60, 0.65}, []float64{0.190, 0.187, 0.185}, []float64{33.4, 33.0, 34.1}, []float64{0.26, 0.25, 0.27})
	fleet := m(fmt.Sprintf("`terraform plan`, 1 `k8s_services` of the same %d Services", fixture.FleetServices), 0, 1, 1,
		[]float64{0.79, 0.80, 0.78}, []float64{0.11, 0.12, 0.11}, []float64{41.3, 41.0, 41.5}, []float64{0.05, 0.05, 0.06})
	big := m(fmt.Sprintf("`terraform plan`, 1 `k8s_ready_endpoints` of a Service with %d endpoints", fixture.BigEndpoints), 1, 0, 1,
		[]float64{0.63, 0.64, 0.62}, []float64{0.20, 0.21, 0.19}, []float64{38.3, 38.0, 38.6}, []float64{0.02, 0.02, 0.02})
	// The same command with the baseline's provider, as addBaseline makes it.
	baseline := func(of *measurement, wall, cpu, rss []float64) *measurement {
		base := m(of.title+" (baseline)", of.reads, of.fleetReads, of.perRead, wall, cpu, rss, of.server)
		base.baselineOf = of
		return base
	}
	return &benchRun{
		opts: Options{Runs: 3, Sizes: []int{1, 100}, Incumbent: "incumbent/terraform-provider-kubernetes", Baseline: "v0.1.0"},
		Run: &benchrun.Run{
			BaselineCommit: "8331de0",
			CurrentCommit:  "eb32036 + uncommitted changes",
			LoadStart:      "0.20 0.15 0.10",
			Cluster:        &testcluster.Cluster{Version: "v1.37.2"},
		},
		ms: []*measurement{
			m("`terraform plan`, 1 `k8s_ready_endpoints`", 1, 0, 1,
				[]float64{0.31, 0.30, 0.32}, []float64{0.050, 0.052, 0.048}, []float64{30.1, 30.5, 30.3}, []float64{0.01, 0.01, 0.02}),
			plan100,
			baseline(plan100, []float64{0.60, 0.61, 0.59}, []float64{0.200, 0.170, 0.175}, []float64{33.0, 33.2, 33.1}),
			m("`terraform plan`, 100 `trivial_constant` (Terraform's floor)", 0, 0, 100,
				[]float64{0.33, 0.32, 0.34}, []float64{0.156, 0.150, 0.160}, []float64{25.0, 25.2, 24.8}, []float64{0, 0, 0}),
			m(fmt.Sprintf("`terraform plan`, %d `k8s_ready_endpoints`, one per Service", fixture.FleetServices), fixture.FleetServices, 0, fixture.FleetServices,
				[]float64{2.30, 2.35, 2.32}, []float64{0.60, 0.62, 0.61}, []float64{40.0, 40.2, 39.9}, []float64{1.1, 1.2, 1.0}),
			fleet,
			baseline(fleet, []float64{0.80, 0.84, 0.81}, []float64{0.10, 0.10, 0.12}, []float64{55.0, 54.8, 54.6}),
			big,
			baseline(big, []float64{0.61, 0.60, 0.62}, []float64{0.19, 0.20, 0.19}, []float64{38.3, 38.0, 38.6}),
			m("`terraform plan`, 100 `kubernetes_endpoints_v1` (incumbent)", 0, 0, 100,
				[]float64{0.74, 0.73, 0.75}, []float64{0.48, 0.47, 0.49}, []float64{60.0, 61.0, 59.0}, []float64{0.30, 0.31, 0.29}),
			m("`terraform plan`, 100 `kubernetes_endpoint_slice_v1` (incumbent)", 0, 0, 100,
				[]float64{0.94, 0.93, 0.95}, []float64{0.72, 0.71, 0.73}, []float64{62.0, 63.0, 61.0}, []float64{0.30, 0.31, 0.29}),
			m("`terraform validate`, 100 `k8s_ready_endpoints`", 0, 0, 0,
				[]float64{0.21, 0.20, 0.22}, []float64{0.05, 0.05, 0.05}, []float64{28.0, 28.0, 28.0}, []float64{0, 0, 0}),
			m("`terraform validate`, empty configuration (the bare CLI)", 0, 0, 0,
				[]float64{0.05, 0.05, 0.06}, nil, nil, []float64{0, 0, 0}),
		},
	}
}

// fixedRequests are the requests of fixedRun as the audit log counts them:
// one GET and one LIST per k8s_ready_endpoints read, two pages of each LIST
// per fleet read.
func fixedRequests(b *benchRun) auditCount {
	reads, fleetReads := 0, 0
	for _, m := range b.ms {
		reads += m.reads * b.opts.Runs
		fleetReads += m.fleetReads * b.opts.Runs
	}
	c := auditCount{byKind: map[string]int{
		"get\tservices\t200":        reads,
		"list\tendpointslices\t200": reads + 2*fleetReads,
		"list\tservices\t200":       2 * fleetReads,
	}}
	for _, n := range c.byKind {
		c.total += n
	}
	return c
}

func fixedReport(t *testing.T, requests auditCount) string {
	t.Helper()
	gobench, err := os.ReadFile(filepath.Join("testdata", "gobench.txt"))
	if err != nil {
		t.Fatal(err)
	}
	b := fixedRun()
	size := sizeReport{release: 27_500_000, trivial: 17_900_000, table: "| module | bytes |\n|---|---:|\n| k8s.io/api | 2000000 |\n"}
	env := reportEnv{date: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), machine: "2 cores (Test CPU @ 2.80GHz), 7.8 GiB memory",
		goVersion: "go1.26.8", terraformVersion: "Terraform v1.11.4", loadEnd: "0.50 0.40 0.30"}
	return b.report(requests, size, parseGoBenchmarks(string(gobench)), env)
}

// The whole report of a fixed run is testdata/report.md; go test -update
// rewrites it, for a change meant to change the report (review the diff).
func TestTheReportOfAFixedRunIsTheGoldenOne(t *testing.T) {
	textcheck.Golden(t, filepath.Join("testdata", "report.md"), fixedReport(t, fixedRequests(fixedRun())))
}

// The targets table computes each row from the measurements; these rows are
// worked out by hand from fixedRun.
func TestTheTargetsTableOfAFixedRun(t *testing.T) {
	report := fixedReport(t, fixedRequests(fixedRun()))
	textcheck.ContainsLines(t, "the report", report,
		// median CPU 0.187 s / 100 reads, 0.13 ms under 2.0
		"| provider CPU per read, plan of 100 (user + system of all provider processes / 100, median) | 1.87 ms | ≤ 2.0 ms | **pass** (7 % under) |",
		// median wall 0.62 s / 0.33 s
		"| plan of 100 reads / plan of 100 trivial data sources (medians, same rounds) | 1.88× | ≤ 1.25× | **miss** by 0.63× (50 % over) |",
		"| plan of one read of 5000 endpoints (median) | 0.630 s | ≤ 0.8 s | **pass** (21 % under) |",
		"| release binary (linux/amd64) | 27.50 MB (26.23 MiB) | ≤ 26 MB | **miss** by 1.50 MB (6 % over) |",
		"| API requests per `k8s_ready_endpoints` read | 1.00 get services + 1.00 list endpointslices + 0.00 other | 1 get services + 1 list endpointslices | **pass** |",
		// 0.79 s / 2.32 s
		"| that plan / the plan of 500 `k8s_ready_endpoints` over the same Services (same rounds) | 0.341× | ≤ 0.15× | **miss** by 0.19× (127 % over) |",
		"| requests per fleet read (page size 250: 2 pages of 500 Services and of their 500 slices) | 2.00 list services + 2.00 list endpointslices | 2 + 2, nothing per Service | **pass** |",
		"| `Pool`, 10k endpoints (median of 5) | 4.40 ms | < 5 ms | **pass** (12 % under) |",
		"| `Fleet`, 50,000 endpoints in 500 Services (median of 5) | 55.00 ms | < 50 ms | **miss** by 5.00 ms (10 % over) |",
		"| plan of 100 `k8s_ready_endpoints` / 100 `kubernetes_endpoints_v1` | 0.84× | 0.39× |",
	)
}

// The before/after table, worked out by hand from fixedRun: current and
// baseline medians, their ratio, the ratios of each round, and the verdict
// against 1.05.
func TestTheBeforeAfterTableOfAFixedRun(t *testing.T) {
	report := fixedReport(t, fixedRequests(fixedRun()))
	textcheck.Contains(t, "the report", report,
		"Baseline: the provider at `v0.1.0` (commit 8331de0),",
		"current: commit eb32036 + uncommitted changes.",
		"Ratios are current / baseline of the medians of 3 rounds;",
		// 0.62 / 0.60; rounds 0.62/0.60, 0.60/0.61, 0.65/0.59
		"| `terraform plan`, 100 `k8s_ready_endpoints` | wall time of the plan | 0.620 s | 0.600 s | 1.033× | 0.98–1.10× | **pass** (+3.3 %) |",
		// 0.187 s / 100 against 0.175 s / 100: 7 % more CPU
		"|  | provider CPU per read (user + system) | 1.87 ms | 1.75 ms | 1.069× | 0.95–1.10× | **miss** (+6.9 %) |",
		"|  | provider peak RSS | 33.4 MiB | 33.1 MiB | 1.009× | 0.99–1.03× | information |",
		// faster: 0.79 / 0.81
		"| `terraform plan`, 1 `k8s_services` of the same 500 Services | wall time of the plan | 0.790 s | 0.810 s | 0.975× | 0.95–0.99× | **pass** (-2.5 %) |",
		"|  | provider CPU per read (user + system) | 110.00 ms | 100.00 ms | 1.100× | 0.92–1.20× | **miss** (+10.0 %) |",
		"|  | provider peak RSS | 41.3 MiB | 54.8 MiB | 0.754× | 0.75–0.76× | information |",
		"| `terraform plan`, 1 `k8s_ready_endpoints` of a Service with 5000 endpoints | wall time of the plan | 0.630 s | 0.610 s | 1.033× | 1.00–1.07× | **pass** (+3.3 %) |",
		// 0.20 / 0.19 = 1.053: just over the bound; rounds 1.05, 1.05, 1.00
		"|  | provider CPU per read (user + system) | 200.00 ms | 190.00 ms | 1.053× | 1.00–1.05× | **miss** (+5.3 %) |",
	)
}

// The targets table takes the current build's measurements, wherever the
// baseline's copies stand in the rounds.
func TestFindSkipsTheBaselinesMeasurements(t *testing.T) {
	b := fixedRun()
	slices.Reverse(b.ms)
	measured := 0
	for _, prefix := range baselineCompared {
		// The fixed run has no fleet with pod_health_checks.
		if !slices.ContainsFunc(b.ms, func(m *measurement) bool { return strings.HasPrefix(m.title, prefix) }) {
			continue
		}
		measured++
		if m := b.find(prefix); m == nil || m.baselineOf != nil || strings.HasSuffix(m.title, "(baseline)") {
			t.Errorf("find(%q) gave %+v, not the current build's measurement", prefix, m)
		}
	}
	if measured < 3 {
		t.Fatalf("%d of the compared measurements are in the fixed run: the test proves little", measured)
	}
}

func TestWithoutABaselineTheSectionSaysHowToMeasureIt(t *testing.T) {
	b := fixedRun()
	b.opts.Baseline = ""
	var ms []*measurement
	for _, m := range b.ms {
		if m.baselineOf == nil {
			ms = append(ms, m)
		}
	}
	b.ms = ms
	got := b.beforeAfter()
	if !strings.Contains(got, "No baseline was measured: set K8S_TF_BENCH_BASELINE") || strings.Contains(got, "| measurement |") {
		t.Errorf("without a baseline, the section is\n%s", got)
	}
}

func TestBeforeAfterVerdictPassesUpTo5PerCentWorse(t *testing.T) {
	for ratio, want := range map[float64]string{
		0.90:  "**pass** (-10.0 %)",
		1.00:  "**pass** (+0.0 %)",
		1.05:  "**pass** (+5.0 %)",
		1.051: "**miss** (+5.1 %)",
		1.30:  "**miss** (+30.0 %)",
	} {
		if got := beforeAfterVerdict(ratio); got != want {
			t.Errorf("beforeAfterVerdict(%v) = %q, want %q", ratio, got, want)
		}
	}
}

func TestAnExtraRequestPerReadIsAMiss(t *testing.T) {
	requests := fixedRequests(fixedRun())
	requests.byKind["get\tnamespaces\t200"] = 1
	requests.total++
	report := fixedReport(t, requests)
	want := "| API requests per `k8s_ready_endpoints` read | 1.00 get services + 1.00 list endpointslices + 0.00 other | 1 get services + 1 list endpointslices | **miss** |"
	if !strings.Contains(report, want) {
		t.Errorf("one request more than the two per read is not a miss:\n%s", report)
	}
}

func TestParseGoBenchmarksGivesTheMedianOfEachInOrder(t *testing.T) {
	got := parseGoBenchmarks("BenchmarkB/n=1-8 10 30 ns/op 5 B/op 1 allocs/op\n" +
		"BenchmarkA-8 10 7 ns/op\n" +
		"BenchmarkB/n=1-8 10 10 ns/op 7 B/op 1 allocs/op\n" +
		"not a benchmark line\n" +
		"BenchmarkB/n=1-8 10 20 ns/op 6 B/op 3 allocs/op\n")
	want := []goBenchmark{{name: "BenchmarkB/n=1", nsPerOp: 20, bytes: 6, allocs: 1}, {name: "BenchmarkA", nsPerOp: 7}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
}

// The request table counts what readAudit finds in the audit log: the
// provider's requests only, from the offset on, by verb, resource and code.
func TestReadAuditCountsTheProvidersRequestsFromTheOffset(t *testing.T) {
	before := `{"userAgent":"terraform-provider-k8s/0.1.0","verb":"get","requestURI":"/api/v1/namespaces/bench/services/web","objectRef":{"resource":"services"},"responseStatus":{"code":200}}` + "\n"
	after := strings.Join([]string{
		`{"userAgent":"terraform-provider-k8s/0.1.0","verb":"get","requestURI":"/api/v1/namespaces/bench/services/web","objectRef":{"resource":"services"},"responseStatus":{"code":200}}`,
		`{"userAgent":"terraform-provider-k8s/0.1.0","verb":"list","requestURI":"/apis/discovery.k8s.io/v1/namespaces/bench/endpointslices?labelSelector=x&limit=250","objectRef":{"resource":"endpointslices"},"responseStatus":{"code":200}}`,
		`{"userAgent":"terraform-provider-k8s/0.1.0","verb":"get","requestURI":"/api/v1/namespaces/bench/services/gone","objectRef":{"resource":"services"},"responseStatus":{"code":404}}`,
		`{"userAgent":"terraform-provider-k8s/0.1.0","verb":"get","requestURI":"/apis/discovery.k8s.io/v1?timeout=32s"}`,
		`{"userAgent":"kube-controller-manager/v1.37.2","verb":"list","requestURI":"/api/v1/nodes","objectRef":{"resource":"nodes"},"responseStatus":{"code":200}}`,
		`not json`,
	}, "\n") + "\n"
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(before+after), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readAudit(path, int64(len(before)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"get\tservices\t200": 1, "list\tendpointslices\t200": 1, "get\tservices\t404": 1, "get\t-\t0": 1}
	if fmt.Sprint(got.byKind) != fmt.Sprint(want) || got.total != 4 || got.discovery != 1 {
		t.Errorf("counted %v (total %d, discovery %d), want %v (total 4, discovery 1)", got.byKind, got.total, got.discovery, want)
	}
}

func TestIsDiscovery(t *testing.T) {
	for path, want := range map[string]bool{
		"/api": true, "/api/v1": true, "/apis": true, "/apis/discovery.k8s.io": true, "/apis/discovery.k8s.io/v1": true,
		"/openapi/v3": true, "/version": true,
		"/api/v1/nodes": false, "/apis/discovery.k8s.io/v1/endpointslices": false, "/api/v1/namespaces/a/services/b": false,
	} {
		if got := isDiscovery(path); got != want {
			t.Errorf("isDiscovery(%s) = %v, want %v", path, got, want)
		}
	}
}
