package companion

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/utils/clock"
)

// fakeTerraform is a CLI whose plan gives what the test says, and which
// records what it was asked.
type fakeTerraform struct {
	changes bool
	summary planSummary
	planErr error
	// planned are the options of each plan; applied counts applies.
	planned []planOptions
	applied int
	env     []string
}

func (f *fakeTerraform) statePull(context.Context, func(io.Reader) error) error { return nil }
func (f *fakeTerraform) plan(_ context.Context, _ string, o planOptions) (bool, planSummary, error) {
	f.planned = append(f.planned, o)
	return f.changes, f.summary, f.planErr
}
func (f *fakeTerraform) apply(context.Context, string) error {
	f.applied++
	return nil
}
func (f *fakeTerraform) command(_ context.Context, _ string, env []string) error {
	f.env = env
	return nil
}

// twoPools is a configuration with pools web and api, each used by a
// resource of its own, and one resource that uses both.
const twoPools = `
data "k8s_ready_endpoints" "web" {
  service = "web"
}
data "k8s_ready_endpoints" "api" {
  service = "api"
}
resource "terraform_data" "web" {
  input = data.k8s_ready_endpoints.web.endpoints
}
resource "terraform_data" "api" {
  input = data.k8s_ready_endpoints.api.endpoints
}
resource "terraform_data" "both" {
  input = [data.k8s_ready_endpoints.web.endpoints, data.k8s_ready_endpoints.api.endpoints]
}
resource "terraform_data" "unrelated" {
  input = "x"
}
`

// filterOf is the filter of runs of a configuration whose pools are web and api.
func filterOf(t *testing.T, config string) poolChangeFilter {
	t.Helper()
	return filterWatching(t, config, "data.k8s_ready_endpoints.web", "data.k8s_ready_endpoints.api")
}

// filterWatching is the filter of runs of a configuration whose pools are
// watched.
func filterWatching(t *testing.T, config string, watched ...string) poolChangeFilter {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"main.tf": config})
	g, err := readConfiguration(dir)
	if err != nil {
		t.Fatal(err)
	}
	return newPoolChangeFilter(g, watched)
}

