package kube

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// fifoOf is the queue an informer of s has, as newStoreInformer makes it.
func fifoOf(s *store) *cache.RealFIFO {
	return cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{KeyFunction: cache.MetaNamespaceKeyFunc, KnownObjects: s, Transformer: trimForCache})
}

// drain applies what the queue holds to s, as the informer's loop does,
// and gives the changes it notices.
func drain(t *testing.T, s *store, fifo *cache.RealFIFO, n int) []Change {
	t.Helper()
	var changes []Change
	for range n {
		if _, err := fifo.Pop(func(popped any, _ bool) error {
			return s.apply(popped, notifier(func(ch Change) { changes = append(changes, ch) }))
		}); err != nil {
			t.Fatal(err)
		}
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

// A relist that no longer has an object deletes it (the queue finds it
// through the store's keys), and what is still there stays: the store
// answers for a Service's slices as the API would.
func TestARelistDeletesWhatWentWhileTheWatchWasDown(t *testing.T) {
	s := newStore()
	fifo := fifoOf(s)
	if err := fifo.Replace([]any{sliceNamed("web-a", "web"), sliceNamed("web-b", "web"), sliceNamed("api-a", "api")}, "1"); err != nil {
		t.Fatal(err)
	}
	drain(t, s, fifo, 3)
	if got := sliceNames(s, "web"); !slices.Equal(got, []string{"web-a", "web-b"}) {
		t.Fatalf("web's slices %v after the first list", got)
	}
	if err := fifo.Replace([]any{sliceNamed("web-a", "web")}, "2"); err != nil {
		t.Fatal(err)
	}
	changes := drain(t, s, fifo, 3)
	if got := sliceNames(s, "web"); !slices.Equal(got, []string{"web-a"}) {
		t.Errorf("web's slices %v after the relist, want web-a alone", got)
	}
	if got := sliceNames(s, "api"); got != nil {
		t.Errorf("api's slices %v after the relist, want none", got)
	}
	if keys := s.ListKeys(); !slices.Equal(keys, []string{"shop/web-a"}) {
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
	fifo := fifoOf(s)
	if err := fifo.Add(sliceNamed("web-a", "web")); err != nil {
		t.Fatal(err)
	}
	drain(t, s, fifo, 1)
	if err := fifo.Update(sliceNamed("web-a", "other")); err != nil {
		t.Fatal(err)
	}
	changes := drain(t, s, fifo, 1)
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
	drain(t, s, fifo, 1)
	if got, keys := sliceNames(s, "other"), s.ListKeys(); got != nil || keys != nil {
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
