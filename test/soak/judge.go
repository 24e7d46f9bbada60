package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
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
	// sliced is each pool's members as its EndpointSlices show them, and
	// sliceEvents when they changed (watchSlices).
	sliced      map[pool][]string
	sliceEvents map[pool][]time.Time
	// initial is each pool's members at the start.
	initial map[string][]string
	faults  []*fault
	// lease is each workspace's Lease as polled, by the workspace's name.
	lease   map[string][]leaseSample
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
	// paused stops the reads of a workspace's state file: closing any
	// descriptor of it would drop the fcntl lock this process holds on it.
	paused map[*workspace]bool
}

func (j *judge) pauseState(w *workspace, on bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.paused[w] = on
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
	return &judge{s: s, state: map[string][]string{}, history: map[string][]observation{}, initial: map[string][]string{},
		lease: map[string][]leaseSample{}, paused: map[*workspace]bool{}, sliced: map[pool][]string{},
		sliceEvents: map[pool][]time.Time{}}
}

// readState reads w's state file and records what changed; an error when
// it does not parse (being written, or a human's half-written file). The
// pools of every workspace are apart: each pool is in one.
func (j *judge) readState(w *workspace, now time.Time) error {
	raw, err := os.ReadFile(filepath.Join(w.dir, "terraform.tfstate"))
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

// watchState reads the state files every 250 ms until ctx ends.
func (j *judge) watchState(ctx context.Context) {
	wait.UntilWithContext(ctx, func(context.Context) {
		for _, w := range j.s.workspaces {
			j.mu.Lock()
			paused := j.paused[w]
			j.mu.Unlock()
			if !paused {
				_ = j.readState(w, time.Now())
			}
		}
	}, 250*time.Millisecond)
}

// watchLease reads the workspaces' Leases every 500 ms until ctx ends.
func (j *judge) watchLease(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		now := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		list, err := j.s.client.CoordinationV1().Leases("default").List(rctx, metav1.ListOptions{})
		cancel()
		if err != nil {
			return
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		for _, w := range j.s.workspaces {
			for _, l := range list.Items {
				if l.Name != w.lease() {
					continue
				}
				ls := leaseSample{at: now}
				if l.Spec.HolderIdentity != nil {
					ls.holder = *l.Spec.HolderIdentity
				}
				if l.Spec.RenewTime != nil {
					ls.renew = l.Spec.RenewTime.Time
				}
				j.lease[w.name] = append(j.lease[w.name], ls)
			}
		}
	}, 500*time.Millisecond)
}

// sampleMetrics scrapes the leader's metrics, or every live replica's when
// they share many workspaces.
func (j *judge) sampleMetrics(ctx context.Context) {
	var replicas []*replica
	if !j.s.many() {
		if r := j.s.leader(); r != nil {
			replicas = append(replicas, r)
		}
	} else {
		for _, id := range slices.Sorted(maps.Keys(j.s.live())) {
			replicas = append(replicas, j.s.live()[id])
		}
	}
	for _, r := range replicas {
		m, err := scrape(ctx, r.metrics)
		if err != nil {
			continue
		}
		j.mu.Lock()
		j.samples = append(j.samples, sample{at: time.Now(), identity: r.identity, rss: m["process_resident_memory_bytes"],
			goroutines: m["go_goroutines"], fds: m["process_open_fds"], cpu: m["process_cpu_seconds_total"]})
		j.mu.Unlock()
	}
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

func (j *judge) lastLease(w *workspace) leaseSample {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lastLeaseLocked(w)
}

func (j *judge) lastLeaseLocked(w *workspace) leaseSample {
	if l := j.lease[w.name]; len(l) > 0 {
		return l[len(l)-1]
	}
	return leaseSample{}
}

func (j *judge) human(at time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.humans = append(j.humans, at)
}
