// Package imagebench is the companion's image in the bench (issue 26;
// `make bench-image`, `bench -only image`): its size, compressed and by
// layer (the report of make image), the cold start of `sync` to its line
// `watching` against a state of fixture.FleetServices pools, in the image's
// container (podman, run as test/imagetest runs it) and as the plain
// binary, alternately, and a pod's Ready to the apply's end in each. See
// bench/README.md.
package imagebench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/clis"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/companionproc"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/stats"
)

type Options struct {
	archive, report string
	rounds, changes int
}

func (o *Options) Register(flags *flag.FlagSet) {
	flags.StringVar(&o.archive, "image", "bin/image/terraform-provider-k8s-sync.tar", "image: the docker-archive of make image (relative to the repository)")
	flags.StringVar(&o.report, "image-report", "bin/image/report.json", "image: the sizes make image wrote")
	flags.IntVar(&o.rounds, "image-rounds", 5, "image: rounds of cold starts, container and plain binary alternately")
	flags.IntVar(&o.changes, "image-changes", 12, "image: pool changes timed from a pod's Ready to the apply's end, for each of the container and the binary (0: none)")
}

// imageReport is what tools/image writes with -report.
type imageReport struct {
	CompressedBytes int64 `json:"compressed_bytes"`
	Layers          []struct {
		CompressedBytes   int64 `json:"compressed_bytes"`
		UncompressedBytes int64 `json:"uncompressed_bytes"`
	} `json:"layers"`
}

type Results struct {
	report imageReport
	pools  int
	// container and binary are the cold starts to `watching`, s.
	container, binary []float64
	// readyContainer and readyBinary are a pod's Ready to the end of the
	// apply, s.
	readyContainer, readyBinary []float64
	// skipped says why the cold starts were not measured.
	skipped string
	// notBuilt says why nothing of the image was measured.
	notBuilt string
}

// imageLayers names the layers tools/image writes, in its order.
var imageLayers = []string{"base files (passwd, CA certificates, CLI configuration, directories)", "the CLI (OpenTofu)", "the provider (and its mirror's hard links)"}

// part is the image's part of one bench run.
type part struct {
	*benchrun.Run
	opts Options
}

// Measure runs the image's part on the run's cluster, with the fleet
// fixture of fixture.Create already there.
func Measure(ctx context.Context, run *benchrun.Run, client kubernetes.Interface, o Options) (*Results, error) {
	b := &part{Run: run, opts: o}
	r := &Results{pools: fixture.FleetServices}
	raw, err := os.ReadFile(filepath.Join(b.Root, o.report))
	if errors.Is(err, fs.ErrNotExist) {
		// A part that cannot run is said in the report, and the parts
		// measured beside it are still written.
		r.notBuilt = fmt.Sprintf("the image is not built: %s is missing (make image, or make bench-image, builds it)", o.report)
		b.Say("image: skipped, %s", r.notBuilt)
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the image's sizes (make image writes %s): %w", o.report, err)
	}
	if err := json.Unmarshal(raw, &r.report); err != nil {
		return nil, fmt.Errorf("%s: %w", o.report, err)
	}
	if _, err := exec.LookPath("podman"); err != nil {
		r.skipped = fmt.Sprintf("podman is not on PATH (%v; make container-runtime installs it)", err)
		return r, nil
	}
	p, err := newBenchPodman(filepath.Join(b.Work, "podman"))
	if err != nil {
		return nil, err
	}
	out, err := p.run(ctx, "load", "-i", filepath.Join(b.Root, o.archive))
	if err != nil {
		return nil, err
	}
	image := strings.TrimSpace(out[strings.LastIndex(out, "Loaded image: ")+len("Loaded image: "):])

	b.Say("image: a state of %d k8s_ready_endpoints, applied; then %d rounds of sync's cold start, in the container and as the binary", fixture.FleetServices, o.rounds)
	cli, err := b.NewCLI("image")
	if err != nil {
		return nil, err
	}
	dir, err := cli.Applied(ctx, "image-each", benchrun.ReadyEndpointsEach(fixture.FleetServices))
	if err != nil {
		return nil, err
	}
	// The container's user (65532) reads the configuration and a copy of
	// the kubeconfig.
	kubeconfig := filepath.Join(b.Work, "kubeconfig-image")
	if err := copyReadable(b.Cluster.Kubeconfig(), kubeconfig); err != nil {
		return nil, err
	}
	if err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chmod(path, info.Mode()|0o044|(info.Mode()&0o100)>>3|(info.Mode()&0o100)>>6)
	}); err != nil {
		return nil, err
	}
	// The same OpenTofu as the image's, for the binary too.
	tofu, err := clis.Find(ctx, "tofu", b.Root)
	if err != nil {
		return nil, err
	}
	binary := []string{b.Provider, "sync", "-chdir", dir, "-terraform", tofu, "-kubeconfig", b.Cluster.Kubeconfig(), "-listen="}
	container := p.argv("run", "--rm", "--network=host", "--pull=never", "--read-only", "--read-only-tmpfs",
		"-v", dir+":/config:ro", "-v", kubeconfig+":/kube/config:ro", image, "sync", "-kubeconfig=/kube/config", "-listen=")
	for round := 0; round <= o.rounds; round++ {
		cw, err := coldStart(ctx, container, p.env())
		if err != nil {
			return nil, fmt.Errorf("the container's cold start: %w", err)
		}
		bw, err := coldStart(ctx, binary, cli.Env)
		if err != nil {
			return nil, fmt.Errorf("the binary's cold start: %w", err)
		}
		fmt.Fprintf(benchrun.Log, "  round %d: container %.2fs, binary %.2fs\n", round, cw, bw)
		if round > 0 { // the first warms the page cache
			r.container, r.binary = append(r.container, cw), append(r.binary, bw)
		}
	}
	if o.changes > 0 {
		b.Say("image: a pod's Ready to the end of the apply, %d changes in the container and as the binary, both with OpenTofu", o.changes)
		if err := b.imageLatency(ctx, client, p, image, tofu, kubeconfig, r); err != nil {
			return nil, fmt.Errorf("image latency: %w", err)
		}
	}
	return r, nil
}