// decided makes a run of req with r, and says how the machine decides it
// ended.
func decided(r *runner, req runRequest) runOutcome {
	return decideRun(req, r.run(context.Background(), req)).outcome
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func webChanged() runRequest {
	return runRequest{changes: map[string][]poolChange{"data.k8s_ready_endpoints.web": {change("a", "10.0.0.1:80")}}, sig: "s"}
}

func TestARun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tf      fakeTerraform
		req     func() runRequest
		result  runResult
		applied int
		targets []string
		reason  string
	}{
		{name: "a plan that changes pools only is applied",
			tf:  fakeTerraform{changes: true, summary: planSummary{changed: []string{"terraform_data.web"}}},
			req: webChanged, result: resultApplied, applied: 1},
		{name: "a plan that changes more than pools is refused",
			tf:  fakeTerraform{changes: true, summary: planSummary{changed: []string{"terraform_data.web", "terraform_data.unrelated"}}},
			req: webChanged, result: resultRefused},
		{name: "a plan that changes no resource brings the state's data sources current",
			tf:  fakeTerraform{changes: false},
			req: webChanged, result: resultStateUpdated, applied: 1},
		{name: "a plan whose outputs alone change brings the state current",
			tf:  fakeTerraform{changes: true},
			req: webChanged, result: resultStateUpdated, applied: 1},
		{name: "but not when its apply would also record drift of resources that are not pools",
			tf:  fakeTerraform{changes: false, summary: planSummary{drift: []string{"terraform_data.unrelated"}}},
			req: webChanged, result: resultNoChanges, reason: "terraform_data.unrelated"},
		{name: "a retry whose plan has nothing to do applies nothing",
			tf:  fakeTerraform{changes: false},
			req: func() runRequest { return runRequest{retry: true} }, result: resultNoChanges},
		{name: "with an unreadable pool, the plan targets what uses the changed pools and not it",
			tf: fakeTerraform{changes: true, summary: planSummary{changed: []string{"terraform_data.web"}}},
			req: func() runRequest {
				r := webChanged()
				r.unreadable = map[string]cause{"data.k8s_ready_endpoints.api": {kind: causeReadFails, text: "gone"}}
				return r
			}, result: resultApplied, applied: 1, targets: []string{"data.k8s_ready_endpoints.web", "terraform_data.web"}},
		{name: "with a pool the shrink guard refused, the plan targets what uses the others and not it",
			tf: fakeTerraform{changes: true, summary: planSummary{changed: []string{"terraform_data.web"}}},
			req: func() runRequest {
				r := webChanged()
				r.refused = map[string]cause{"data.k8s_ready_endpoints.api": {kind: causeShrink, text: "would be emptied"}}
				return r
			}, result: resultApplied, applied: 1, targets: []string{"data.k8s_ready_endpoints.web", "terraform_data.web"}},
		{name: "an instance of a pool with keys targets what uses its block",
			tf: fakeTerraform{changes: true, summary: planSummary{changed: []string{"terraform_data.api"}}},
			req: func() runRequest {
				r := runRequest{changes: map[string][]poolChange{`data.k8s_ready_endpoints.api["x"]`: {change("a")}}}
				r.unreadable = map[string]cause{"data.k8s_ready_endpoints.web": {kind: causeReadFails, text: "gone"}}
				return r
			}, result: resultApplied, applied: 1, targets: []string{"data.k8s_ready_endpoints.api", "terraform_data.api"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tf := tc.tf
			r := &runner{tf: &tf, filter: filterOf(t, twoPools), refresh: true, log: discard()}
			o := decided(r, tc.req())
			if o.result != tc.result {
				t.Fatalf("result %s (%v), want %s", o.result, o.err, tc.result)
			}
			if tf.applied != tc.applied {
				t.Errorf("%d applies, want %d", tf.applied, tc.applied)
			}
			if len(tf.planned) != 1 || !slices.Equal(tf.planned[0].targets, tc.targets) {
				t.Errorf("plans %+v, want one with targets %v", tf.planned, tc.targets)
			}
			if !strings.Contains(o.reason, tc.reason) {
				t.Errorf("reason %q, want it to name %q", o.reason, tc.reason)
			}
		})
	}
}

func TestARunThatWouldNeedAnUnreadablePoolPlansNothing(t *testing.T) {
	tf := fakeTerraform{changes: true}
	// web is used only with api.
	config := strings.Replace(twoPools, "input = data.k8s_ready_endpoints.web.endpoints", `input = "web"`, 1)
	r := &runner{tf: &tf, filter: filterOf(t, config), log: discard()}
	req := webChanged()
	req.unreadable = map[string]cause{"data.k8s_ready_endpoints.api": {kind: causeReadFails, text: "gone"}}
	if o := decided(r, req); o.result != resultWaiting {
		t.Fatalf("result %s, want %s", o.result, resultWaiting)
	}
	if len(tf.planned) != 0 {
		t.Errorf("%d plans, want none", len(tf.planned))
	}
}

// A run that cannot leave a refused pool out (-command runs the whole
// configuration) runs nothing: it would apply what the guard refused.
func TestARunThatCannotLeaveARefusedPoolOutRunsNothing(t *testing.T) {
	tf := fakeTerraform{}
	r := &runner{tf: &tf, command: "true", log: discard()}
	req := webChanged()
	req.refused = map[string]cause{"data.k8s_ready_endpoints.api": {kind: causeShrink, text: "would be emptied"}}
	if o := decided(r, req); o.result != resultWaiting || tf.env != nil {
		t.Fatalf("result %s, command run with %v: want %s and no command", o.result, tf.env, resultWaiting)
	}
}

