package provider

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vigie/terraform-provider-k8s/internal/testcluster"
	"github.com/vigie/terraform-provider-k8s/internal/traffic"
)

// TestAccTrafficRollingUpdate replaces the 5 pods of a Service one by one
// (new pod ready, then the old one deleted with a grace period: it drains,
// then goes) while a bounded client sends 50 requests a second through
// HAProxy on the backend of examples/pools/haproxy, and reports failed/total.
//
//   - "pool applied once": the baseline. The backend of the apply before
//     the rollout names only the old pods: once they are gone, every request
//     fails.
//   - "pool re-applied during the rollout": the test itself runs terraform
//     apply in a loop (the provisioner of reloadingPool writes the backend
//     and reloads HAProxy when it changed), as the companion of issue 19
//     will when a pool changes (this loop is its stand-in): no request
//     fails.
func TestAccTrafficRollingUpdate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reapply bool
	}{{"pool applied once", false}, {"pool re-applied during the rollout", true}} {
		t.Run(tc.name, func(t *testing.T) { rollingUpdateThroughHAProxy(t, tc.reapply) })
	}
}

// reloadingPool is the configuration of a pool that keeps an HAProxy
// current: examples/pools/haproxy as a module, and a terraform_data
// resource (built in: no provider to install) replaced whenever the rendered
// backend changes, whose provisioner writes the backend file and reloads
// HAProxy gracefully (check, then SIGUSR2 to the master: new workers, the
// old ones finish their connections). Run by the companion of issue 19,
// `terraform apply` is all a change of the pool takes.
const reloadingPool = `
terraform {
  required_providers {
    k8s = { source = "vigie/k8s" }
  }
}

variable "namespace" {
  type = string
}

module "pool" {
  source    = "./pool"
  namespace = var.namespace
  service   = "web"
  port_name = "http"
}

resource "terraform_data" "haproxy_backend" {
  input            = module.pool.haproxy_backend
  triggers_replace = module.pool.haproxy_backend

  provisioner "local-exec" {
    # Before HAProxy runs (the first apply), only the file is written.
    command     = <<-EOT
      printf '%s' "$BACKEND" > backend.cfg.tmp && mv backend.cfg.tmp backend.cfg
      if [ -s haproxy/haproxy.pid ]; then
        haproxy -c -q -f haproxy/haproxy.cfg -f backend.cfg && kill -USR2 "$(cat haproxy/haproxy.pid)" && date +%s.%N >> reloads
      fi
    EOT
    environment = { BACKEND = self.input }
  }
}
`

// prepareReloadingPool writes reloadingPool and the example module into dir
// and returns the apply (terraform get first: the module is local).
func prepareReloadingPool(t *testing.T, c *testCluster, dir, namespace string) func() error {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "pool"), 0o755); err != nil {
		t.Fatal(err)
	}
	prepareHAProxyExample(t, filepath.Join(dir, "pool"))
	if err := os.Rename(filepath.Join(dir, "pool", "dev.tfrc"), filepath.Join(dir, "dev.tfrc")); err != nil {
		t.Fatal(err)
	}
	writeText(t, filepath.Join(dir, "main.tf"), reloadingPool)
	run := func(args ...string) error {
		cmd := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+filepath.Join(dir, "dev.tfrc"), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "KUBECONFIG="+c.kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("terraform %v: %w\n%s", args, err, out)
		}
		return nil
	}
	if err := run("get", "-no-color"); err != nil {
		t.Fatal(err)
	}
	return func() error {
		return run("apply", "-auto-approve", "-input=false", "-no-color", "-var", "namespace="+namespace)
	}
}

