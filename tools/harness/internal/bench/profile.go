package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/stats"
)

// PROFILE=1 (bench -profile, or bench -only profile alone): where the
// provider's time and memory go in four reads, attributed by pprof, and its
// instructions per read counted under callgrind beside older builds.

// profiledRead is one configuration the profiles are of.
type profiledRead struct {
	name  string // of the files: bench/cpu-NAME.pprof, heap-NAME.pprof, heap-peak-NAME.pprof
	dir   string // b.DirOf(dir)
	title string
	reads int // data source reads per plan, for per-read figures
	// measurement is the title of the bench's measurement of the same
	// plan with the release build.
	measurement string
}

func profiledReads() []profiledRead {
	return []profiledRead{
		{"plan-100", "k8s-100", "a plan of 100 `k8s_ready_endpoints`", 100, "`terraform plan`, 100 `k8s_ready_endpoints`"},
		{"fleet-500", "fleet", fmt.Sprintf("a plan of 1 `k8s_services` of %d Services x 10 pods", fixture.FleetServices), 1,
			fmt.Sprintf("`terraform plan`, 1 `k8s_services` of the same %d Services", fixture.FleetServices)},
		{"fleet-500-checks", "fleet-checks", "the same with `pod_health_checks`", 1,
			fmt.Sprintf("`terraform plan`, 1 `k8s_services` of the same %d Services with `pod_health_checks`", fixture.FleetServices)},
		{"read-5000", "big", fmt.Sprintf("a plan of 1 `k8s_ready_endpoints` of %d endpoints", fixture.BigEndpoints), 1,
			fmt.Sprintf("`terraform plan`, 1 `k8s_ready_endpoints` of a Service with %d endpoints", fixture.BigEndpoints)},
	}
}

// findTitle is the measurement of the current build with that title.
func (b *benchRun) findTitle(title string) *measurement {
	for _, m := range b.ms {
		if m.baselineOf == nil && m.title == title {
			return m
		}
	}
	return nil
}

// profileTopN is how many functions each table of the profiles lists.
const profileTopN = 15

type profileResults struct {
	// plans are the bench's measurements of the reads with the release
	// build, when the part runs alone (bench -only profile); the whole
	// bench has them in its commands table.
	plans        []*measurement
	reads        []profiledReadResult
	profilePlans int
	// instructions are the callgrind counts, nil when not measured.
	instructions *instructionResults
}

type profiledReadResult struct {
	read profiledRead
	// cpu, alloc and peak are pprof's -top text of the merged profiles:
	// CPU by own time and by cumulative time, allocated bytes (whole life),
	// in-use bytes at each process's largest live heap.
	cpuFlat, cpuCum, alloc, allocCum, peak string
}

