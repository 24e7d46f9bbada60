package companion

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// The companion with its state in the backends teams keep it in (issue 27):
// Kubernetes itself (a Secret, a Lease as the lock) on the test's control
// plane, and PostgreSQL (Debian's server, one per test, started by
// test/testcluster). Only a CLI built with its backends runs them: the
// release terraform and OpenTofu; a Terraform built from source has the local
// backend alone, and these tests skip on it, saying so.

// stateBackend is where a test keeps its state.
type stateBackend struct {
	// name is the backend's type, as .terraform/terraform.tfstate says it.
	name string
	// block is the configuration's backend block, in a terraform block.
	block string
	// ns is the namespace of the kubernetes backend's Secret and Lease.
	ns string
	// pg is the PostgreSQL server of the pg backend.
	pg *testcluster.Postgres
}

// The kubernetes backend keeps the state of workspace default in Secret
// tfstate-default-<secret_suffix>, locked by Lease lock-tfstate-default-<suffix>.
const (
	stateSecretSuffix = "pools"
	stateSecret       = "tfstate-default-" + stateSecretSuffix
	stateLease        = "lock-" + stateSecret
	// stateDatabase is the pg backend's database; it makes the schema
	// terraform_remote_state there.
	stateDatabase = "terraform"
)

// kubernetesBackend keeps the state in ns of the test's control plane, with
// the credentials of context of the test cluster's kubeconfig (admin,
// cert-user).
func kubernetesBackend(ns, context string) *stateBackend {
	return &stateBackend{name: "kubernetes", ns: ns, block: fmt.Sprintf(`
terraform {
  backend "kubernetes" {
    secret_suffix  = %q
    namespace      = %q
    config_path    = %q
    config_context = %q
  }
}
`, stateSecretSuffix, ns, acc.kubeconfig, context)}
}

// pgBackend starts a PostgreSQL server of the test's own, its data in the
// test's directory, and keeps the state in a database of it.
func pgBackend(t *testing.T) *stateBackend {
	t.Helper()
	if _, err := testcluster.PostgresBinaries(); err != nil {
		t.Skip(err)
	}
	pg, err := testcluster.StartPostgres(testCtx(t), testcluster.PostgresOptions{Dir: filepath.Join(t.TempDir(), "postgres")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("end of PostgreSQL's log:\n%s", pg.LogTail())
		}
		pg.Stop()
	})
	if err := pg.CreateDatabase(testCtx(t), stateDatabase); err != nil {
		t.Fatal(err)
	}
	return &stateBackend{name: "pg", pg: pg, block: fmt.Sprintf(`
terraform {
  backend "pg" {
    conn_str = %q
  }
}
`, pg.ConnString(stateDatabase))}
}

// backendConfig is poolConfig with the backend's block and, for the
// scenarios, two resources whose provisioners take as long as files of the
// working directory say: terraform_data.slow is replaced with the pool (its
// sleep, slow-seconds, makes the companion's apply long; it touches
// "sleeping" when it starts), terraform_data.holder
// only when a human asks (hold-seconds: a human's apply that holds the lock;
// it touches "holding" when it starts, once its plan is made).
func backendConfig(b *stateBackend, ns string) string {
	return poolConfig(ns, b.block+`
resource "terraform_data" "slow" {
  triggers_replace = local.members
  provisioner "local-exec" {
    command = "touch sleeping; sleep $(cat slow-seconds)"
  }
}
resource "terraform_data" "holder" {
  provisioner "local-exec" {
    command = "touch holding; sleep $(cat hold-seconds)"
  }
}
`)
}

// newBackendWorkdir initializes the backend, writes config and applies. A
// CLI without the backend skips the test.
func newBackendWorkdir(t *testing.T, b *stateBackend, config string) *workdir {
	t.Helper()
	w := &workdir{dir: t.TempDir()}
	w.setFile(t, "slow-seconds", "0")
	w.setFile(t, "hold-seconds", "0")
	b.init(t, w, config)
	w.terraform(t, "apply", "-auto-approve", "-input=false", "-no-color")
	if _, err := os.Stat(filepath.Join(w.dir, "terraform.tfstate")); err == nil {
		t.Fatalf("the state was written to a local file, not to the %s backend", b.name)
	}
	b.wantState(t)
	return w
}