func rollingUpdateThroughHAProxy(t *testing.T, reapply bool) {
	c := accCluster(t)
	k := trafficSetUp(t, c)
	n := k.Network()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := c.namespace(t)
	c.createService(t, dualStackWebServiceSpec(ns, corev1.IPv4Protocol, corev1.IPv6Protocol))
	pod := func(i int) testcluster.Pod {
		return testcluster.Pod{Name: fmt.Sprintf("web-%d", i), Labels: webLabels, IPs: n.PodIPs(i), Ready: true, Node: accNode, Ports: map[string]int32{"http": 8080}}
	}
	var old, next []string
	var replacements []testcluster.Pod
	for i := 1; i <= 5; i++ {
		if err := k.RunPod(ctx, ns, pod(i)); err != nil {
			t.Fatal(err)
		}
		old = append(old, pod(i).Name)
		replacements = append(replacements, pod(i+5))
		next = append(next, pod(i+5).Name)
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		c.waitForSlices(t, ns, endpointCount(family, 5, 5))
	}
	dir := t.TempDir()
	apply := prepareReloadingPool(t, c, dir, ns)
	if err := apply(); err != nil {
		t.Fatal(err)
	}
	// The first apply wrote the backend; HAProxy starts on it, and its pid
	// file is there for the provisioner's reloads from now on.
	h, err := traffic.StartHAProxy(ctx, traffic.HAProxyOptions{Dir: filepath.Join(dir, "haproxy"), Backend: filepath.Join(dir, "backend.cfg")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	if r := loadForASecond(t, h.URL(false), 50); r.Failed != 0 || !slices.Equal(r.Pods(), old) {
		t.Fatalf("before the rollout: %v, want answers from %v", r, old)
	}

	// What the companion will do when the pool changes: terraform apply
	// (whose provisioner writes the backend and reloads HAProxy). Here, in a
	// loop until the rollout is over.
	stop, looped := make(chan struct{}), make(chan error, 1)
	applies := 0
	reapplyOnce := func() error {
		applies++
		return apply()
	}
	if reapply {
		go func() {
			for {
				select {
				case <-stop:
					looped <- nil
					return
				default:
				}
				if err := reapplyOnce(); err != nil {
					looped <- err
					return
				}
			}
		}()
	} else {
		close(looped)
	}

	const pause, grace = 2 * time.Second, 10
	// The rollout takes 9 pauses and the last grace period; the load covers it.
	during := make(chan traffic.Result, 1)
	go func() {
		r, _ := traffic.Run(context.Background(), traffic.Load{URL: h.URL(true), Rate: 50, Duration: 9*pause + grace*time.Second + 2*time.Second})
		during <- r
	}()
	if err := k.RollingUpdate(ctx, testcluster.Rollout{Namespace: ns, Old: old, New: replacements, Pause: pause, Grace: grace}); err != nil {
		t.Fatal(err)
	}
	if reapply {
		close(stop)
		if err := <-looped; err != nil {
			t.Fatal(err)
		}
		// The change the loop may have missed: the last old pod gone.
		if err := reapplyOnce(); err != nil {
			t.Fatal(err)
		}
	}
	duringRollout := <-during
	after := loadForASecond(t, h.URL(false), 50)
	reloads, err := os.ReadFile(filepath.Join(dir, "reloads"))
	if err != nil && reapply {
		t.Fatal(err)
	}
	reloadCount := strings.Count(string(reloads), "\n")
	t.Logf("%d reloads by the provisioner", reloadCount)
	// 10 changes of the pool (5 pods in, 5 out), each one reload at most:
	// an apply that changes nothing reloads nothing.
	if reapply && (reloadCount < 1 || reloadCount > 10) {
		t.Errorf("%d reloads in %d applies, want 1 to 10 (one per change of the pool at most)", reloadCount, applies)
	}
	t.Logf("%s: during the rollout %d/%d requests failed %v (%d applies); after it %d/%d",
		map[bool]string{false: "pool applied once", true: "pool re-applied"}[reapply],
		duringRollout.Failed, duringRollout.Total, duringRollout.Failures, applies, after.Failed, after.Total)
	if !reapply {
		if after.Failed != after.Total || slices.ContainsFunc(duringRollout.Pods(), func(p string) bool { return slices.Contains(next, p) }) {
			t.Errorf("pool applied once: after the rollout %v, during %v; want every request failed, and no answer from the new pods", after, duringRollout)
		}
		return
	}
	if duringRollout.Failed != 0 {
		t.Errorf("pool re-applied: %d/%d requests failed during the rollout: %v", duringRollout.Failed, duringRollout.Total, duringRollout.Failures)
	}
	if after.Failed != 0 || !slices.Equal(after.Pods(), slices.Sorted(slices.Values(next))) {
		t.Errorf("pool re-applied, after the rollout: %v, want answers from %v only", after, next)
	}
}
