package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// run drives the soak once it is set up: a stretch of noise alone, then
// churn and faults for Duration, then the wait for the pools to catch up,
// then the verdict.
func (s *soak) run(ctx context.Context) (*Result, error) {
	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stopBG()
		wg.Wait()
	}()
	wg.Go(func() { s.judge.watchState(bg) })
	wg.Go(func() { s.judge.watchLease(bg) })
	if err := s.judge.watchSlices(bg); err != nil {
		return nil, err
	}

	// A leader, watching; or every workspace led, and watched, by the
	// replica the group prefers for it.
	if !s.many() {
		if _, err := s.waitShared(ctx, 2*time.Minute); err != nil {
			return nil, fmt.Errorf("no replica leads and watches after 2 minutes")
		}
		s.log("%s leads and watches", s.leader().identity)
	} else {
		took, err := s.waitShared(ctx, 3*time.Minute)
		if err != nil {
			return nil, err
		}
		_, held := s.sharedOut()
		s.log("the %d workspaces are shared out after %.1f s: %s", len(s.workspaces), took.Seconds(), held)
	}
	sleep(ctx, 2*s.o.SettleMax)
	wg.Go(func() { s.sampler(bg) })

	// Noise alone: no run may start.
	stretch := min(30*time.Second, max(s.o.Duration/10, 10*time.Second))
	s.log("noise alone for %s", stretch)
	runsBefore := s.runsStarted()
	s.judge.noiseOnly[0] = time.Now()
	s.makeNoise(ctx, time.Now().Add(stretch))
	sleep(ctx, s.o.SettleMax)
	s.judge.noiseOnly[1] = time.Now()
	noiseRuns := s.runsStarted() - runsBefore

	s.started = time.Now()
	end := s.started.Add(s.o.Duration)
	s.log("churn and faults for %s", s.o.Duration)
	churn, stopChurn := context.WithCancel(ctx)
	var drivers sync.WaitGroup
	drivers.Go(func() { s.drive(churn, end) })
	drivers.Go(func() { s.makeNoise(churn, end) })
	s.runFaults(ctx, end)
	sleep(ctx, time.Until(end))
	stopChurn()
	drivers.Wait()

	// Every change in state, or superseded, within a bound: the catch-up.
	s.log("churn stopped: waiting for the pools to catch up")
	caught := time.Now().Add(3 * time.Minute)
	for time.Now().Before(caught) && len(s.judge.pending(time.Now())) > 0 {
		sleep(ctx, 250*time.Millisecond)
	}
	for _, w := range s.workspaces {
		s.idle(ctx, w)
	}
	sleep(ctx, 2*s.o.SettleMax)
	s.judge.sampleMetrics(ctx)
	s.sampleCPU(ctx)
	r := s.verdict()
	r.NoiseRuns = noiseRuns
	if noiseRuns > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("%d run(s) started during %s of changes that must start nothing", noiseRuns, stretch))
	}
	r.NoiseStretch = stretch
	return r, nil
}

func (s *soak) runsStarted() int {
	n := 0
	for _, r := range s.allReplicas() {
		n += r.proc.Count("run started", nil)
	}
	return n
}

// drive makes ChangesPerMinute pool changes a minute, and a burst every
// BurstEvery, until end or ctx ends.
func (s *soak) drive(ctx context.Context, end time.Time) {
	steady := time.NewTicker(time.Minute / time.Duration(s.o.ChangesPerMinute))
	defer steady.Stop()
	burst := time.NewTicker(s.o.BurstEvery)
	defer burst.Stop()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return
		case <-steady.C:
			s.change(ctx, nil, false)
		case <-burst.C:
			pools := s.model.pools()
			rand.Shuffle(len(pools), func(i, j int) { pools[i], pools[j] = pools[j], pools[i] })
			s.log("burst of %d changes", s.o.Burst)
			for i := range s.o.Burst {
				p := pools[i%len(pools)]
				s.change(ctx, &p, true)
			}
		}
	}
}

// change makes one change (to p, when given) and gives it to the judge.
func (s *soak) change(ctx context.Context, p *pool, burst bool) {
	s.pause.RLock()
	defer s.pause.RUnlock()
	c, err := s.model.step(ctx, p)
	if err != nil {
		if ctx.Err() == nil {
			s.judge.note("driver: %v", err)
		}
		return
	}
	if c != nil {
		c.burst = burst
		c.workspace = s.owner[c.pool].name
		s.judge.record(c)
	}
}