// profileReads plans each read profiledPlans times with the profiled
// provider for a CPU profile, and as many again for heap profiles (apart:
// the heap's sampling costs time), keeps each merged in bench/ and gives
// their top functions; then the instruction counts.
func (b *benchRun) profileReads(ctx context.Context) (*profileResults, error) {
	rc := filepath.Join(b.Work, "terraformrc-profile")
	if err := benchrun.WriteRC(rc, b.Work, map[string]string{"vigie/k8s": "profile"}); err != nil {
		return nil, err
	}
	res := &profileResults{profilePlans: b.opts.ProfilePlans}
	if b.opts.Only == "profile" {
		b.Say("%d rounds of the four reads with the release build (wall, CPU, peak RSS)", b.opts.Runs)
		for _, read := range profiledReads() {
			m := b.findTitle(read.measurement)
			if m == nil {
				return nil, fmt.Errorf("no measurement %s", read.measurement)
			}
			res.plans = append(res.plans, m)
			for _, base := range b.ms {
				if base.baselineOf == m {
					res.plans = append(res.plans, base)
				}
			}
		}
		for _, m := range res.plans {
			if _, err := b.runOnce(ctx, m, false); err != nil {
				return nil, err
			}
		}
		for range b.opts.Runs {
			for _, m := range res.plans {
				if _, err := b.runOnce(ctx, m, true); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, read := range profiledReads() {
		if b.opts.ProfilePlans == 0 {
			break
		}
		b.Say("profiles of the provider: %d plans of %s for CPU, %d for the heap", b.opts.ProfilePlans, read.title, b.opts.ProfilePlans)
		r := profiledReadResult{read: read}
		for _, kind := range []string{"cpu", "heap"} {
			dir := filepath.Join(b.Work, "profiles", read.name, kind)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			env := "K8S_TF_CPUPROFILE_DIR=" + dir
			if kind == "heap" {
				env = "K8S_TF_HEAPPROFILE_DIR=" + dir
			}
			for range b.opts.ProfilePlans {
				cmd := exec.CommandContext(ctx, "terraform", append([]string{"-chdir=" + b.DirOf(read.dir)}, planArgs()...)...)
				cmd.Env = append(slices.Clone(b.Env), "TF_CLI_CONFIG_FILE="+rc, env)
				if out, err := cmd.CombinedOutput(); err != nil {
					return nil, fmt.Errorf("profiled plan of %s: %w\n%s", read.title, err, out)
				}
			}
		}
		var err error
		cpu, err := b.mergeProfiles(ctx, filepath.Join(b.Work, "profiles", read.name, "cpu", "cpu-*.pprof"), "cpu-"+read.name+".pprof")
		if err != nil {
			return nil, err
		}
		heap, err := b.mergeProfiles(ctx, filepath.Join(b.Work, "profiles", read.name, "heap", "heap-[0-9]*.pprof"), "heap-"+read.name+".pprof")
		if err != nil {
			return nil, err
		}
		peak, err := b.mergeProfiles(ctx, filepath.Join(b.Work, "profiles", read.name, "heap", "heap-peak-*.pprof"), "heap-peak-"+read.name+".pprof")
		if err != nil {
			return nil, err
		}
		for _, t := range []struct {
			into *string
			file string
			args []string
		}{
			{&r.cpuFlat, cpu, []string{"-top"}},
			{&r.cpuCum, cpu, []string{"-top", "-cum"}},
			{&r.alloc, heap, []string{"-top", "-sample_index=alloc_space", profilerOwn}},
			{&r.allocCum, heap, []string{"-top", "-cum", "-sample_index=alloc_space", profilerOwn}},
			{&r.peak, peak, []string{"-top", "-sample_index=inuse_space", profilerOwn}},
		} {
			if *t.into, err = pprofTop(ctx, t.file, t.args...); err != nil {
				return nil, err
			}
		}
		res.reads = append(res.reads, r)
	}
	if b.opts.InstructionRounds > 0 {
		var err error
		if res.instructions, err = b.countInstructions(ctx); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// profilerOwn leaves out of the heap's tables what the profiled provider
// allocates to write its profiles.
const profilerOwn = `-ignore=^main\.(writeHeap|watchPeak)`

func planArgs() []string {
	return []string{"plan", "-input=false", "-lock=false", "-parallelism=10", "-no-color"}
}

// mergeProfiles merges the profiles that pattern matches into bench/name
// (git-ignored) and gives its path.
func (b *benchRun) mergeProfiles(ctx context.Context, pattern, name string) (string, error) {
	written, err := filepath.Glob(pattern)
	if err != nil || len(written) == 0 {
		return "", fmt.Errorf("the profiled provider wrote no profile %s", pattern)
	}
	merged, err := exec.CommandContext(ctx, "go", append([]string{"tool", "pprof", "-proto"}, written...)...).Output()
	if err != nil {
		return "", fmt.Errorf("go tool pprof -proto %s: %w", pattern, err)
	}
	kept := filepath.Join(b.Root, "bench", name)
	return kept, os.WriteFile(kept, merged, 0o644)
}

func pprofTop(ctx context.Context, file string, args ...string) (string, error) {
	args = append(append([]string{"tool", "pprof"}, args...), fmt.Sprintf("-nodecount=%d", profileTopN), file)
	out, err := exec.CommandContext(ctx, "go", args...).Output()
	if err != nil {
		return "", fmt.Errorf("go tool pprof %s: %w", strings.Join(args[2:], " "), err)
	}
	// The header's file, build and type lines say nothing the section does not.
	var keep []string
	for line := range strings.SplitSeq(strings.TrimRight(string(out), "\n"), "\n") {
		if strings.HasPrefix(line, "File: ") || strings.HasPrefix(line, "Build ID: ") || strings.HasPrefix(line, "Type: ") || strings.HasPrefix(line, "Time: ") ||
			strings.HasPrefix(line, "Active filters:") || strings.HasPrefix(line, "   ignore=") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n") + "\n", nil
}

// Instruction counts: user-space instructions that valgrind's callgrind
// executed for every provider process of a plan, summed. Unlike CPU
// seconds they do not grow when other work shares the cores, so two builds
// compare within a fraction of a per cent on a loaded machine. Both builds
// run unstripped (the same machine code as the release's -s -w, whose only
// difference is the symbol tables, which callgrind needs to name
// functions), with GODEBUG=asyncpreemptoff=1: callgrind stops on Go's
// preemption signals otherwise.

// instructionReads are the reads counted.
func instructionReads() []profiledRead {
	all := profiledReads()
	return []profiledRead{all[0], all[3]}
}

type instructionBuild struct {
	name     string // "current" or the revision
	commit   string
	program  string
	counts   map[string][]float64 // by read name: instructions per plan, one per round
	byFunc   map[string]map[string]float64
	procs    map[string]int // provider processes of one plan
	wrapDir  string
	outDir   string
	rcPath   string
	baseline bool
}

type instructionResults struct {
	rounds int
	reads  []profiledRead
	builds []*instructionBuild
}

// countInstructions plans each of instructionReads with the current
// build and each baseline, in turn within each round, under callgrind.
func (b *benchRun) countInstructions(ctx context.Context) (*instructionResults, error) {
	if _, err := exec.LookPath("valgrind"); err != nil {
		return nil, fmt.Errorf("instruction counts need valgrind (apt-get install valgrind): %w", err)
	}
	rounds := b.opts.InstructionRounds
	res := &instructionResults{rounds: rounds, reads: instructionReads()}
	current := &instructionBuild{name: "current", commit: b.CommitOf(ctx), program: filepath.Join(b.Work, "unstripped")}
	res.builds = append(res.builds, current)
	for _, rev := range b.opts.InstructionBaselines {
		b.Say("building the provider at %s unstripped, for its instruction counts", rev)
		program := filepath.Join(b.Work, "bin", "instructions-"+rev, "terraform-provider-k8s")
		commit, err := b.BuildAt(ctx, rev, program, false)
		if err != nil {
			return nil, err
		}
		res.builds = append(res.builds, &instructionBuild{name: rev, commit: commit, program: program, baseline: true})
	}
	for i, build := range res.builds {
		build.wrapDir = filepath.Join(b.Work, "callgrind-wrap", strconv.Itoa(i))
		build.outDir = filepath.Join(b.Work, "callgrind-out", strconv.Itoa(i))
		build.rcPath = filepath.Join(b.Work, fmt.Sprintf("terraformrc-callgrind-%d", i))
		build.counts, build.byFunc, build.procs = map[string][]float64{}, map[string]map[string]float64{}, map[string]int{}
		if err := os.MkdirAll(build.wrapDir, 0o755); err != nil {
			return nil, err
		}
		script := fmt.Sprintf("#!/bin/sh\nGODEBUG=asyncpreemptoff=1 exec valgrind --tool=callgrind --callgrind-out-file=%q --log-file=%q %q \"$@\"\n",
			filepath.Join(build.outDir, "callgrind.%p"), filepath.Join(build.outDir, "valgrind.%p.log"), build.program)
		if err := os.WriteFile(filepath.Join(build.wrapDir, "terraform-provider-k8s"), []byte(script), 0o755); err != nil {
			return nil, err
		}
		if err := benchrun.WriteRC(build.rcPath, filepath.Dir(build.wrapDir), map[string]string{"vigie/k8s": strconv.Itoa(i)}); err != nil {
			return nil, err
		}
	}
	for round := 1; round <= rounds; round++ {
		for _, read := range res.reads {
			for _, build := range res.builds {
				b.Say("instructions, round %d of %d: %s, %s build", round, rounds, read.title, build.name)
				if err := b.countPlan(ctx, build, read); err != nil {
					return nil, err
				}
			}
		}
	}
	return res, nil
}

// countPlan runs one plan of read with build under callgrind and records
// its instructions, in all and by function.
func (b *benchRun) countPlan(ctx context.Context, build *instructionBuild, read profiledRead) error {
	_ = os.RemoveAll(build.outDir)
	if err := os.MkdirAll(build.outDir, 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "terraform", append([]string{"-chdir=" + b.DirOf(read.dir)}, planArgs()...)...)
	cmd.Env = append(slices.Clone(b.Env), "TF_CLI_CONFIG_FILE="+build.rcPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("plan of %s under callgrind (%s build): %w\n%s", read.title, build.name, err, out)
	}
	outs, err := filepath.Glob(filepath.Join(build.outDir, "callgrind.*"))
	if err != nil || len(outs) == 0 {
		return fmt.Errorf("callgrind wrote nothing in %s (%s build): see its valgrind.*.log", build.outDir, build.name)
	}
	var total float64
	funcs := build.byFunc[read.name]
	if funcs == nil {
		funcs = map[string]float64{}
		build.byFunc[read.name] = funcs
	}
	for _, out := range outs {
		n, err := callgrindTotal(out)
		if err != nil {
			return err
		}
		total += n
		annotated, err := exec.CommandContext(ctx, "callgrind_annotate", "--threshold=100", "--auto=no", out).Output()
		if err != nil {
			return fmt.Errorf("callgrind_annotate %s: %w", out, err)
		}
		for name, ir := range parseAnnotate(string(annotated)) {
			funcs[name] += ir
		}
	}
	build.counts[read.name] = append(build.counts[read.name], total)
	build.procs[read.name] = len(outs)
	return nil
}

// callgrindTotal is the "totals:" (or "summary:") line of a callgrind
// output file: the instructions of the process.
func callgrindTotal(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var summary float64
	found := false
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		line := scanner.Text()
		for _, prefix := range []string{"totals:", "summary:"} {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				n, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
				if err != nil {
					return 0, fmt.Errorf("%s: %q: %w", path, line, err)
				}
				if prefix == "totals:" {
					return n, nil
				}
				summary, found = n, true
			}
		}
	}
	if err := scanner.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%s: no totals line (the process was killed before callgrind wrote it?)", path)
	}
	return summary, nil
}

// parseAnnotate reads callgrind_annotate's table of instructions by
// function ("1,234 (5.6%)  file:function [binary]" or older "1,234  file:function"):
// the function's own instructions, by its name without the file, the
// levels of a recursion summed.
func parseAnnotate(out string) map[string]float64 {
	funcs := map[string]float64{}
	inTable := false
	for line := range strings.SplitSeq(out, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "Ir") && strings.Contains(trimmed, "file:function") {
			inTable = true
			continue
		}
		if !inTable || trimmed == "" || strings.HasPrefix(trimmed, "--") {
			if inTable && trimmed == "" && len(funcs) > 0 {
				break
			}
			continue
		}
		number, rest, _ := strings.Cut(trimmed, " ")
		n, err := strconv.ParseFloat(strings.ReplaceAll(number, ",", ""), 64)
		if err != nil {
			continue
		}
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, "(") {
			_, rest, _ = strings.Cut(rest, ")")
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 || fields[0] == "PROGRAM" {
			continue
		}
		name := fields[0]
		if _, fn, ok := strings.Cut(name, ":"); ok {
			name = fn
		}
		// callgrind names the levels of a recursion f'2, f'3...: one function.
		if i := strings.LastIndexByte(name, '\''); i > 0 && strings.Trim(name[i+1:], "0123456789") == "" {
			name = name[:i]
		}
		funcs[name] += n
	}
	return funcs
}

// profileSection is the Markdown of the profiles and the instruction counts.
func profileSection(res *profileResults) string {
	if res == nil {
		return ""
	}
	r := benchrun.NewSection("Where the provider's time and memory go (PROFILE=1)")
	p := r.Line
	if len(res.plans) > 0 {
		r.Para("The four reads with the release build through the rusage wrapper, as in `make bench` (medians of %d rounds, interleaved; CPU and peak RSS of the provider processes of each plan):", len(res.plans[0].wall))
		r.Table("| command | wall, s | min–max, s | provider CPU, s | peak RSS, MiB | min–max, MiB |", "|---|---:|---:|---:|---:|---:|")
		for _, m := range res.plans {
			p("| %s | %.3f | %s | %.3f | %.1f | %s |", m.title, stats.Median(m.wall), stats.MinMax(m.wall, "%.3f"), stats.Median(m.cpu), stats.Median(m.rss), stats.MinMax(m.rss, "%.1f"))
		}
		p("")
	}
	if len(res.reads) == 0 {
		return r.String() + instructionSection(res.instructions)
	}
	r.Para("pprof profiles of the provider process (tools/harness/profiledprovider: the provider as the release serves it, profiling itself), %d plans of each read for CPU and %d others for the heap (sampled one byte in 4 KiB), every provider process of those plans merged (schema, validation and reads). Kept in bench/ (git-ignored): `go tool pprof -http=: bench/cpu-NAME.pprof`; `heap-NAME.pprof` with `-sample_index=alloc_space` is every allocation, `heap-peak-NAME.pprof` with `-sample_index=inuse_space` the live heap of each process at its largest, summed over the processes. Totals are over the %d plans. The heap's tables leave out the profiler's own allocations (writing the profiles), which the files keep.", res.profilePlans, res.profilePlans, res.profilePlans)
	for _, rr := range res.reads {
		r.Para("### %s (`%s`)", capitalise(rr.read.title), rr.read.name)
		for _, t := range []struct{ title, text string }{
			{"CPU, by own time", rr.cpuFlat},
			{"CPU, by cumulative time", rr.cpuCum},
			{"Allocated bytes, by own allocation", rr.alloc},
			{"Allocated bytes, cumulative", rr.allocCum},
			{"In-use bytes at the largest live heap", rr.peak},
		} {
			r.Para("%s:", t.title)
			p("```")
			r.WriteString(t.text)
			p("```")
			p("")
		}
	}
	if res.instructions != nil {
		r.WriteString(instructionSection(res.instructions))
	}
	return r.String()
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// instructionSection is the table of instructions per read, current over
// each baseline, and the functions whose instructions grew most.
func instructionSection(res *instructionResults) string {
	if res == nil {
		return ""
	}
	r := benchrun.NewSection("Provider instructions per read, under callgrind (PROFILE=1)")
	p := r.Line
	var names []string
	for _, build := range res.builds {
		names = append(names, fmt.Sprintf("%s (`%s`)", build.name, build.commit))
	}
	p("Instructions that valgrind's callgrind executed in every provider process of one plan (user space, all threads), summed; builds %s, each unstripped (the release's machine code; callgrind needs the symbols to name functions), with GODEBUG=asyncpreemptoff=1 (callgrind stops on Go's preemption signals otherwise). %d rounds, the builds in turn within each round; the median of the rounds, and per round the lowest and highest ratio. Instruction counts do not grow with the load of the machine as CPU seconds do; they do not see cache misses or stalls. Target: no worse than 5 %% (ratio ≤ 1.05×).",
		strings.Join(names, ", "), res.rounds)
	p("")
	r.Table("| read | build | instructions per plan (median) | per read | processes | current / this | per round, min–max | verdict (≤ 1.05×) |", "|---|---|---:|---:|---:|---:|---:|---|")
	current := res.builds[0]
	for _, read := range res.reads {
		for _, build := range res.builds {
			med := stats.Median(build.counts[read.name])
			ratio, spread, verdict := "", "", ""
			if build.baseline {
				cm := stats.Median(current.counts[read.name])
				q := cm / med
				ratio = fmt.Sprintf("%.3f×", q)
				var lo, hi float64
				for i := range min(len(current.counts[read.name]), len(build.counts[read.name])) {
					x := current.counts[read.name][i] / build.counts[read.name][i]
					if i == 0 || x < lo {
						lo = x
					}
					if i == 0 || x > hi {
						hi = x
					}
				}
				spread = fmt.Sprintf("%.3f–%.3f×", lo, hi)
				verdict = fmt.Sprintf("**pass** (%+.1f %%)", (q-1)*100)
				if q > 1.05 {
					verdict = fmt.Sprintf("**miss** (%+.1f %%)", (q-1)*100)
				}
			}
			p("| %s | %s | %s | %s | %d | %s | %s | %s |", read.title, build.name, millions(med), millions(med/float64(read.reads)),
				build.procs[read.name], ratio, spread, verdict)
		}
	}
	p("")
	for _, build := range res.builds[1:] {
		for _, read := range res.reads {
			r.Para("Functions whose own instructions changed most, current over %s, %s (per plan: the sums of the %d rounds over %d):", build.name, read.title, res.rounds, res.rounds)
			p("| function | current | %s | change |", build.name)
			p("|---|---:|---:|---:|")
			for _, d := range funcDiffs(current.byFunc[read.name], build.byFunc[read.name], 12) {
				p("| `%s` | %s | %s | %+.1f M |", d.name, millions(d.a/float64(res.rounds)), millions(d.b/float64(res.rounds)), (d.a-d.b)/float64(res.rounds)/1e6)
			}
			p("")
		}
	}
	return r.String()
}

func millions(n float64) string {
	return fmt.Sprintf("%.1f M", n/1e6)
}

type funcDiff struct {
	name string
	a, b float64
}

// funcDiffs are the n functions whose instructions differ most between a
// and b, by absolute difference.
func funcDiffs(a, b map[string]float64, n int) []funcDiff {
	var all []funcDiff
	for name, x := range a {
		all = append(all, funcDiff{name, x, b[name]})
	}
	for name, y := range b {
		if _, ok := a[name]; !ok {
			all = append(all, funcDiff{name, 0, y})
		}
	}
	abs := func(x float64) float64 { return max(x, -x) }
	sort.Slice(all, func(i, j int) bool {
		di, dj := abs(all[i].a-all[i].b), abs(all[j].a-all[j].b)
		if di != dj {
			return di > dj
		}
		return all[i].name < all[j].name
	})
	return all[:min(n, len(all))]
}
