package kube

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// keysOf are the "namespace/name" of what s holds, sorted.
func keysOf(s *store) []string {
	var keys []string
	for _, p := range s.list("") {
		keys = append(keys, p.namespace.Value()+"/"+p.name)
	}
	slices.Sort(keys)
	return keys
}

// drain applies what the queue holds next (a list is one delta) to s, as
// the informer's loop does, and gives the changes it notices.
func drain(t *testing.T, s *store, fifo *cache.RealFIFO) []Change {
	t.Helper()
	var changes []Change
	if _, err := fifo.Pop(func(popped any, _ bool) error {
		return s.apply(popped, notifier(func(ch Change) { changes = append(changes, ch) }))
	}); err != nil {
		t.Fatal(err)
	}
	return changes
}

func sliceNamed(name, service string) *discoveryv1.EndpointSlice {
	s := labelledSlice(service)
	s.Name = name
	return s
}

func sliceNames(s *store, service string) []string {
	var names []string
	for _, p := range s.slicesOf("shop", service) {
		names = append(names, p.name)
	}
	slices.Sort(names)
	return names
}

// A relist that no longer has an object deletes it (the list comes as one
// delta, which the store compares with what it holds), and what is still
// there stays: the store answers for a Service's slices as the API would.
func TestARelistDeletesWhatWentWhileTheWatchWasDown(t *testing.T) {
	s := newStore()
	fifo := newQueue("test") // as newStoreInformer makes it
	if err := fifo.Replace([]any{sliceNamed("web-a", "web"), sliceNamed("web-b", "web"), sliceNamed("api-a", "api")}, "1"); err != nil {
		t.Fatal(err)
	}
	drain(t, s, fifo)
	if got := sliceNames(s, "web"); !slices.Equal(got, []string{"web-a", "web-b"}) {
		t.Fatalf("web's slices %v after the first list", got)
	}
	if err := fifo.Replace([]any{sliceNamed("web-a", "web")}, "2"); err != nil {
		t.Fatal(err)
	}
	changes := drain(t, s, fifo)
	if got := sliceNames(s, "web"); !slices.Equal(got, []string{"web-a"}) {
		t.Errorf("web's slices %v after the relist, want web-a alone", got)
	}
	if got := sliceNames(s, "api"); got != nil {
		t.Errorf("api's slices %v after the relist, want none", got)
	}
	if keys := keysOf(s); !slices.Equal(keys, []string{"shop/web-a"}) {
		t.Errorf("keys %v, want shop/web-a", keys)
	}
	var services []string
	for _, ch := range changes {
		services = append(services, ch.Service+"/"+ch.Name)
	}
	slices.Sort(services)
	if want := []string{"api/api-a", "web/web-a", "web/web-b"}; !slices.Equal(services, want) {
		t.Errorf("changes %v, want %v", services, want)
	}
}

// A slice relabelled for another Service leaves the old Service's slices
// and joins the new one's; its change names both.
func TestASliceRelabelledMovesToItsNewService(t *testing.T) {
	s := newStore()
	fifo := newQueue("test") // as newStoreInformer makes it
	if err := fifo.Add(sliceNamed("web-a", "web")); err != nil {
		t.Fatal(err)
	}
	drain(t, s, fifo)
	if err := fifo.Update(sliceNamed("web-a", "other")); err != nil {
		t.Fatal(err)
	}
	changes := drain(t, s, fifo)
	if got := sliceNames(s, "web"); got != nil {
		t.Errorf("web keeps %v", got)
	}
	if got := sliceNames(s, "other"); !slices.Equal(got, []string{"web-a"}) {
		t.Errorf("other's slices %v, want web-a", got)
	}
	if len(changes) != 2 || changes[0].Service != "web" || changes[1].Service != "other" {
		t.Errorf("changes %+v, want web's then other's", changes)
	}
	if err := fifo.Delete(sliceNamed("web-a", "other")); err != nil {
		t.Fatal(err)
	}
	drain(t, s, fifo)
	if got, keys := sliceNames(s, "other"), keysOf(s); got != nil || keys != nil {
		t.Errorf("after the delete: other's slices %v, keys %v", got, keys)
	}
}

