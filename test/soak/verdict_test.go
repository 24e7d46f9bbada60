package soak

import (
	"testing"
	"time"
)

// A shrink refusal is the driver's when what it made removes more than
// half of a state the companion may still hold: any the judge saw within
// one -state-interval, as a human's apply shows only at the next read.
func TestAShrinkRefusalIsTheDriversAgainstAStateOfTheLastInterval(t *testing.T) {
	at := time.Date(2026, 12, 2, 13, 20, 0, 0, time.UTC)
	p := pool{namespace: "soak", service: "svc-10"}
	before := []string{"a", "b", "c", "d", "e"}
	after := []string{"d", "e", "f", "g"}
	for _, tt := range []struct {
		name string
		// applied is when the state went from before to after (a human's
		// apply of what the driver made); refused when the guard refused.
		applied, refused time.Duration
		want             bool
	}{
		{"the state still before", 10 * time.Second, 5 * time.Second, true},
		{"after a human's apply, within the interval", 5 * time.Second, 6 * time.Second, true},
		{"after a human's apply, an interval later", 5 * time.Second, 16 * time.Second, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := &judge{s: &soak{o: Options{StateInterval: 10 * time.Second}},
				history: map[string][]observation{stateKey(p): {{at: at, members: before}, {at: at.Add(tt.applied), members: after}}},
				changes: []*change{{Change: Change{At: at.Add(time.Second), Key: stateKey(p), Want: after}, pool: p}},
			}
			if got := j.driverShrank(at.Add(tt.refused)); got != tt.want {
				t.Errorf("driverShrank = %v, want %v", got, tt.want)
			}
		})
	}
}
