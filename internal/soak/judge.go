package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// judge watches the soak from outside: the state file, the Lease, the
// leader's metrics; and keeps the changes the driver made.
type judge struct {
	s *soak

	mu sync.Mutex
	// state is each pool's members in state as last read; history each
	// pool's members by the time they were first read so.
	state   map[string][]string
	history map[string][]observation
	// changes in the order they were made.
	changes []*change
	// initial is each pool's members at the start.
	initial map[string][]string
	faults  []*fault
	lease   []leaseSample
	samples []sample
	// noiseOnly is the stretch of noise without any pool change at the
	// start, during which no run may start.
	noiseOnly [2]time.Time
	noise     int
	humans    []time.Time
	notes     []string
	// exits are the replicas that exited by themselves; cpu the last CPU
	// of each replica, its own and its children's, s.
	exits []string
	cpu   map[string][2]float64
	// checks are the lines of the checks of every SampleEvery.
	checks []string
	// paused stops the reads of the state file: closing any descriptor of
	// it would drop the fcntl lock this process holds on it.
	paused bool
}

func (j *judge) pauseState(on bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.paused = on
}

type observation struct {
	at      time.Time
	members []string
}

// leaseSample is the Lease's holder and renew time when read.
type leaseSample struct {
	at     time.Time
	holder string
	renew  time.Time
}

// sample is the leader's metrics.
type sample struct {
	at         time.Time
	identity   string
	rss        float64
	goroutines float64
	fds        float64
	cpu        float64
}

func newJudge(s *soak) *judge {
	return &judge{s: s, state: map[string][]string{}, history: map[string][]observation{}, initial: map[string][]string{}}
}

func (j *judge) statePath() string { return filepath.Join(j.s.dir, "terraform.tfstate") }

// readState reads the state file and records what changed; an error when
// it does not parse (being written, or a human's half-written file).
func (j *judge) readState(now time.Time) error {
	raw, err := os.ReadFile(j.statePath())
	if err != nil {
		return err
	}
	found, err := StatePools(raw)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for key, members := range found {
		if prev, ok := j.state[key]; !ok || !slices.Equal(prev, members) {
			j.state[key] = members
			j.history[key] = append(j.history[key], observation{at: now, members: members})
			if _, ok := j.initial[key]; !ok {
				j.initial[key] = members
			}
			j.match(key, now)
		}
	}
	return nil
}

// stateKey is where state keeps p: the single's resource name, the fleet's
// instance key.
func stateKey(p pool) string {
	if p.fleet {
		return p.String()
	}
	return p.resource()
}

func (j *judge) statePool(p pool) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.state[stateKey(p)]
}

// match pairs what state now shows of key's pool with the changes
// (MatchState).
func (j *judge) match(key string, now time.Time) {
	MatchState(j.pairs(), key, j.state[key], now)
}

// pairs are the changes as the judge pairs them with state.
func (j *judge) pairs() []*Change {
	out := make([]*Change, len(j.changes))
	for i, c := range j.changes {
		out[i] = &c.Change
	}
	return out
}

func (j *judge) record(c *change) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.changes = append(j.changes, c)
	j.match(c.Key, time.Now())
}

// watchState reads the state file every 250 ms until ctx ends.
func (j *judge) watchState(ctx context.Context) {
	wait.UntilWithContext(ctx, func(context.Context) {
		j.mu.Lock()
		paused := j.paused
		j.mu.Unlock()
		if !paused {
			_ = j.readState(time.Now())
		}
	}, 250*time.Millisecond)
}

// watchLease reads the Lease every 500 ms until ctx ends.
func (j *judge) watchLease(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		now := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		l, err := j.s.client.CoordinationV1().Leases("default").Get(rctx, leaseName, metav1.GetOptions{})
		cancel()
		if err != nil {
			return
		}
		ls := leaseSample{at: now}
		if l.Spec.HolderIdentity != nil {
			ls.holder = *l.Spec.HolderIdentity
		}
		if l.Spec.RenewTime != nil {
			ls.renew = l.Spec.RenewTime.Time
		}
		j.mu.Lock()
		j.lease = append(j.lease, ls)
		j.mu.Unlock()
	}, 500*time.Millisecond)
}

// leader is the live replica that logged "leading" last.
func (s *soak) leader() *replica {
	var best *replica
	var at time.Time
	for _, r := range s.live() {
		if e := r.proc.Events("leading", nil); len(e) > 0 {
			last := e[len(e)-1].Time
			if lost := r.proc.Events("lost the Lease: stopping", nil); len(lost) > 0 && lost[len(lost)-1].Time.After(last) {
				continue
			}
			if best == nil || last.After(at) {
				best, at = r, last
			}
		}
	}
	return best
}

// sampleLeader scrapes the leader's metrics.
func (j *judge) sampleLeader(ctx context.Context) {
	r := j.s.leader()
	if r == nil {
		return
	}
	m, err := scrape(ctx, r.metrics)
	if err != nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.samples = append(j.samples, sample{at: time.Now(), identity: r.identity, rss: m["process_resident_memory_bytes"],
		goroutines: m["go_goroutines"], fds: m["process_open_fds"], cpu: m["process_cpu_seconds_total"]})
}

// scrape reads a Prometheus text page into name{labels} -> value.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// pending are the changes not yet seen nor superseded made before t.
func (j *judge) pending(before time.Time) []*change {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*change
	for _, c := range j.changes {
		if c.At.Before(before) && c.Seen.IsZero() && !c.Superseded {
			out = append(out, c)
		}
	}
	return out
}

func (j *judge) note(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.notes = append(j.notes, time.Now().UTC().Format("15:04:05")+" "+fmt.Sprintf(format, args...))
}

func (j *judge) lastLease() leaseSample {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.lease) == 0 {
		return leaseSample{}
	}
	return j.lease[len(j.lease)-1]
}

func (j *judge) human(at time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.humans = append(j.humans, at)
}
