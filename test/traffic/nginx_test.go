package traffic

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// writeUpstream writes an nginx upstream in the shape that
// examples/pools/nginx renders (provider::k8s::members: IPv6 in brackets),
// with both addresses of each pod; no pod is the example's placeholder for
// an empty pool.
func writeUpstream(t *testing.T, path string, pods ...*testcluster.NetPod) {
	t.Helper()
	tail := "}\n"
	if len(pods) == 0 {
		tail = "    # No ready pod: a placeholder that takes no traffic, as NGINX refuses an empty upstream.\n    server 127.0.0.1:1 down;\n}\n"
	}
	writePool(t, path, "upstream demo_web {\n", tail, pods, func(_ *testcluster.NetPod, ip string) string {
		return fmt.Sprintf("    server %s max_fails=3 fail_timeout=10s;\n", net.JoinHostPort(ip, "8080"))
	})
}

// The master killed with SIGKILL leaves its worker serving (nginx's
// workers do not watch their master); the guard ends it.
func TestNginxWorkerGoesWithAKilledMaster(t *testing.T) {
	n, ok := startLB(t, nginxUnderTest, nil).(*Nginx)
	if !ok {
		t.Fatal("the nginx under test is not an *Nginx")
	}
	workers, err := n.Workers(context.Background())
	if err != nil || len(workers) == 0 {
		t.Fatalf("workers %v, %v: want one", workers, err)
	}
	if err := syscall.Kill(n.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, pid := range append(workers, n.GuardPID()) {
		if !gone(pid) {
			t.Errorf("process %d still runs 5 s after the nginx master was killed", pid)
		}
	}
}

func TestNginxReloadCommandQuotesWhatNeedsIt(t *testing.T) {
	got := NginxReloadCommand("/usr/sbin/nginx", "/tmp/a b/nginx")
	want := "/usr/sbin/nginx -t -q -p '/tmp/a b/nginx/' -e '/tmp/a b/nginx/error.log' -c '/tmp/a b/nginx/nginx.conf' && " +
		"/usr/sbin/nginx -s reload -p '/tmp/a b/nginx/' -e '/tmp/a b/nginx/error.log' -c '/tmp/a b/nginx/nginx.conf'"
	if got != want {
		t.Errorf("NginxReloadCommand =\n%s\nwant\n%s", got, want)
	}
}
