// Package stats gives the figures of the bench's reports from its samples:
// medians, nearest-rank percentiles, ranges, and the verdict of a measure
// against its target.
package stats

import (
	"fmt"
	"math"
	"slices"
)

// Median is the median of v (0 when empty).
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// MinMax is the range of v in format ("—" when empty).
func MinMax(v []float64, format string) string {
	if len(v) == 0 {
		return "—"
	}
	return fmt.Sprintf(format+"–"+format, slices.Min(v), slices.Max(v))
}

// Verdict compares a measure with its bound (lower is better).
func Verdict(v, bound float64, unit string) string {
	if v <= bound {
		return fmt.Sprintf("**pass** (%.0f %% under)", (bound-v)/bound*100)
	}
	return fmt.Sprintf("**miss** by %.2f%s (%.0f %% over)", v-bound, unit, (v-bound)/bound*100)
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of v: the
// smallest value with at least p % of the values at or below it. Of 50
// values, the 99th is the largest.
func Percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(v))
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}