const (
	imageLatencyNamespace = "bench-image"
	imageLatencyService   = "lat"
	imageLatencyPods      = 4
)

// imageLatency: a Service of 4 ready pods, one made not ready and ready
// again, alternately; each change timed from the write of the pod's Ready
// condition to the companion's `run ended` (plan and apply of a
// terraform_data pool, result applied). The container's companion and the
// binary's, each on a configuration and state of its own, both with
// OpenTofu (the image's and the same build on this machine), take turns in
// blocks, each block starting from a state the other's changes left
// current.
func (b *part) imageLatency(ctx context.Context, client kubernetes.Interface, p *benchPodman, image, tofu, kubeconfig string, r *Results) error {
	if err := fixture.CreateLatencyService(ctx, client, imageLatencyNamespace, imageLatencyService, imageLatencyPods, "10.251.0.%d"); err != nil {
		return err
	}
	main := benchrun.ProviderBlock + fmt.Sprintf("\ndata \"k8s_ready_endpoints\" \"lat\" {\n  namespace = %q\n  service   = %q\n  port_name = \"http\"\n}\n\n"+
		"resource \"terraform_data\" \"pool\" {\n  input = [for e in data.k8s_ready_endpoints.lat.endpoints : \"${e.address}:${e.port}\"]\n}\n",
		imageLatencyNamespace, imageLatencyService)
	rc := filepath.Join(b.Work, "terraformrc-image")
	binEnv := append(slices.Clone(b.Env), "TF_CLI_CONFIG_FILE="+rc)
	binDir, err := b.Config("image-latency-binary", main)
	if err != nil {
		return err
	}
	ctrDir, err := b.Config("image-latency-container", main)
	if err != nil {
		return err
	}
	tmp := filepath.Join(b.Work, "image-tmp")
	if err := os.MkdirAll(tmp, 0o1777); err != nil {
		return err
	}
	for _, d := range []string{ctrDir, tmp} {
		if err := os.Chown(d, 65532, 65532); err != nil {
			return err
		}
	}
	run := func(args ...string) []string {
		return p.argv(append([]string{"run", "--rm", "--network=host", "--pull=never", "--read-only",
			"-v", ctrDir + ":/config", "-v", tmp + ":/tmp", "-v", kubeconfig + ":/kube/config:ro",
			"-e", "KUBECONFIG=/kube/config"}, args...)...)
	}
	ctrTofu := func(args ...string) []string { return run(append([]string{"--entrypoint", "tofu", image}, args...)...) }
	binTofu := func(args ...string) []string { return append([]string{tofu, "-chdir=" + binDir}, args...) }
	if err := runArgv(ctx, ctrTofu("init", "-input=false"), p.env()); err != nil {
		return err
	}
	companions := []struct {
		name     string
		samples  *[]float64
		apply    []string
		applyEnv []string
		start    []string
		startEnv []string
	}{
		{"container", &r.readyContainer, ctrTofu("apply", "-auto-approve", "-input=false", "-no-color"), p.env(),
			run(image, "sync", "-kubeconfig=/kube/config", "-log-format=json", "-listen=", "-settle-quiet=200ms", "-settle-max=2s"), p.env()},
		{"binary", &r.readyBinary, binTofu("apply", "-auto-approve", "-input=false", "-no-color"), binEnv,
			[]string{b.Provider, "sync", "-chdir", binDir, "-terraform", tofu, "-kubeconfig", b.Cluster.Kubeconfig(), "-log-format=json", "-listen=",
				"-settle-quiet=200ms", "-settle-max=2s"}, binEnv},
	}
	toggled := fmt.Sprintf("%s-%d", imageLatencyService, imageLatencyPods-1)
	ready := true
	const blocks = 3
	perBlock := max(1, b.opts.changes/blocks)
	for block := range blocks {
		for _, c := range companions {
			// The state current first: the other's changes came while this
			// one was stopped.
			if err := runArgv(ctx, c.apply, c.applyEnv); err != nil {
				return err
			}
			proc, err := companionproc.Start(ctx, c.start, c.startEnv)
			if err != nil {
				return err
			}
			if _, err := proc.WaitNth(ctx, "watching", 1, 2*time.Minute); err != nil {
				proc.Halt()
				return fmt.Errorf("%s: %w", c.name, err)
			}
			for i := range perBlock {
				ready = !ready
				before := proc.Seen("run ended")
				written, err := fixture.WriteReady(ctx, client, imageLatencyNamespace, toggled, ready)
				if err != nil {
					proc.Halt()
					return err
				}
				ended, err := proc.WaitNth(ctx, "run ended", before+1, 3*time.Minute)
				if err != nil {
					proc.Halt()
					return fmt.Errorf("%s: %w", c.name, err)
				}
				if res, _ := ended.Fields["result"].(string); res != "applied" {
					proc.Halt()
					return fmt.Errorf("%s, change %d: the run ended %q, not applied:\n%s", c.name, i+1, res, proc.Log())
				}
				lat := ended.Time.Sub(written).Seconds()
				*c.samples = append(*c.samples, lat)
				fmt.Fprintf(benchrun.Log, "  block %d, %s: Ready=%v to the apply's end %.2fs\n", block+1, c.name, ready, lat)
				time.Sleep(time.Second) // its state read after the run
			}
			proc.Halt()
		}
	}
	return nil
}

