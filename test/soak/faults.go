package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// fault is one fault of the schedule, as it happened.
type fault struct {
	name       string
	start, end time.Time
	detail     string
	err        error
	// violation, when set, is an invariant the fault itself broke.
	violation string
	// catchUp is the time from its end until every change made before its
	// end is in state (or superseded by one that is).
	catchUp  time.Duration
	caughtUp bool
	// address is the data source a bad input makes unreadable.
	address string
}

// nearby says whether t is during f or within a minute after its
// catch-up: what the fault may still bring about then.
func (f *fault) nearby(t time.Time) bool {
	return !t.Before(f.start) && t.Before(f.end.Add(f.catchUp+time.Minute))
}

type faultFunc func(s *soak, ctx context.Context, f *fault) error

// scheduled is a fault of the schedule.
type scheduled struct {
	name string
	run  faultFunc
}

// schedule is one of each fault, in this order; manyName, when set, is the
// fault's name in the many-workspace soak, "-" when it has none there.
var schedule = []struct {
	scheduled
	manyName string
}{
	{scheduled{"API server killed and restarted", (*soak).faultAPIServer}, ""},
	{scheduled{"watch connections cut (proxy)", (*soak).faultWatchCut}, ""},
	{scheduled{"429/5xx from the proxy", (*soak).faultErrors}, ""},
	{scheduled{"etcd killed and restarted", (*soak).faultEtcd}, ""},
	{scheduled{"leader SIGKILLed", (*soak).faultLeader}, "the replica leading the most workspaces SIGKILLed"},
	{scheduled{"a run's terraform SIGKILLed, its lock left", (*soak).faultTerraform}, ""},
	{scheduled{"a human's apply between runs", (*soak).faultHuman}, ""},
	{scheduled{"state file half-written", (*soak).faultHalfState}, "-"},
	{scheduled{"a Service in state deleted", (*soak).faultServiceDeleted}, ""},
	{scheduled{"a data source's namespace deleted", (*soak).faultNamespaceDeleted}, "-"},
}

// scheduleFor is the schedule of the soak of o: the faults of the single
// soak, or of the many-workspace soak, which has no half-written state nor
// namespace deleted.
func scheduleFor(o Options) []scheduled {
	var out []scheduled
	for _, f := range schedule {
		switch {
		case o.Workspaces == 0:
			out = append(out, f.scheduled)
		case f.manyName == "-":
		case f.manyName != "":
			out = append(out, scheduled{f.manyName, f.run})
		default:
			out = append(out, f.scheduled)
		}
	}
	return out
}

func (s *soak) faultAPIServer(ctx context.Context, f *fault) error {
	s.pause.Lock()
	defer s.pause.Unlock()
	return s.cluster.RestartAPIServer(ctx)
}

func (s *soak) faultEtcd(ctx context.Context, f *fault) error {
	s.pause.Lock()
	defer s.pause.Unlock()
	return s.cluster.RestartEtcd(ctx)
}

func (s *soak) faultWatchCut(ctx context.Context, f *fault) error {
	cut := 0
	for range 3 {
		cut += s.faults.Cut()
		s.tcpProxy.Cut()
		sleep(ctx, 2*time.Second)
	}
	f.detail = fmt.Sprintf("3 cuts 2 s apart, %d requests in flight ended (watches mid-stream)", cut)
	return nil
}

func (s *soak) faultErrors(ctx context.Context, f *fault) error {
	served0, faulted0 := s.faults.Counts()
	s.faults.Faults(3)
	sleep(ctx, s.o.ErrorStretch)
	s.faults.Faults(0)
	served, faulted := s.faults.Counts()
	f.detail = fmt.Sprintf("%s: %d of %d requests answered 429, 503 or 500", s.o.ErrorStretch, faulted-faulted0, served-served0)
	return nil
}

// Lease bounds of the companion (kube.LeaseConfig.WithDefaults): another
// replica takes over within LeaseDuration + RetryPeriod of the last renewal.
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
)

