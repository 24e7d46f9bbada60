package trafficbench

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/textcheck"
)

// fixedTraffic is a traffic part of 20 pods through each load balancer,
// with made-up latencies: 0.90 to 1.66 s by 0.04 through HAProxy, 0.70 to
// 1.42 s through nginx and a last one of 3.10 s.
func fixedTraffic() *Results {
	r := &Results{samples: 20}
	for _, lb := range trafficLBs() {
		r.rows = append(r.rows, trafficRow{lb: lb.name, example: "examples/pools/" + lb.example, reload: lb.reload})
	}
	r.rows[0].version, r.rows[1].version = "2.6.12-1", "1.22.1"
	for i := range 20 {
		r.rows[0].latencies = append(r.rows[0].latencies, 0.90+0.04*float64(i))
		r.rows[1].latencies = append(r.rows[1].latencies, 0.70+0.04*float64(i))
	}
	r.rows[1].latencies[19] = 3.10
	r.rows[0].runs, r.rows[1].runs = 40, 41
	return r
}

// The traffic section of a fixed run is testdata/traffic.md; go test
// -update rewrites it.
func TestTheTrafficSectionOfAFixedRunIsTheGoldenOne(t *testing.T) {
	textcheck.Golden(t, filepath.Join("testdata", "traffic.md"), Section(fixedTraffic()))
}

// The rows are worked out by hand from fixedTraffic: of 20, the median is
// the mean of the 10th and 11th, the p99 (nearest rank) the largest.
func TestTheTrafficRowsOfAFixedRun(t *testing.T) {
	section := Section(fixedTraffic())
	textcheck.ContainsLines(t, "the traffic section", section,
		"| HAProxy 2.6.12-1 (examples/pools/haproxy) | `haproxy -c`, then SIGUSR2 to the master | 20 | 1.28 s | 1.66 s | 0.90–1.66 s | 40 |",
		"| nginx 1.22.1 (examples/pools/nginx) | `nginx -t`, then `nginx -s reload` (SIGHUP to the master) | 20 | 1.08 s | 3.10 s | 0.70–3.10 s | 41 |",
	)
	if !strings.Contains(section, "20 pods through each load balancer") {
		t.Errorf("the section does not give the number of pods:\n%s", section)
	}
}

func TestTrafficNotMeasuredSaysWhy(t *testing.T) {
	r := fixedTraffic()
	r.rows[1] = trafficRow{lb: "nginx", example: "examples/pools/nginx", reload: r.rows[1].reload, reason: "no nginx on PATH"}
	want := "| nginx (examples/pools/nginx) | `nginx -t`, then `nginx -s reload` (SIGHUP to the master) | not measured: no nginx on PATH | — | — | — | — |\n"
	if s := Section(r); !strings.Contains(s, want) || !strings.Contains(s, "| HAProxy 2.6.12-1 (examples/pools/haproxy) |") {
		t.Errorf("nginx missing: want its row to say so and HAProxy's to stay:\n%s", s)
	}
	s := Section(&Results{samples: 20, reason: "pods with a real network need root"})
	if want := "## Traffic: a pod's Ready to its first request through HAProxy and nginx\n\nNot measured: pods with a real network need root.\n"; s != want {
		t.Errorf("no network: %q, want %q", s, want)
	}
	if Section(nil) != "" {
		t.Error("no results gave a section")
	}
}

func TestParseLBVersion(t *testing.T) {
	for out, want := range map[string]string{
		"HAProxy version 2.6.12-1+deb12u4 2026/10/17 - a web site\nStatus: long-term supported branch\n": "2.6.12-1+deb12u4",
		"nginx version: nginx/1.22.1\n": "1.22.1",
		"command not found":             "",
	} {
		if got := parseLBVersion(out); got != want {
			t.Errorf("parseLBVersion(%q) = %q, want %q", out, got, want)
		}
	}
}

// waitRemoved looks for the pod's addresses as each example writes them.
func TestHasAddressInWhatEachExampleRenders(t *testing.T) {
	pod := testcluster.Pod{Name: "web-2", IPs: []string{"10.244.7.2", "fd00:10:244::7:2"}, Ports: map[string]int32{"http": 8080}}
	haproxy := "backend bench-traffic_web\n    balance roundrobin\n" +
		"    server web-1-10-244-7-1-8080 10.244.7.1:8080 check\n" +
		"    server web-22-fd00-10-244--7-22-8080 [fd00:10:244::7:22]:8080 check\n"
	nginx := "upstream bench-traffic_web {\n    server 10.244.7.22:8080 max_fails=3 fail_timeout=10s;\n    server [fd00:10:244::7:1]:8080 max_fails=3 fail_timeout=10s;\n}\n"
	if hasAddress(haproxy, pod) || hasAddress(nginx, pod) {
		t.Errorf("web-2 found among web-1 and web-22")
	}
	for _, rendered := range []string{
		haproxy + "    server web-2-10-244-7-2-8080 10.244.7.2:8080 check\n",
		haproxy + "    server web-2-fd00-10-244--7-2-8080 [fd00:10:244::7:2]:8080 check\n",
		nginx + "    server 10.244.7.2:8080 max_fails=3 fail_timeout=10s;\n",
		nginx + "    server [fd00:10:244::7:2]:8080 max_fails=3 fail_timeout=10s;\n",
	} {
		if !hasAddress(rendered, pod) {
			t.Errorf("web-2 not found in:\n%s", rendered)
		}
	}
}

// The nginx delivery variables of the bench run the commands of
// test/traffic on the directory the bench starts nginx in.
func TestNginxVarsRunTheCommandsOfTraffic(t *testing.T) {
	vars := nginxVars("/usr/sbin/nginx", "/srv/bench/traffic-nginx")
	textcheck.Contains(t, "terraform.tfvars", vars,
		`pool_file      = "upstream.conf"`,
		"test ! -s nginx/nginx.pid || /usr/sbin/nginx -t -q -p /srv/bench/traffic-nginx/nginx/ -e /srv/bench/traffic-nginx/nginx/error.log -c /srv/bench/traffic-nginx/nginx/nginx.conf",
		"test ! -s nginx/nginx.pid || /usr/sbin/nginx -s reload -p /srv/bench/traffic-nginx/nginx/",
	)
}
