package soak

import (
	"slices"
	"testing"
	"time"
)

func TestStatePoolsAreEachTerraformDataInputByNameOrInstanceKey(t *testing.T) {
	raw := []byte(`{"version": 4, "resources": [
  {"mode": "data", "type": "k8s_ready_endpoints", "name": "soak_svc_00", "instances": [{"attributes": {"endpoints": []}}]},
  {"mode": "managed", "type": "terraform_data", "name": "soak_svc_00", "instances": [
    {"attributes": {"input": {"value": ["10.0.0.2:8080", "10.0.0.1:8080"], "type": ["list", "string"]}}}]},
  {"mode": "managed", "type": "terraform_data", "name": "fleet", "instances": [
    {"index_key": "soak-fleet/fleet-00", "attributes": {"input": {"value": ["10.0.1.1:8080"]}}},
    {"index_key": "soak-fleet/fleet-01", "attributes": {"input": {"value": []}}}]},
  {"mode": "managed", "type": "null_resource", "name": "other", "instances": [{"attributes": {}}]}
]}`)
	got, err := StatePools(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"soak_svc_00":         {"10.0.0.1:8080", "10.0.0.2:8080"},
		"soak-fleet/fleet-00": {"10.0.1.1:8080"},
		"soak-fleet/fleet-01": {},
	}
	if len(got) != len(want) {
		t.Errorf("pools %v, want %v", got, want)
	}
	for key, members := range want {
		if !slices.Equal(got[key], members) {
			t.Errorf("pool %s is %v, want %v", key, got[key], members)
		}
	}
	if _, err := StatePools([]byte(`{"version": 4, "resources": [`)); err == nil {
		t.Error("a half-written state parsed")
	}
}

func TestAChangeIsSeenWhenStateShowsItsPoolAndTheEarlierOnesOfItsPoolAreSuperseded(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	sec := func(n int) time.Time { return at.Add(time.Duration(n) * time.Second) }
	change := func(n int, key string, want ...string) *Change {
		return &Change{At: sec(n), Key: key, Want: want}
	}
	type look struct {
		at      int
		key     string
		members []string
	}
	for _, tt := range []struct {
		name    string
		changes []*Change
		state   []look
		// seen is, per change, the second it was seen (-1: not), and
		// superseded, resolved (-1: lost) likewise.
		seen, resolved []int
		superseded     []bool
	}{
		{
			name:       "one change, then state shows it",
			changes:    []*Change{change(0, "a", "1", "2")},
			state:      []look{{3, "a", []string{"1", "2"}}},
			seen:       []int{3},
			resolved:   []int{3},
			superseded: []bool{false},
		},
		{
			name:       "two changes of a pool, state shows only the second",
			changes:    []*Change{change(0, "a", "1"), change(1, "a", "1", "2")},
			state:      []look{{4, "a", []string{"1", "2"}}},
			seen:       []int{-1, 4},
			resolved:   []int{4, 4},
			superseded: []bool{true, false},
		},
		{
			name:       "state shows another pool's members: nothing of this pool is seen",
			changes:    []*Change{change(0, "a", "1"), change(0, "b", "1")},
			state:      []look{{2, "b", []string{"1"}}},
			seen:       []int{-1, 2},
			resolved:   []int{-1, 2},
			superseded: []bool{false, false},
		},
		{
			name:       "state shows a pool no change made: the change is lost",
			changes:    []*Change{change(0, "a", "1", "2")},
			state:      []look{{2, "a", []string{"1"}}, {5, "a", []string{"2"}}},
			seen:       []int{-1},
			resolved:   []int{-1},
			superseded: []bool{false},
		},
		{
			name:       "a change back to a pool state showed before is seen again",
			changes:    []*Change{change(0, "a", "1"), change(5, "a", "1", "2"), change(6, "a", "1")},
			state:      []look{{2, "a", []string{"1"}}, {8, "a", []string{"1", "2"}}, {9, "a", []string{"1"}}},
			seen:       []int{2, 8, 9},
			resolved:   []int{2, 8, 9},
			superseded: []bool{false, false, false},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, l := range tt.state {
				var made []*Change
				for _, c := range tt.changes {
					if !c.At.After(sec(l.at)) {
						made = append(made, c)
					}
				}
				MatchState(made, l.key, l.members, sec(l.at))
			}
			resolved := Resolutions(tt.changes)
			for i, c := range tt.changes {
				if want := secOrZero(sec, tt.seen[i]); !c.Seen.Equal(want) {
					t.Errorf("change %d seen at %v, want %v", i, c.Seen, want)
				}
				if c.Superseded != tt.superseded[i] {
					t.Errorf("change %d superseded %v, want %v", i, c.Superseded, tt.superseded[i])
				}
				if want := secOrZero(sec, tt.resolved[i]); !resolved[c].Equal(want) {
					t.Errorf("change %d resolved at %v, want %v", i, resolved[c], want)
				}
			}
		})
	}
}

func secOrZero(sec func(int) time.Time, n int) time.Time {
	if n < 0 {
		return time.Time{}
	}
	return sec(n)
}
