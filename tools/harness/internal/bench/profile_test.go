package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/textcheck"
)

func TestCallgrindAnnotateGivesEachFunctionsOwnInstructions(t *testing.T) {
	out, err := os.ReadFile(filepath.Join("testdata", "callgrind-annotate.txt"))
	if err != nil {
		t.Fatal(err)
	}
	funcs := parseAnnotate(string(out))
	for name, want := range map[string]float64{
		"fmt.(*fmt).fmtInteger":    15789099,
		"runtime.mallocgcTiny":     5533840,
		"strings.(*Builder).Write": 4300437,
	} {
		if funcs[name] != want {
			t.Errorf("%s: got %v, want %v", name, funcs[name], want)
		}
	}
	recursive := parseAnnotate("Ir  file:function\n10 (1%)  a.go:f [bin]\n5 (0.5%)  a.go:f'2 [bin]\n")
	if len(recursive) != 1 || recursive["f"] != 15 {
		t.Errorf("the levels of a recursion: %v, want f: 15", recursive)
	}
	if _, ok := funcs["PROGRAM"]; ok {
		t.Error("the program's total was read as a function")
	}
	for name := range funcs {
		if strings.ContainsAny(name, "%()[ ") && !strings.Contains(name, ").") {
			t.Errorf("%q is not a function name", name)
		}
	}
}

func TestACallgrindOutputGivesItsTotal(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, text string
		want       float64
		fails      bool
	}{
		{"totals after the summary", "events: Ir\nsummary: 100\nfn=main\n1 100\ntotals: 120\n", 120, false},
		{"only a summary", "events: Ir\nsummary: 100\n", 100, false},
		{"cut short, neither", "events: Ir\nfn=main\n", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := callgrindTotal(path)
			if (err != nil) != c.fails || got != c.want {
				t.Fatalf("got %v, %v; want %v (fails: %v)", got, err, c.want, c.fails)
			}
		})
	}
}

func TestTheInstructionSectionComparesTheCurrentBuildWithEachBaseline(t *testing.T) {
	reads := instructionReads()
	current := &instructionBuild{name: "current", commit: "abc1234",
		counts: map[string][]float64{reads[0].name: {1040e6, 1030e6, 1050e6}, reads[1].name: {500e6, 510e6, 505e6}},
		procs:  map[string]int{reads[0].name: 3, reads[1].name: 3},
		byFunc: map[string]map[string]float64{reads[0].name: {"a": 300e6, "b": 30e6}, reads[1].name: {"a": 100e6}}}
	base := &instructionBuild{name: "8331de0", commit: "8331de0", baseline: true,
		counts: map[string][]float64{reads[0].name: {1000e6, 1000e6, 1000e6}, reads[1].name: {450e6, 450e6, 450e6}},
		procs:  map[string]int{reads[0].name: 3, reads[1].name: 3},
		byFunc: map[string]map[string]float64{reads[0].name: {"a": 300e6, "c": 60e6}, reads[1].name: {"a": 90e6}}}
	got := instructionSection(&instructionResults{rounds: 3, reads: reads, builds: []*instructionBuild{current, base}})
	textcheck.Contains(t, "the section", got,
		"| "+reads[0].title+" | current | 1040.0 M | 10.4 M | 3 |  |  |  |",
		"| "+reads[0].title+" | 8331de0 | 1000.0 M | 10.0 M | 3 | 1.040× | 1.030–1.050× | **pass** (+4.0 %) |",
		"| "+reads[1].title+" | 8331de0 | 450.0 M | 450.0 M | 3 | 1.122× | 1.111–1.133× | **miss** (+12.2 %) |",
		// c gone (-20 M a plan) outweighs b come (+10 M); a is unchanged.
		"| `c` | 0.0 M | 20.0 M | -20.0 M |\n| `b` | 10.0 M | 0.0 M | +10.0 M |\n| `a` | 100.0 M | 100.0 M | +0.0 M |",
	)
}
