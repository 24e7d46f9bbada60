package syncbench

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/procstat"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/stats"
)

// The companion before/after (issue 25): with -baseline, the companion built
// at that revision (the same binary as its provider: `sync` is a command of
// it) is measured beside this one in the same run, on the same cluster: the
// detection latency in the same rounds, a change for each in turn; the idle
// fleet alone on the machine, this build and the baseline alternately, two
// rounds each. Each build's CLI runs use its own provider.

// baselineSync is the baseline's side of the companion's measurements, and
// the idle rounds of both builds.
type baselineSync struct {
	commit             string
	latency, detection []float64
	extraRuns          int
	current, base      idleRounds
}

// idleRounds are one build's figures over the idle rounds.
type idleRounds struct {
	idlePct, peakRSS, watching, syncCPU []float64
	// idle is the length of each idle window, s.
	idle float64
}

// tickPct is one clock tick over the idle window in per cent of a core: the
// resolution of the kernel's accounting of the idle CPU.
func (i idleRounds) tickPct() float64 {
	if i.idle <= 0 {
		return math.NaN()
	}
	return 100 / (procstat.ClockTicks * i.idle)
}

// builds are the companions measured: this build, then the baseline's when
// there is one.
func (s *syncBench) builds(r *Results) []*syncBench {
	builds := []*syncBench{s}
	if r.baseline == nil {
		return builds
	}
	base := *s
	base.provider = s.b.BaselineProvider
	base.Env = slices.Clone(s.Env)
	for i, v := range base.Env {
		if strings.HasPrefix(v, "TF_CLI_CONFIG_FILE=") {
			base.Env[i] = "TF_CLI_CONFIG_FILE=" + s.b.baselineRC
		}
	}
	return append(builds, &base)
}

// companion is the binary that runs `sync`.
func (s *syncBench) companion() string {
	if s.provider != "" {
		return s.provider
	}
	return s.b.Provider
}

// label names the build in errors.
func (s *syncBench) label() string {
	if s.provider != "" && s.provider != s.b.Provider {
		return "the baseline's companion (" + s.b.BaselineCommit + ")"
	}
	return "this companion"
}

// prepareBaseline writes the CLI configuration whose dev_overrides give the
// baseline's provider, unwrapped, and marks the results as compared.
func (s *syncBench) prepareBaseline(r *Results) error {
	if s.b.BaselineProvider == "" {
		return nil
	}
	s.b.baselineRC = filepath.Join(s.b.Work, "terraformrc-sync-baseline")
	if err := benchrun.WriteRC(s.b.baselineRC, s.b.Work, map[string]string{"vigie/k8s": filepath.Join("bin", "baseline")}); err != nil {
		return err
	}
	r.baseline = &baselineSync{commit: s.b.BaselineCommit}
	return nil
}

// baselineSyncRows are the before/after rows of the targets table: the
// latency and the idle CPU within 5 % of the baseline's.
func baselineSyncRows(r *Results) []string {
	base := r.baseline
	if base == nil || len(base.latency) == 0 || len(r.latency) == 0 {
		return nil
	}
	var rows []string
	within := func(ratio float64) string {
		if ratio <= 1.05 {
			return "pass"
		}
		return fmt.Sprintf("**miss** by %.1f %%", (ratio-1.05)*100)
	}
	ratio := stats.Median(r.latency) / stats.Median(base.latency)
	rows = append(rows, fmt.Sprintf("| companion detection latency, this build / %s (medians of %d and %d, same rounds) | %.3f s / %.3f s = %.3f× | ≤ 1.05× | %s |",
		base.commit, len(r.latency), len(base.latency), stats.Median(r.latency), stats.Median(base.latency), ratio, within(ratio)))
	if len(base.current.idlePct) > 0 && len(base.base.idlePct) > 0 {
		cur, old := stats.Median(base.current.idlePct), stats.Median(base.base.idlePct)
		// Both are fractions of a per cent of a core, a few clock ticks:
		// within 5 %, or within one tick of the window.
		tick := base.current.tickPct()
		ratio, verdictText := "—", "pass"
		if old > 0 {
			ratio = fmt.Sprintf("%.2f×", cur/old)
		}
		// (The windows of the rounds differ by milliseconds: a tick of one
		// is a hair more than a tick of the first.)
		if cur-old > tick*1.01 && (old == 0 || cur/old > 1.05) {
			verdictText = fmt.Sprintf("**miss** by %.3f %% of a core", cur-old)
		}
		rows = append(rows, fmt.Sprintf("| companion idle CPU, this build / %s (medians of %d rounds each, alternately) | %.3f %% / %.3f %% of a core = %s (%+.3f %% of a core; one clock tick is %.3f %%) | ≤ 1.05×, or within one tick | %s |",
			base.commit, len(base.current.idlePct), cur, old, ratio, cur-old, tick, verdictText))
	}
	return rows
}

// baselineSyncSection is the paragraph and table of the before/after.
func baselineSyncSection(r *Results) string {
	base := r.baseline
	if base == nil || len(base.latency) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Before/after: the companion built at %s measured beside this one in the same run, on the same cluster: the detection latency in the same rounds (a Service, a configuration and a companion each, changed in turn), and the idle fleet of %d Services alone on the machine, this build and the baseline alternately, %d rounds each. Runs no change explains: this build %d, the baseline %d.\n\n",
		base.commit, syncFleetServices, len(base.current.idlePct), r.extraRuns, base.extraRuns)
	b.WriteString("| measurement | this build | baseline | ratio |\n|---|---:|---:|---:|\n")
	row := func(what string, cur, old []float64, format string) {
		if len(cur) == 0 || len(old) == 0 {
			return
		}
		ratio := "—"
		if stats.Median(old) != 0 {
			ratio = fmt.Sprintf("%.3f×", stats.Median(cur)/stats.Median(old))
		}
		fmt.Fprintf(&b, "| %s | "+format+" | "+format+" | %s |\n", what, stats.Median(cur), stats.Median(old), ratio)
	}
	row("detection latency beyond the quiet time, median, s", r.latency, base.latency, "%.3f")
	row("settle window opened after the write, median, s", r.detection, base.detection, "%.3f")
	row("detection latency, p99 (nearest rank), s", []float64{stats.Percentile(r.latency, 99)}, []float64{stats.Percentile(base.latency, 99)}, "%.3f")
	row("idle CPU, % of a core, median", base.current.idlePct, base.base.idlePct, "%.3f")
	row("start → `watching`, median, s", base.current.watching, base.base.watching, "%.1f")
	row("initial sync CPU (own), median, s", base.current.syncCPU, base.base.syncCPU, "%.2f")
	row("peak RSS (VmHWM), median, MiB", base.current.peakRSS, base.base.peakRSS, "%.1f")
	b.WriteString("\n")
	return b.String()
}