func TestAFailedPlanNamesTheAddressesOfItsErrors(t *testing.T) {
	stderr := `
Error: Service Not Found

  with data.k8s_ready_endpoints.x,
  on main.tf line 3, in data "k8s_ready_endpoints" "x":
   3: data "k8s_ready_endpoints" "x" {

Error: boom

  with module.lb["a"].aws_lb_target_group_attachment.m[0],
  on lb/main.tf line 1:
`
	tf := fakeTerraform{planErr: &cliExit{args: []string{"terraform", "plan"}, code: 1, stderr: stderr}}
	r := &runner{tf: &tf, filter: filterOf(t, twoPools), log: discard()}
	o := decided(r, webChanged())
	want := []string{`data.k8s_ready_endpoints.x`, `module.lb["a"].aws_lb_target_group_attachment.m[0]`}
	if o.result != resultFailed || !slices.Equal(o.failing, want) {
		t.Errorf("result %s, failing %q; want failed naming %q", o.result, o.failing, want)
	}
}

func TestACommandGetsTheChangesAndIsDelivered(t *testing.T) {
	tf := fakeTerraform{}
	r := &runner{tf: &tf, command: "true", terraformPath: "/bin/tofu", log: discard()}
	req := webChanged()
	req.unreadable = map[string]cause{"data.k8s_ready_endpoints.api": {kind: causeReadFails, text: "gone"}}
	if o := decided(r, req); o.result != resultDelivered {
		t.Fatalf("result %s, want %s", o.result, resultDelivered)
	}
	env := map[string]string{}
	for _, kv := range tf.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var changes map[string][]struct{ Added []string }
	if err := json.Unmarshal([]byte(env["K8S_SYNC_CHANGES"]), &changes); err != nil {
		t.Fatal(err)
	}
	if got := changes["data.k8s_ready_endpoints.web"]; len(got) != 1 || !slices.Equal(got[0].Added, []string{"10.0.0.1:80"}) {
		t.Errorf("K8S_SYNC_CHANGES %s", env["K8S_SYNC_CHANGES"])
	}
	if !strings.Contains(env["K8S_SYNC_UNREADABLE"], "data.k8s_ready_endpoints.api") || env["K8S_SYNC_TERRAFORM"] != "/bin/tofu" {
		t.Errorf("environment %v", env)
	}
}

// The CLI writes its errors to stderr and its warnings to stdout: a failed
// run says the error, whatever warnings came after it.
func TestAFailedCommandSaysItsErrorBeforeItsWarnings(t *testing.T) {
	lock := "\x1b[31mError: Error acquiring the state lock\x1b[0m\n\nError message: leases.coordination.k8s.io \"lock-tfstate-default-state\" is forbidden\n\nTerraform acquires a state lock to protect the state from being written\nby multiple users at the same time. Please resolve the issue above and try\nagain. For most commands, you can disable locking with the \"-lock=false\"\nflag, but this is not recommended.\n"
	warnings := strings.Repeat("Warning: Provider development overrides are in effect\n\nThe following provider development overrides are set in the CLI\nconfiguration:\n", 3)
	err := (&cliExit{args: []string{"terraform", "plan"}, code: 1, stderr: lock, stdout: warnings}).Error()
	for _, want := range []string{"terraform plan exited with 1", "Error acquiring the state lock", "is forbidden"} {
		if !strings.Contains(err, want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err, "\x1b[") || strings.Contains(err, "overrides") {
		t.Errorf("error %q has colours or the warnings", err)
	}
}

// At start, a backend that refuses the credentials is waited for, as one
// out of reach is (a Secret rotated a minute after the pod started); one
// that refuses the identity what it asks (an RBAC rule, a grant missing)
// stops the companion with the rule to add, as a working directory not
// initialised for its backend does.
func TestABackendThatRefusesTheCredentialsIsWaitedForAtStartOneThatRefusesTheIdentityIsNot(t *testing.T) {
	for _, tc := range []struct {
		name, stderr string
		permanent    bool
	}{
		{name: "a Secret the identity may not read",
			stderr:    `Error: Error loading the state: secrets "tfstate-default-state" is forbidden: User "system:serviceaccount:lb-sync:k8s-sync" cannot get resource "secrets"`,
			permanent: true},
		{name: "a database role without the grant", stderr: `Error: Failed to get existing workspaces: pq: permission denied for table states`, permanent: true},
		{name: "a token the API server does not take", stderr: `Error: Failed to get existing workspaces: Unauthorized`},
		{name: "a wrong password", stderr: `Error: Failed to get existing workspaces: pq: password authentication failed for user "tf"`},
		{name: "a backend out of reach", stderr: `Error: Failed to get existing workspaces: dial tcp 127.0.0.1:5432: connect: connection refused`},
		{name: "a working directory not initialised", stderr: "Error: Backend initialization required, please run \"terraform init\"", permanent: true},
		{name: "providers not installed", stderr: "Error: Required plugins are not installed", permanent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := &cliExit{args: []string{"terraform", "state", "pull"}, code: 1, stderr: tc.stderr}
			if got := waitingCannotCure(err); got != tc.permanent {
				t.Errorf("permanent %v, want %v", got, tc.permanent)
			}
		})
	}
}

