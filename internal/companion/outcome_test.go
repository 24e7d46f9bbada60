package companion

import (
	"errors"
	"testing"
)

// Each result a run can end with is the machine's event of its own kind,
// decided in one place: no result counts as a failure but a failure, and
// each has the runs metric's label of its own.
func TestEveryRunResultIsAnEventOfItsOwnKind(t *testing.T) {
	for _, r := range runResults {
		o := runOutcome{result: r}
		if r == resultFailed {
			o.err = errors.New("exit 1")
		}
		ev := runEnded(o)
		if ev.kind == evRunFailed && r != resultFailed {
			t.Errorf("result %v is taken as a failed run", r)
		}
		if r == resultFailed && ev.kind != evRunFailed {
			t.Errorf("a failed run is taken as %v", ev.kind)
		}
	}
}

// The runs metric's labels are made from the results, one each, and the
// shrink guard's refusal (no run): the guide's metrics table names each.
func TestTheRunsLabelsAreMadeFromTheResults(t *testing.T) {
	seen := map[string]bool{}
	for _, label := range runLabels() {
		if label == "" || seen[label] {
			t.Errorf("label %q: empty or twice in %v", label, runLabels())
		}
		seen[label] = true
	}
	if len(seen) != len(runResults)+1 || !seen[labelShrinkRefused] {
		t.Errorf("labels %v: want one per result and %s", runLabels(), labelShrinkRefused)
	}
	if got := runEnded(runOutcome{}); got.kind != evRunFailed || got.outcome.err == nil {
		t.Errorf("an outcome without a result: %v, error %v; want a failed run that says why", got.kind, got.outcome.err)
	}
}
