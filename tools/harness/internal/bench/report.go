package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/binsize"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/stats"
)

// find gives the current build's measurement whose title starts with prefix.
func (b *benchRun) find(prefix string) *measurement {
	for _, m := range b.ms {
		if m.baselineOf == nil && strings.HasPrefix(m.title, prefix) {
			return m
		}
	}
	return nil
}

// sizes gives the release binary's size and what takes it.
type sizeReport struct {
	release, trivial int64
	table            string
}

func (b *benchRun) sizes() (sizeReport, error) {
	var r sizeReport
	info, err := os.Stat(b.Provider)
	if err != nil {
		return r, err
	}
	r.release = info.Size()
	if info, err = os.Stat(b.trivial); err != nil {
		return r, err
	}
	r.trivial = info.Size()
	var table bytes.Buffer
	if err := binsize.Print(&table, filepath.Join(b.Work, "unstripped")); err != nil {
		return r, err
	}
	r.table = table.String()
	return r, nil
}

type goBenchmark struct {
	name                   string
	nsPerOp, bytes, allocs float64
}

// runGoBenchmarks runs the rules' benchmarks 5 times and gives the medians.
func runGoBenchmarks(ctx context.Context, root string) ([]goBenchmark, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run=NONE", "-bench=.", "-benchmem", "-count=5", "./internal/endpoints/")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -bench: %w\n%s", err, out)
	}
	return parseGoBenchmarks(string(out)), nil
}

