package syncbench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/companionproc"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/stats"
)

// The companion's latency with the state in each backend (issue 27): from
// a pod's Ready condition written to the end of the apply that brings it into
// the pool, with the state in a local file, in the kubernetes backend (a
// Secret and a Lease on the bench's control plane) and in the pg backend (a
// PostgreSQL server of the bench's own, test/testcluster), in the same
// run: one Service, one pool and one companion per backend, and rounds that
// change each in turn, in an order that rotates.

const syncBackendNamespace = "bench-sync-backends"

// stateBackends are the backends measured, local first: the ratios are to it.
var stateBackends = []string{"local", "kubernetes", "pg"}

// backendLatency is, per backend, each change's latency (write to the "run
// ended" line of an applied run), s, and the run's own duration (plan, show,
// apply, as the companion logs it), s.
type backendLatency struct {
	rounds    int
	quiet     time.Duration
	latency   map[string][]float64
	duration  map[string][]float64
	extraRuns map[string]int
}

// backendBlock is the configuration's backend block for name.
func backendBlock(name, kubeconfig string, pg *testcluster.Postgres) string {
	switch name {
	case "kubernetes":
		return fmt.Sprintf("\nterraform {\n  backend \"kubernetes\" {\n    secret_suffix = \"bench\"\n    namespace     = %q\n    config_path   = %q\n  }\n}\n",
			syncBackendNamespace, kubeconfig)
	case "pg":
		return fmt.Sprintf("\nterraform {\n  backend \"pg\" {\n    conn_str = %q\n  }\n}\n", pg.ConnString("terraform"))
	}
	return ""
}

func (s *syncBench) backendLatency(ctx context.Context, r *Results) error {
	o := s.b.opts
	res := &backendLatency{rounds: o.backendRounds, quiet: o.quiet, latency: map[string][]float64{}, duration: map[string][]float64{}, extraRuns: map[string]int{}}
	pg, err := testcluster.StartPostgres(ctx, testcluster.PostgresOptions{Dir: filepath.Join(s.b.Work, "postgres"), Log: benchrun.Log})
	if err != nil {
		return err
	}
	defer pg.Stop()
	if err := pg.CreateDatabase(ctx, "terraform"); err != nil {
		return err
	}
	client := s.client
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: syncBackendNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := testcluster.WaitForServiceAccount(ctx, client, syncBackendNamespace, time.Minute); err != nil {
		return err
	}
	companions := map[string]*companionproc.Proc{}
	for i, name := range stateBackends {
		service := "state-" + name
		if err := fixture.CreatePoolService(ctx, client, syncBackendNamespace, service, 3, fmt.Sprintf("10.251.%d.", i)+"%d"); err != nil {
			return err
		}
		// init sees the backend block alone: with vigie/k8s required, it
		// would ask the registry for it, dev_overrides or not.
		block := backendBlock(name, s.b.Cluster.Kubeconfig(), pg)
		if block != "" {
			dir, err := s.b.Config("sync-backend-"+name, block)
			if err != nil {
				return err
			}
			if err := s.Command(ctx, dir, "init", "-input=false", "-no-color"); err != nil {
				return err
			}
		}
		dir, err := s.Applied(ctx, "sync-backend-"+name, benchrun.ProviderBlock+block+fmt.Sprintf(
			"\ndata \"k8s_ready_endpoints\" \"pool\" {\n  namespace = %q\n  service   = %q\n  port_name = \"http\"\n}\n\nresource \"terraform_data\" \"pool\" {\n  input = [for e in data.k8s_ready_endpoints.pool.endpoints : \"${e.address}:${e.port}\"]\n}\n",
			syncBackendNamespace, service))
		if err != nil {
			return err
		}
		c, err := s.startCompanion(ctx, dir, "-settle-quiet", o.quiet.String(), "-settle-max", (o.quiet + 2*time.Second).String())
		if err != nil {
			return err
		}
		defer c.Halt()
		if _, err := c.WaitNth(ctx, "watching", 1, 2*time.Minute); err != nil {
			return fmt.Errorf("state in %s: %w", name, err)
		}
		companions[name] = c
	}
	for round := range res.rounds {
		for k := range stateBackends {
			name := stateBackends[(round+k)%len(stateBackends)]
			c := companions[name]
			before := c.Seen("run ended")
			written, err := fixture.WriteReady(ctx, client, syncBackendNamespace, "state-"+name+"-1", round%2 == 1)
			if err != nil {
				return err
			}
			ended, err := c.WaitNth(ctx, "run ended", before+1, 5*time.Minute)
			if err != nil {
				return fmt.Errorf("state in %s: %w", name, err)
			}
			if result, _ := ended.Fields["result"].(string); result != "applied" {
				return fmt.Errorf("state in %s, round %d: the run ended %q, not applied:\n%s", name, round+1, result, c.Log())
			}
			text, _ := ended.Fields["duration"].(string)
			run, err := time.ParseDuration(text)
			if err != nil {
				return fmt.Errorf("state in %s: run ended without a duration: %v", name, ended.Fields)
			}
			lat := ended.Time.Sub(written).Seconds()
			res.latency[name], res.duration[name] = append(res.latency[name], lat), append(res.duration[name], run.Seconds())
			fmt.Fprintf(benchrun.Log, "  round %d, state in %s: apply ended %.0f ms after the write (the run %.0f ms)\n", round+1, name, lat*1000, run.Seconds()*1000)
			// Let the companion read the state again after its run.
			time.Sleep(time.Second)
		}
	}
	time.Sleep(2 * time.Second)
	for _, name := range stateBackends {
		res.extraRuns[name] = companions[name].Seen("run started") - res.rounds
	}
	r.backends = res
	return nil
}

// backendLatencyRows are the rows of the targets table: no target, the
// medians and their ratio to local.
func backendLatencyRows(res *backendLatency) []string {
	if res == nil || len(res.latency["local"]) == 0 {
		return nil
	}
	local := stats.Median(res.latency["local"])
	var rows []string
	for _, name := range stateBackends {
		rows = append(rows, fmt.Sprintf("| companion pod Ready written → apply's end, state in the %s backend, median of %d | %.3f s (%.2f× local) | — | |",
			name, len(res.latency[name]), stats.Median(res.latency[name]), stats.Median(res.latency[name])/local))
	}
	return rows
}

// backendLatencySection is the paragraph and table of the measurement.
func backendLatencySection(res *backendLatency) string {
	if res == nil || len(res.latency["local"]) == 0 {
		return ""
	}
	var extra []string
	for _, name := range stateBackends {
		extra = append(extra, fmt.Sprintf("%s %d", name, res.extraRuns[name]))
	}
	var b benchrun.Section
	b.Para("With the state in each backend, in the same run: one Service, one applied pool (`terraform_data`) and one companion per backend (settle quiet time %s); %d rounds, each changing every backend's pool in turn (a pod made not ready, then ready, alternately), in an order that rotates; from the write of the Ready condition to the companion's `run ended` line of the applied run. Runs no change explains: %s.",
		res.quiet, res.rounds, strings.Join(extra, ", "))
	b.Table("| state backend | pod Ready → apply's end, median (min–max), s | ratio to local | the run (plan, show, apply), median, s |", "|---|---:|---:|---:|")
	local := stats.Median(res.latency["local"])
	for _, name := range stateBackends {
		b.Line("| %s | %.3f (%s) | %.2f× | %.3f |", name, stats.Median(res.latency[name]), stats.MinMax(res.latency[name], "%.2f"),
			stats.Median(res.latency[name])/local, stats.Median(res.duration[name]))
	}
	b.Line("")
	return b.String()
}
