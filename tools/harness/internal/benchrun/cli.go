package benchrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// CLI is the terraform on PATH with a CLI configuration of its own
// (terraformrc-NAME) whose dev_overrides give the release build directly,
// without the rusage wrapper of the plans.
type CLI struct {
	Terraform string
	Env       []string
	run       *Run
}

// NewCLI writes the CLI configuration terraformrc-name and gives the CLI
// that runs with it.
func (r *Run) NewCLI(name string) (CLI, error) {
	terraform, err := exec.LookPath("terraform")
	if err != nil {
		return CLI{}, err
	}
	rc := filepath.Join(r.Work, "terraformrc-"+name)
	if err := WriteRC(rc, r.Work, map[string]string{"vigie/k8s": "bin"}); err != nil {
		return CLI{}, err
	}
	return CLI{Terraform: terraform, Env: append(slices.Clone(r.Env), "TF_CLI_CONFIG_FILE="+rc), run: r}, nil
}

// Command runs terraform -chdir=dir with args.
func (c CLI) Command(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, c.Terraform, append([]string{"-chdir=" + dir}, args...)...)
	cmd.Env = c.Env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("terraform %s in %s: %w\n%s", strings.Join(args, " "), dir, err, out)
	}
	return nil
}

// Apply applies the configuration in dir.
func (c CLI) Apply(ctx context.Context, dir string) error {
	return c.Command(ctx, dir, "apply", "-auto-approve", "-input=false", "-parallelism=10", "-no-color")
}

// Applied writes main as the configuration name (Run.Config), applies it
// and gives its directory.
func (c CLI) Applied(ctx context.Context, name, main string) (string, error) {
	dir, err := c.run.Config(name, main)
	if err != nil {
		return "", err
	}
	return dir, c.Apply(ctx, dir)
}

// WantOutput checks that the output name of dir's state is want.
func (c CLI) WantOutput(ctx context.Context, dir, name string, want int) error {
	cmd := exec.CommandContext(ctx, c.Terraform, "-chdir="+dir, "output", "-json", name)
	cmd.Env = c.Env
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("terraform output %s in %s: %w", name, dir, err)
	}
	var got int
	if err := json.Unmarshal(out, &got); err != nil || got != want {
		return fmt.Errorf("output %s in %s is %s, want %d", name, dir, bytes.TrimSpace(out), want)
	}
	return nil
}