// init initializes the backend of w (again, -reconfigure, after a change of
// its settings), then writes config, which has the same backend block. The
// tests have no registry: init of a configuration that requires vigie/k8s
// would ask the registry for it, dev_overrides or not, so init sees the
// backend block alone (the provider comes from dev_overrides, and
// terraform_data is built in). A CLI that lacks the backend skips the test.
func (b *stateBackend) init(t *testing.T, w *workdir, config string) {
	t.Helper()
	w.write(t, b.block)
	cmd := exec.Command(acc.terraform, "init", "-input=false", "-no-color", "-reconfigure")
	cmd.Dir = w.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "Unsupported backend type") || strings.Contains(string(out), "There is no backend type named") {
			t.Skipf("%s has no %s backend (a Terraform built from source has only local): the release terraform and OpenTofu have it", acc.terraform, b.name)
		}
		t.Fatalf("init: %v\n%s", err, out)
	}
	w.write(t, config)
}

func (w *workdir) setFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileWithin says whether the file name appears in w within timeout.
func (w *workdir) fileWithin(name string, timeout time.Duration) bool {
	return wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		_, err := os.Stat(filepath.Join(w.dir, name))
		return err == nil, nil
	}) == nil
}

func (w *workdir) waitForFile(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	if !w.fileWithin(name, timeout) {
		t.Fatalf("no file %s in %s within %s", name, w.dir, timeout)
	}
}

// wantState checks that the backend holds the state of workspace default.
func (b *stateBackend) wantState(t *testing.T) {
	t.Helper()
	switch b.name {
	case "kubernetes":
		if _, err := acc.client.CoreV1().Secrets(b.ns).Get(testCtx(t), stateSecret, metav1.GetOptions{}); err != nil {
			t.Fatalf("the kubernetes backend's Secret: %v", err)
		}
	case "pg":
		names, err := b.pg.Exec(testCtx(t), stateDatabase, "SELECT name FROM terraform_remote_state.states")
		if err != nil || names != "default" {
			t.Fatalf("the pg backend's states: %q, %v; want default", names, err)
		}
	}
}

// wantUnlocked checks, in the backend itself, that nobody holds the lock:
// the Lease has no holder; no session of PostgreSQL holds an advisory lock.
func (b *stateBackend) wantUnlocked(t *testing.T) {
	t.Helper()
	switch b.name {
	case "kubernetes":
		lease, err := acc.client.CoordinationV1().Leases(b.ns).Get(testCtx(t), stateLease, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if err == nil && lease.Spec.HolderIdentity != nil {
			t.Errorf("Lease %s/%s is still held by %s: %v", b.ns, stateLease, *lease.Spec.HolderIdentity, lease.Annotations)
		}
	case "pg":
		held, err := b.pg.Exec(testCtx(t), stateDatabase, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
		if err != nil || held != "0" {
			t.Errorf("advisory locks held in PostgreSQL: %q, %v; want 0", held, err)
		}
	}
}

// stop sends the companion SIGTERM and waits for its exit.
func (c *companion) stop(t *testing.T) {
	t.Helper()
	if err := c.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(45 * time.Second):
		t.Fatalf("the companion did not stop within 45 s of SIGTERM:\n%s", c.log())
	}
}

// stopDuringTheSleep stops the companion while its run sleeps 30 s, and
// expects it to exit 0 well before, the run ended by SIGINT.
func (c *companion) stopDuringTheSleep(t *testing.T) {
	t.Helper()
	start := time.Now()
	c.stop(t)
	if code := c.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0:\n%s", code, c.log())
	}
	if d := time.Since(start); d > 25*time.Second {
		t.Errorf("stopping took %s: the sleep of 30 s was not interrupted", d)
	}
	if n := c.count("run ended", map[string]string{"error": "stopped by SIGINT"}); n != 1 {
		t.Errorf("no run ended by SIGINT:\n%s", c.log())
	}
}

