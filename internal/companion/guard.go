package companion

import (
	"fmt"
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

// refusals are the data source instances whose changes the guard refuses,
// each with why: a run leaves them out and keeps the others current.
func (g shrinkGuard) refusals(changes map[string][]poolChange) map[string]cause {
	out := map[string]cause{}
	for address, list := range changes {
		if reason := g.refuses(address, list); reason != "" {
			out[address] = cause{kind: causeShrink, text: reason}
		}
	}
	return out
}

// refuses says why the guard refuses the changes of one data source
// instance (each pool of a fleet), or "".
func (g shrinkGuard) refuses(address string, changes []poolChange) string {
	var reasons []string
	for _, c := range changes {
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
	return strings.Join(reasons, "; ")
}
