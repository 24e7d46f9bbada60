package stats

import (
	"math"
	"testing"
)

func TestPercentileIsTheNearestRank(t *testing.T) {
	var fifty []float64
	for i := 50; i >= 1; i-- {
		fifty = append(fifty, float64(i))
	}
	for _, tt := range []struct {
		v    []float64
		p    float64
		want float64
	}{
		{fifty, 99, 50},
		{fifty, 50, 25},
		{fifty, 90, 45},
		{fifty, 100, 50},
		{fifty, 1, 1},
		{[]float64{3}, 99, 3},
		{[]float64{1, 2, 3, 4}, 50, 2},
		{[]float64{1, 2, 3, 4}, 51, 3},
	} {
		if got := Percentile(tt.v, tt.p); got != tt.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tt.v, tt.p, got, tt.want)
		}
	}
	if !math.IsNaN(Percentile(nil, 99)) {
		t.Error("the percentile of nothing is not NaN")
	}
	if fifty[0] != 50 {
		t.Error("percentile sorted its input")
	}
}

func TestMedianAndVerdict(t *testing.T) {
	for _, tt := range []struct {
		values []float64
		want   float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tt.values); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.values, got, tt.want)
		}
	}
	if got := Verdict(2, 2, " ms"); got != "**pass** (0 % under)" {
		t.Errorf("a measure at its bound: %s, want a pass", got)
	}
	if got := Verdict(3, 2, " ms"); got != "**miss** by 1.00 ms (50 % over)" {
		t.Errorf("a measure over its bound: %s", got)
	}
	if got := MinMax(nil, "%.1f"); got != "—" {
		t.Errorf("minMax of nothing = %q", got)
	}
}