// metric is the value of a sample of the companion's /metrics (served with
// -listen 127.0.0.1:0), e.g. `k8s_sync_runs_total{result="failed"}`; -1
// when absent.
func (c *companion) metric(t *testing.T, sample string) float64 {
	t.Helper()
	address := c.field("serving /healthz and /metrics", "address")
	if address == "" {
		t.Fatal("the companion serves no /metrics: start it with -listen 127.0.0.1:0")
	}
	resp, err := http.Get("http://" + address + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if value, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	return -1
}

// The scenarios of a shared state, in order on one working directory whose
// state is in each backend: each leaves the pool current for the next.
func TestAccSyncWithTheStateInABackend(t *testing.T) {
	t.Parallel()
	needCluster(t)
	for _, name := range []string{"kubernetes", "pg"} {
		t.Run(name, func(t *testing.T) {
			ns := namespace(t)
			b := kubernetesBackend(ns, "admin")
			if name == "pg" {
				b = pgBackend(t)
			}
			webWithPods(t, ns, 2)
			w := newBackendWorkdir(t, b, backendConfig(b, ns))
			for _, step := range []struct {
				name string
				run  func(*testing.T, *stateBackend, *workdir, string)
			}{
				{"a pod Ready is exactly one run and check exits 0", backendOneRun},
				{"check exits 2 naming what differs", backendCheckDiffers},
				{"a human's apply that brought the pool current leaves nothing to do", backendHumanAppliedFirst},
				{"a lock held by a human's apply is waited for", backendLockWaitedFor},
				{"SIGTERM during a run releases the lock", backendSIGTERMReleasesTheLock},
			} {
				if !t.Run(step.name, func(t *testing.T) { step.run(t, b, w, ns) }) {
					return
				}
			}
		})
	}
}

func backendOneRun(t *testing.T, b *stateBackend, w *workdir, ns string) {
	wantCheck(t, w, "after apply", t.Fatalf)
	c := startSync(t, w)
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3))
	c.quiet(t, 4*time.Second)
	if n := c.runs(); n != 1 {
		t.Errorf("%d runs, want exactly 1:\n%s", n, c.log())
	}
	wantCheck(t, w, "after the run", t.Errorf)
	b.wantState(t)
	c.stop(t)
}

func backendCheckDiffers(t *testing.T, _ *stateBackend, w *workdir, ns string) {
	runPod(t, ns, "web", "web-4", "10.244.0.4", true)
	waitForReady(t, ns, "web", 4, 4)
	code, out := check(t, w)
	if code != 2 || !strings.Contains(out, "data.k8s_ready_endpoints.web: differs: added [10.244.0.4:8080] removed []") {
		t.Fatalf("check with web-4 Ready exited %d, want 2 naming it:\n%s", code, out)
	}
}

// The companion starts with web-4 not yet in state and a settle window
// longer than a human's apply; it reads the state every second. The human's
// apply brings web-4 in: the companion finds nothing to do. The window is
// twice the longest apply seen on a loaded 2-core machine (14 s).
func backendHumanAppliedFirst(t *testing.T, _ *stateBackend, w *workdir, _ string) {
	const quiet = 30 * time.Second
	c := startSync(t, w, "-settle-quiet", quiet.String(), "-settle-max", "60s", "-state-interval", "1s")
	started := time.Now()
	c.waitFor(t, 10*time.Second, "pool differs from state", map[string]string{"added": "10.244.0.4:8080"})
	w.terraform(t, "apply", "-auto-approve", "-input=false", "-no-color")
	if time.Since(started) > quiet-2*time.Second {
		t.Fatalf("the human's apply took until %s after the companion's start, too close to its quiet time %s for this test", time.Since(started), quiet)
	}
	c.waitFor(t, quiet, "pools match state again: no run")
	// Past the end of the window that was open.
	c.quiet(t, time.Until(started.Add(quiet+2*time.Second)))
	if n := c.runs(); n != 0 {
		t.Errorf("%d runs after a human's apply brought the pool current, want none:\n%s", n, c.log())
	}
	wantMembers(t, w, members(1, 2, 3, 4))
	c.stop(t)
}