// targetedConfig has pools web and api, a fleet, a pool no resource uses
// (an output exports it), a local module and one from a registry.
const targetedConfig = twoPools + `
data "k8s_services" "fleet" {
  namespace = "apps"
}
resource "terraform_data" "member" {
  for_each = data.k8s_services.fleet.services
  input    = each.value.endpoints
}
data "k8s_ready_endpoints" "exported" {
  service = "exported"
}
output "exported" {
  value = data.k8s_ready_endpoints.exported.endpoints
}
locals {
  web = data.k8s_ready_endpoints.web.endpoints
}
module "local_lb" {
  source = "./lb"
  pool   = local.web
}
module "registry_lb" {
  source = "example/lb/any"
  pool   = data.k8s_ready_endpoints.api.endpoints
}
`

func TestATargetedRunPlansWhatTheChangedPoolsNeed(t *testing.T) {
	const web, api, fleet, exported = "data.k8s_ready_endpoints.web", "data.k8s_ready_endpoints.api", "data.k8s_services.fleet",
		"data.k8s_ready_endpoints.exported"
	changed := func(addresses ...string) runRequest {
		r := runRequest{changes: map[string][]poolChange{}}
		for _, a := range addresses {
			r.changes[a] = []poolChange{change(a, "10.0.0.1:80")}
		}
		return r
	}
	unreadable := func(r runRequest, address string) runRequest {
		r.unreadable = map[string]cause{address: {kind: causeReadFails, text: "gone"}}
		return r
	}
	full := func(r runRequest) runRequest { r.full = true; return r }
	services := func(address string, names ...string) runRequest {
		r := runRequest{changes: map[string][]poolChange{}}
		for _, n := range names {
			c := change(n, "10.0.0.1:80")
			c.Name = n
			r.changes[address] = append(r.changes[address], c)
		}
		return r
	}
	files := map[string]string{"main.tf": targetedConfig, "lb/main.tf": `
variable "pool" {}
resource "terraform_data" "pool" {
  input = var.pool
}
`}
	for _, tc := range []struct {
		name string
		req  runRequest
		// off turns targeting off; json adds a .tf.json file;
		// memberUsesWeb makes the fleet's resource use web too, and web
		// change.
		off, json, memberUsesWeb bool
		targets                  []string
	}{
		{name: "a pool's change plans the resources that use it, through locals and modules, and the pool itself",
			req: changed(web), targets: []string{web, "module.local_lb.terraform_data.pool", "terraform_data.both", "terraform_data.web"}},
		{name: "a module from a registry is planned whole", req: changed(api),
			targets: []string{api, "module.registry_lb", "terraform_data.api", "terraform_data.both"}},
		{name: "a fleet's skipped list plans every instance of the resource that uses it, and reads the fleet once",
			req: changed(fleet), targets: []string{fleet, "terraform_data.member"}},
		{name: "a fleet's Services plan the instances of the resource keyed by them, and read the fleet once",
			req: services(fleet, "apps/a", "apps/b"), targets: []string{fleet, `terraform_data.member["apps/a"]`, `terraform_data.member["apps/b"]`}},
		{name: "a fleet's Services with another pool's change that the resource also uses plan it whole",
			req: services(fleet, "apps/a"), off: false, targets: []string{fleet, "terraform_data.member"}, memberUsesWeb: true},
		{name: "a pool only an output uses plans the pool alone: the output follows it",
			req: changed(exported), targets: []string{exported}},
		{name: "two changed pools plan what each needs", req: changed(web, fleet),
			targets: []string{web, fleet, "module.local_lb.terraform_data.pool", "terraform_data.both", "terraform_data.member", "terraform_data.web"}},
		{name: "what also uses an unreadable pool is left out", req: unreadable(changed(web), api),
			targets: []string{web, "module.local_lb.terraform_data.pool", "terraform_data.web"}},
		{name: "a full run plans the whole configuration", req: full(changed(web))},
		{name: "a full run with an unreadable pool plans everything but what uses it", req: full(unreadable(changed(web), api)),
			targets: []string{exported, web, fleet, "module.local_lb.terraform_data.pool", "terraform_data.member", "terraform_data.web"}},
		{name: "with targeting off, a run plans the whole configuration", req: changed(web), off: true},
		{name: "a configuration with a file the companion does not read is planned whole", req: changed(web), json: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, files)
			if tc.json {
				writeFiles(t, dir, map[string]string{"extra.tf.json": `{"resource": {"terraform_data": {"json": {"input": "x"}}}}`})
			}
			req := tc.req
			if tc.memberUsesWeb {
				writeFiles(t, dir, map[string]string{"main.tf": strings.Replace(targetedConfig, "input    = each.value.endpoints",
					"input    = [each.value.endpoints, local.web]", 1)})
				req.changes[web] = []poolChange{change("w", "10.0.0.9:80")}
				tc.targets = []string{web, fleet, "module.local_lb.terraform_data.pool", "terraform_data.both", "terraform_data.member", "terraform_data.web"}
			}
			g, err := readConfiguration(dir)
			if err != nil {
				t.Fatal(err)
			}
			tf := fakeTerraform{changes: true, summary: planSummary{changed: []string{"terraform_data.web"}}}
			r := &runner{tf: &tf, filter: newPoolChangeFilter(g, []string{web, api, fleet, exported}), targetChanged: !tc.off, log: discard()}
			if o := decided(r, req); o.result != resultApplied {
				t.Fatalf("result %s (%v), want %s", o.result, o.err, resultApplied)
			}
			if len(tf.planned) != 1 || !slices.Equal(tf.planned[0].targets, tc.targets) {
				t.Errorf("plans %+v, want one with targets %q", tf.planned, tc.targets)
			}
		})
	}
}

