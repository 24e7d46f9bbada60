package provider

import (
	"context"
	"maps"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigie/terraform-provider-k8s/internal/pools"
)

func TestQuietLogsTurnLogsOffOnlyWhenNoneWasAskedFor(t *testing.T) {
	off := map[string]string{
		"TF_LOG_SDK": "off", "TF_LOG_SDK_PROTO": "off", "TF_LOG_SDK_FRAMEWORK": "off", "TF_LOG_PROVIDER_K8S": "off",
	}
	tests := []struct {
		name    string
		environ []string
		want    map[string]string
	}{
		{"no log asked for: every logger off", []string{"HOME=/home/u", "PATH=/bin", "TF_CLI_CONFIG_FILE=rc"}, off},
		{"TF_LOG asks for logs: left as the SDK sets them", []string{"TF_LOG=TRACE"}, nil},
		{"a log file alone is asking for logs", []string{"HOME=/home/u", "TF_LOG_PATH=/tmp/tf.log"}, nil},
		{"the provider's logs alone", []string{"TF_LOG_PROVIDER=DEBUG"}, nil},
		{"an empty TF_LOG is still a choice of the user", []string{"TF_LOG="}, nil},
		{"a variable that merely contains TF_LOG does not count", []string{"MY_TF_LOG=TRACE"}, off},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := QuietLogs(tt.environ); !maps.Equal(got, tt.want) {
				t.Errorf("QuietLogs(%q) = %v, want %v", tt.environ, got, tt.want)
			}
		})
	}
}

func TestTheProviderCollectsGarbageHalfAsOftenUnlessTheUserSetGOGC(t *testing.T) {
	if percent, set := gcPercent(""); !set || percent != 200 {
		t.Errorf("without GOGC: %d, %v; want 200, true", percent, set)
	}
	for _, gogc := range []string{"100", "off", "50"} {
		if _, set := gcPercent(gogc); set {
			t.Errorf("GOGC=%s was overridden", gogc)
		}
	}
}

// gogc is the collector's target of the process now.
func gogc(t *testing.T) int {
	t.Helper()
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	return int(sample[0].Value.Uint64())
}

// wantGOGC says when the collector's target is not want.
func wantGOGC(t *testing.T, when string, want int) {
	t.Helper()
	if got := gogc(t); got != want {
		t.Errorf("%s: target %d, want %d", when, got, want)
	}
}

func TestAFleetsPodPagesAreListedUnderTheLowerTargetAndItComesBackAfterTheLast(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(200))
	g := &scopedGC{low: 100}
	g.enter()
	g.enter()
	wantGOGC(t, "while two list Pods", 100)
	g.leave()
	wantGOGC(t, "while one still lists Pods", 100)
	g.leave()
	wantGOGC(t, "once none lists Pods (the 200 from before)", 200)
	g.leave() // one leave too many changes nothing
	wantGOGC(t, "after a leave with none in", 200)

	// Through a reader: the pager's PodPages run under it, and the rest of
	// the reader is the same.
	pager := &targetSeen{t: t}
	src := podPagesUnder(g, pager)
	paged, ok := src.(pools.PodPager)
	if !ok {
		t.Fatal("the wrapper of a pager has no PodPages")
	}
	if err := paged.PodPages(context.Background(), "ns", "", func([]corev1.Pod, bool) {}); err != nil {
		t.Fatal(err)
	}
	if pager.during != 100 || gogc(t) != 200 {
		t.Errorf("PodPages ran at target %d and left %d, want 100 and 200", pager.during, gogc(t))
	}
	if _, err := src.Pods(context.Background(), "ns", ""); err != nil || pager.pods != 1 {
		t.Errorf("Pods through the wrapper: %v, %d calls; want the reader's own", err, pager.pods)
	}
	// A reader that cannot page (a cache) is given back as it is.
	if plain := (noPager{}); podPagesUnder(g, plain) != pools.Reader(plain) {
		t.Error("a reader without PodPages was wrapped")
	}
}

func TestAUsersGOGCIsNotChangedWhileAFleetListsPods(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	g := &scopedGC{} // Serve leaves low at 0 when the user set GOGC
	g.enter()
	wantGOGC(t, "while Pods are listed (the user's 150)", 150)
	g.leave()
	wantGOGC(t, "after (the user's 150)", 150)
}

type noPager struct{ pools.Reader }

type targetSeen struct {
	noPager
	t      *testing.T
	during int
	pods   int
}

func (p *targetSeen) PodPages(_ context.Context, _, _ string, each func([]corev1.Pod, bool)) error {
	p.during = gogc(p.t)
	each(nil, false)
	return nil
}

func (p *targetSeen) Pods(context.Context, string, string) ([]corev1.Pod, error) {
	p.pods++
	return nil, nil
}
