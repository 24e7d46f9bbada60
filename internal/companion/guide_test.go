package companion

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The guide's "What it decides, and why" is the machine's table of rules,
// rendered: TestTheGuideSaysWhatTheTableDecides fails when the two differ,
// and `go test -run TestTheGuideSaysWhatTheTableDecides -args
// -companion.update-guide` writes the table into the guide's template
// (then `make docs`).

var updateGuide = flag.Bool("companion.update-guide", false, "write the machine's table of decisions into the sync guide's template")

const (
	guideTemplate = "../../templates/guides/sync.md.tmpl"
	tableBegin    = "<!-- the machine's table (internal/companion/machine.go), written by its test: do not edit -->\n"
	tableEnd      = "<!-- end of the machine's table -->\n"
)

// phaseMeanings say what each phase is, in the guide's words.
var phaseMeanings = map[phase]string{
	phaseStarting:   "the first read of state has not succeeded yet",
	phaseReading:    "state is being read, or the pools recomputed against it",
	phaseIdle:       "every pool matches state, or nothing is due",
	phaseSettling:   "pools differ from state: the settle window is open",
	phaseBackingOff: "a run failed: its retry waits for the backoff",
	phaseHeld:       "pools differ, and a run showed there is no point running for them again until they change",
	phaseRunning:    "a run (plan and apply, or `-command`) is in flight",
	phaseStale:      "the last read of state failed: no run until one succeeds",
	phaseStopping:   "SIGTERM came during a run: the companion waits for it to end",
}

// decisionTable renders the rules as a Markdown table, a row for each
// phase and event; the events of a phase that decide the same are one row.
func decisionTable() string {
	var b strings.Builder
	b.WriteString("| In phase | When | It decides |\n|---|---|---|\n")
	for i := 0; i < len(rules); {
		r := rules[i]
		events := []string{r.event.String()}
		j := i + 1
		for ; j < len(rules) && rules[j].phase == r.phase && rules[j].does == r.does; j++ {
			events = append(events, rules[j].event.String())
		}
		where := ""
		if i == 0 || rules[i-1].phase != r.phase {
			where = "**" + r.phase.String() + "**: " + phaseMeanings[r.phase]
		}
		b.WriteString("| " + where + " | " + strings.Join(events, "; ") + " | " + r.does + " |\n")
		i = j
	}
	return b.String()
}

func TestTheGuideSaysWhatTheTableDecides(t *testing.T) {
	for p := phaseStarting; p <= phaseStopping; p++ {
		if phaseMeanings[p] == "" || phaseNames[p] == "" {
			t.Errorf("phase %d has no name or meaning for the guide", p)
		}
	}
	raw, err := os.ReadFile(filepath.FromSlash(guideTemplate))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	begin, end := strings.Index(text, tableBegin), strings.Index(text, tableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no table of decisions between %q and %q", guideTemplate, tableBegin, tableEnd)
	}
	want := decisionTable()
	got := text[begin+len(tableBegin) : end]
	if got == want {
		return
	}
	if *updateGuide {
		if err := os.WriteFile(filepath.FromSlash(guideTemplate), []byte(text[:begin+len(tableBegin)]+want+text[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the guide's table of decisions is not the machine's: run go test ./internal/companion/ -run %s -args -companion.update-guide, "+
		"then make docs\n\nthe guide has:\n%s\nthe machine's:\n%s", t.Name(), got, want)
}