// A human's apply holds the lock for 10 s, its plan made; web-5 becomes
// Ready meanwhile. The companion's run waits for the lock, then applies.
func backendLockWaitedFor(t *testing.T, _ *stateBackend, w *workdir, ns string) {
	c := startSync(t, w, "-listen", "127.0.0.1:0")
	w.setFile(t, "hold-seconds", "10")
	_ = os.Remove(filepath.Join(w.dir, "holding"))
	holder := exec.Command(acc.terraform, "apply", "-auto-approve", "-input=false", "-no-color", "-replace=terraform_data.holder")
	holder.Dir = w.dir
	var holderOut strings.Builder
	holder.Stdout, holder.Stderr = &holderOut, &holderOut
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	holderDone := make(chan error, 1)
	go func() { holderDone <- holder.Wait() }()
	if !w.fileWithin("holding", 60*time.Second) {
		t.Fatalf("the human's apply did not start its provisioner within 60 s:\n%s", holderOut.String())
	}
	runPod(t, ns, "web", "web-5", "10.244.0.5", true)
	c.waitFor(t, 30*time.Second, "run started")
	var holderEnded time.Time
	select {
	case err := <-holderDone:
		holderEnded = time.Now()
		if err != nil {
			t.Fatalf("the human's apply: %v\n%s", err, holderOut.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the human's apply did not end:\n%s", holderOut.String())
	}
	c.waitFor(t, 90*time.Second, "run ended", map[string]string{"result": "applied"})
	if n := c.count("run failed: retrying with backoff", nil); n != 0 {
		t.Errorf("%d failed runs while the lock was held, want none: the lock is waited for\n%s", n, c.log())
	}
	if got := c.metric(t, `k8s_sync_runs_total{result="failed"}`); got != 0 {
		t.Errorf(`k8s_sync_runs_total{result="failed"} %v, want 0`, got)
	}
	started, ended := c.firstTime("run started"), c.firstTime("run ended")
	if !started.Before(holderEnded) || !ended.After(holderEnded) {
		t.Errorf("the run (%s to %s) did not wait for the human's apply, which ended at %s", started, ended, holderEnded)
	}
	wantMembers(t, w, members(1, 2, 3, 4, 5))
	w.setFile(t, "hold-seconds", "0")
	c.stop(t)
}

// The companion's apply sleeps 30 s (terraform_data.slow); SIGTERM then
// ends it through SIGINT, and the CLI releases the lock.
func backendSIGTERMReleasesTheLock(t *testing.T, b *stateBackend, w *workdir, ns string) {
	w.setFile(t, "slow-seconds", "30")
	_ = os.Remove(filepath.Join(w.dir, "sleeping"))
	c := startSync(t, w)
	runPod(t, ns, "web", "web-6", "10.244.0.6", true)
	c.waitFor(t, 60*time.Second, "applying the saved plan")
	// A SIGINT that comes before the provisioner starts does not stop it
	// (the CLI lets the resource it is at finish): wait for the sleep.
	w.waitForFile(t, "sleeping", 60*time.Second)
	c.stopDuringTheSleep(t)
	b.wantUnlocked(t)
	w.setFile(t, "slow-seconds", "0")
	w.terraform(t, "plan", "-input=false", "-no-color", "-lock-timeout=0s")
}

// PostgreSQL down when the companion starts, with a pool change waiting:
// the state read is retried with backoff, each failure logged naming the
// backend and counted, /healthz names the failing read from the first one,
// and the run is made once PostgreSQL is back.
func TestAccSyncWaitsForABackendDownAtStart(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	b := pgBackend(t)
	webWithPods(t, ns, 2)
	w := newBackendWorkdir(t, b, backendConfig(b, ns))
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	waitForReady(t, ns, "web", 3, 3)
	b.pg.StopServer()
	const down = 6 * time.Second
	stopped := time.Now()
	c := startCompanion(t, []string{"-chdir", w.dir, "-listen", "127.0.0.1:0"})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("companion log:\n%s", c.log())
		}
	})
	address := "127.0.0.1:" + strconv.Itoa(b.pg.Port)
	c.waitFor(t, 30*time.Second, "reading state failed", map[string]string{"backend": "pg", "error": address})
	c.waitHealthz(t, 5*time.Second, "state: the last read failed (backend pg): ")
	if h := c.get(t, "/healthz"); !strings.Contains(h, address) {
		t.Errorf("/healthz does not name the address refused:\n%s", h)
	}
	// PostgreSQL stays down until the companion has read again (a second
	// failure: on a loaded machine a state read alone takes seconds), and
	// for at least down: the time passing is the scenario, not a condition
	// to poll for.
	c.waitForCount(t, 60*time.Second, "reading state failed", 2, map[string]string{"backend": "pg", "error": address})
	time.Sleep(time.Until(stopped.Add(down)))
	downFor := time.Since(stopped)
	if err := b.pg.StartServer(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, 60*time.Second, "watching")
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3))
	if h := c.get(t, "/healthz"); h != "ok\n" {
		t.Errorf("/healthz once state reads again:\n%s", h)
	}
	failures := c.count("reading state failed", map[string]string{"backend": "pg", "error": address})
	// -retry-initial 500ms doubling to -retry-max 4s (and the reads' own
	// time) while it was down, not a read after a read.
	if most := readsWithBackoff(downFor, 500*time.Millisecond, 4*time.Second) + 2; failures < 2 || failures > most {
		t.Errorf("%d failed state reads naming the pg backend and its address over %s down, want 2 to %d (backoff from 500ms):\n%s", failures, downFor.Round(100*time.Millisecond), most, c.log())
	}
	// Every failure is counted, those of PostgreSQL starting up again too.
	logged := c.count("reading state failed", map[string]string{"backend": "pg"})
	if got := c.metric(t, `k8s_sync_state_read_failures_total{backend="pg"}`); got != float64(logged) {
		t.Errorf(`k8s_sync_state_read_failures_total{backend="pg"} %v, want %d, the failures logged`, got, logged)
	}
	if n := c.runs(); n != 1 {
		t.Errorf("%d runs, want 1:\n%s", n, c.log())
	}
}