// Labels packed into one string match a selector as the map they came from
// does.
func TestPackedLabelsMatchSelectorsAsTheirMapDoes(t *testing.T) {
	sets := []map[string]string{
		nil,
		{"app": "web"},
		{"app": "web", "tier": "front", "example.com/lb": "haproxy"},
		{"app": "", "team": "a"},
		{"ap": "p", "app": "webby"},
	}
	for _, selector := range []string{"", "app=web", "app!=web", "app", "!app", "app in (web,api)", "app notin (web)",
		"tier=front,app=web", "example.com/lb=haproxy", "app=", "team"} {
		sel, err := parseSelector(selector)
		if err != nil {
			t.Fatal(err)
		}
		for _, set := range sets {
			if got, want := sel.Matches(packedLabels(packLabels(set))), sel.Matches(labels.Set(set)); got != want {
				t.Errorf("selector %q on %v: packed labels match %v, the map %v", selector, set, got, want)
			}
		}
	}
}

// A Service's slices stay its slices whichever of them goes or comes first.
func TestAServicesSlicesAreKeptWhicheverGoesFirst(t *testing.T) {
	for _, tt := range []struct {
		name   string
		remove []string
		want   []string
	}{
		{"none removed", nil, []string{"web-a", "web-b", "web-c"}},
		{"the first put", []string{"web-a"}, []string{"web-b", "web-c"}},
		{"one put later", []string{"web-b"}, []string{"web-a", "web-c"}},
		{"the last put", []string{"web-c"}, []string{"web-a", "web-b"}},
		{"the first two", []string{"web-a", "web-b"}, []string{"web-c"}},
		{"all", []string{"web-b", "web-a", "web-c"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore()
			for _, name := range []string{"web-a", "web-b", "web-c"} {
				s.put(kept(t, sliceNamed(name, "web")))
			}
			for _, name := range tt.remove {
				if s.remove("shop", name) == nil {
					t.Fatalf("%s was not there to remove", name)
				}
			}
			if got := sliceNames(s, "web"); !slices.Equal(got, tt.want) {
				t.Errorf("web's slices %v, want %v", got, tt.want)
			}
			// The one left first is relabelled away, and a new one comes.
			if len(tt.want) > 0 {
				s.put(kept(t, sliceNamed(tt.want[0], "other")))
				s.put(kept(t, sliceNamed("web-d", "web")))
				want := append(slices.Clone(tt.want[1:]), "web-d")
				if got := sliceNames(s, "web"); !slices.Equal(got, want) {
					t.Errorf("after a relabel and a put: web's slices %v, want %v", got, want)
				}
				if got := sliceNames(s, "other"); !slices.Equal(got, tt.want[:1]) {
					t.Errorf("other's slices %v, want %v", got, tt.want[:1])
				}
			}
		})
	}
}

// A first list is one delta: the queue has synced once the store holds all
// of it, not before. Its objects may come packed already (the reflector's
// watch-list transforms them as they arrive) and are kept as they come. An
// object added before a relist is applied before it.
func TestAListIsAppliedWholeBeforeTheQueueHasSynced(t *testing.T) {
	s := newStore()
	fifo := newQueue("test") // as newStoreInformer makes it
	a, b := kept(t, sliceNamed("web-a", "web")), kept(t, sliceNamed("web-b", "web"))
	if err := fifo.Replace([]any{a, b}, "1"); err != nil {
		t.Fatal(err)
	}
	if fifo.HasSynced() {
		t.Fatal("synced before the list was applied")
	}
	if changes := drain(t, s, fifo); !fifo.HasSynced() || len(changes) != 2 {
		t.Fatalf("after the list: synced %v, %d changes; want synced, 2", fifo.HasSynced(), len(changes))
	}
	if s.get("shop", "web-a") != a || s.get("shop", "web-b") != b {
		t.Error("packed objects of the list were not kept as they came")
	}
	if err := fifo.Add(sliceNamed("early", "web")); err != nil {
		t.Fatal(err)
	}
	if err := fifo.Replace([]any{a, sliceNamed("early", "web")}, "2"); err != nil {
		t.Fatal(err)
	}
	if changes := drain(t, s, fifo); len(changes) != 1 || changes[0].Name != "early" {
		t.Fatalf("the add: changes %+v, want early's", changes)
	}
	if got := sliceNames(s, "web"); !slices.Equal(got, []string{"early", "web-a", "web-b"}) {
		t.Errorf("web's slices %v after the add, before the relist", got)
	}
	drain(t, s, fifo)
	if got := sliceNames(s, "web"); !slices.Equal(got, []string{"early", "web-a"}) {
		t.Errorf("web's slices %v after the relist, want early and web-a", got)
	}
}
