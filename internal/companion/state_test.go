package companion

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/internal/provider"
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
	found, ignored, serial := got.found, got.ignored, got.id.serial
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

func TestAStateReadAsAStream(t *testing.T) {
	ctx := context.Background()
	t.Run("the state last read is not decoded again", func(t *testing.T) {
		first, err := poolsOfState(ctx, []byte(sampleState), "")
		if err != nil || first.same {
			t.Fatalf("first read: same %v, %v", first.same, err)
		}
		again, err := readStatePools(ctx, strings.NewReader(sampleState), "", first.id)
		if err != nil || !again.same || len(again.found) != 0 {
			t.Fatalf("the same lineage and serial: same %v, %d pools, %v; want same and nothing decoded", again.same, len(again.found), err)
		}
		next := strings.Replace(sampleState, `"serial": 7`, `"serial": 8`, 1)
		if got, err := readStatePools(ctx, strings.NewReader(next), "", first.id); err != nil || got.same || len(got.found) != 3 {
			t.Fatalf("a new serial: same %v, %d pools, %v; want the 3 pools read", got.same, len(got.found), err)
		}
	})
	t.Run("a resource whose instances come before its type", func(t *testing.T) {
		state := `{"version": 4, "serial": 1, "lineage": "l", "resources": [
		  {"instances": [{"attributes": {"service": "web", "namespace": "shop", "id": "shop/web", "endpoints": []}}],
		   "mode": "data", "type": "k8s_ready_endpoints", "name": "web", "provider": "provider[\"x/vigie/k8s\"]"},
		  {"instances": [{"attributes": {"id": "1", "input": {"value": [1, {"a": "b"}]}}}],
		   "mode": "managed", "type": "terraform_data", "name": "pool", "provider": "provider[\"terraform.io/builtin/terraform\"]"}]}`
		got, err := poolsOfState(ctx, []byte(state), "")
		if err != nil || len(got.found) != 1 || got.found[0].address != "data.k8s_ready_endpoints.web" {
			t.Fatalf("found %v, %v; want data.k8s_ready_endpoints.web", got.found, err)
		}
	})
	t.Run("a state cut in the middle of a fleet", func(t *testing.T) {
		state := `{"version": 4, "serial": 1, "lineage": "l", "resources": [
		  {"mode": "data", "type": "k8s_services", "name": "fleet", "provider": "provider[\"x/vigie/k8s\"]",
		   "instances": [{"attributes": {"namespaces": ["a"], "services": {"a/web": {"name": "web"`
		_, err := poolsOfState(ctx, []byte(state), "")
		if !errors.Is(err, provider.ErrStateSyntax) {
			t.Fatalf("err = %v, want the state's syntax named", err)
		}
	})
	t.Run("an empty output is no state", func(t *testing.T) {
		if _, err := poolsOfState(ctx, []byte(" \n"), ""); !errors.Is(err, errNoState) {
			t.Fatalf("err = %v, want errNoState", err)
		}
	})
}

// A fleet's Service this provider version cannot read makes the fleet
// undecodable, named with the Service; the stream goes on with the pools
// after it.
func TestAFleetWithAServiceThatCannotBeReadIsNamedAndTheNextPoolsRead(t *testing.T) {
	state := `{"version": 4, "serial": 1, "lineage": "l", "resources": [
	  {"mode": "data", "type": "k8s_services", "name": "fleet", "provider": "provider[\"x/vigie/k8s\"]",
	   "instances": [{"attributes": {"namespaces": ["a"], "services": {"a/web": {"endpoints": "not a list"}}, "skipped": []}}]},
	  {"mode": "data", "type": "k8s_ready_endpoints", "name": "api", "provider": "provider[\"x/vigie/k8s\"]",
	   "instances": [{"attributes": {"service": "api", "namespace": "shop", "id": "shop/api", "endpoints": []}}]}]}`
	got, err := poolsOfState(context.Background(), []byte(state), "")
	if err != nil {
		t.Fatal(err)
	}
	if reason := got.undecodable["data.k8s_services.fleet"]; !strings.Contains(reason, `services["a/web"]`) {
		t.Errorf("undecodable %v, want the fleet named with its Service a/web", got.undecodable)
	}
	if len(got.found) != 1 || got.found[0].address != "data.k8s_ready_endpoints.api" {
		t.Errorf("found %v, want data.k8s_ready_endpoints.api", got.found)
	}
}

// A state that the CLI does not finish writing within -state-timeout is an
// error that says how much was read, and the CLI is stopped.
func TestAStateTooLargeToReadInTimeIsAnErrorWithItsSize(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "terraform")
	// 2 MB of a state, then a CLI that never ends it.
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '{\"version\": 4, \"outputs\": {\"x\": \"'\nhead -c 2000000 /dev/zero | tr '\\0' a\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &cli{path: script, dir: dir, stopTimeout: time.Second, stateTimeout: 2 * time.Second}
	start := time.Now()
	err := c.statePull(context.Background(), func(r io.Reader) error {
		_, err := readStatePools(context.Background(), r, "", stateID{})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "did not end within 2s") || !strings.Contains(err.Error(), "2.0 MB read") {
		t.Fatalf("err = %v, want the bound and the 2.0 MB read", err)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Fatalf("statePull took %s: the CLI was not stopped", waited)
	}
}
