package provider

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/traffic"
)

func TestOnlyResetsAtAReloadThatHAProxySaysLostItsSocketsAreCountedApart(t *testing.T) {
	reload := time.Unix(1700000000, 250_000_000)
	reloads := fmt.Sprintf("%d.%09d\n%d.%09d\n", reload.Unix(), reload.Nanosecond(), reload.Unix()+10, reload.Nanosecond())
	reset := "read: read: connection reset by peer"
	lost := "[NOTICE] Reloading HAProxy\n[ALERT]    (6458) : " + traffic.HAProxyLostSockets + "!\n[NOTICE] Loading success.\n"
	healthy := "[NOTICE] Reloading HAProxy\n[NOTICE] Loading success.\n"
	tests := []struct {
		name     string
		failures []traffic.Failure
		log      string
		want     int
	}{
		{"a reset just after a reload that lost its sockets", []traffic.Failure{{At: reload.Add(300 * time.Millisecond), Reason: reset}}, lost, 1},
		{"a reset just before the reload's time is written", []traffic.Failure{{At: reload.Add(-400 * time.Millisecond), Reason: reset}}, lost, 1},
		{"the same reset when HAProxy took its sockets over", []traffic.Failure{{At: reload.Add(300 * time.Millisecond), Reason: reset}}, healthy, 0},
		{"a reset far from any reload", []traffic.Failure{{At: reload.Add(5 * time.Second), Reason: reset}}, lost, 0},
		{"a timeout at the reload", []traffic.Failure{{At: reload.Add(300 * time.Millisecond), Reason: "timeout"}}, lost, 0},
		{"a 503 at the reload", []traffic.Failure{{At: reload.Add(300 * time.Millisecond), Reason: "status 503"}}, lost, 0},
		{"resets at the second reload, and one between", []traffic.Failure{
			{At: reload.Add(10*time.Second + time.Second), Reason: reset},
			{At: reload.Add(10*time.Second + 1500*time.Millisecond), Reason: reset},
			{At: reload.Add(6 * time.Second), Reason: reset},
		}, lost, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := traffic.Result{Failed: len(tt.failures), FailedAt: tt.failures}
			if got := resetsOfLostSockets(r, reloadTimes(reloads), tt.log); got != tt.want {
				t.Errorf("counted apart %d, want %d", got, tt.want)
			}
		})
	}
}
