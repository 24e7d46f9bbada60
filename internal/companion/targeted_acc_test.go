package companion

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Issue 39: a run plans what the changed pools need (-target), so that the
// other pools are neither read nor planned; a plan of the whole
// configuration on -full-plan-interval catches what the pools do not show.
//
// api's pool changes while no companion runs, and a human's `terraform
// apply -refresh-only` writes its data source into state but leaves
// terraform_data.api_pool behind: the pools match state, so no run is for
// it. web then changes: the run targets web's pool and its dependents, and
// leaves api_pool as it is. The full plan on the interval brings it
// current.
func TestAccSyncARunPlansWhatTheChangedPoolNeedsAndAFullPlanCatchesTheRest(t *testing.T) {
	t.Parallel()
	ns, w := webAndAPI(t)
	runPod(t, ns, "api", "api-2", "10.244.1.2", true)
	waitForReady(t, ns, "api", 2, 2)
	w.terraform(t, "apply", "-refresh-only", "-auto-approve", "-input=false", "-no-color")
	wantCheck(t, w, "after the refresh-only apply", t.Fatalf)
	apiPoolHas := func() bool {
		return strings.Contains(w.terraform(t, "state", "show", "-no-color", "terraform_data.api_pool"), "10.244.1.2:8080")
	}
	if apiPoolHas() {
		t.Fatal("terraform_data.api_pool is current after a refresh-only apply: the test shows nothing")
	}

	cli := newCountingCLI(t)
	c := startSync(t, w, "-terraform", cli.path, "-full-plan-interval", "20s")
	start := time.Now()
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3))
	plans := cli.invocations("plan")
	if len(plans) != 1 {
		t.Fatalf("%d plans, want 1: %q", len(plans), plans)
	}
	var targets []string
	for _, arg := range plans[0] {
		if target, ok := strings.CutPrefix(arg, "-target="); ok {
			targets = append(targets, target)
		}
	}
	if want := []string{"data.k8s_ready_endpoints.web", "terraform_data.pool"}; !slices.Equal(targets, want) {
		t.Errorf("the run's plan targets %q, want %q: %q", targets, want, plans[0])
	}
	if apiPoolHas() {
		t.Error("the run for web changed terraform_data.api_pool: it planned more than web's pool needs")
	}
	if time.Since(start) > 15*time.Second {
		t.Skip("the run for web ended too late to tell it from the full plan")
	}

	c.waitFor(t, 60*time.Second, "planning the whole configuration: -full-plan-interval passed")
	c.waitForCount(t, 60*time.Second, "run ended", 2, map[string]string{"result": "applied"})
	if !apiPoolHas() {
		t.Errorf("the full plan did not bring terraform_data.api_pool current:\n%s", c.log())
	}
	plans = cli.invocations("plan")
	if len(plans) != 2 || slices.ContainsFunc(plans[1], func(arg string) bool { return strings.HasPrefix(arg, "-target=") }) {
		t.Errorf("plans %q: want a second one of the whole configuration", plans)
	}
	wantCheck(t, w, "after the full plan", t.Errorf)
}
