package soak

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// TestSoak runs the soak: SOAK_DURATION long (default 2m, the short
// schedule of `make soak-short`, part of `make test`); SOAK=long gives the
// options of `make soak` (the full fleet, 10 changes a minute, bursts of
// 50) and with them SOAK_POOLS single data sources (40 unless set; the
// short schedule keeps its own), SOAK_REPORT a file for the report.
// SOAK_WORKSPACES=K runs the many-workspace soak (issue 40) on either
// schedule: K workspaces that share those pools out, three replicas. It
// needs TF_ACC=1 and the CLI of TF_ACC_TERRAFORM_PATH, as the acceptance
// tests.
func TestSoak(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("soak: set TF_ACC=1 (make soak, make soak-short)")
	}
	d := 2 * time.Minute
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("SOAK_DURATION: %v", err)
		}
	}
	o := Short(d)
	title := "Soak of the companion (short schedule)"
	if os.Getenv("SOAK") == "long" {
		o = Long(d)
		title = "Soak of the companion"
		if v := os.Getenv("SOAK_POOLS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("SOAK_POOLS %q: want a positive number of single data sources", v)
			}
			o.Singles = n
		}
	}
	if v := os.Getenv("SOAK_WORKSPACES"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			t.Fatalf("SOAK_WORKSPACES %q: want a positive number of workspaces", v)
		}
		o = o.Many(k)
		title = strings.Replace(title, "companion", "companion, many workspaces", 1)
	}
	o.Terraform = os.Getenv("TF_ACC_TERRAFORM_PATH")
	if o.Terraform == "" {
		t.Fatal("set TF_ACC_TERRAFORM_PATH (bin/harness cli terraform)")
	}
	o.Work = t.TempDir()
	if keep := os.Getenv("SOAK_KEEP"); keep != "" {
		// The configuration, its state and the replicas' logs, kept.
		o.Work = keep
		if err := os.MkdirAll(keep, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	o.Log = os.Stderr
	bin := filepath.Join(o.Work, "bin")
	o.Binary = filepath.Join(bin, "terraform-provider-k8s")
	build := exec.Command("go", "build", "-o", o.Binary, "github.com/vigie/terraform-provider-k8s")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build the provider: %v", err)
	}
	o.CLIConfig = filepath.Join(o.Work, "terraformrc")
	if err := os.WriteFile(o.CLIConfig, []byte(testcluster.DevOverrides(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+20*time.Minute)
	defer cancel()
	r, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	md := r.Markdown(title)
	if path := os.Getenv("SOAK_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Log("\n" + md)
	for _, v := range r.Violations {
		t.Error(v)
	}
	if want := len(scheduleFor(o)); r.Changes == 0 || len(r.Faults) != want && d < 30*time.Minute {
		t.Errorf("%d changes and %d faults made, want some and %d", r.Changes, len(r.Faults), want)
	}
}
