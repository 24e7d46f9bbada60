package companion

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// shrinkGuard refuses a run that would empty a pool (unless AllowEmpty) or
// remove more than MaxShrink of its members at once: a cluster that lost
// its pods, a selector that matches nothing, is no reason to take the
// members out of a load balancer.
type shrinkGuard struct {
	MaxShrink  float64
	AllowEmpty bool
}

// refusal says why the guard refuses the changes, or "".
func (g shrinkGuard) refusal(changes map[string][]poolChange) string {
	var reasons []string
	for _, address := range slices.Sorted(maps.Keys(changes)) {
		for _, c := range changes[address] {
			name := address
			if c.Name != "" {
				name += "[" + c.Name + "]"
			}
			switch {
			case len(c.Before) > 0 && len(c.After) == 0 && !g.AllowEmpty:
				reasons = append(reasons, fmt.Sprintf("%s would be emptied (%d members to 0; -allow-empty lets it)", name, len(c.Before)))
			case len(c.Before) > 0 && float64(len(c.Removed)) > g.MaxShrink*float64(len(c.Before)):
				reasons = append(reasons, fmt.Sprintf("%s would lose %d of its %d members at once, more than -max-shrink %.2f", name, len(c.Removed), len(c.Before), g.MaxShrink))
			}
		}
	}
	return strings.Join(reasons, "; ")
}
