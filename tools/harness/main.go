// Command harness drives the project's local tooling: the local control plane
// (test/testcluster) for make cluster-up, cluster-down and demo, the
// pinned CLIs of the acceptance tests, and make bench. It is a module of its
// own under tools/, like the other build-only modules, so that `go install
// ./...` of the provider never installs it; the Makefile builds it into bin/.
//
//	harness up [-dir .cluster] [-version v1.X.Y] [-audit]   start the control plane in the background
//	harness down [-dir .cluster]                            stop it and delete its state
//	harness cli NAME                                        print the path of an acceptance-test CLI (building it if needed)
//	harness helm                                            print the path of helm (building it from tools/helm if needed)
//	harness demo -kubeconfig FILE [-namespace demo] [-network [-hold FILE]]
//	                                                        the demo's Service and pods in every state (-network: pods that answer)
//	harness haproxy -dir DIR -backend FILE [-ready FILE]    HAProxy on a rendered backend until stopped; SIGHUP reloads
//	harness bench [flags]                                   measure; writes bench/results.md (see bench/README.md)
//	harness bench-sync [flags]                              the sync companion's part alone (bench -only sync)
//	harness pin VERSION                                     rewrite tools/cluster for another Kubernetes version
//	harness build-control-plane [-version v1.X.Y]           build (or find) the control plane binaries
//
// This package dispatches the commands and parses their flags; what each
// does is a package of internal/ (see README.md): controlplane, clis, demo,
// and bench with the parts of its run (syncbench, imagebench, trafficbench,
// on the run they share, benchrun).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/bench"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/controlplane"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/demo"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/imagebench"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/syncbench"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/trafficbench"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	if os.Args[1] == "rusage-wrap" {
		// Before any signal handling of its own: it forwards signals to the
		// program it wraps.
		os.Exit(bench.RusageWrap(os.Args[2:]))
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

