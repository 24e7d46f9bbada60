package companion

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// A state as `terraform state pull` gives it: a pool of the default
// provider configuration with for_each, one in a module, one of an alias,
// and resources the companion does not read.
const sampleState = `{
  "version": 4, "terraform_version": "1.11.0", "serial": 7, "lineage": "x",
  "resources": [
    {"mode": "data", "type": "k8s_ready_endpoints", "name": "web", "provider": "provider[\"example.org/vigie/k8s\"]",
     "instances": [
       {"index_key": "a", "attributes": {"service": "web", "namespace": "shop", "id": "shop/web", "endpoints": []}},
       {"index_key": "b", "attributes": {"service": "api", "namespace": "shop", "id": "shop/api", "endpoints": []}}
     ]},
    {"module": "module.lb[0]", "mode": "data", "type": "k8s_services", "name": "fleet", "provider": "provider[\"example.org/vigie/k8s\"]",
     "instances": [{"attributes": {"namespaces": ["b", "a"], "label_selector": "lb=haproxy", "services": {}, "skipped": []}}]},
    {"mode": "data", "type": "k8s_ready_endpoints", "name": "east", "provider": "provider[\"example.org/vigie/k8s\"].east",
     "instances": [{"attributes": {"service": "web", "namespace": "shop", "id": "shop/web", "endpoints": []}}]},
    {"mode": "managed", "type": "terraform_data", "name": "pool", "provider": "provider[\"terraform.io/builtin/terraform\"]",
     "instances": [{"attributes": {"id": "1"}}]}
  ]
}`

func TestPoolsOfStateAreThoseOfTheServedProviderConfiguration(t *testing.T) {
	got, err := poolsOfState(context.Background(), []byte(sampleState), "")
	if err != nil {
		t.Fatal(err)
	}
	found, ignored, serial := got.found, got.ignored, got.serial
	var addresses []string
	for _, in := range found {
		addresses = append(addresses, in.address)
	}
	want := []string{`data.k8s_ready_endpoints.web["a"]`, `data.k8s_ready_endpoints.web["b"]`, "module.lb[0].data.k8s_services.fleet"}
	if !reflect.DeepEqual(addresses, want) {
		t.Errorf("pools %v, want %v", addresses, want)
	}
	if serial != 7 {
		t.Errorf("serial %d, want 7", serial)
	}
	if len(ignored) != 1 || !strings.HasPrefix(ignored[0], "data.k8s_ready_endpoints.east ") {
		t.Errorf("ignored %v, want the alias east's pool", ignored)
	}
	if r := found[1].pool.Pool; r == nil || r.Namespace != "shop" || r.Service != "api" {
		t.Errorf("request of web[b] = %+v", found[1].pool.Pool)
	}
	if f := found[2].pool.Fleet; f == nil || !reflect.DeepEqual(f.Namespaces, []string{"a", "b"}) || f.Selector != "lb=haproxy" {
		t.Errorf("request of the fleet = %+v", found[2].pool.Fleet)
	}

	east, err := poolsOfState(context.Background(), []byte(sampleState), "east")
	if err != nil {
		t.Fatal(err)
	}
	if len(east.found) != 1 || east.found[0].address != "data.k8s_ready_endpoints.east" {
		t.Errorf("pools of alias east: %v", east.found)
	}
}

func TestAStateTheCompanionCannotReadIsAnError(t *testing.T) {
	for name, state := range map[string]string{
		"not JSON":        "{",
		"another version": `{"version": 3, "resources": []}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := poolsOfState(context.Background(), []byte(state), ""); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// A pool whose attributes this provider version cannot read (a newer
// version wrote them) is named and left out; the others are watched.
func TestAPoolTheCompanionCannotReadIsNamedAndTheOthersWatched(t *testing.T) {
	state := `{"version": 4, "resources": [
	  {"mode": "data", "type": "k8s_ready_endpoints", "name": "web", "provider": "provider[\"x/vigie/k8s\"]",
	   "instances": [{"attributes": {"service": "web", "endpoints": "x"}}]},
	  {"mode": "data", "type": "k8s_ready_endpoints", "name": "api", "provider": "provider[\"x/vigie/k8s\"]",
	   "instances": [{"attributes": {"service": "api", "namespace": "shop", "id": "shop/api", "endpoints": []}}]}]}`
	got, err := poolsOfState(context.Background(), []byte(state), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.found) != 1 || got.found[0].address != "data.k8s_ready_endpoints.api" {
		t.Errorf("found %v, want data.k8s_ready_endpoints.api alone", got.found)
	}
	if reason, ok := got.undecodable["data.k8s_ready_endpoints.web"]; !ok || !strings.Contains(reason, "endpoints") {
		t.Errorf("undecodable %v, want data.k8s_ready_endpoints.web named with what is wrong", got.undecodable)
	}
}

func TestProviderAlias(t *testing.T) {
	for in, want := range map[string]string{
		`provider["example.org/vigie/k8s"]`:                 "",
		`provider["example.org/vigie/k8s"].east`:            "east",
		`module.m.provider["example.org/vigie/k8s"].west`:   "west",
		`provider["example.org/vigie/k8s"].by_region["eu"]`: `by_region["eu"]`,
	} {
		if got := providerAlias(in); got != want {
			t.Errorf("providerAlias(%s) = %q, want %q", in, got, want)
		}
	}
}
