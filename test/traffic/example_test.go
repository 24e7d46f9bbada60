package traffic

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// The delivery script that examples/pools/haproxy and examples/pools/nginx
// ship (apply-pool.sh, run by their terraform_data's provisioner), run here
// as the provisioner runs it, on a real HAProxy and nginx.

// applyPoolScript is the shipped script of an example, checked to be the
// same file in both examples.
func applyPoolScript(t *testing.T, example string) string {
	t.Helper()
	path := filepath.Join("..", "..", "examples", "pools", example, "apply-pool.sh")
	mine, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"haproxy", "nginx"} {
		theirs, err := os.ReadFile(filepath.Join("..", "..", "examples", "pools", other, "apply-pool.sh"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mine, theirs) {
			t.Fatalf("examples/pools/%s/apply-pool.sh and examples/pools/%s/apply-pool.sh differ: one script, copied into each example", example, other)
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// applyPool runs the script with the provisioner's environment.
func applyPool(script, text, file, check, saveState, reload string) ([]byte, error) {
	cmd := exec.Command("sh", script)
	cmd.Env = append(os.Environ(), "POOL_TEXT="+text, "POOL_FILE="+file, "CHECK_COMMAND="+check,
		"SAVE_STATE_COMMAND="+saveState, "RELOAD_COMMAND="+reload)
	return cmd.CombinedOutput()
}

// commands are the check and reload commands of a load balancer under test.
func commands(t *testing.T, running loadBalancer) (check, reload string) {
	t.Helper()
	switch lb := running.(type) {
	case *HAProxy:
		return lb.CheckCommand(), lb.SignalCommand()
	case *Nginx:
		return lb.CheckCommand(), lb.SignalCommand()
	}
	t.Fatalf("no commands for %T", running)
	return "", ""
}

// waitForNewWorkers waits until none of the workers from before is current.
func waitForNewWorkers(t *testing.T, running loadBalancer, before []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		now, err := running.Workers(ctx)
		if err == nil && len(now) > 0 && !overlap(now, before) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("workers %v (%v) after the reload, want none of %v", now, err, before)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// The script delivers a changed pool (written, checked, reloaded), does
// nothing for the pool the file already holds, and puts the previous file
// back without a reload when the program refuses the new one.
func TestApplyPoolReloadsOnlyAChangedPoolThatTheProgramAccepts(t *testing.T) {
	for _, lb := range loadBalancers {
		t.Run(lb.name, func(t *testing.T) {
			t.Parallel()
			script := applyPoolScript(t, lb.name)
			var pool string
			running := startLB(t, lb, &pool)
			check, reload := commands(t, running)
			workers := func() []int {
				w, err := running.Workers(context.Background())
				if err != nil || len(w) == 0 {
					t.Fatalf("workers %v, %v: want some", w, err)
				}
				return w
			}
			before := workers()
			held, err := os.ReadFile(pool)
			if err != nil {
				t.Fatal(err)
			}

			if out, err := applyPool(script, string(held), pool, check, "", reload); err != nil || !strings.Contains(string(out), "no reload") {
				t.Fatalf("the pool the file holds: %v\n%s\nwant success and no reload", err, out)
			}
			if now := workers(); !slices.Equal(now, before) {
				t.Errorf("workers %v after the pool the file holds, want %v: nothing reloaded", now, before)
			}

			out, err := applyPool(script, lb.broken, pool, check, "", reload)
			if err == nil || !strings.Contains(string(out), "refuses") {
				t.Fatalf("a pool the program refuses: %v\n%s\nwant a failure that says it refuses it", err, out)
			}
			if now, _ := os.ReadFile(pool); !bytes.Equal(now, held) {
				t.Errorf("after the refused pool, %s holds\n%s\nwant the previous one back:\n%s", pool, now, held)
			}
			if now := workers(); !slices.Equal(now, before) {
				t.Errorf("workers %v after the refused pool, want %v: nothing reloaded", now, before)
			}
			if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(pool), ".*")); len(leftovers) != 0 {
				t.Errorf("temporary files left beside the pool: %v", leftovers)
			}

			changed := string(held) + "# changed\n"
			if out, err := applyPool(script, changed, pool, check, "", reload); err != nil {
				t.Fatalf("a changed pool: %v\n%s", err, out)
			}
			if now, _ := os.ReadFile(pool); string(now) != changed {
				t.Errorf("after the changed pool, %s holds\n%s\nwant\n%s", pool, now, changed)
			}
			waitForNewWorkers(t, running, before)
		})
	}
}

// HAProxy keeps what its health checks learned across a reload when the
// script saves the servers' state first (save_state_command) and the
// configuration loads it (server-state-file, load-server-state-from-file):
// a server found down stays down. Without it, the new workers take every
// server as up until its checks fail again (3 failed checks 2 s apart),
// and requests reach the server that was down. Both are measured, each
// count is logged ("server state: ...").
func TestHAProxyKeepsWhatItsHealthChecksLearnedAcrossAReload(t *testing.T) {
	script := applyPoolScript(t, "haproxy")
	pods := network(t, "web-a", "web-b", "web-c")
	for _, saved := range []bool{true, false} {
		name := map[bool]string{true: "state saved", false: "no state saved"}[saved]
		t.Run(name, func(t *testing.T) {
			if _, err := HAProxyPath(); err != nil {
				t.Skip(err)
			}
			if _, err := exec.LookPath("socat"); err != nil {
				t.Skip("no socat on PATH, which saves HAProxy's server state (Debian: apt-get install socat)")
			}
			pool := filepath.Join(t.TempDir(), "pool.cfg")
			writeBackend(t, pool, pods["web-a"], pods["web-b"])
			h, err := StartHAProxy(context.Background(), HAProxyOptions{Dir: t.TempDir(), Backend: pool,
				Defaults: []string{"default-server inter 2s fall 3 rise 2"}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(h.Stop)
			if err := pods["web-b"].SetHealth(testcluster.HealthNotReady); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pods["web-b"].SetHealth(testcluster.HealthReady) })
			// The checks take web-b out: 3 failures 2 s apart.
			var r Result
			for range 15 {
				if r = load(t, h.URL(false), 20, time.Second); r.ByPod["web-b"] == 0 {
					break
				}
			}
			if r.ByPod["web-b"] != 0 {
				t.Fatalf("web-b still answers 15 s after its health check started failing: %v", r)
			}

			// web-c joins: the pool changes, the script delivers it.
			writeBackend(t, pool+".next", pods["web-a"], pods["web-b"], pods["web-c"])
			next, err := os.ReadFile(pool + ".next")
			if err != nil {
				t.Fatal(err)
			}
			saveState := ""
			if saved {
				saveState = h.SaveStateCommand()
			}
			before, err := h.Workers(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if out, err := applyPool(script, string(next), pool, h.CheckCommand(), saveState, h.SignalCommand()); err != nil {
				t.Fatalf("apply-pool.sh: %v\n%s", err, out)
			}
			waitForNewWorkers(t, h, before)
			after := load(t, h.URL(false), 50, 2*time.Second)
			t.Logf("server state: %s: in the 2 s after the reload, %d of %d requests reached web-b, which its health check had taken out (%v)",
				name, after.ByPod["web-b"], after.Total, after)
			if after.Failed != 0 || after.ByPod["web-c"] == 0 {
				t.Errorf("%s: after the reload %v, want no failure and answers from web-c", name, after)
			}
			if saved && after.ByPod["web-b"] != 0 {
				t.Errorf("state saved: web-b answered %d requests after the reload, want none: it was down before it", after.ByPod["web-b"])
			}
			if !saved && after.ByPod["web-b"] == 0 {
				t.Errorf("no state saved: web-b answered no request after the reload; the new workers should take it as up until its checks fail, which this test measures")
			}
		})
	}
}