func run(command string, args []string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var err error
	switch command {
	case "up":
		err = controlplane.Up(ctx, parseClusterFlags("up", args, true))
	case "serve":
		err = controlplane.Serve(ctx, parseClusterFlags("serve", args, true))
	case "down":
		err = controlplane.Down(parseClusterFlags("down", args, false).Dir)
	case "cli":
		err = cli(ctx, args)
	case "helm":
		err = helm(ctx)
	case "demo":
		err = runDemo(ctx, args)
	case "haproxy":
		err = runHAProxy(ctx, args)
	case "bench":
		err = runBench(ctx, args)
	case "bench-sync":
		err = runBench(ctx, append([]string{"-only", "sync"}, args...))
	case "pin":
		if len(args) != 1 {
			return errors.New("usage: harness pin v1.X.Y")
		}
		err = controlplane.Pin(ctx, repoRoot(), args[0])
	case "build-control-plane":
		f := parseClusterFlags("build-control-plane", args, true)
		err = controlplane.Build(ctx, repoRoot(), f.Version)
	default:
		usage()
	}
	return err
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: harness up|down|cli|helm|demo|haproxy|bench|bench-sync|pin|build-control-plane [flags]  (see tools/harness/main.go)`)
	os.Exit(2)
}

func repoRoot() string {
	root, err := testcluster.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
	return root
}

// runDemo is `demo`: its flags, then internal/demo.
func runDemo(ctx context.Context, args []string) error {
	var o demo.Options
	flags := flag.NewFlagSet("demo", flag.ExitOnError)
	flags.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (required)")
	flags.StringVar(&o.Namespace, "namespace", "demo", "namespace of the demo, deleted first if it exists")
	flags.BoolVar(&o.Network, "network", false, "give each pod a real network (root and iproute2)")
	flags.StringVar(&o.Hold, "hold", "", "write this file once the pods are there (with -network: serve), and keep running (and their networks) until stopped")
	flags.StringVar(&o.AddPod, "add-pod", "", "with -hold: when this file exists, add a ready pod web-3, then write FILE.done")
	_ = flags.Parse(args)
	return demo.Run(ctx, o)
}

// runHAProxy is `haproxy`: its flags, then internal/demo.
func runHAProxy(ctx context.Context, args []string) error {
	var o demo.HAProxyOptions
	flags := flag.NewFlagSet("haproxy", flag.ExitOnError)
	flags.StringVar(&o.Dir, "dir", "", "directory of HAProxy's configuration and log (required)")
	flags.StringVar(&o.Backend, "backend", "", "the rendered backend file (required)")
	flags.IntVar(&o.Port, "port", 0, "frontend port on 127.0.0.1 and [::1]; 0 picks a free one")
	flags.StringVar(&o.Ready, "ready", "", "file to write the port to once HAProxy serves")
	_ = flags.Parse(args)
	return demo.HAProxy(ctx, o)
}

// runBench is `bench` (and `bench-sync`, `bench -only sync`): its flags,
// then internal/bench.
func runBench(ctx context.Context, args []string) error {
	flags := flag.NewFlagSet("bench", flag.ExitOnError)
	runs := flags.Int("runs", envInt("K8S_TF_BENCH_RUNS", 7), "timed runs of each command (rounds, interleaved)")
	sizes := flags.String("sizes", "1,10,100,300,1000", "numbers of data sources planned")
	out := flags.String("out", "bench/results.md", "Markdown file written, relative to the repository root")
	profile := flags.Bool("profile", os.Getenv("PROFILE") == "1", "also profile the provider (CPU and heap) in four reads and count its instructions per read under callgrind (PROFILE=1; tools/harness/internal/bench/profile.go)")
	instructions := flags.String("instructions", os.Getenv("K8S_TF_BENCH_INSTRUCTIONS"), "with -profile: revisions, comma-separated, whose instructions per read are counted beside the current build's (K8S_TF_BENCH_INSTRUCTIONS; default the -baseline)")
	profilePlans := flags.Int("profile-plans", 10, "with -profile: plans of each read profiled, for CPU and again for the heap (one plan gives a few dozen samples at 100 Hz, too few to rank anything; 0: none)")
	instructionRounds := flags.Int("instruction-rounds", 3, "with -profile: rounds of the instruction counts (0: none)")
	gobench := flags.Bool("gobench", true, "run the Go benchmarks of the rules (internal/endpoints)")
	only := flags.String("only", "", "run one part alone: profile (the provider's profiles and instruction counts; default bench/results-profile.md), sync (the companion; writes -out, default bench/results-sync.md), traffic (a pod's Ready to its first request through HAProxy and nginx; default bench/results-traffic.md) or image (the companion's image; default bench/results-image.md)")
	withSync := flags.Bool("sync", true, "also measure the sync companion (tools/harness/internal/syncbench)")
	withImage := flags.Bool("image-part", true, "also measure the companion's image (tools/harness/internal/imagebench; needs make image)")
	var imageOpts imagebench.Options
	imageOpts.Register(flags)
	trafficSamplesFlag := flags.Int("traffic-samples", trafficbench.Samples, "traffic: pods made ready, one at a time, per load balancer (1 to 100)")
	baseline := flags.String("baseline", os.Getenv("K8S_TF_BENCH_BASELINE"), "also plan with the provider built at this git revision, in the same rounds (K8S_TF_BENCH_BASELINE)")
	var syncOpts syncbench.Options
	syncOpts.Register(flags)
	_ = flags.Parse(args)
	if err := syncOpts.Check(); err != nil {
		return err
	}
	opts := bench.Options{Runs: *runs, Out: *out, Profile: *profile, GoBench: *gobench, Incumbent: os.Getenv("K8S_TF_BENCH_INCUMBENT"),
		Baseline: *baseline, Only: *only, WithSync: *withSync, Sync: syncOpts, WithImage: *withImage, Image: imageOpts, TrafficSamples: *trafficSamplesFlag}
	opts.InstructionRounds, opts.ProfilePlans = *instructionRounds, *profilePlans
	revs := *instructions
	if revs == "" {
		revs = opts.Baseline
	}
	for rev := range strings.SplitSeq(revs, ",") {
		if rev = strings.TrimSpace(rev); rev != "" {
			opts.InstructionBaselines = append(opts.InstructionBaselines, rev)
		}
	}
	switch opts.Only {
	case "":
	case "profile":
		opts.Profile = true
		if !isFlagSet(flags, "out") {
			opts.Out = "bench/results-profile.md"
		}
		// -baseline plans the four reads with the baseline's release build
		// too, beside the current one's (wall, CPU, RSS).
	case "sync", "traffic", "image":
		if !isFlagSet(flags, "out") {
			opts.Out = "bench/results-" + opts.Only + ".md"
		}
		// The traffic and the image plan nothing with the baseline; the
		// companion's part measures the baseline's companion beside this one.
		if opts.Only != "sync" {
			opts.Baseline = ""
		}
	default:
		return fmt.Errorf("-only %q: the parts that run alone are profile, sync, traffic and image", opts.Only)
	}
	if opts.TrafficSamples < 1 || opts.TrafficSamples > 100 {
		return fmt.Errorf("-traffic-samples %d: want 1 to 100", opts.TrafficSamples)
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-sizes: %q is not a positive number", s)
		}
		opts.Sizes = append(opts.Sizes, n)
	}
	if !slices.Contains(opts.Sizes, 100) {
		return fmt.Errorf("-sizes must include 100, the size the targets are about")
	}
	if opts.Runs < 1 {
		return fmt.Errorf("-runs must be at least 1")
	}
	return bench.Run(ctx, repoRoot(), opts)
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

func isFlagSet(flags *flag.FlagSet, name string) bool {
	set := false
	flags.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseClusterFlags parses the flags of up, serve and down (withStart:
// those of a start too) and build-control-plane.
func parseClusterFlags(name string, args []string, withStart bool) controlplane.Options {
	var f controlplane.Options
	flags := flag.NewFlagSet(name, flag.ExitOnError)
	flags.StringVar(&f.Dir, "dir", filepath.Join(repoRoot(), ".cluster"), "state directory of the local control plane")
	if withStart {
		flags.StringVar(&f.Version, "version", os.Getenv("K8S_TF_K8S_VERSION"), "Kubernetes version (default: the one pinned in tools/cluster/go.mod)")
		flags.BoolVar(&f.Audit, "audit", false, "write an audit log (one line per request) to DIR/audit.log")
	}
	_ = flags.Parse(args)
	return f
}
