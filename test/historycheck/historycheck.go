// Package historycheck refuses the project's history in what users read
// (README.md, CHANGELOG.md, docs/, examples/, the charts' READMEs): a
// commit-like id, an issue or pull request number, a date outside the
// CHANGELOG's release headings, or words that tell what changed ("no
// longer"). A user page says what is and how to use it; history lives in git
// and figures in bench/. It also refuses a package registry's host named in
// any file of the repository (hosts.go). `make docs-check` runs both
// (cmd/historycheck).
package historycheck

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// A Finding is one line refused, with why.
type Finding struct {
	File string // relative to the root, slash-separated
	Line int
	Why  string
	Text string
}

func (f Finding) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", f.File, f.Line, f.Why, strings.TrimSpace(f.Text))
}

var (
	// token: a word, with the hyphens of a name: a commit id stands alone,
	// while a hex part of a hyphenated name (a pod's "web-6d4cf56db6-x7x9k",
	// an Azure tenant's or server's UUID in the AKS example) is data.
	token = regexp.MustCompile(`[0-9A-Za-z_-]+`)
	// digest: an image's or a file's content hash, named by its algorithm.
	digest      = regexp.MustCompile(`\b(sha1|sha256|sha512):[0-9A-Fa-f]+`)
	issueNumber = regexp.MustCompile(`(?i)(^|[^\w&/])#[0-9]+\b|\b(issues?|pull requests?|PRs?|pulls?)\s+#?[0-9]+\b`)
	date        = regexp.MustCompile(`\b(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])\b`)
	// timestamp: an RFC 3339 time in an example's value (a heartbeat
	// annotation), data rather than history.
	timestamp = regexp.MustCompile(`\b[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}`)
	// historyWords are phrases that tell what changed rather than what is.
	historyWords = regexp.MustCompile(`(?i)\b(no longer|not any ?more|any ?more\b|previously|used to be|before (these|this|that) changes?|since (these|this|that) changes?|after (these|this|that) changes?|than before|as before|until now|from now on|the previous (run|version|release)|other engineers)\b`)
)

// commitLike says whether a word looks like an abbreviated or full commit
// id: 7 to 40 hex digits with at least one digit and one letter (a word of
// digits alone is a number, of letters alone a word: "deadbeef", "facade").
func commitLike(w string) bool {
	if len(w) < 7 || len(w) > 40 || strings.Trim(w, "0123456789abcdefABCDEF") != "" {
		return false
	}
	return strings.ContainsAny(w, "0123456789") && strings.ContainsAny(strings.ToLower(w), "abcdef")
}

// CheckLine gives why a line of file is refused, or nothing.
// releaseHeading is true for a heading of the CHANGELOG, where a release's
// date belongs.
func CheckLine(line string, releaseHeading bool) []string {
	var why []string
	masked := digest.ReplaceAllStringFunc(line, blank)
	for _, w := range token.FindAllString(masked, -1) {
		if commitLike(w) {
			why = append(why, fmt.Sprintf("a commit-like id %q", w))
		}
	}
	if m := issueNumber.FindString(line); m != "" {
		why = append(why, fmt.Sprintf("an issue number %q", strings.TrimSpace(m)))
	}
	if !releaseHeading {
		noTimes := timestamp.ReplaceAllStringFunc(line, blank)
		if m := date.FindString(noTimes); m != "" {
			why = append(why, fmt.Sprintf("a date %q", m))
		}
	}
	if m := historyWords.FindString(line); m != "" {
		why = append(why, fmt.Sprintf("history %q", m))
	}
	return why
}

func blank(s string) string { return strings.Repeat(" ", len(s)) }

// Paths are the files users read, relative to the repository's root:
// README.md, CHANGELOG.md, every Markdown file of docs/, every file of
// examples/, the README.md of each chart.
func Paths(root string) ([]string, error) {
	paths := []string{"README.md", "CHANGELOG.md"}
	for _, dir := range []string{"docs", "examples"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if strings.HasPrefix(d.Name(), ".") && p != filepath.Join(root, dir) {
					return filepath.SkipDir
				}
				return nil
			}
			if dir == "docs" && !strings.HasSuffix(p, ".md") {
				return nil
			}
			// Tests of the examples are the project's, not the user's.
			if strings.HasSuffix(p, "_test.go") || strings.Contains(p, string(filepath.Separator)+".terraform") {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			paths = append(paths, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	charts, err := filepath.Glob(filepath.Join(root, "charts", "*", "README.md"))
	if err != nil {
		return nil, err
	}
	for _, c := range charts {
		rel, err := filepath.Rel(root, c)
		if err != nil {
			return nil, err
		}
		paths = append(paths, filepath.ToSlash(rel))
	}
	slices.Sort(paths)
	return paths, nil
}

// Check reads each of paths under root and gives every line refused.
func Check(root string, paths []string) ([]Finding, error) {
	var found []Finding
	for _, rel := range paths {
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		changelog := rel == "CHANGELOG.md"
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
		for n := 1; sc.Scan(); n++ {
			text := sc.Text()
			heading := changelog && strings.HasPrefix(text, "#")
			for _, why := range CheckLine(text, heading) {
				found = append(found, Finding{File: rel, Line: n, Why: why, Text: text})
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
	}
	return found, nil
}
