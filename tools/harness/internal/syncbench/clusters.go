package syncbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/vigie/terraform-provider-k8s/test/syncproc"
	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/companionproc"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/stats"
)

// The companion's latency for a pool that spans two clusters (issue 27): the
// bench's control plane (blue) and a second one started for this part
// (green), one Service in each, read through two provider configurations
// into one applied pool, and one companion for both. Rounds change the blue
// pool, the green pool (in an order that rotates), then both within one
// settle window; from the write of the Ready condition to the companion's
// `run ended` line of the applied run.

const syncClustersNamespace = "bench-sync-clusters"

// syncClusters are the clusters of the measurement, the bench's first.
var syncClusters = []string{"blue", "green"}

// clusterLatency is, per cluster, each change's latency, s; both is the
// latency of a change in both clusters within one window (from the first
// write), bothRuns the runs each of those made (one is right).
type clusterLatency struct {
	rounds    int
	quiet     time.Duration
	latency   map[string][]float64
	both      []float64
	bothRuns  []int
	extraRuns int
}

// clustersConfig is the configuration: a provider configuration per
// cluster, with its kubeconfig a constant, as the companion derives its
// connections from.
func clustersConfig(kubeconfigs map[string]string) string {
	var b strings.Builder
	b.WriteString("terraform {\n  required_providers {\n    k8s = { source = \"vigie/k8s\" }\n  }\n}\n")
	var members []string
	for _, name := range syncClusters {
		fmt.Fprintf(&b, "\nprovider \"k8s\" {\n  alias      = %q\n  kubeconfig = %q\n}\n", name, kubeconfigs[name])
		fmt.Fprintf(&b, "\ndata \"k8s_ready_endpoints\" %q {\n  provider  = k8s.%s\n  namespace = %q\n  service   = \"web\"\n  port_name = \"http\"\n}\n",
			name, name, syncClustersNamespace)
		members = append(members, fmt.Sprintf("[for e in data.k8s_ready_endpoints.%s.endpoints : \"%s/${e.address}:${e.port}\"]", name, name))
	}
	fmt.Fprintf(&b, "\nresource \"terraform_data\" \"pool\" {\n  input = concat(%s)\n}\n", strings.Join(members, ", "))
	return b.String()
}

