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
// give their own, so that what a run decides is tested without a CLI.
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

// run makes one run for req.
func (r *runner) run(ctx context.Context, req runRequest) runOutcome {
	if r.command != "" {
		return r.runCommand(ctx, req)
	}
	o := planOptions{refresh: r.refresh}
	targets, targeted, waiting := r.scope(req)
	if waiting != "" {
		return runOutcome{result: resultWaiting, reason: waiting}
	}
	o.targets = targets
	// A run that left out what uses both a changed pool and an unreadable
	// or refused one brings the changed pool into state without it: only
	// a plan of everything, once nothing is left out, brings it current.
	partial := targeted && r.filter.leavesOut(resourcesOf(req.changes), append(resourcesOf(req.unreadable), resourcesOf(req.refused)...))
	dir, err := os.MkdirTemp("", "k8s-sync-")
	if err != nil {
		return runOutcome{result: resultFailed, err: err}
	}
	defer os.RemoveAll(dir)
	planFile := filepath.Join(dir, "pools.tfplan")
	failed := func(err error) runOutcome {
		if errors.Is(err, errStopped) {
			return runOutcome{result: resultStopped, err: err, targeted: targeted, partial: partial}
		}
		return runOutcome{result: resultFailed, err: err, failing: failingAddresses(err), targeted: targeted, partial: partial}
	}
	changes, summary, err := r.tf.plan(ctx, planFile, o)
	if err != nil {
		return failed(err)
	}
	if !changes && len(req.changes) == 0 {
		return runOutcome{result: resultNoChanges, targeted: targeted}
	}
	if blocked := r.notAllowed(summary.changed); len(blocked) > 0 {
		return runOutcome{result: resultRefused, blocked: blocked, targeted: targeted}
	}
	result := resultApplied
	if len(summary.changed) == 0 {
		// Nothing a load balancer sees changes (an endpoint's zone, a
		// draining flag no resource reads): applying the saved plan writes
		// the data sources' new results into state, so that neither this
		// companion nor check sees the same difference again. Not when the
		// apply would also record drift of resources that are not pools.
		if drift := r.notAllowed(summary.drift); len(drift) > 0 {
			return runOutcome{result: resultNoChanges, targeted: targeted,
				reason: "the state's data sources are not brought current: the plan also records changes made outside Terraform to " + strings.Join(drift, ",")}
		}
		result = resultStateUpdated
	}
	r.log.Info("applying the saved plan", "changes", len(summary.changed), "addresses", strings.Join(summary.changed, ","))
	if err := r.tf.apply(ctx, planFile); err != nil {
		return failed(err)
	}
	return runOutcome{result: result, targeted: targeted, partial: partial}
}

// scope is what a run plans: the -target addresses (none: the whole
// configuration); targeted says the plan leaves the dependents of the
// unreadable and refused pools out; waiting, when set, says why nothing
// can be planned.
//
// A run plans what the changed pools need: the resources (and modules from
// a registry) that depend on them, and the changed data sources themselves
// (so that one no resource uses, or only an output, is brought current):
// -target plans them and what they depend on, and so reads those pools and
// no other. The whole configuration is planned when the run is full (the
// -full-plan-interval), when targeting is off, and when the configuration
// cannot say what depends on what (-allow, a .tf.json file). Either way,
// what uses an unreadable pool or one the shrink guard refused is left
// out, when the configuration says what that is.
func (r *runner) scope(req runRequest) (targets []string, targeted bool, waiting string) {
	excluded := append(resourcesOf(req.unreadable), resourcesOf(req.refused)...)
	if !r.filter.targetable() {
		if len(req.refused) > 0 {
			// A plan of everything would apply what the guard refused.
			return nil, false, "the configuration does not say which resources leave out the pools the shrink guard refused"
		}
		return nil, false, ""
	}
	changed := resourcesOf(req.changes)
	if req.full || !r.targetChanged {
		if len(excluded) == 0 {
			return nil, false, ""
		}
		changed = r.filter.watched
	}
	targets = r.filter.targets(changed, excluded)
	if len(targets) == 0 && len(excluded) > 0 {
		return nil, false, "every resource that uses the changed pools also uses a pool whose read fails or that the shrink guard refused"
	}
	targets = r.filter.withDataSources(targets, changed, excluded)
	if !req.full && r.targetChanged {
		targets = r.filter.byServiceInstances(targets, req.changes)
	}
	if len(excluded) > 0 {
		r.log.Info("planning the dependents of the readable pools only", "targets", strings.Join(targets, ","),
			"unreadable", strings.Join(slices.Sorted(maps.Keys(req.unreadable)), ","))
	}
	return targets, len(excluded) > 0, ""
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

// runCommand runs the hook that replaces plan and apply: $K8S_SYNC_CHANGES
// holds the changes as JSON, by data source address, and
// $K8S_SYNC_UNREADABLE the pools whose read fails, by address, with why.
func (r *runner) runCommand(ctx context.Context, req runRequest) runOutcome {
	if len(req.refused) > 0 {
		// The command runs the whole configuration: it would apply what
		// the guard refused.
		return runOutcome{result: resultWaiting, reason: "the shrink guard refused a pool, and -command runs the whole configuration"}
	}
	changes, _ := json.Marshal(req.changes)
	unreadable, _ := json.Marshal(req.unreadable)
	env := []string{"K8S_SYNC_CHANGES=" + string(changes), "K8S_SYNC_UNREADABLE=" + string(unreadable),
		"K8S_SYNC_TERRAFORM=" + r.terraformPath}
	if err := r.tf.command(ctx, r.command, env); err != nil {
		if errors.Is(err, errStopped) {
			return runOutcome{result: resultStopped, err: err}
		}
		return runOutcome{result: resultFailed, err: err}
	}
	return runOutcome{result: resultDelivered}
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
