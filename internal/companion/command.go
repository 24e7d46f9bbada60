package companion

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// -command runs a program with arguments, without a shell: the companion's
// image has none (a static binary on an empty base), and a command that
// needs a shell's pipes or expansions says so (sh -c '...') where there is
// one. Its value stays one string, split into words as a shell splits
// them (quotes and backslashes), so the flag, the workspaces file's
// `command` and the chart's extraArgs keep their form; what a shell would
// expand or interpret is refused rather than passed on as it is.

// commandWords splits a -command value into its program and arguments:
// words separated by blanks; '...' keeps everything as it is; "..." keeps
// everything but \" \\ \$ \` (escaped) ; a backslash outside quotes keeps
// the next character. $, `, |, &, ;, <, >, (, ), a glob (*, ?, [) or a word
// that starts with ~ or # outside single quotes is refused: a shell would
// change them, this does not run one.
func commandWords(s string) ([]string, error) {
	var (
		words []string
		word  strings.Builder
		in    bool // in a word (an empty '' is a word)
	)
	end := func() {
		if in {
			words = append(words, word.String())
		}
		word.Reset()
		in = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			end()
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("the single quote at %d is not closed", i)
			}
			word.WriteString(s[i+1 : i+1+j])
			in, i = true, i+1+j
		case c == '"':
			in = true
			closed := false
			for i++; i < len(s); i++ {
				c = s[i]
				if c == '"' {
					closed = true
					break
				}
				if c == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					if s[i+1] != '\n' {
						word.WriteByte(s[i+1])
					}
					i++
					continue
				}
				if c == '$' || c == '`' {
					return nil, expansion(s, i)
				}
				word.WriteByte(c)
			}
			if !closed {
				return nil, errors.New("a double quote is not closed")
			}
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("it ends with a backslash")
			}
			i++
			if s[i] != '\n' {
				word.WriteByte(s[i])
				in = true
			}
		case c == '$' || c == '`':
			return nil, expansion(s, i)
		case strings.IndexByte("|&;<>()*?[", c) >= 0 || (!in && (c == '~' || c == '#')):
			return nil, fmt.Errorf("%q at %d is a shell's, and the command runs without one: quote it ('%c') to pass it as it is, or give a shell its script (sh -c '...') where there is one", c, i, c)
		default:
			word.WriteByte(c)
			in = true
		}
	}
	end()
	if len(words) == 0 {
		return nil, errors.New("give a program to run, and its arguments")
	}
	return words, nil
}

// expansion is the error of a $ or ` outside single quotes.
func expansion(s string, i int) error {
	return fmt.Errorf("%q at %d would be expanded by a shell, and the command runs without one: "+
		"the command finds $K8S_SYNC_CHANGES and the others in its environment; quote it ('%c') to pass it as it is", s[i], i, s[i])
}

// validCommand checks a -command value at start: its words, and its
// program found (on PATH, or as a path relative to dir).
func validCommand(command, dir string) error {
	if command == "" {
		return nil
	}
	words, err := commandWords(command)
	if err != nil {
		return fmt.Errorf("-command %q: %w", command, err)
	}
	program := words[0]
	if !strings.Contains(program, "/") {
		if _, err := exec.LookPath(program); err != nil {
			return fmt.Errorf("-command %q: the program %s is not on PATH (%s): give its path, or put it in the image", command, program, os.Getenv("PATH"))
		}
		return nil
	}
	if !filepath.IsAbs(program) {
		program = filepath.Join(dir, program)
	}
	if info, err := os.Stat(program); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return fmt.Errorf("-command %q: %s is not an executable file", command, program)
	}
	return nil
}