// readsWithBackoff is how many reads fit in d when each failure waits
// initial, doubling up to most, before the next: the most a companion with
// -retry-initial initial and -retry-max most makes, the reads taking no time.
func readsWithBackoff(d, initial, most time.Duration) int {
	n, at, wait := 1, time.Duration(0), initial
	for at+wait <= d {
		at += wait
		n++
		wait = min(2*wait, most)
	}
	return n
}

// Bad input at start: the credentials the backend gets are refused when the
// companion starts (in a cluster, a Secret created or rotated a minute
// after the pod started). The companion keeps running: it reads state again
// with backoff, each failure logged, counted and named in /healthz, and
// starts watching, and makes the pending run, once the credentials work.
func TestAccSyncWaitsForCredentialsRefusedAtStart(t *testing.T) {
	needCluster(t)
	for _, backend := range []string{"pg", "kubernetes"} {
		t.Run(backend, func(t *testing.T) {
			ns := namespace(t)
			webWithPods(t, ns, 2)
			var b *stateBackend
			var refuse, accept func()
			var refusal string
			switch backend {
			case "pg":
				b = pgBackend(t)
				password := b.pg.Password
				refusal = "password authentication failed"
				refuse = func() {
					if err := b.pg.SetPassword(testCtx(t), "rotated"); err != nil {
						t.Fatal(err)
					}
				}
				accept = func() {
					if err := b.pg.SetPassword(testCtx(t), password); err != nil {
						t.Fatal(err)
					}
				}
			case "kubernetes":
				var setToken func(string)
				b, setToken = tokenBackend(t, ns)
				refusal = "Unauthorized"
				refuse = func() { setToken("not-a-token") }
				accept = func() { setToken(serviceAccountToken(t, ns)) }
			}
			w := newBackendWorkdir(t, b, backendConfig(b, ns))
			runPod(t, ns, "web", "web-3", "10.244.0.3", true)
			waitForReady(t, ns, "web", 3, 3)
			refuse()
			c := startCompanion(t, []string{"-chdir", w.dir, "-listen", "127.0.0.1:0"})
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("companion log:\n%s", c.log())
				}
			})
			refused := map[string]string{"backend": backend, "error": refusal}
			c.waitForCount(t, 60*time.Second, "reading state failed", 2, refused)
			c.waitHealthz(t, 5*time.Second, "state: the last read failed (backend "+backend+"): ")
			if h := c.get(t, "/healthz"); !strings.Contains(h, refusal) {
				t.Errorf("/healthz does not say the backend refused the credentials:\n%s", h)
			}
			if c.count("watching", nil) != 0 || c.count("run started", nil) != 0 {
				t.Errorf("the companion watched or ran on a state it could not read:\n%s", c.log())
			}
			accept()
			c.waitFor(t, 60*time.Second, "watching")
			c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
			wantMembers(t, w, members(1, 2, 3))
			if h := c.get(t, "/healthz"); h != "ok\n" {
				t.Errorf("/healthz once the credentials work:\n%s", h)
			}
			reads := c.count("reading state failed", refused)
			if got := c.metric(t, `k8s_sync_state_read_failures_total{backend="`+backend+`"}`); got != float64(reads) {
				t.Errorf(`k8s_sync_state_read_failures_total{backend=%q} %v, want %d, the failures logged`, backend, got, reads)
			}
			// The reads back off (500ms, doubling to 4s).
			events := c.Events("reading state failed", refused)
			if d := events[1].Time.Sub(events[0].Time); d < 400*time.Millisecond {
				t.Errorf("2 failed state reads within %s: no backoff\n%s", d, c.log())
			}
		})
	}
}