// Terraform plans a root module's output only when everything it uses is
// planned: an output of two pools (examples/pools/multi-cluster) targets
// both when one changes.
func TestATargetedRunPlansWhatAnOutputOfTheChangedPoolUses(t *testing.T) {
	config := `
data "k8s_ready_endpoints" "blue" {
  service = "web"
}
data "k8s_ready_endpoints" "green" {
  service = "web"
}
locals {
  pools = { blue = data.k8s_ready_endpoints.blue.endpoints, green = data.k8s_ready_endpoints.green.endpoints }
}
output "backend" {
  value = templatefile("backend.tftpl", { pools = local.pools })
}
`
	blue, green := "data.k8s_ready_endpoints.blue", "data.k8s_ready_endpoints.green"
	tf := fakeTerraform{changes: true}
	r := &runner{tf: &tf, filter: filterWatching(t, config, blue, green), targetChanged: true, log: discard()}
	req := runRequest{changes: map[string][]poolChange{green: {change("g", "10.0.0.1:80")}}}
	if o := decided(r, req); o.result != resultStateUpdated {
		t.Fatalf("result %s (%v), want %s", o.result, o.err, resultStateUpdated)
	}
	if want := []string{blue, green}; len(tf.planned) != 1 || !slices.Equal(tf.planned[0].targets, want) {
		t.Errorf("plans %+v, want one with targets %q", tf.planned, want)
	}
	// With blue unreadable, the output cannot be planned, and green's pool
	// brought into state alone would leave it behind: nothing is planned.
	tf = fakeTerraform{changes: true}
	r.tf = &tf
	req.unreadable = map[string]cause{blue: {kind: causeReadFails, text: "gone"}}
	if o := decided(r, req); o.result != resultWaiting || len(tf.planned) != 0 {
		t.Errorf("result %s, plans %+v: want %s and none", o.result, tf.planned, resultWaiting)
	}
}