// faultLeader SIGKILLs the leader, or the replica that leads the most
// workspaces: each of its workspaces must be led by another replica within
// the Lease's bound of its last renewal. It is started again after.
func (s *soak) faultLeader(ctx context.Context, f *fault) error {
	r, held := s.busiest()
	if r == nil {
		return fmt.Errorf("no leader to kill")
	}
	lastRenew := map[*workspace]time.Time{}
	for _, w := range held {
		if ls := s.judge.lastLease(w); ls.holder == r.identity {
			lastRenew[w] = ls.renew
		}
	}
	s.mu.Lock()
	r.killedAt = time.Now()
	s.mu.Unlock()
	if err := r.proc.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-r.proc.Done()
	takers := map[*workspace]*replica{}
	var took []float64
	by := map[string]int{}
	deadline := time.Now().Add(leaseDuration + retryPeriod + 30*time.Second)
	for time.Now().Before(deadline) && len(takers) < len(held) {
		for _, w := range held {
			if takers[w] != nil {
				continue
			}
			for _, o := range s.live() {
				e := o.proc.Events("leading", w.leaseFields())
				if len(e) == 0 || !e[len(e)-1].Time.After(r.killedAt) {
					continue
				}
				takers[w] = o
				by[o.identity]++
				took = append(took, e[len(e)-1].Time.Sub(r.killedAt).Seconds())
				if !s.many() {
					f.detail = fmt.Sprintf("%s killed; %s leading %.1f s later", r.identity, o.identity, e[len(e)-1].Time.Sub(r.killedAt).Seconds())
				}
				// The bound counts from the killed leader's last renewal,
				// which the Lease's history gives to 0.5 s. A replica
				// sees a renewal up to one RetryPeriod after it is made
				// (it reads the Lease at each tick and counts
				// LeaseDuration from when it saw it, as client-go does),
				// and takes the Lease at its next tick after that, up to
				// one RetryPeriod later; 2 s more for the requests on a
				// busy machine. (One RetryPeriod less was exceeded by
				// 0.3 s in the many-workspace soak of 2026-12-06.)
				since := r.killedAt
				if !lastRenew[w].IsZero() {
					since = lastRenew[w]
				}
				if d := e[len(e)-1].Time.Sub(since); d > leaseDuration+2*retryPeriod+2*time.Second {
					f.violation = fmt.Sprintf("%stakeover %.1f s after the last renewal, more than the Lease's %s + 2 x %s + 2 s", w.label(), d.Seconds(), leaseDuration, retryPeriod)
				}
				break
			}
		}
		sleep(ctx, 200*time.Millisecond)
	}
	if s.many() {
		f.detail = fmt.Sprintf("%s killed leading %d of %d workspaces; %d taken over (%s) %.1f to %.1f s later", r.identity, len(held),
			len(s.workspaces), len(takers), countText(by), percentile(took, 0), percentile(took, 100))
	}
	switch {
	case len(takers) == 0:
		f.violation = "no replica took over"
	case len(takers) < len(held):
		var left []string
		for _, w := range held {
			if takers[w] == nil {
				left = append(left, w.name)
			}
		}
		f.violation = fmt.Sprintf("no replica took over %s", strings.Join(left, ", "))
	}
	return s.startReplica(r.name)
}

// faultTerraform SIGKILLs the terraform of a run (its apply when it gets
// there within 30 s) of the leader, or of whichever workspace's holder
// gets there first, then holds that state's lock as the killed run would
// have left it in a backend whose lock outlives its holder: the companion
// must wait -lock-timeout, report the run failed, and never force-unlock.
func (s *soak) faultTerraform(ctx context.Context, f *fault) error {
	var r *replica
	var w *workspace
	var victim int
	var phase string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && victim == 0 {
		for _, rep := range s.live() {
			for _, c := range children(rep.proc.Pid()) {
				args := cmdline(c)
				if strings.Contains(args, " apply") || strings.Contains(args, " plan") && time.Until(deadline) < 30*time.Second {
					if cw := s.workspaceOf(cwd(c)); cw != nil {
						r, w, victim, phase = rep, cw, c, args
					}
				}
			}
		}
		sleep(ctx, 20*time.Millisecond)
	}
	if victim == 0 {
		if !s.many() {
			if l := s.leader(); l != nil {
				return fmt.Errorf("no run of %s reached terraform plan or apply in a minute", l.identity)
			}
			return fmt.Errorf("no leader")
		}
		return fmt.Errorf("no run of any workspace reached terraform plan or apply in a minute")
	}
	_ = syscall.Kill(victim, syscall.SIGKILL)
	// The lock, held from here as if the killed run had left it.
	s.judge.pauseState(w, true)
	defer s.judge.pauseState(w, false)
	time.Sleep(time.Second) // a read of the file under way ends first
	lock, err := holdLock(w.dir)
	if err != nil {
		return err
	}
	held := time.Now()
	var report, early string
	bound := 2*s.o.LockTimeout + 30*time.Second
	for time.Since(held) < bound && report == "" {
		// The runs started once the lock was held: each must wait
		// -lock-timeout for it, then fail saying so.
		started := r.proc.Events("run started", w.fields())
		ended := r.proc.Events("run ended", w.fields())
		for i, st := range started {
			if i >= len(ended) || !st.Time.After(held) {
				continue
			}
			e := ended[i]
			if !strings.Contains(strings.ToLower(e.Str("error")), "lock") {
				continue
			}
			waited := e.Time.Sub(st.Time)
			if waited < s.o.LockTimeout-500*time.Millisecond {
				early = fmt.Sprintf("a run failed on the lock after %.1f s, before -lock-timeout %s", waited.Seconds(), s.o.LockTimeout)
			}
			report = fmt.Sprintf("a run started %.1f s after the lock was taken failed %.1f s later (-lock-timeout %s): %.120s",
				st.Time.Sub(held).Seconds(), waited.Seconds(), s.o.LockTimeout, e.Str("error"))
		}
		sleep(ctx, 200*time.Millisecond)
	}
	intact := lock.intact()
	lock.release()
	f.detail = fmt.Sprintf("%skilled pid %d (%s) of %s; lock held %.1f s", w.label(), victim, strings.TrimSpace(phase), r.identity, time.Since(held).Seconds())
	switch {
	case report == "":
		f.violation = fmt.Sprintf("no run reported the held lock within %s", bound)
	case !intact:
		f.violation = "the lock's info was removed while held: someone force-unlocked it"
	case early != "":
		f.violation = early
	default:
		f.detail += "; " + report + "; the lock was left alone (no force-unlock)"
	}
	return nil
}

