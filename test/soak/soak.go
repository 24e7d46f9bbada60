// Package soak runs the sync companion for a long time under churn and
// faults, and judges it from outside (issue 28): the local control plane of
// test/testcluster, Services of fake pods spread over single
// k8s_ready_endpoints data sources and a k8s_services fleet that feed
// terraform_data pools, two companion replicas with leader election, a
// churn driver that changes pools at a steady rate (and makes changes that
// must start nothing), faults on a schedule of the soak's own, and a judge
// that reads the state file, the Lease, the companions' logs and metrics.
//
// `make soak` runs it for SOAK_DURATION (30 minutes by default) and writes
// bench/results-soak.md; `make soak-short`, part of `make test`, runs the
// same code for under 3 minutes with one of each fault and a smaller fleet.
// With SOAK_WORKSPACES (issue 40) the same soak runs K workspaces, each its
// own configuration and state, served by three replicas of `sync
// -workspaces` that share the workspaces' Leases out (workspaces.go).
package soak

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/vigie/terraform-provider-k8s/test/syncproc"
	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// Options of a soak.
type Options struct {
	// Duration of the churn, from the first change to the last fault's end.
	Duration time.Duration
	// Singles are the Services of single data sources, Fleet those of the
	// k8s_services fleet, Pods the pods of each at the start.
	Singles, Fleet, Pods int
	// ChangesPerMinute is the steady rate of pool changes; Burst changes
	// are made at once every BurstEvery.
	ChangesPerMinute int
	Burst            int
	BurstEvery       time.Duration
	// NoiseEvery is the period of the changes that must start nothing.
	NoiseEvery time.Duration
	// Quiet and SettleMax are the companion's settle window; LockTimeout
	// its -lock-timeout; StateInterval its -state-interval.
	Quiet, SettleMax, LockTimeout, StateInterval time.Duration
	// ErrorStretch is how long the proxy answers with 429 and 5xx;
	// BadInputHold how long a deleted Service, a deleted namespace or a
	// half-written state stays so.
	ErrorStretch, BadInputHold time.Duration
	// SampleEvery is the period of the judge's checks and of the leader's
	// metrics samples.
	SampleEvery time.Duration
	// Workspaces, when more than 0, is the number of workspaces of the
	// many-workspace soak (Many); RunsPerReplica its replicas'
	// -max-concurrent-runs.
	Workspaces, RunsPerReplica int

	// Binary is the provider binary (the companion); Terraform the CLI.
	Binary, Terraform string
	// CLIConfig is a CLI configuration with dev_overrides for Binary.
	CLIConfig string
	// Work is a directory of the soak's own.
	Work string
	// Log receives progress.
	Log io.Writer
}

// Long are the options of `make soak`: 40 single data sources and a fleet
// of 10 Services, 10 pods each, 10 changes a minute, bursts of 50 every 5
// minutes.
func Long(d time.Duration) Options {
	return Options{
		Duration: d, Singles: 40, Fleet: 10, Pods: 10,
		ChangesPerMinute: 10, Burst: 50, BurstEvery: 5 * time.Minute, NoiseEvery: 2 * time.Second,
		Quiet: time.Second, SettleMax: 5 * time.Second, LockTimeout: 20 * time.Second, StateInterval: 20 * time.Second,
		ErrorStretch: time.Minute, BadInputHold: 45 * time.Second, SampleEvery: time.Minute,
	}
}

// Short are the options of `make soak-short`: the same code, a fleet of 20
// Services of 6 pods, faults a few seconds apart.
func Short(d time.Duration) Options {
	return Options{
		Duration: d, Singles: 14, Fleet: 6, Pods: 6,
		ChangesPerMinute: 20, Burst: 20, BurstEvery: d / 2, NoiseEvery: time.Second,
		Quiet: 500 * time.Millisecond, SettleMax: 3 * time.Second, LockTimeout: 5 * time.Second, StateInterval: 10 * time.Second,
		ErrorStretch: 8 * time.Second, BadInputHold: 8 * time.Second, SampleEvery: 15 * time.Second,
	}
}

// Namespaces of the soak.
const (
	nsSingles  = "soak"
	nsFleet    = "soak-fleet"
	nsDoomed   = "soak-doomed"
	nodeName   = "soak-node"
	targetPort = 8080
	leaseName  = "soak-sync"
)

