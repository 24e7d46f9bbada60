package companion

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCommandWords(t *testing.T) {
	for _, tc := range []struct {
		name, command string
		want          []string
	}{
		{"a program alone", "notify", []string{"notify"}},
		{"words separated by blanks", " tofu\tapply  -auto-approve\n-input=false ", []string{"tofu", "apply", "-auto-approve", "-input=false"}},
		{"single quotes keep everything as it is", `curl -d '$K8S_SYNC_CHANGES | "x" \n'`, []string{"curl", "-d", `$K8S_SYNC_CHANGES | "x" \n`}},
		{"double quotes keep blanks and shell characters", `notify "a b | c; (d) * ~e #f"`, []string{"notify", "a b | c; (d) * ~e #f"}},
		{"escapes in double quotes", `echo "a \"b\" \\ \$HOME \c"`, []string{"echo", `a "b" \ $HOME \c`}},
		{"a backslash outside quotes keeps the next character", `echo a\ b \$x \|`, []string{"echo", "a b", "$x", "|"}},
		{"a backslash and a newline join lines", "tofu apply \\\n  -auto-approve", []string{"tofu", "apply", "-auto-approve"}},
		{"quotes inside a word join it", `-target='data.k8s_ready_endpoints.web["a"]'x`, []string{`-target=data.k8s_ready_endpoints.web["a"]x`}},
		{"empty quotes are an empty argument", `notify '' ""`, []string{"notify", "", ""}},
		{"~ and # inside a word", "notify a~b a#b", []string{"notify", "a~b", "a#b"}},
		{"a shell's script as its argument", `sh -c 'echo "$K8S_SYNC_CHANGES" >> /tmp/calls'`, []string{"sh", "-c", `echo "$K8S_SYNC_CHANGES" >> /tmp/calls`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := commandWords(tc.command)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("commandWords(%q) = %q, want %q", tc.command, got, tc.want)
			}
		})
	}
}

func TestCommandWordsRefusesWhatNeedsAShell(t *testing.T) {
	for _, tc := range []struct {
		name, command, want string
	}{
		{"empty", "", "give a program"},
		{"blanks only", " \t\n", "give a program"},
		{"a variable", `notify $K8S_SYNC_CHANGES`, `'$' at 7 would be expanded by a shell`},
		{"a variable in double quotes", `notify "$K8S_SYNC_CHANGES"`, `'$' at 8 would be expanded`},
		{"a command substitution", "notify `date`", "'`' at 7 would be expanded"},
		{"a pipe", "notify | tee x", `'|' at 7 is a shell's`},
		{"a redirection", "notify > x", `'>' at 7 is a shell's`},
		{"a list", "a; b", `';' at 1 is a shell's`},
		{"a background job", "a & b", `'&' at 2 is a shell's`},
		{"a subshell", "(a)", `'(' at 0 is a shell's`},
		{"a glob", "rm *.tfplan", `'*' at 3 is a shell's`},
		{"a home directory", "~/notify", `'~' at 0 is a shell's`},
		{"a comment", "notify # why", `'#' at 7 is a shell's`},
		{"an open single quote", "notify 'a", "the single quote at 7 is not closed"},
		{"an open double quote", `notify "a`, "a double quote is not closed"},
		{"a last backslash", `notify a\`, "it ends with a backslash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := commandWords(tc.command)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("commandWords(%q) = %q, %v; want an error with %q", tc.command, got, err, tc.want)
			}
		})
	}
}

// At start, -command's errors name the flag: its words, its program.
func TestValidCommandNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notify"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "not-executable"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, command, want string
	}{
		{"none", "", ""},
		{"a program on PATH", "sh -c 'exit 0'", ""},
		{"a path relative to the working directory", "./notify --to lb", ""},
		{"an absolute path", filepath.Join(dir, "notify"), ""},
		{"a program not on PATH", "notify-lb -d x", `-command "notify-lb -d x": the program notify-lb is not on PATH (/bin:/usr/bin)`},
		{"a missing file", "./missing", `-command "./missing": ` + filepath.Join(dir, "missing") + " is not an executable file"},
		{"a file that is not executable", "./not-executable", "not-executable is not an executable file"},
		{"a directory", dir, "is not an executable file"},
		{"a shell's script", `echo "$K8S_SYNC_CHANGES" >> calls`, `-command "echo \"$K8S_SYNC_CHANGES\" >> calls": '$' at 6 would be expanded`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", "/bin:/usr/bin")
			err := validCommand(tc.command, dir)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("validCommand(%q): %v", tc.command, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("validCommand(%q) = %v, want an error with %q", tc.command, err, tc.want)
			}
		})
	}
}

// The command runs as an argument vector in the working directory, its
// arguments reaching it as they are, the changes in its environment.
func TestACommandRunsWithoutAShell(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	c := &cli{dir: dir, stopTimeout: time.Second}
	// sh here only records what it was given: $1 is the first argument
	// after the script's name, as the command gave it.
	command := `sh -c 'printf "%s|%s|%s|%s" "$1" "$2" "$PWD" "$K8S_SYNC_CHANGES" > out' name 'a b' '$HOME;*'`
	if err := c.command(context.Background(), command, []string{"K8S_SYNC_CHANGES={}"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	realDir, _ := filepath.EvalSymlinks(dir)
	if want := "a b|$HOME;*|" + realDir + "|{}"; string(got) != want && string(got) != strings.Replace(want, realDir, dir, 1) {
		t.Errorf("the command recorded %q, want %q", got, want)
	}
	// A program that takes no argument, and one that fails.
	if err := c.command(context.Background(), "true", nil); err != nil {
		t.Errorf("true: %v", err)
	}
	var exit *cliExit
	if err := c.command(context.Background(), "false", nil); !errors.As(err, &exit) || exit.code != 1 {
		t.Errorf("false: %v, want its exit 1", err)
	}
	if err := c.command(context.Background(), "no-such-program-here", nil); err == nil || !strings.Contains(err.Error(), "no-such-program-here") {
		t.Errorf("a missing program: %v, want an error naming it", err)
	}
}

// A command without arguments stopped by the companion says so.
func TestACommandWithoutArgumentsIsStopped(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "wait")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &cli{dir: dir, stopTimeout: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := c.command(ctx, "./wait", nil); !errors.Is(err, errStopped) {
		t.Errorf("a stopped command: %v, want %v", err, errStopped)
	}
}

// shCommand is a -command that gives script to sh.
func shCommand(script string) string {
	return "sh -c '" + strings.ReplaceAll(script, "'", `'\''`) + "'"
}

func TestShCommandQuotesItsScript(t *testing.T) {
	script := `trap '' INT; echo "$K8S_SYNC_CHANGES" >> 'a b'`
	got, err := commandWords(shCommand(script))
	if err != nil || !slices.Equal(got, []string{"sh", "-c", script}) {
		t.Fatalf("commandWords(shCommand(%q)) = %q, %v", script, got, err)
	}
}
