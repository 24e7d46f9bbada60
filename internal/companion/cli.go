// Package companion is the provider binary's second use: `sync`, a
// long-running companion that runs Terraform exactly when a pool in its state
// would change, and `check`, one pass that says whether any would. Both learn
// what to watch from the state of a working directory, through the real CLI,
// and recompute each pool with the provider's own code (provider.StatePool,
// package pools), so a pool is what the provider version of the
// configuration would read.
package companion

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/utils/clock"

	"github.com/vigie/terraform-provider-k8s/internal/kube"
)

// Exit codes of both subcommands; check also exits exitDrift.
const (
	exitOK    = 0
	exitError = 1
	exitDrift = 2
)

// Commands are the subcommands main hands to Main.
var Commands = []string{"sync", "check"}

// Main runs a subcommand with its arguments and gives the exit code.
func Main(command string, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch command {
	case "sync":
		return runSync(ctx, args, stderr)
	case "check":
		return runCheck(ctx, args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "unknown command %q: the commands are %s\n", command, strings.Join(Commands, ", "))
	return exitError
}

// common are the flags of both subcommands.
type common struct {
	opts                SyncOptions
	kubeconfig, context string
	requestTimeout      time.Duration
	logFormat           string
	clusters            stringList
	// workspaces is -workspaces, in place of -chdir.
	workspaces string
}

func (c *common) register(fs *flag.FlagSet) {
	c.opts = DefaultSyncOptions()
	// The image names its CLI (tofu, or terraform for those who build it so).
	if name := os.Getenv("K8S_SYNC_TERRAFORM"); name != "" {
		c.opts.Terraform = name
	}
	fs.StringVar(&c.opts.Dir, "chdir", c.opts.Dir, "the working directory of the configuration, initialized (terraform init)")
	fs.StringVar(&c.opts.Terraform, "terraform", c.opts.Terraform, "the CLI: terraform or tofu, on PATH or a path (default from $K8S_SYNC_TERRAFORM, which the image sets)")
	fs.StringVar(&c.opts.Alias, "provider-alias", "", "serve only this alias of the k8s provider configurations (connected by -kubeconfig and -context); empty serves all")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file of the default provider configuration (and of the Lease); else KUBE_CONFIG_PATH(S), KUBE_HOST, $KUBECONFIG, ~/.kube/config, then the pod's service account, as the provider")
	fs.StringVar(&c.context, "context", "", "kubeconfig context; empty for the current one")
	fs.Var(&c.clusters, "cluster", "ALIAS=CONTEXT, ALIAS=KUBECONFIG or ALIAS=KUBECONFIG#CONTEXT: how to connect to the cluster of a provider configuration (repeat; default for the one without alias, ALIAS[KEY] for an instance of a provider for_each); else as its provider block says")
	fs.DurationVar(&c.opts.StateTimeout, "state-timeout", c.opts.StateTimeout, "bound of one read of state (state pull, through the backend)")
	fs.DurationVar(&c.requestTimeout, "request-timeout", kube.DefaultOptions().RequestTimeout, "bound of one API request")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json")
}

func (c *common) logger(stderr io.Writer) *slog.Logger {
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(stderr, nil))
	}
	return slog.New(slog.NewTextHandler(stderr, nil))
}

// prepare checks what can be checked before anything starts, and makes the
// client: the CLI found, the directory a configuration (initialised where
// TF_DATA_DIR says), the kubeconfig or the pod's token usable.
func (c *common) prepare(stderr io.Writer) (*kube.Client, *slog.Logger, error) {
	log := c.logger(stderr)
	if c.logFormat != "text" && c.logFormat != "json" {
		return nil, log, fmt.Errorf("-log-format %q: use text or json", c.logFormat)
	}
	path, err := exec.LookPath(c.opts.Terraform)
	if err != nil {
		return nil, log, fmt.Errorf("-terraform %q: the CLI was not found (%w): install terraform or tofu, or give its path", c.opts.Terraform, err)
	}
	c.opts.Terraform = path
	if c.workspaces == "" {
		if info, err := os.Stat(c.opts.Dir); err != nil || !info.IsDir() {
			return nil, log, fmt.Errorf("-chdir %q is not a directory", c.opts.Dir)
		}
		if err := checkDataDir(path, c.opts.Dir, c.opts.Env); err != nil {
			return nil, log, err
		}
	}
	client, err := c.connect(log)
	return client, log, err
}

// errCluster marks prepare's errors of the cluster's connection.
var errCluster = errors.New("no connection to the cluster")