// soak is one run.
type soak struct {
	o       Options
	log     func(format string, args ...any)
	cluster *testcluster.Cluster
	client  kubernetes.Interface
	// workspaces are the configurations' working directories: one for
	// the single soak; owner is each pool's.
	workspaces []*workspace
	owner      map[pool]*workspace
	// workspacesFile is the replicas' -workspaces, for many.
	workspacesFile string
	env            []string
	tcpProxy       *testcluster.Proxy
	faults         *testcluster.FaultProxy
	proxyCfg       string // the companions' kubeconfig

	model   *model
	judge   *judge
	started time.Time

	// pause is held by a fault while the API server is down: the driver
	// makes no change meanwhile (its model would not know what landed).
	pause sync.RWMutex

	mu        sync.Mutex
	replicas  []*replica
	nextIndex map[string]int
}

// replica is one companion process.
type replica struct {
	name     string // "a" or "b"
	identity string // its Lease identity: name and start number
	proc     *syncproc.Process
	metrics  string // its /metrics URL
	logFile  *os.File
	started  time.Time
	killedAt time.Time
}

// Run runs a soak and gives what was judged; its error is one of setup or
// of the soak itself, not a broken invariant (see Result.Violations).
func Run(ctx context.Context, o Options) (*Result, error) {
	s := &soak{o: o, nextIndex: map[string]int{}}
	s.log = func(format string, args ...any) {
		fmt.Fprintf(o.Log, "soak %s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
	}
	defer s.stop()
	if err := s.setup(ctx); err != nil {
		return nil, err
	}
	return s.run(ctx)
}

func (s *soak) setup(ctx context.Context) error {
	s.log("starting the control plane")
	var err error
	s.cluster, err = testcluster.Start(ctx, testcluster.Options{Version: os.Getenv("K8S_TF_K8S_VERSION"), Log: s.o.Log})
	if err != nil {
		return err
	}
	cfg, err := s.cluster.RESTConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	if s.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if s.faults, err = testcluster.StartFaultProxy(cfg); err != nil {
		return err
	}
	if s.tcpProxy, err = testcluster.StartProxy(strings.TrimPrefix(s.faults.URL, "http://")); err != nil {
		return err
	}
	proxied := strings.Replace(s.faults.Kubeconfig(), s.faults.URL, "http://"+s.tcpProxy.Addr, 1)
	s.proxyCfg = filepath.Join(s.o.Work, "companion-kubeconfig")
	if err := os.WriteFile(s.proxyCfg, []byte(proxied), 0o600); err != nil {
		return err
	}
	if err := testcluster.EnsureNode(ctx, s.client, nodeName, "soak-zone"); err != nil {
		return err
	}
	s.model = newModel(s.client)
	s.log("creating %d Services of %d pods", s.o.Singles+s.o.Fleet+1, s.o.Pods)
	if err := s.model.create(ctx, s.o); err != nil {
		return err
	}
	if err := s.makeWorkspaces(); err != nil {
		return err
	}
	s.env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+s.o.CLIConfig, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
	s.judge = newJudge(s)
	for _, w := range s.workspaces {
		if w.name == "" {
			s.log("first apply")
		} else {
			s.log("first apply of %s (%d pools)", w.name, len(w.pools))
		}
		if out, err := s.terraform(ctx, w, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
			return fmt.Errorf("%sfirst apply: %w\n%s", w.label(), err, out)
		}
		if err := s.judge.readState(w, time.Now()); err != nil {
			return fmt.Errorf("%sthe state of the first apply: %w", w.label(), err)
		}
	}
	for _, p := range s.model.pools() {
		if got, want := s.judge.statePool(p), s.model.want(p); !sameSet(got, want) {
			return fmt.Errorf("after the first apply, pool %s is %v in state, want %v", p, got, want)
		}
	}
	for _, name := range s.replicaNames() {
		if err := s.startReplica(name); err != nil {
			return err
		}
	}
	return nil
}

// config is w's configuration: a data source and a terraform_data per
// single Service, a fleet data source and a terraform_data per Service of
// it when w has the fleet.
func (s *soak) config(w *workspace) string {
	var b strings.Builder
	fmt.Fprintf(&b, "terraform {\n  required_providers {\n    k8s = { source = \"vigie/k8s\" }\n  }\n}\nprovider \"k8s\" {\n  kubeconfig = %q\n}\n", s.cluster.Kubeconfig())
	fleet := false
	for _, p := range w.pools {
		if p.fleet {
			fleet = true
			continue
		}
		fmt.Fprintf(&b, `
data "k8s_ready_endpoints" %q {
  namespace = %q
  service   = %q
  port_name = "http"
}
resource "terraform_data" %q {
  input = [for e in data.k8s_ready_endpoints.%s.endpoints : "${e.address}:${e.port}"]
}
`, p.resource(), p.namespace, p.service, p.resource(), p.resource())
	}
	if !fleet {
		return b.String()
	}
	fmt.Fprintf(&b, `
data "k8s_services" "fleet" {
  namespace = %q
  port_name = "http"
}
resource "terraform_data" "fleet" {
  for_each = data.k8s_services.fleet.services
  input    = [for e in each.value.endpoints : "${e.address}:${e.port}"]
}
`, nsFleet)
	return b.String()
}

func (s *soak) terraform(ctx context.Context, w *workspace, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.o.Terraform, args...)
	cmd.Dir, cmd.Env = w.dir, s.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// startReplica starts companion name (a new identity each start).
func (s *soak) startReplica(name string) error {
	s.mu.Lock()
	s.nextIndex[name]++
	identity := fmt.Sprintf("soak-%s-%d", name, s.nextIndex[name])
	s.mu.Unlock()
	port, err := freePort()
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(s.o.Work, identity+".log"))
	if err != nil {
		return err
	}
	// One workspace is served with -chdir under one Lease, many with
	// -workspaces under a Lease each of the group leaseGroup.
	where := []string{"-chdir", s.workspaces[0].dir, "-lease-name", leaseName}
	if s.many() {
		where = []string{"-workspaces", s.workspacesFile, "-lease-name", leaseGroup, "-max-concurrent-runs", strconv.Itoa(s.o.RunsPerReplica)}
	}
	args := append(append([]string{"sync"}, where...), "-terraform", s.o.Terraform, "-kubeconfig", s.proxyCfg,
		"-listen", "127.0.0.1:"+strconv.Itoa(port), "-leader-elect", "-identity", identity,
		"-lease-namespace", "default",
		"-settle-quiet", s.o.Quiet.String(), "-settle-max", s.o.SettleMax.String(),
		"-retry-initial", "1s", "-retry-max", "8s", "-lock-timeout", s.o.LockTimeout.String(),
		"-state-interval", s.o.StateInterval.String(), "-stop-timeout", "30s")
	p, err := syncproc.Start(s.o.Binary, args, syncproc.Options{Env: []string{"TF_CLI_CONFIG_FILE=" + s.o.CLIConfig,
		"CHECKPOINT_DISABLE=1"}, Output: f})
	if err != nil {
		_ = f.Close()
		return err
	}
	r := &replica{name: name, identity: identity, proc: p, metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", port), logFile: f, started: time.Now()}
	s.mu.Lock()
	s.replicas = append(s.replicas, r)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.Wait(ctx, "waiting for the Lease", 1, nil); err != nil {
		return fmt.Errorf("replica %s: %w\n%s", identity, err, p.Log())
	}
	s.log("replica %s started (pid %d)", identity, p.Pid())
	return nil
}

// live are the replicas not killed, by name.
func (s *soak) live() map[string]*replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*replica{}
	for _, r := range s.replicas {
		if r.killedAt.IsZero() {
			out[r.identity] = r
		}
	}
	return out
}

func (s *soak) allReplicas() []*replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*replica(nil), s.replicas...)
}

func (s *soak) stop() {
	for _, r := range s.allReplicas() {
		if r.killedAt.IsZero() {
			r.proc.Stop(45 * time.Second)
		}
		_ = r.logFile.Close()
	}
	if s.tcpProxy != nil {
		_ = s.tcpProxy.Close()
	}
	if s.faults != nil {
		_ = s.faults.Close()
	}
	if s.cluster != nil {
		s.cluster.Stop()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("not a TCP address: %v", l.Addr())
	}
	return addr.Port, nil
}