// parseGoBenchmarks gives the median of each benchmark of the output of go
// test -bench -benchmem, in the order they first appear, without the -N
// suffix of GOMAXPROCS.
func parseGoBenchmarks(out string) []goBenchmark {
	samples := map[string][3][]float64{}
	var order []string
	for line := range strings.SplitSeq(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 3 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := fields[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		s, seen := samples[name]
		if !seen {
			order = append(order, name)
		}
		for i := 2; i+1 < len(fields); i++ {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			switch fields[i+1] {
			case "ns/op":
				s[0] = append(s[0], v)
			case "B/op":
				s[1] = append(s[1], v)
			case "allocs/op":
				s[2] = append(s[2], v)
			}
		}
		samples[name] = s
	}
	var result []goBenchmark
	for _, name := range order {
		s := samples[name]
		result = append(result, goBenchmark{name: name, nsPerOp: stats.Median(s[0]), bytes: stats.Median(s[1]), allocs: stats.Median(s[2])})
	}
	return result
}

// reportEnv is what the report says of the machine and the run that the
// measurements do not: apart, so that a test can give a fixed one.
type reportEnv struct {
	date                        time.Time
	machine                     string
	goVersion, terraformVersion string
	loadEnd                     string
}

func currentReportEnv() reportEnv {
	env := reportEnv{date: time.Now(), machine: benchrun.Machine(), loadEnd: benchrun.LoadAverage()}
	env.goVersion, env.terraformVersion = benchrun.Versions()
	return env
}

func (b *benchRun) report(requests auditCount, size sizeReport, gobench []goBenchmark, env reportEnv) string {
	var r strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&r, format+"\n", args...) }
	runs := b.opts.Runs
	p("# make bench results")
	p("")
	p("Written by `make bench` (tools/harness bench) on %s; see [README.md](README.md) for what each number means and how to run it.", env.date.UTC().Format("2006-01-02"))
	p("")
	p("Machine: %s, Linux; %s, %s; Kubernetes %s (local control plane). Load average (1, 5, 15 min) %s at the start, %s at the end. %d timed rounds of every command, interleaved, after one untimed round.",
		env.machine, env.goVersion, env.terraformVersion, b.Cluster.Version, b.LoadStart, env.loadEnd, runs)
	p("")

	plan100 := b.find("`terraform plan`, 100 `k8s_ready_endpoints`")
	trivial := b.find("`terraform plan`, 100 `trivial_constant`")
	big := b.find("`terraform plan`, 1 `k8s_ready_endpoints` of a Service")
	validate := b.find("`terraform validate`, 100")
	cpuPerRead := stats.Median(plan100.cpu) / 100 * 1000
	floorRatio := stats.Median(plan100.wall) / stats.Median(trivial.wall)
	p("## Targets")
	p("")
	p("| measurement | measured | target | verdict |")
	p("|---|---:|---:|---|")
	p("| provider CPU per read, plan of 100 (user + system of all provider processes / 100, median) | %.2f ms | ≤ 2.0 ms | %s |", cpuPerRead, stats.Verdict(cpuPerRead, 2.0, " ms"))
	p("| plan of 100 reads / plan of 100 trivial data sources (medians, same rounds) | %.2f× | ≤ 1.25× | %s |", floorRatio, stats.Verdict(floorRatio, 1.25, "×"))
	p("| plan of one read of %d endpoints (median) | %.3f s | ≤ 0.8 s | %s |", fixture.BigEndpoints, stats.Median(big.wall), stats.Verdict(stats.Median(big.wall), 0.8, " s"))
	p("| provider peak RSS, that read (median) | %.1f MiB | ≤ 60 MiB | %s |", stats.Median(big.rss), stats.Verdict(stats.Median(big.rss), 60, " MiB"))
	p("| provider peak RSS, plan of 100 (median) | %.1f MiB | ≤ 45 MiB | %s |", stats.Median(plan100.rss), stats.Verdict(stats.Median(plan100.rss), 45, " MiB"))
	p("| `terraform validate`, 100 data sources (median) | %.3f s | — | |", stats.Median(validate.wall))
	mb := float64(size.release) / 1e6
	p("| release binary (linux/amd64) | %.2f MB (%.2f MiB) | ≤ 26 MB | %s |", mb, float64(size.release)/1048576, stats.Verdict(mb, 26, " MB"))
	reads, fleetReads, podLists := 0, 0, 0
	for _, m := range b.ms {
		reads += m.reads * runs
		fleetReads += m.fleetReads * runs
		podLists += m.podLists * runs
	}
	// A fleet read lists the Services and the slices of fixture.Namespace, a
	// page of kube.DefaultOptions().PageSize each: 500 of each, 2 pages.
	fleetPageSize := int(kube.DefaultOptions().PageSize)
	pages := (fixture.FleetServices + fleetPageSize - 1) / fleetPageSize
	gets, lists := requests.byKind["get\tservices\t200"], requests.byKind["list\tendpointslices\t200"]
	serviceLists := requests.byKind["list\tservices\t200"]
	singleLists := lists - fleetReads*pages
	pods := requests.byKind["list\tpods\t200"]
	others := requests.total - gets - lists - serviceLists - pods
	requestsVerdict := "**miss**"
	if gets == reads && singleLists == reads && others == 0 && pods == podLists {
		requestsVerdict = "**pass**"
	}
	p("| API requests per `k8s_ready_endpoints` read | %.2f get services + %.2f list endpointslices + %.2f other | 1 get services + 1 list endpointslices | %s |",
		float64(gets)/float64(reads), float64(singleLists)/float64(reads), float64(others)/float64(reads), requestsVerdict)
	if podLists > 0 {
		p("| LISTs of Pods, for `pod_health_checks` | %d | %d (one per read with it; the fleet's in pages) | %s |", pods, podLists, map[bool]string{true: "**pass**", false: "**miss**"}[pods == podLists])
	}
	if fleet := b.find("`terraform plan`, 1 `k8s_services`"); fleet != nil && fleetReads > 0 {
		each := b.find(fmt.Sprintf("`terraform plan`, %d `k8s_ready_endpoints`, one per Service", fixture.FleetServices))
		fleetVerdict := "**miss**"
		if serviceLists == fleetReads*pages {
			fleetVerdict = "**pass**"
		}
		p("| plan of 1 `k8s_services` read of %d Services x 10 pods (median) | %.3f s | ≤ 0.5 s | %s |", fixture.FleetServices, stats.Median(fleet.wall), stats.Verdict(stats.Median(fleet.wall), 0.5, " s"))
		ratio := stats.Median(fleet.wall) / stats.Median(each.wall)
		p("| that plan / the plan of %d `k8s_ready_endpoints` over the same Services (same rounds) | %.3f× | ≤ 0.15× | %s |", fixture.FleetServices, ratio, stats.Verdict(ratio, 0.15, "×"))
		p("| provider peak RSS, that fleet read (median) | %.1f MiB | ≤ 80 MiB | %s |", stats.Median(fleet.rss), stats.Verdict(stats.Median(fleet.rss), 80, " MiB"))
		p("| requests per fleet read (page size %d: %d pages of %d Services and of their %d slices) | %.2f list services + %.2f list endpointslices | %d + %d, nothing per Service | %s |",
			fleetPageSize, pages, fixture.FleetServices, fixture.FleetServices, float64(serviceLists)/float64(fleetReads), float64(lists-singleLists)/float64(fleetReads), pages, pages, fleetVerdict)
	}
	if ready10k := findBenchmark(gobench, "BenchmarkPool/endpoints=10000"); ready10k != nil {
		ms := ready10k.nsPerOp / 1e6
		p("| `Pool`, 10k endpoints (median of 5) | %.2f ms | < 5 ms | %s |", ms, stats.Verdict(ms, 5, " ms"))
	}
	if fleet := findBenchmark(gobench, "BenchmarkFleet"); fleet != nil {
		ms := fleet.nsPerOp / 1e6
		p("| `Fleet`, 50,000 endpoints in 500 Services (median of 5) | %.2f ms | < 50 ms | %s |", ms, stats.Verdict(ms, 50, " ms"))
	}
	p("")

	p("## Commands (wall time and provider CPU; medians of %d)", runs)
	p("")
	p("| command | wall, s | min–max, s | provider CPU, s | CPU per data source, ms | provider processes | peak RSS, MiB | control plane CPU, s |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, m := range b.ms {
		cpu, perRead, starts, rss := "—", "—", "—", "—"
		if len(m.cpu) > 0 {
			cpu = fmt.Sprintf("%.3f", stats.Median(m.cpu))
			starts = fmt.Sprint(m.starts[len(m.starts)-1])
			rss = fmt.Sprintf("%.1f", stats.Median(m.rss))
			if m.perRead > 0 {
				perRead = fmt.Sprintf("%.2f", stats.Median(m.cpu)/float64(m.perRead)*1000)
			}
		}
		p("| %s | %.3f | %s | %s | %s | %s | %s | %.2f |", m.title, stats.Median(m.wall), stats.MinMax(m.wall, "%.3f"), cpu, perRead, starts, rss, stats.Median(m.server))
	}
	p("")
	if b.opts.Incumbent != "" {
		p("Incumbent (K8S_TF_BENCH_INCUMBENT, %s), same rounds:", filepath.Base(b.opts.Incumbent))
		p("")
		p("| ratio | wall | provider CPU |")
		p("|---|---:|---:|")
		for _, kind := range []string{"kubernetes_endpoints_v1", "kubernetes_endpoint_slice_v1"} {
			if m := b.find("`terraform plan`, 100 `" + kind); m != nil {
				p("| plan of 100 `k8s_ready_endpoints` / 100 `%s` | %.2f× | %.2f× |", kind, stats.Median(plan100.wall)/stats.Median(m.wall), stats.Median(plan100.cpu)/stats.Median(m.cpu))
			}
		}
		p("")
	} else {
		p("The incumbent was not measured: set K8S_TF_BENCH_INCUMBENT to a built terraform-provider-kubernetes binary (see README.md).")
		p("")
	}
	r.WriteString(b.beforeAfter())

	p("## API requests at the API server")
	p("")
	baselineReads := ""
	if b.opts.Baseline != "" {
		baselineReads = " (the baseline's included: both builds send the same user agent)"
	}
	p("Audit log lines with a user agent starting with `terraform-provider-k8s` during the timed rounds: %d `k8s_ready_endpoints` reads and %d `k8s_services` reads%s; per read below is per `k8s_ready_endpoints` read.", reads, fleetReads, baselineReads)
	p("")
	p("| verb | resource | HTTP code | requests | per read |")
	p("|---|---|---|---:|---:|")
	kinds := make([]string, 0, len(requests.byKind))
	for k := range requests.byKind {
		kinds = append(kinds, k)
	}
	// Most requests first; kinds of as many requests by name, so that two
	// runs with the same counts give the same table.
	slices.SortFunc(kinds, func(a, b string) int {
		return cmp.Or(requests.byKind[b]-requests.byKind[a], strings.Compare(a, b))
	})
	for _, k := range kinds {
		f := strings.Split(k, "\t")
		p("| %s | %s | %s | %d | %.2f |", f[0], f[1], f[2], requests.byKind[k], float64(requests.byKind[k])/float64(reads))
	}
	p("")
	p("Requests for discovery or OpenAPI paths (/api, /apis, /openapi, /version): %d.", requests.discovery)
	p("")

	p("## Binary")
	p("")
	p("The release build (`CGO_ENABLED=0 go build -trimpath -ldflags \"-s -w\"`, as .goreleaser.yml) is %d bytes. The trivial provider (terraform-plugin-framework and one constant data source, same flags) is %.2f MB: the framework's floor.", size.release, float64(size.trivial)/1e6)
	p("")
	p("Bytes of the unstripped build by module and package (code, and data in symbols; the function tables of .gopclntab grow with the code):")
	p("")
	r.WriteString(size.table)
	p("")

	if len(gobench) > 0 {
		p("## Rules: `go test -run=NONE -bench=. -benchmem -count=5 ./internal/endpoints/`")
		p("")
		p("Medians of 5. Growth is the time over that of the size ten times smaller.")
		p("")
		p("| benchmark | ns/op | ms/op | B/op | allocs/op | growth |")
		p("|---|---:|---:|---:|---:|---:|")
		var prev goBenchmark
		for _, g := range gobench {
			growth := "—"
			if family, _, _ := strings.Cut(g.name, "/"); prev.name != "" && strings.HasPrefix(prev.name, family+"/") {
				growth = fmt.Sprintf("%.1f×", g.nsPerOp/prev.nsPerOp)
			}
			p("| %s | %.0f | %.2f | %.0f | %.0f | %s |", g.name, g.nsPerOp, g.nsPerOp/1e6, g.bytes, g.allocs, growth)
			prev = g
		}
		p("")
	}
	return r.String()
}

