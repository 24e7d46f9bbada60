package companion

import (
	"maps"
	"slices"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// The slices the pools leave out, labelled for a Service with a selector
// but written by a manager the data source does not trust: the companion
// computes the pools as a plan would, without them, and says each once in
// its log (when it is first left out) and all in a gauge, as a plan says
// them in a warning.

// leftOutSlice is one slice left out of the pool of Service (namespace/name).
type leftOutSlice struct {
	service string
	endpoints.LeftOutSlice
}

func leftOutOf(service string, slices []endpoints.LeftOutSlice) []leftOutSlice {
	out := make([]leftOutSlice, len(slices))
	for i, s := range slices {
		out[i] = leftOutSlice{service: service, LeftOutSlice: s}
	}
	return out
}

// noteLeftOut logs the slices that the evaluations leave out now and did
// not at the last recompute, and sets the gauge to how many they leave out.
func (s *syncer) noteLeftOut(instances []instance) {
	now := map[string]string{}
	for i, in := range instances {
		for _, l := range s.evals[i].leftOut {
			key := l.Namespace + "/" + l.Name
			if _, seen := now[key]; seen {
				continue
			}
			now[key] = in.address
			if _, before := s.leftOut[key]; before {
				continue
			}
			manager := l.Manager
			if manager == "" {
				manager = "(no managed-by label)"
			}
			s.log.Warn("EndpointSlice left out: the Service has a selector and the slice's manager is not trusted "+
				"(add it to trusted_slice_managers if its slices belong in the pool)",
				"slice", key, "manager", manager, "service", l.service, "data_source", in.address)
		}
	}
	s.leftOut = now
	s.metrics.slicesLeftOut.Set(float64(len(now)))
}

// allLeftOut are the slices the fleet's pools leave out, by Service name.
func (p *fleetPool) allLeftOut() []leftOutSlice {
	var out []leftOutSlice
	for _, name := range slices.Sorted(maps.Keys(p.leftOut)) {
		out = append(out, p.leftOut[name]...)
	}
	return out
}