// tokenBackend is the kubernetes backend in ns with the identity of
// service account state (the rules the sync guide gives, in ns), through a
// kubeconfig file of the test's own whose token setToken writes, as a
// Secret mounted in a pod is updated in place. It starts with a valid
// token.
func tokenBackend(t *testing.T, ns string) (*stateBackend, func(token string)) {
	t.Helper()
	ctx := testCtx(t)
	if _, err := acc.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "state"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "state"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update"}},
			{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		},
	}
	if _, err := acc.client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "state"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "state"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "state", Namespace: ns}},
	}
	if _, err := acc.client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	base, err := clientcmd.LoadFromFile(acc.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := base.Clusters[base.Contexts[base.CurrentContext].Cluster]
	path := filepath.Join(t.TempDir(), "kubeconfig")
	setToken := func(token string) {
		t.Helper()
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["test"] = cluster
		cfg.AuthInfos["state"] = &clientcmdapi.AuthInfo{Token: token}
		cfg.Contexts["state"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "state", Namespace: ns}
		cfg.CurrentContext = "state"
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatal(err)
		}
	}
	setToken(serviceAccountToken(t, ns))
	return &stateBackend{name: "kubernetes", ns: ns, block: fmt.Sprintf(`
terraform {
  backend "kubernetes" {
    secret_suffix  = %q
    namespace      = %q
    config_path    = %q
    config_context = "state"
  }
}
`, stateSecretSuffix, ns, path)}, setToken
}