func (s *soak) makeNoise(ctx context.Context, end time.Time) {
	t := time.NewTicker(s.o.NoiseEvery)
	defer t.Stop()
	for n := 0; time.Now().Before(end); n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.pause.RLock()
			_, err := s.model.noise(ctx, n)
			s.pause.RUnlock()
			if err == nil {
				s.judge.mu.Lock()
				s.judge.noise++
				s.judge.mu.Unlock()
			}
		}
	}
}

// runFaults runs the schedule: one of each fault, evenly spread over
// Duration, again for each 30 minutes of it. With many workspaces, a fault
// ends once they are shared out again (its effects include the Leases it
// moved).
func (s *soak) runFaults(ctx context.Context, end time.Time) {
	rounds := max(1, int(s.o.Duration/(30*time.Minute)))
	schedule := scheduleFor(s.o)
	var all []int
	for range rounds {
		for i := range schedule {
			all = append(all, i)
		}
	}
	for k, i := range all {
		at := s.started.Add(s.o.Duration * time.Duration(k+1) / time.Duration(len(all)+1))
		sleep(ctx, time.Until(at))
		if ctx.Err() != nil || time.Now().After(end) {
			return
		}
		f := &fault{name: schedule[i].name, start: time.Now()}
		s.log("fault: %s", f.name)
		fctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		f.err = schedule[i].run(s, fctx, f)
		cancel()
		if s.many() {
			s.reshare(ctx, f)
		}
		f.end = time.Now()
		s.log("fault ended after %.1f s: %s %v", f.end.Sub(f.start).Seconds(), f.detail, errText(f.err))
		s.judge.mu.Lock()
		s.judge.faults = append(s.judge.faults, f)
		s.judge.mu.Unlock()
		// A change right after it: the pools must catch up.
		s.change(ctx, nil, false)
	}
}

// reshare waits, after fault f, for the workspaces to be shared out
// again, up to 90 s, and says so in f's detail when it had to.
func (s *soak) reshare(ctx context.Context, f *fault) {
	took, err := s.waitShared(ctx, 90*time.Second)
	switch {
	case err != nil:
		f.violation = strings.TrimPrefix(f.violation+"; ", "; ") + err.Error()
	case took > time.Second:
		f.detail = strings.TrimPrefix(f.detail+"; ", "; ") + fmt.Sprintf("the workspaces shared out again %.1f s later", took.Seconds())
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return "error: " + err.Error()
}

// sampler samples the leader's metrics and judges the pending changes
// every SampleEvery, and starts again a replica that exited by itself.
func (s *soak) sampler(ctx context.Context) {
	t := time.NewTicker(s.o.SampleEvery)
	defer t.Stop()
	supervise := time.NewTicker(time.Second)
	defer supervise.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-supervise.C:
			for _, r := range s.live() {
				select {
				case <-r.proc.Done():
					s.mu.Lock()
					r.killedAt = time.Now()
					s.mu.Unlock()
					s.judge.note("replica %s exited by itself (code %d): started again", r.identity, r.proc.ExitCode())
					s.judge.mu.Lock()
					s.judge.exits = append(s.judge.exits, fmt.Sprintf("%s exited %d at %s", r.identity, r.proc.ExitCode(), time.Now().UTC().Format("15:04:05")))
					s.judge.mu.Unlock()
					if err := s.startReplica(r.name); err != nil {
						s.judge.note("start %s again: %v", r.name, err)
					}
				default:
				}
			}
		case <-t.C:
			s.judge.sampleMetrics(ctx)
			s.sampleCPU(ctx)
			s.judge.minute()
		}
	}
}

// sampleCPU records each live replica's CPU: its own (metrics) and its
// children's, terraform's (/proc, those it waited for).
func (s *soak) sampleCPU(ctx context.Context) {
	for _, r := range s.live() {
		m, err := scrape(ctx, r.metrics)
		if err != nil {
			continue
		}
		child := childCPU(r.proc.Pid())
		s.judge.mu.Lock()
		if s.judge.cpu == nil {
			s.judge.cpu = map[string][2]float64{}
		}
		s.judge.cpu[r.identity] = [2]float64{m["process_cpu_seconds_total"], child}
		s.judge.mu.Unlock()
	}
}

// childCPU is the user and system CPU of pid's waited-for children, s.
func childCPU(pid int) float64 {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	// After the command's name: state is fields[0]; cutime and cstime are
	// the 16th and 17th fields of stat, fields[13] and [14] here.
	if len(fields) < 15 {
		return 0
	}
	cu, _ := strconv.ParseFloat(fields[13], 64)
	cs, _ := strconv.ParseFloat(fields[14], 64)
	return (cu + cs) / 100
}