// stateLock is the local backend's lock of terraform.tfstate held by this
// process: an fcntl write lock on the file and its .lock.info, as
// terraform's own local backend takes it.
type stateLock struct {
	f        *os.File
	infoPath string
	info     []byte
}

func holdLock(dir string) (*stateLock, error) {
	path := filepath.Join(dir, "terraform.tfstate")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	lk := &syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err = syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, lk)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	info, _ := json.Marshal(map[string]string{"ID": "soak-left-by-a-killed-run", "Operation": "OperationTypeApply",
		"Who": "soak@" + strconv.Itoa(os.Getpid()), "Path": path, "Created": time.Now().UTC().Format(time.RFC3339Nano)})
	l := &stateLock{f: f, infoPath: lockInfoPath(dir), info: info}
	if err := os.WriteFile(l.infoPath, info, 0o600); err != nil {
		l.release()
		return nil, err
	}
	return l, nil
}

func (l *stateLock) intact() bool {
	data, err := os.ReadFile(l.infoPath)
	return err == nil && string(data) == string(l.info)
}

func (l *stateLock) release() {
	_ = os.Remove(l.infoPath)
	_ = syscall.FcntlFlock(l.f.Fd(), syscall.F_SETLK, &syscall.Flock_t{Type: syscall.F_UNLCK, Whence: io.SeekStart})
	_ = l.f.Close()
}

// lockInfoPath is where the local backend keeps the lock's holder: a
// holder terraform cannot read there is an error at once, not a lock to
// wait for.
func lockInfoPath(dir string) string { return filepath.Join(dir, ".terraform.tfstate.lock.info") }

// lockFree says whether nobody holds the state's lock: no .lock.info, and
// the fcntl lock can be taken.
func lockFree(dir string) (bool, string) {
	path := filepath.Join(dir, "terraform.tfstate")
	if data, err := os.ReadFile(lockInfoPath(dir)); err == nil {
		return false, ".terraform.tfstate.lock.info is there: " + string(data)
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err.Error()
	}
	defer f.Close()
	lk := &syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, lk); err != nil {
		return false, err.Error()
	}
	if lk.Type != syscall.F_UNLCK {
		return false, fmt.Sprintf("pid %d holds the fcntl lock", lk.Pid)
	}
	return true, ""
}

// children are the processes whose parent is pid.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// cwd is the working directory of pid ("" when it is gone).
func cwd(pid int) string {
	dir, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
	return dir
}

func cmdline(pid int) string {
	raw, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.ReplaceAll(string(raw), "\x00", " ")
}

// idle waits until the holder of w runs nothing in it (up to a minute).
func (s *soak) idle(ctx context.Context, w *workspace) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if r := s.holder(w); r != nil && r.proc.Count("run started", w.fields()) == r.proc.Count("run ended", w.fields()) {
			return
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// faultHuman applies a configuration between two runs, as a human would:
// the single soak's, or one workspace's at random.
func (s *soak) faultHuman(ctx context.Context, f *fault) error {
	w := s.workspaces[rand.IntN(len(s.workspaces))]
	s.idle(ctx, w)
	out, err := s.terraform(ctx, w, "apply", "-auto-approve", "-input=false", "-no-color", "-lock-timeout=2m")
	if err != nil {
		return fmt.Errorf("the human's apply: %w\n%s", err, out)
	}
	s.judge.human(time.Now())
	_ = os.WriteFile(filepath.Join(s.o.Work, "human-apply.txt"), []byte(out), 0o644)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Apply complete!") {
			f.detail = w.label() + line
		}
	}
	return nil
}

