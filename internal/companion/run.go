package companion

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// terraform is the CLI as a run uses it, as Consul-Terraform-Sync's driver
// is: the CLI runner (cli, runner.go) satisfies it, and the tests of runs
// give their own, so that what a run finds, and what the machine decides
// of it, is tested without a CLI.
type terraform interface {
	// statePull gives read the state of the working directory, through its
	// backend, as a stream.
	statePull(ctx context.Context, read func(io.Reader) error) error
	// plan writes a saved plan and says what it changes; changes is false
	// when it has nothing to do.
	plan(ctx context.Context, planFile string, o planOptions) (changes bool, summary planSummary, err error)
	// apply applies a saved plan.
	apply(ctx context.Context, planFile string) error
	// command runs a -command value (a program and its arguments, no
	// shell) in the working directory with env added.
	command(ctx context.Context, command string, env []string) error
}

// planOptions are plan's -refresh and -target.
type planOptions struct {
	refresh bool
	targets []string
}

// planSummary is what a run reads of a saved plan.
type planSummary struct {
	// changed are the managed resources the plan changes.
	changed []string
	// drift are the managed resources whose refreshed state differs from
	// state (changes made outside Terraform), which an apply records.
	drift []string
}

// runner makes runs: a plan of the pools, applied when it is pool-only, or
// the command that replaces plan and apply.
type runner struct {
	tf     terraform
	filter poolChangeFilter
	// refresh is plan's -refresh.
	refresh bool
	// targetChanged says a run plans only what the changed pools need.
	targetChanged bool
	// command, when set, replaces plan and apply; terraformPath is given
	// to it as $K8S_SYNC_TERRAFORM.
	command, terraformPath string
	log                    *slog.Logger
}

// run makes one run for req and reports what it found. It decides
// nothing: before each step it asks the machine's decideRun whether the run
// goes on, and the machine decides the run's result from the facts.
func (r *runner) run(ctx context.Context, req runRequest) runFacts {
	if r.command != "" {
		return r.runCommand(ctx, req)
	}
	f := runFacts{scope: r.scope(req)}
	if decideRun(req, f).next != stepPlan {
		return f
	}
	dir, err := os.MkdirTemp("", "k8s-sync-")
	if err != nil {
		f.err = err
		return f
	}
	defer os.RemoveAll(dir)
	planFile := filepath.Join(dir, "pools.tfplan")
	if f.scope.targetable && leavesPoolsOut(req) {
		r.log.Info("planning the dependents of the readable pools only", "targets", strings.Join(f.scope.targets, ","),
			"unreadable", strings.Join(slices.Sorted(maps.Keys(req.unreadable)), ","))
	}
	f.did = stepPlan
	changes, summary, err := r.tf.plan(ctx, planFile, planOptions{refresh: r.refresh, targets: f.scope.targets})
	if err != nil {
		f.err, f.failing = err, failingAddresses(err)
		return f
	}
	f.plan = planFacts{changes: changes, changed: summary.changed, notPools: r.notAllowed(summary.changed),
		driftNotPools: r.notAllowed(summary.drift)}
	if decideRun(req, f).next != stepApply {
		return f
	}
	r.log.Info("applying the saved plan", "changes", len(summary.changed), "addresses", strings.Join(summary.changed, ","))
	f.did = stepApply
	if err := r.tf.apply(ctx, planFile); err != nil {
		f.err, f.failing = err, failingAddresses(err)
	}
	return f
}

// scope is what a run's plan covers: the -target addresses (none: the
// whole configuration), and what the configuration says of what uses the
// changed pools and the pools left out (unreadable, or refused by the
// shrink guard).
//
// A run plans what the changed pools need: the resources (and modules from
// a registry) that depend on them, and the changed data sources themselves
// (so that one no resource uses, or only an output, is brought current):
// -target plans them and what they depend on, and so reads those pools and
// no other. The whole configuration is planned when the run is full (the
// -full-plan-interval), when targeting is off, and when the configuration
// cannot say what depends on what (-allow, a .tf.json file). Either way,
// what uses a pool left out is left out, when the configuration says what
// that is.
func (r *runner) scope(req runRequest) runScope {
	if !r.filter.targetable() {
		return runScope{}
	}
	s := runScope{targetable: true}
	excluded := append(resourcesOf(req.unreadable), resourcesOf(req.refused)...)
	changed := resourcesOf(req.changes)
	if req.full || !r.targetChanged {
		if len(excluded) == 0 {
			return s
		}
		changed = r.filter.watched
	}
	s.users = r.filter.targets(changed, excluded)
	s.targets = r.filter.withDataSources(s.users, changed, excluded)
	if !req.full && r.targetChanged {
		s.targets = r.filter.byServiceInstances(s.targets, req.changes)
	}
	// What uses both a changed pool and one left out stays behind the
	// changed pool in state: only a plan of everything, once nothing is
	// left out, brings it current.
	s.leavesOutChanged = r.filter.leavesOut(resourcesOf(req.changes), excluded)
	return s
}

func (r *runner) notAllowed(addresses []string) []string {
	var out []string
	for _, a := range addresses {
		if !r.filter.allows(a) {
			out = append(out, a)
		}
	}
	return out
}

// runCommand runs the hook that replaces plan and apply, when the machine
// says so: $K8S_SYNC_CHANGES holds the changes as JSON, by data source
// address, and $K8S_SYNC_UNREADABLE the pools whose read fails, by
// address, with why.
func (r *runner) runCommand(ctx context.Context, req runRequest) runFacts {
	f := runFacts{command: true}
	if decideRun(req, f).next != stepCommand {
		return f
	}
	changes, _ := json.Marshal(req.changes)
	unreadable, _ := json.Marshal(req.unreadable)
	env := []string{"K8S_SYNC_CHANGES=" + string(changes), "K8S_SYNC_UNREADABLE=" + string(unreadable),
		"K8S_SYNC_TERRAFORM=" + r.terraformPath}
	f.did = stepCommand
	f.err = r.tf.command(ctx, r.command, env)
	return f
}

// resourcesOf are the resource addresses (no instance keys) of the
// instances keyed in m, sorted.
func resourcesOf[V any](m map[string]V) []string {
	var out []string
	for address := range m {
		out = append(out, withoutKeys(address))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// withAddress is the line of a Terraform or OpenTofu diagnostic that names
// the object it is about: "  with module.m.data.k8s_ready_endpoints.x,".
var withAddress = regexp.MustCompile(`(?m)^\s*with ([^\s,]+),\s*$`)

// failingAddresses are the addresses the CLI's error output names.
func failingAddresses(err error) []string {
	var exit *cliExit
	if !errors.As(err, &exit) {
		return nil
	}
	var out []string
	for _, m := range withAddress.FindAllStringSubmatch(exit.stderr, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}