func findBenchmark(all []goBenchmark, name string) *goBenchmark {
	for i := range all {
		if all[i].name == name {
			return &all[i]
		}
	}
	return nil
}

// beforeAfter is the report's section on the baseline: for each measurement
// repeated with the baseline's provider, the medians of both and their ratio
// for wall time, provider CPU and peak RSS, and the verdict against "no worse
// than 5 %" for the first two.
func (b *benchRun) beforeAfter() string {
	var r strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&r, format+"\n", args...) }
	p("## Before/after")
	p("")
	if b.opts.Baseline == "" {
		p("No baseline was measured: set K8S_TF_BENCH_BASELINE (or -baseline) to a git revision to plan with the provider built at it in the same rounds (see README.md).")
		p("")
		return r.String()
	}
	p("Baseline: the provider at `%s` (commit %s), built from that revision's tree as the current one is built (`CGO_ENABLED=0 go build -trimpath -ldflags \"-s -w\"`); current: commit %s. "+
		"Every round plans each configuration below with the current build, then at once with the baseline (same configuration, same directory, a CLI configuration of its own), both through the rusage wrapper. "+
		"Ratios are current / baseline of the medians of %d rounds; \"per round\" is the lowest and the highest ratio of the two plans of one round. "+
		"Target: no worse than 5 %% (ratio ≤ 1.05×) in wall time and in provider CPU; peak RSS is given as information.",
		b.opts.Baseline, b.BaselineCommit, b.CurrentCommit, b.opts.Runs)
	p("")
	p("| measurement | | current | baseline | current / baseline | per round, min–max | verdict (≤ 1.05×) |")
	p("|---|---|---:|---:|---:|---:|---|")
	row := func(title, what string, cur, old []float64, format string, judged bool) {
		ratio := stats.Median(cur) / stats.Median(old)
		var rounds []float64
		for i := range min(len(cur), len(old)) {
			rounds = append(rounds, cur[i]/old[i])
		}
		v := "information"
		if judged {
			v = beforeAfterVerdict(ratio)
		}
		p("| %s | %s | "+format+" | "+format+" | %.3f× | %s× | %s |", title, what, stats.Median(cur), stats.Median(old), ratio, stats.MinMax(rounds, "%.2f"), v)
	}
	for _, base := range b.ms {
		if m := base.baselineOf; m != nil {
			row(m.title, "wall time of the plan", m.wall, base.wall, "%.3f s", true)
			row("", "provider CPU per read (user + system)", msPerRead(m.cpu, m.perRead), msPerRead(base.cpu, m.perRead), "%.2f ms", true)
			row("", "provider peak RSS", m.rss, base.rss, "%.1f MiB", false)
		}
	}
	p("")
	return r.String()
}

// beforeAfterVerdict judges a ratio current / baseline against "no worse
// than 5 %", and says the change in per cent.
func beforeAfterVerdict(ratio float64) string {
	v := "**pass**"
	if ratio > 1.05 {
		v = "**miss**"
	}
	return fmt.Sprintf("%s (%+.1f %%)", v, (ratio-1)*100)
}

// msPerRead is the provider CPU of each run in ms per read.
func msPerRead(cpu []float64, reads int) []float64 {
	out := make([]float64, len(cpu))
	for i, c := range cpu {
		out[i] = c / float64(reads) * 1000
	}
	return out
}