// serviceAccountToken is a new token of service account state in ns.
func serviceAccountToken(t *testing.T, ns string) string {
	t.Helper()
	expiry := int64(3600)
	tr, err := acc.client.CoreV1().ServiceAccounts(ns).CreateToken(testCtx(t), "state",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// PostgreSQL stopped as a run starts and started again seconds later: the
// run fails, is retried with backoff (a log line naming the backend, a
// metric), and applies once PostgreSQL is back.
func TestAccSyncRetriesARunWhileTheBackendRestarts(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	b := pgBackend(t)
	webWithPods(t, ns, 2)
	w := newBackendWorkdir(t, b, backendConfig(b, ns))
	c := startSync(t, w, "-listen", "127.0.0.1:0")
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 60*time.Second, "run started")
	b.pg.StopServer()
	c.waitFor(t, 60*time.Second, "run failed: retrying with backoff")
	// PostgreSQL stays down for 3 s, the retries' backoff going on: the
	// time passing is the scenario (the count of failed runs below is
	// judged over it), not a condition to poll for.
	time.Sleep(3 * time.Second)
	if err := b.pg.StartServer(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3))
	failed := c.count("run failed: retrying with backoff", nil)
	if failed < 1 || failed > 6 {
		t.Errorf("%d failed runs over 3 s down, want 1 to 6 (backoff from 500ms):\n%s", failed, c.log())
	}
	if got := c.metric(t, `k8s_sync_runs_total{result="failed"}`); got != float64(failed) {
		t.Errorf(`k8s_sync_runs_total{result="failed"} %v, want %d`, got, failed)
	}
	b.wantUnlocked(t)
	if n := c.count("run failed: retrying with backoff", map[string]string{"backend": "pg"}); n != failed {
		t.Errorf("%d of %d failed runs name the pg backend:\n%s", n, failed, c.log())
	}
	// The state read after the failed run fails too.
	reads := c.count("reading state failed", map[string]string{"backend": "pg"})
	if reads == 0 {
		t.Errorf("no failed state read names the pg backend:\n%s", c.log())
	}
	if got := c.metric(t, `k8s_sync_state_read_failures_total{backend="pg"}`); got != float64(reads) {
		t.Errorf(`k8s_sync_state_read_failures_total{backend="pg"} %v, want %d, the failures logged`, got, reads)
	}
}