func (c *common) connect(log *slog.Logger) (*kube.Client, error) {
	if err := checkServiceAccount(c.kubeconfig); err != nil {
		return nil, fmt.Errorf("%w: %w", errCluster, err)
	}
	loaded, err := kube.DefaultConfigLoader().Load(c.kubeconfig, c.context)
	if err != nil {
		return nil, fmt.Errorf("%w: unable to load the kubeconfig: %w; give -kubeconfig and -context, or set $KUBECONFIG or KUBE_CONFIG_PATH and KUBE_CTX", errCluster, err)
	}
	opts := kube.DefaultOptions()
	opts.RequestTimeout = c.requestTimeout
	opts.UserAgent = "terraform-provider-k8s-sync"
	c.opts.Client = opts
	c.opts.Clusters = c.clusters
	c.opts.DefaultFromFlags = c.kubeconfig != "" || c.context != ""
	client, err := kube.NewClient(loaded.Rest, opts)
	if err != nil {
		return nil, err
	}
	log.Info("default cluster", "source", loaded.Source, "server", loaded.Rest.Host)
	return client, nil
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func runSync(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs)
	var (
		allowed        stringList
		listen         string
		leaderElect    bool
		profiling      bool
		leaseNamespace string
		leaseName      string
		identity       string
		podName        string
		podUID         string
		memoryLimitMiB int64
		workspacesPath string
		maxRuns        int
	)
	fs.DurationVar(&c.opts.Quiet, "settle-quiet", c.opts.Quiet, "settle window: the quiet time after the last pool change before a run")
	fs.DurationVar(&c.opts.MaxWait, "settle-max", c.opts.MaxWait, "settle window: the longest wait from the first pool change, however busy the cluster")
	fs.DurationVar(&c.opts.LockTimeout, "lock-timeout", c.opts.LockTimeout, "how long plan and apply wait for a state lock held by someone else")
	fs.DurationVar(&c.opts.StopTimeout, "stop-timeout", c.opts.StopTimeout, "on SIGTERM, how long a running command has after its SIGINT before it is killed")
	fs.DurationVar(&c.opts.RetryInitial, "retry-initial", c.opts.RetryInitial, "wait before the first retry of a failed run; it doubles")
	fs.DurationVar(&c.opts.RetryMax, "retry-max", c.opts.RetryMax, "the longest wait between retries")
	fs.Float64Var(&c.opts.MaxShrink, "max-shrink", c.opts.MaxShrink, "the largest share of a pool's members one run may remove (1 turns the guard off)")
	fs.BoolVar(&c.opts.AllowEmpty, "allow-empty", false, "let a run empty a pool")
	fs.DurationVar(&c.opts.GateOpenAfter, "gate-open-after", 0, "the fail-safe of readiness gates: open the gate of a pod that has waited this long for a pool that is not applied (a load balancer that refuses it, runs that fail), so that its rollout goes on; 0: never, the rollout waits")
	fs.Var(&allowed, "allow", "an address a run may change (repeat); replaces the resources derived from the configuration")
	fs.StringVar(&c.opts.Command, "command", "", "a program and its arguments, split as a shell splits words but run without a shell, that replaces plan and apply (a pipeline's webhook, another configuration); $K8S_SYNC_CHANGES in its environment holds the changes as JSON. For a shell: sh -c 'SCRIPT'")
	fs.DurationVar(&c.opts.CommandRepeat, "command-repeat", c.opts.CommandRepeat, "with -command, how long a change given to it waits for state to show it before it is given again (0: never)")
	fs.BoolVar(&c.opts.Refresh, "refresh", true, "plan with -refresh (false: only the data sources are read again)")
	fs.BoolVar(&c.opts.TargetChanged, "target-changed", c.opts.TargetChanged, "a run plans only what the changed pools need (-target of their dependents); false: the whole configuration")
	fs.DurationVar(&c.opts.FullPlanInterval, "full-plan-interval", c.opts.FullPlanInterval, "how often a run plans the whole configuration anyway, to catch what the pools do not show (0: never)")
	fs.DurationVar(&c.opts.StateInterval, "state-interval", c.opts.StateInterval, "how often state is read again without a run")
	fs.StringVar(&listen, "listen", "127.0.0.1:9464", "address of /healthz and /metrics; empty for none")
	fs.BoolVar(&profiling, "profiling", false, "also serve Go's profiles (/debug/pprof/) on -listen, as Kubernetes components' --profiling")
	fs.BoolVar(&leaderElect, "leader-elect", false, "run only while holding a Lease, so that of several replicas one runs")
	fs.StringVar(&leaseNamespace, "lease-namespace", "default", "namespace of the Lease")
	fs.StringVar(&leaseName, "lease-name", "terraform-provider-k8s-sync", "name of the Lease")
	fs.StringVar(&identity, "identity", "", "this replica's name in the Lease; default: host name and process id")
	fs.StringVar(&podName, "pod-name", "", "with -workspaces and -leader-elect, the pod this replica runs in (in -lease-namespace), given with -pod-uid from the downward API: the pod owns the replica's member Lease, which the garbage collector deletes with it")
	fs.StringVar(&podUID, "pod-uid", "", "with -pod-name, the pod's UID (metadata.uid)")
	fs.Int64Var(&memoryLimitMiB, "memory-limit-mib", 128, "soft memory limit of the Go runtime, in MiB (0: none; $GOMEMLIMIT wins)")
	fs.StringVar(&workspacesPath, "workspaces", "", "a file, or a directory of files, listing the working directories to keep current, each with its settings (the flags give the rest); in place of -chdir")
	fs.IntVar(&maxRuns, "max-concurrent-runs", 4, "with -workspaces, the most runs of this replica at once (0: no bound)")
	fs.Usage = usage("sync", "Keeps the pools of the working directory's state current: runs plan and apply when one would change.", syncExitCodes, fs.PrintDefaults, stderr)
	if code, done := parsed(fs.Parse(args)); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sync takes no arguments, got %q\n", fs.Args())
		return exitError
	}
	c.opts.Allowed = allowed
	c.workspaces = workspacesPath
	if workspacesPath != "" {
		chdir := false
		fs.Visit(func(f *flag.Flag) { chdir = chdir || f.Name == "chdir" })
		if chdir {
			fmt.Fprintln(stderr, "give -chdir (one working directory) or -workspaces (a list of them), not both")
			return exitError
		}
	}
	if (podName == "") != (podUID == "") {
		fmt.Fprintf(stderr, "-pod-name %q and -pod-uid %q: give both (the chart sets them from the downward API) or neither\n", podName, podUID)
		return exitError
	}
	if podName != "" && (workspacesPath == "" || !leaderElect) {
		fmt.Fprintf(stderr, "-pod-name %q: only with -workspaces and -leader-elect, whose replica's member Lease the pod owns; without them there is none\n", podName)
		return exitError
	}
	// Reading a large state makes short-lived copies of it; a soft limit
	// makes the collector reclaim them before the heap doubles, for a
	// process that then stays up for months.
	if memoryLimitMiB > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimitMiB << 20)
	}
	client, log, err := c.prepare(stderr)
	if err == nil {
		err = validateSync(c.opts)
	}
	if err == nil && maxRuns < 0 {
		err = fmt.Errorf("-max-concurrent-runs %d: give 0 (no bound) or more", maxRuns)
	}
	if err == nil {
		err = checkTempDir()
	}
	workspaces := []workspace{{name: "default", opts: c.opts}}
	if err == nil && workspacesPath != "" {
		// -chdir's was checked with the flags.
		workspaces, err = loadWorkspaces(workspacesPath, c.opts)
		for _, w := range workspaces {
			if err == nil {
				err = checkDataDir(c.opts.Terraform, w.opts.Dir, w.opts.Env)
			}
		}
	}
	if err == nil {
		// Options that only a syncer checks (-cluster), before anything
		// starts.
		for _, w := range workspaces {
			if _, err = newSyncer(w.opts, client, nil, log); err != nil {
				err = fmt.Errorf("workspace %s: %w", w.name, err)
				break
			}
		}
	}
	if err != nil {
		log.Error("not started", "error", err.Error())
		return exitError
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(processCollectors()...)
	r := newReplica(workspaces, workspacesPath == "", client, newHub(ctx, clock.RealClock{}, log), log, registry, clock.RealClock{})
	if workspacesPath != "" && maxRuns > 0 {
		r.slots = make(chan struct{}, maxRuns)
	}
	if listen != "" {
		l, err := net.Listen("tcp", listen)
		if err != nil {
			log.Error("not started", "error", fmt.Sprintf("-listen %s: %v", listen, err))
			return exitError
		}
		log.Info("serving /healthz and /metrics", "address", l.Addr().String())
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, r.healthText()) })
		mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
		if profiling {
			mux.HandleFunc("/debug/pprof/", httppprof.Index)
			mux.HandleFunc("/debug/pprof/cmdline", httppprof.Cmdline)
			mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", httppprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
		}
		server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = server.Serve(l) }()
		defer server.Close()
	}
	if leaderElect {
		if identity == "" {
			host, _ := os.Hostname()
			identity = fmt.Sprintf("%s-%d", host, os.Getpid())
		}
		lease := kube.LeaseConfig{Namespace: leaseNamespace, Name: leaseName, Identity: identity}.WithDefaults()
		r.lease = &lease
	}
	if podName != "" {
		r.pod = &kube.PodRef{Name: podName, UID: podUID}
	}
	if err := r.serve(ctx); err != nil {
		log.Error("stopped", "error", explain(err, c.opts.Terraform, c.opts.Dir).Error())
		return exitError
	}
	log.Info("stopped")
	return exitOK
}