func runArgv(ctx context.Context, argv, env []string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
	}
	return nil
}

func copyReadable(from, to string) error {
	content, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, content, 0o644)
}

// coldStart runs argv, a companion (or podman running one, its flags
// last), until it logs the event `watching`, then stops it with SIGTERM,
// and gives the time from its start to that event, s.
func coldStart(ctx context.Context, argv, env []string) (float64, error) {
	start := time.Now()
	c, err := companionproc.Start(ctx, argv, env)
	if err != nil {
		return 0, err
	}
	defer c.Halt()
	if _, err := c.WaitNth(ctx, "watching", 1, 5*time.Minute); err != nil {
		return 0, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return time.Since(start).Seconds(), nil
}

// benchPodman is podman with storage and configuration of its own
// (testcluster.PodmanEnv), as test/imagetest runs it.
type benchPodman struct{ vars []string }

func newBenchPodman(dir string) (*benchPodman, error) {
	vars, err := testcluster.PodmanEnv(dir)
	return &benchPodman{vars: vars}, err
}

func (p *benchPodman) argv(args ...string) []string { return append([]string{"podman"}, args...) }

// env is podman's environment: its configuration is read from there only.
func (p *benchPodman) env() []string { return append(os.Environ(), p.vars...) }

func (p *benchPodman) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = p.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Section is the image's section of the report.
func Section(r *Results) string {
	if r == nil {
		return ""
	}
	b := benchrun.NewSection("The companion's image (`make image`)")
	if r.notBuilt != "" {
		b.Para("Not measured: %s.", r.notBuilt)
		return b.String()
	}
	b.Table("| layer | compressed | uncompressed |", "|---|---:|---:|")
	p := b.Line
	for i, l := range r.report.Layers {
		name := fmt.Sprintf("layer %d", i+1)
		if i < len(imageLayers) && len(r.report.Layers) == len(imageLayers) {
			name = imageLayers[i]
		}
		p("| %s | %.1f MB | %.1f MB |", name, float64(l.CompressedBytes)/1e6, float64(l.UncompressedBytes)/1e6)
	}
	p("| **the image** | **%.1f MB** | |", float64(r.report.CompressedBytes)/1e6)
	p("")
	if r.skipped != "" {
		b.Para("Cold starts not measured: %s.", r.skipped)
		return b.String()
	}
	p("Cold start of `sync` to its event `watching` (state pulled, %d pools decoded, informers started and listed) against a state of %d `k8s_ready_endpoints` of 10 endpoints each, local backend: in the container (podman with runc and vfs storage, read-only root, as the image test runs it; its time includes creating the container) median %.2f s (min–max %s s), the plain binary with the same OpenTofu median %.2f s (min–max %s s), %d rounds alternating after one untimed.",
		r.pools, r.pools, stats.Median(r.container), stats.MinMax(r.container, "%.2f"), stats.Median(r.binary), stats.MinMax(r.binary, "%.2f"), len(r.binary))
	p("")
	if len(r.readyBinary) > 0 {
		p("A pod's Ready to the end of the apply (the write of its Ready condition to the companion's `run ended`, result applied: settle quiet time 200 ms, plan, apply of a `terraform_data` pool), both with OpenTofu, %d changes each in blocks taking turns: in the container median %.2f s, p90 %.2f s (min–max %s s); the plain binary median %.2f s, p90 %.2f s (min–max %s s).",
			len(r.readyBinary), stats.Median(r.readyContainer), stats.Percentile(r.readyContainer, 90), stats.MinMax(r.readyContainer, "%.2f"),
			stats.Median(r.readyBinary), stats.Percentile(r.readyBinary, 90), stats.MinMax(r.readyBinary, "%.2f"))
		p("")
	}
	return b.String()
}