// Bad input: a kubernetes backend whose identity (cert-user of the test
// cluster's kubeconfig) may read and write the state's Secret, and has lost
// the right to take its Lease. Every plan fails on the lock: the companion
// retries with backoff, counts the failures, names the backend and keeps
// the CLI's error, which names the Lease; once the Role has the rule again,
// the run is made.
func TestAccSyncBackendThatRefusesTheLock(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	webWithPods(t, ns, 2)
	// The rules the sync guide gives for the kubernetes backend.
	leases := rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "state"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update"}},
			leases,
		},
	}
	if _, err := acc.client.RbacV1().Roles(ns).Create(testCtx(t), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "state"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "state"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "cert-user"}},
	}
	if _, err := acc.client.RbacV1().RoleBindings(ns).Create(testCtx(t), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := kubernetesBackend(ns, "cert-user")
	w := newBackendWorkdir(t, b, backendConfig(b, ns))
	setRules := func(rules ...rbacv1.PolicyRule) {
		t.Helper()
		current, err := acc.client.RbacV1().Roles(ns).Get(testCtx(t), "state", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		current.Rules = rules
		if _, err := acc.client.RbacV1().Roles(ns).Update(testCtx(t), current, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setRules(role.Rules[0])

	c := startSync(t, w, "-listen", "127.0.0.1:0")
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitForCount(t, 60*time.Second, "run failed: retrying with backoff", 2)
	if got := c.metric(t, `k8s_sync_runs_total{result="failed"}`); got < 2 {
		t.Errorf(`k8s_sync_runs_total{result="failed"} %v, want at least 2`, got)
	}
	wantMembers(t, w, members(1, 2))
	setRules(role.Rules...)
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3))
	b.wantUnlocked(t)
	all := c.count("run failed: retrying with backoff", nil)
	if n := c.count("run failed: retrying with backoff", map[string]string{"backend": "kubernetes"}); n != all {
		t.Errorf("%d of %d failed runs name the kubernetes backend:\n%s", n, all, c.log())
	}
	// The CLI's error says what to fix: the Lease, refused (the CLI wraps
	// its lines).
	for _, part := range []string{"Error acquiring the state lock", stateLease, "forbidden"} {
		if n := c.count("run failed: retrying with backoff", map[string]string{"error": part}); n != all {
			t.Errorf("%d of %d failed runs have %q in their error:\n%s", n, all, part, c.log())
		}
	}
}

// Bad input: the pg backend's password changed under a running companion,
// then set back. The run fails on the credentials; the state reads that
// follow fail too, with backoff, each logged naming the backend and
// counted, and no run is made on a state that could not be read; check
// exits 1 with the CLI's error meanwhile. Once the password is back, the
// run is made.
func TestAccSyncBackendThatRefusesTheCredentials(t *testing.T) {
	t.Parallel()
	needCluster(t)
	ns := namespace(t)
	b := pgBackend(t)
	webWithPods(t, ns, 2)
	w := newBackendWorkdir(t, b, backendConfig(b, ns))
	password := b.pg.Password
	c := startSync(t, w, "-listen", "127.0.0.1:0")
	if err := b.pg.SetPassword(testCtx(t), "rotated"); err != nil {
		t.Fatal(err)
	}
	refused := map[string]string{"backend": "pg", "error": "password authentication failed for user"}
	if code, out := check(t, w); code != 1 || !strings.Contains(out, refused["error"]) {
		t.Errorf("check with the credentials refused exited %d, want 1 with %q:\n%s", code, refused["error"], out)
	}
	runPod(t, ns, "web", "web-3", "10.244.0.3", true)
	c.waitFor(t, 60*time.Second, "run failed: retrying with backoff", refused)
	c.waitForCount(t, 60*time.Second, "reading state failed", 3, refused)
	if err := b.pg.SetPassword(testCtx(t), password); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, 60*time.Second, "run ended", map[string]string{"result": "applied"})
	wantMembers(t, w, members(1, 2, 3))
	reads, failed := c.count("reading state failed", refused), c.count("run failed: retrying with backoff", nil)
	if got := c.metric(t, `k8s_sync_state_read_failures_total{backend="pg"}`); got != float64(reads) {
		t.Errorf(`k8s_sync_state_read_failures_total{backend="pg"} %v, want %d, the failures logged`, got, reads)
	}
	if n := c.count("run failed: retrying with backoff", refused); n != failed {
		t.Errorf("%d of %d failed runs name the pg backend and the refusal:\n%s", n, failed, c.log())
	}
	// The reads back off (500ms, doubling to 4s): 3 take 1.5 s at least.
	first, third := c.Events("reading state failed", refused)[0].Time, c.Events("reading state failed", refused)[2].Time
	if d := third.Sub(first); d < 1200*time.Millisecond {
		t.Errorf("3 failed state reads within %s: no backoff\n%s", d, c.log())
	}
}

// A state with nothing to watch is permanent: with the state in a backend
// too, the companion does not start (exit 1), and says why.
func TestAccSyncRefusesToStartOnABackendStateWithoutPools(t *testing.T) {
	t.Parallel()
	needCluster(t)
	b := pgBackend(t)
	w := &workdir{dir: t.TempDir()}
	// Initialized, never applied: the pg backend holds an empty state.
	b.init(t, w, backendConfig(b, "default"))
	for _, command := range []string{"sync", "check"} {
		args := []string{command, "-chdir", w.dir, "-terraform", acc.terraform, "-kubeconfig", acc.kubeconfig}
		if command == "sync" {
			args = append(args, "-listen", "", "-retry-initial", "500ms", "-retry-max", "1s")
		}
		cmd := execCommand(args...)
		done := make(chan struct{})
		var out []byte
		go func() { out, _ = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("%s on a state without pools did not exit within 60 s:\n%s", command, out)
		}
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "nothing to watch") && !strings.Contains(string(out), "has no state") {
			t.Errorf("%s exited %d, want 1 saying there is nothing to watch:\n%s", command, code, out)
		}
	}
}