func validateSync(o SyncOptions) error {
	switch {
	case o.MaxShrink <= 0 || o.MaxShrink > 1:
		return fmt.Errorf("-max-shrink %v: give a share in (0, 1]", o.MaxShrink)
	case o.Quiet < 0 || o.MaxWait < o.Quiet:
		return fmt.Errorf("-settle-quiet %v and -settle-max %v: the quiet time must be at least 0 and at most the longest wait", o.Quiet, o.MaxWait)
	case o.RetryInitial <= 0 || o.RetryMax < o.RetryInitial:
		return fmt.Errorf("-retry-initial %v and -retry-max %v: give 0 < initial <= max", o.RetryInitial, o.RetryMax)
	case o.StateInterval <= 0:
		return fmt.Errorf("-state-interval %v: give a positive duration", o.StateInterval)
	case o.StateTimeout <= 0:
		return fmt.Errorf("-state-timeout %v: give a positive duration", o.StateTimeout)
	case o.CommandRepeat < 0:
		return fmt.Errorf("-command-repeat %v: give a duration of 0 (never) or more", o.CommandRepeat)
	}
	return validCommand(o.Command, o.Dir)
}

// runCheck is `check`: one pass over the pools of state, exit 0 when each
// matches the cluster, 2 when one differs, 1 on error.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs)
	var cpuProfile string
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) of this check to the file")
	fs.Usage = usage("check", "One pass: says whether each pool of the working directory's state matches the cluster.", checkExitCodes, fs.PrintDefaults, stderr)
	if code, done := parsed(fs.Parse(args)); done {
		return code
	}
	if cpuProfile != "" {
		stop, err := startCPUProfile(cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "-cpuprofile: %v\n", err)
			return exitError
		}
		defer stop()
	}
	client, log, err := c.prepare(stderr)
	if errors.Is(err, errCluster) {
		// No state, or no initialised configuration, is said before the
		// cluster's own trouble.
		if stateErr := stateFirst(ctx, c.opts.Terraform, c.opts.Dir); stateErr != nil {
			err = stateErr
		}
	}
	if err != nil {
		log.Error("check failed", "error", err.Error())
		return exitError
	}
	s, err := newSyncer(c.opts, client, newHub(ctx, clock.RealClock{}, log), log)
	if err != nil {
		log.Error("check failed", "error", err.Error())
		return exitError
	}
	// check plans nothing: it needs no configuration.
	s.checkOnly = true
	if err := s.loadState(ctx); err != nil {
		log.Error("check failed", "error", explain(err, c.opts.Terraform, c.opts.Dir).Error())
		return exitError
	}
	defer s.stopCaches()
	return report(stdout, log, s.instances, s.undecodable, s.recompute(ctx, true))
}