func (s *syncBench) clusterLatency(ctx context.Context, r *Results) error {
	o := s.b.opts
	res := &clusterLatency{rounds: o.clusterRounds, quiet: o.quiet, latency: map[string][]float64{}}
	green, err := testcluster.Start(ctx, testcluster.Options{Dir: filepath.Join(s.b.Work, "cluster-green"), Version: os.Getenv("K8S_TF_K8S_VERSION"), Log: benchrun.Log})
	if err != nil {
		return fmt.Errorf("the second control plane: %w", err)
	}
	defer green.Stop()
	cfg, err := green.RESTConfig()
	if err != nil {
		return err
	}
	greenClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := testcluster.EnsureNode(ctx, greenClient, fixture.Node, fixture.Zone); err != nil {
		return err
	}
	clients := map[string]kubernetes.Interface{"blue": s.client, "green": greenClient}
	kubeconfigs := map[string]string{"blue": s.b.Cluster.Kubeconfig(), "green": green.Kubeconfig()}
	for i, name := range syncClusters {
		if err := fixture.CreateLatencyService(ctx, clients[name], syncClustersNamespace, "web", 4, fmt.Sprintf("10.252.%d.%%d", i)); err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	dir, err := s.Applied(ctx, "sync-clusters", clustersConfig(kubeconfigs))
	if err != nil {
		return err
	}
	// No -kubeconfig: each alias connects as its provider block says.
	c, err := companionproc.Start(ctx, []string{s.companion(), "sync", "-chdir", dir, "-terraform", s.Terraform, "-log-format", "json",
		"-listen", "127.0.0.1:0", "-settle-quiet", o.quiet.String(), "-settle-max", (o.quiet + 2*time.Second).String()}, slices.Clone(s.Env))
	if err != nil {
		return err
	}
	defer c.Halt()
	if _, err := c.WaitNth(ctx, "watching", 1, 2*time.Minute); err != nil {
		return err
	}
	// waitRun waits for the next run's end after before runs and gives its
	// line, an error unless it applied.
	waitRun := func(before int, what string) (syncproc.Event, error) {
		ended, err := c.WaitNth(ctx, "run ended", before+1, 5*time.Minute)
		if err != nil {
			return syncproc.Event{}, fmt.Errorf("%s: %w", what, err)
		}
		if result, _ := ended.Fields["result"].(string); result != "applied" {
			return syncproc.Event{}, fmt.Errorf("%s: the run ended %q, not applied:\n%s", what, result, c.Log())
		}
		return ended, nil
	}
	for round := range res.rounds {
		ready := round%2 == 1 // the first change removes a member
		for k := range syncClusters {
			name := syncClusters[(round+k)%len(syncClusters)]
			before := c.Seen("run ended")
			written, err := fixture.WriteReady(ctx, clients[name], syncClustersNamespace, "web-1", ready)
			if err != nil {
				return err
			}
			ended, err := waitRun(before, fmt.Sprintf("round %d, a change in %s", round+1, name))
			if err != nil {
				return err
			}
			lat := ended.Time.Sub(written).Seconds()
			res.latency[name] = append(res.latency[name], lat)
			fmt.Fprintf(benchrun.Log, "  round %d, a change in %s: apply ended %.0f ms after the write\n", round+1, name, lat*1000)
			time.Sleep(time.Second)
		}
		// Both clusters within one window: one run.
		before, startedBefore := c.Seen("run ended"), c.Seen("run started")
		var first time.Time
		for k, name := range syncClusters {
			written, err := fixture.WriteReady(ctx, clients[name], syncClustersNamespace, "web-2", ready)
			if err != nil {
				return err
			}
			if k == 0 {
				first = written
			}
		}
		ended, err := waitRun(before, fmt.Sprintf("round %d, a change in both clusters", round+1))
		if err != nil {
			return err
		}
		// A second run, if the window split the two changes, would start
		// within the quiet time and a settle of its own.
		time.Sleep(o.quiet + 2*time.Second)
		runs := c.Seen("run started") - startedBefore
		if runs > 1 {
			if _, err := waitRun(before+runs-1, fmt.Sprintf("round %d, the second run of a change in both clusters", round+1)); err != nil {
				return err
			}
		}
		lat := ended.Time.Sub(first).Seconds()
		res.both, res.bothRuns = append(res.both, lat), append(res.bothRuns, runs)
		fmt.Fprintf(benchrun.Log, "  round %d, a change in both: apply ended %.0f ms after the first write; %d run(s)\n", round+1, lat*1000, runs)
		time.Sleep(time.Second)
	}
	time.Sleep(2 * time.Second)
	runs := 0
	for _, n := range res.bothRuns {
		runs += n
	}
	res.extraRuns = c.Seen("run started") - res.rounds*len(syncClusters) - runs
	r.clusters = res
	return nil
}

// clusterLatencyRows are the rows of the targets table.
func clusterLatencyRows(res *clusterLatency) []string {
	if res == nil || len(res.latency["blue"]) == 0 {
		return nil
	}
	var rows []string
	blue := stats.Median(res.latency["blue"])
	for _, name := range syncClusters {
		rows = append(rows, fmt.Sprintf("| companion, one pool over two clusters: pod Ready written → apply's end, a change in %s, median of %d | %.3f s (%.2f× blue) | — | |",
			name, len(res.latency[name]), stats.Median(res.latency[name]), stats.Median(res.latency[name])/blue))
	}
	one := 0
	for _, n := range res.bothRuns {
		if n == 1 {
			one++
		}
	}
	rows = append(rows, fmt.Sprintf("| the same, a change in both within one window: rounds with exactly one run | %d of %d | all | %s |",
		one, len(res.bothRuns), map[bool]string{true: "pass", false: "**miss**"}[one == len(res.bothRuns)]))
	return rows
}

// clusterLatencySection is the paragraph and table of the measurement.
func clusterLatencySection(res *clusterLatency) string {
	if res == nil || len(res.latency["blue"]) == 0 {
		return ""
	}
	var b benchrun.Section
	b.Para("One pool over two clusters, in the same run: the bench's control plane (blue) and a second one (green), one Service of 4 ready pods in each, read through two provider configurations into one `terraform_data`, one companion for both (settle quiet time %s); %d rounds, each a change in blue and one in green (in an order that rotates; a pod made not ready, then ready, alternately), then one in both clusters back to back; from the write of the Ready condition (the first, for both) to the companion's `run ended` line of the applied run. Runs no change explains: %d.",
		res.quiet, res.rounds, res.extraRuns)
	b.Table("| change in | pod Ready → apply's end, median (min–max), s | ratio to blue | runs per change |", "|---|---:|---:|---|")
	blue := stats.Median(res.latency["blue"])
	for _, name := range syncClusters {
		b.Line("| %s | %.3f (%s) | %.2f× | 1 |", name, stats.Median(res.latency[name]), stats.MinMax(res.latency[name], "%.2f"), stats.Median(res.latency[name])/blue)
	}
	var runs []string
	for _, n := range res.bothRuns {
		runs = append(runs, fmt.Sprint(n))
	}
	b.Para("| both, within one window | %.3f (%s) | %.2f× | %s |", stats.Median(res.both), stats.MinMax(res.both, "%.2f"), stats.Median(res.both)/blue, strings.Join(runs, ", "))
	return b.String()
}