// What a run reads of `plan -json` (lines as Terraform 1.11 writes them).
func TestAPlansMachineReadableOutputSaysWhatItChangesAndWhy(t *testing.T) {
	out := strings.Join([]string{
		`{"@level":"info","@message":"Terraform 1.11.4","type":"version","terraform":"1.11.4","ui":"1.2"}`,
		`{"@level":"info","type":"apply_start","hook":{"resource":{"addr":"data.k8s_ready_endpoints.web"},"action":"read"}}`,
		`{"@level":"info","type":"planned_change","change":{"resource":{"addr":"data.k8s_ready_endpoints.later"},"action":"read"}}`,
		`{"@level":"info","type":"planned_change","change":{"resource":{"addr":"terraform_data.pool"},"action":"update"}}`,
		`{"@level":"info","type":"planned_change","change":{"resource":{"addr":"module.lb[\"eu\"].terraform_data.member[\"a\"]"},"action":"replace"}}`,
		`{"@level":"info","type":"planned_change","change":{"resource":{"addr":"terraform_data.renamed"},"action":"move"}}`,
		`{"@level":"info","type":"resource_drift","change":{"resource":{"addr":"terraform_data.other"},"action":"update"}}`,
		`{"@level":"info","type":"change_summary","changes":{"add":0,"change":2,"remove":0,"operation":"plan"}}`,
		`{"@level":"error","type":"diagnostic","diagnostic":{"severity":"error","summary":"Service not found","detail":"web/gone does not exist.","address":"data.k8s_ready_endpoints.gone"}}`,
		`{"@level":"warn","type":"diagnostic","diagnostic":{"severity":"warning","summary":"Resource targeting is in effect","detail":"..."}}`,
		`not JSON`,
	}, "\n")
	s, errs := readPlanJSON([]byte(out))
	if want := []string{"terraform_data.pool", `module.lb["eu"].terraform_data.member["a"]`}; !slices.Equal(s.changed, want) {
		t.Errorf("changed %q, want %q", s.changed, want)
	}
	if want := []string{"terraform_data.other"}; !slices.Equal(s.drift, want) {
		t.Errorf("drift %q, want %q", s.drift, want)
	}
	want := "Error: Service not found\n\n  with data.k8s_ready_endpoints.gone,\n\nweb/gone does not exist.\n\n"
	if errs != want {
		t.Errorf("errors %q, want %q", errs, want)
	}
	if got := failingAddresses(&cliExit{stderr: errs}); !slices.Equal(got, []string{"data.k8s_ready_endpoints.gone"}) {
		t.Errorf("failing %q, want the data source", got)
	}
}

// A run that waits for a slot of the replica (-max-concurrent-runs) says
// how long, apart from its own duration, and is not busy meanwhile: a
// workspace waiting for a slot can be handed over.
func TestARunThatWaitsForASlotSaysHowLongAndIsNotBusyMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tf := fakeTerraform{changes: true, summary: planSummary{changed: []string{"terraform_data.web"}}}
		s := &syncer{slots: make(chan struct{}, 1), clock: clock.RealClock{}, runner: &runner{tf: &tf, filter: filterOf(t, twoPools), log: discard()}}
		s.slots <- struct{}{} // another workspace's run
		done := make(chan runOutcome)
		go func() { done <- decideRun(webChanged(), s.run(context.Background(), webChanged())).outcome }()
		synctest.Wait()
		if !s.handOver(func() {}) {
			t.Error("not handed over while waiting for a slot")
		}
		s.handedOver = false
		// The other workspace's run holds the slot for 3 s: in the bubble's
		// clock, the scenario itself, which takes no real time.
		time.Sleep(3 * time.Second)
		<-s.slots
		if o := <-done; o.result != resultApplied || o.queued != 3*time.Second {
			t.Errorf("result %s, queued %s: want %s after 3s in the queue", o.result, o.queued, resultApplied)
		}
	})
}