// startCPUProfile profiles the process's CPU into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// report writes what check found, a line per instance, and gives its exit
// code: 1 when a pool could not be checked, else 2 when one differs.
func report(stdout io.Writer, log *slog.Logger, instances []instance, undecodable map[string]string, v view) int {
	code := exitOK
	for _, address := range slices.Sorted(maps.Keys(undecodable)) {
		fmt.Fprintf(stdout, "%s: error: this provider version cannot read it: %s\n", address, undecodable[address])
		code = exitError
	}
	for _, in := range instances {
		if reason, ok := v.unreadable[in.address]; ok {
			fmt.Fprintf(stdout, "%s: error: %s\n", in.address, reason)
			code = exitError
			continue
		}
		changes, ok := v.changes[in.address]
		if !ok {
			fmt.Fprintf(stdout, "%s: matches the cluster\n", in.address)
			continue
		}
		if code == exitOK {
			code = exitDrift
		}
		for _, ch := range changes {
			name := in.address
			if ch.Name != "" {
				name += " " + ch.Name
			}
			detail := ""
			if ch.membersOnly() {
				detail = " (the same members; other attributes differ: the next run brings the state current)"
			}
			fmt.Fprintf(stdout, "%s: differs: added [%s] removed [%s]%s\n", name, strings.Join(ch.Added, " "), strings.Join(ch.Removed, " "), detail)
		}
	}
	if code == exitError && len(v.changes) > 0 {
		// An error wins: the caller cannot trust the rest.
		log.Warn("some pools differ, but others could not be checked")
	}
	return code
}

// IsCommand says whether args (os.Args[1:]) start with a subcommand, and
// which: the plugin protocol's start by Terraform has none.
func IsCommand(args []string) (string, bool) {
	if len(args) == 0 || !slices.Contains(Commands, args[0]) {
		return "", false
	}
	return args[0], true
}
