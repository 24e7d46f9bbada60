package soak

import (
	"encoding/json"
	"slices"
	"time"
)

// The judge's way to pair pool changes with the state file, kept apart
// from the soak's processes so that the bench's churn (tools/harness,
// `bench-sync -sync-parts churn`) judges its changes the same way: the
// state file read as it is written, each terraform_data's input as its
// pool, and each change seen when state first shows the pool it made.

// Change is a pool change as the judge pairs it with state.
type Change struct {
	// At is when it was written, Key where state keeps its pool (a
	// terraform_data's name, or its instance key under for_each), Want the
	// pool's members once it is applied.
	At   time.Time
	Key  string
	Want []string
	// Seen is when state first showed Want (at the change itself when
	// state showed it already); Superseded is set when a later change of
	// its pool was seen first.
	Seen       time.Time
	Superseded bool
}

// StatePools reads a state file: the members of every terraform_data (its
// input, a list of strings), sorted, by the resource's name or, under
// for_each, by the instance's key.
func StatePools(raw []byte) (map[string][]string, error) {
	var st struct {
		Resources []struct {
			Mode, Type, Name string
			Instances        []struct {
				IndexKey   any `json:"index_key"`
				Attributes struct {
					Input struct {
						Value []string `json:"value"`
					} `json:"input"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, err
	}
	found := map[string][]string{}
	for _, r := range st.Resources {
		if r.Mode != "managed" || r.Type != "terraform_data" {
			continue
		}
		for _, in := range r.Instances {
			key := r.Name
			if k, ok := in.IndexKey.(string); ok {
				key = k
			}
			members := slices.Clone(in.Attributes.Input.Value)
			slices.Sort(members)
			found[key] = members
		}
	}
	return found, nil
}

// MatchState pairs what state shows of key's pool at now, members, with
// changes (in the order made): the last change of key neither seen nor
// superseded whose Want is members is seen at now, and the earlier ones of
// key not seen are superseded.
func MatchState(changes []*Change, key string, members []string, now time.Time) {
	last := -1
	for i, c := range changes {
		if c.Key == key && c.Seen.IsZero() && !c.Superseded && sameSet(c.Want, members) {
			last = i
		}
	}
	if last < 0 {
		return
	}
	changes[last].Seen = now
	for _, c := range changes[:last] {
		if c.Key == key && c.Seen.IsZero() {
			c.Superseded = true
		}
	}
}

// Resolutions is when each change was resolved: when it, or a later change
// of its pool that superseded it, was seen in state. A change not in it was
// lost.
func Resolutions(changes []*Change) map[*Change]time.Time {
	resolved := map[*Change]time.Time{}
	byPool := map[string][]*Change{}
	for _, c := range changes {
		byPool[c.Key] = append(byPool[c.Key], c)
	}
	for _, list := range byPool {
		var next time.Time
		for i := len(list) - 1; i >= 0; i-- {
			c := list[i]
			if !c.Seen.IsZero() {
				next = c.Seen
			}
			if !next.IsZero() {
				resolved[c] = next
			}
		}
	}
	return resolved
}