func (s *soak) faultHalfState(ctx context.Context, f *fault) error {
	w := s.workspaces[0]
	s.idle(ctx, w)
	r := s.leader()
	path := filepath.Join(w.dir, "terraform.tfstate")
	whole, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	failures0 := s.readFailures()
	if err := os.WriteFile(path, whole[:len(whole)/2], 0o644); err != nil {
		return err
	}
	sleep(ctx, s.o.BadInputHold)
	// Put back as the human would, unless a run wrote it meanwhile.
	if now, _ := os.ReadFile(path); len(now) == len(whole)/2 {
		if err := os.WriteFile(path, whole, 0o644); err != nil {
			return err
		}
	}
	failures := s.readFailures() - failures0
	f.detail = fmt.Sprintf("%d bytes of %d for %s: %d failed reads or runs logged", len(whole)/2, len(whole), s.o.BadInputHold, failures)
	if r != nil && r.proc.ExitCode() != 0 {
		f.violation = "the leader exited"
	}
	return nil
}

// readFailures counts the failed state reads and failed runs of every replica.
func (s *soak) readFailures() int {
	n := 0
	for _, r := range s.allReplicas() {
		n += r.proc.Count("reading state failed", nil) + r.proc.Count("run ended", map[string]string{"result": "failed"})
	}
	return n
}

// notRecomputed is the companion's line for a pool whose read fails.
const notRecomputed = "pool not recomputed: its dependents are left out of runs until it reads again"

func (s *soak) faultServiceDeleted(ctx context.Context, f *fault) error {
	p := pool{namespace: nsSingles, service: "svc-01"}
	defer s.holdOff(ctx, f, p)()
	s.idle(ctx, s.owner[p])
	lines := s.countAll(notRecomputed, p.resource())
	if err := s.client.CoreV1().Services(p.namespace).Delete(ctx, p.service, metav1.DeleteOptions{}); err != nil {
		return err
	}
	sleep(ctx, s.o.BadInputHold)
	logged := s.countAll(notRecomputed, p.resource()) - lines
	if _, err := s.client.CoreV1().Services(p.namespace).Create(ctx, service(p), metav1.CreateOptions{}); err != nil {
		return err
	}
	f.detail = fmt.Sprintf("%s%s deleted for %s: logged %d time(s) as not recomputed", s.owner[p].label(), p, s.o.BadInputHold, logged)
	if logged != 1 {
		f.violation = fmt.Sprintf("the deleted Service was logged %d times, want once", logged)
	}
	return nil
}

// holdOff makes p the pool of fault f, which the driver leaves alone until
// the function it returns is called, and returns once what the driver did
// before has had its settle window.
func (s *soak) holdOff(ctx context.Context, f *fault, p pool) (release func()) {
	f.address = p.resource()
	s.model.setOff(p, true)
	sleep(ctx, s.o.SettleMax)
	return func() { s.model.setOff(p, false) }
}

// countAll counts lines of msg naming data source address, over the replicas.
func (s *soak) countAll(msg, address string) int {
	n := 0
	for _, r := range s.allReplicas() {
		for _, e := range r.proc.Events(msg, nil) {
			if strings.HasSuffix(e.Str("data_source"), "."+address) {
				n++
			}
		}
	}
	return n
}

func (s *soak) faultNamespaceDeleted(ctx context.Context, f *fault) error {
	p := pool{namespace: nsDoomed, service: "doomed"}
	defer s.holdOff(ctx, f, p)()
	if err := testcluster.DeleteNamespace(ctx, s.client, nsDoomed); err != nil {
		return err
	}
	for {
		_, err := s.client.CoreV1().Namespaces().Get(ctx, nsDoomed, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sleep(ctx, 500*time.Millisecond)
	}
	gone := time.Now()
	sleep(ctx, s.o.BadInputHold)
	if err := s.model.namespace(ctx, nsDoomed); err != nil {
		return err
	}
	// Its pods first, then the Service: the pool comes back whole, as it
	// is in state, never empty (which the shrink guard would refuse).
	if err := s.model.createService(ctx, p, -1); err != nil {
		return err
	}
	f.detail = fmt.Sprintf("%s deleted (gone after %.1f s), made again with its Service and pods after %s", nsDoomed, gone.Sub(f.start).Seconds(), s.o.BadInputHold)
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
