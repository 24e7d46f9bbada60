// Package textcheck is what the harness's tests check of the text the
// benches write from fixed input: a golden file, the lines a text must
// have, the rows a table must end with. Only tests import it.
package textcheck

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files (testdata/*.md) from the fixed runs")

// Golden checks that got is the file golden; go test -update rewrites the
// file first, for a change meant to change the text (review the diff).
func Golden(t testing.TB, golden, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the text differs from %s (go test -update rewrites it):\n%s", golden, LineDiff(string(want), got))
	}
}

// LineDiff names the first lines that differ.
func LineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for i := 0; i < max(len(w), len(g)) && len(out) < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			out = append(out, fmt.Sprintf("line %d:\n  want %s\n  got  %s", i+1, wl, gl))
		}
	}
	return strings.Join(out, "\n")
}

// Contains checks that text, which what names, contains each of wants.
func Contains(t testing.TB, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}

// ContainsLines checks that text, which what names, contains each of
// lines followed by a line break: a whole row of a table, or its end.
func ContainsLines(t testing.TB, what, text string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("%s has no line ending with\n%s\nin:\n%s", what, line, text)
		}
	}
}

// RowSuffixes checks that there are as many rows as wants, the i-th
// ending with wants[i].
func RowSuffixes(t testing.TB, rows []string, wants ...string) {
	t.Helper()
	if len(rows) != len(wants) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(wants), strings.Join(rows, "\n"))
	}
	for i, w := range wants {
		if !strings.HasSuffix(rows[i], w) {
			t.Errorf("row %d = %q, want it to end with %q", i, rows[i], w)
		}
	}
}
