package provider

import (
	"reflect"
	"strings"
	"testing"
)

func TestHostPortMember(t *testing.T) {
	for _, tc := range []struct {
		address string
		port    int64
		want    string
	}{
		{"10.0.0.7", 8080, "10.0.0.7:8080"},
		{"fd00::7", 8080, "[fd00::7]:8080"},
		{"::1", 1, "[::1]:1"},
		{"::ffff:10.0.0.7", 65535, "[::ffff:10.0.0.7]:65535"},
	} {
		if got := hostPortMember(tc.address, tc.port); got != tc.want {
			t.Errorf("hostPortMember(%q, %d) = %q, want %q", tc.address, tc.port, got, tc.want)
		}
	}
}

func TestCTSStatus(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		ready, serving, terminating bool
		want                        string
	}{
		{"ready", true, true, false, "passing"},
		{"ready while terminating (publishNotReadyAddresses)", true, true, true, "passing"},
		{"draining: serving while terminating", false, true, true, "warning"},
		{"terminating and no longer serving", false, false, true, "critical"},
		{"not ready, not terminating", false, false, false, "critical"},
		{"serving but neither ready nor terminating", false, true, false, "critical"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ctsStatus(poolMember{Ready: tc.ready, Serving: tc.serving, Terminating: tc.terminating})
			if got != tc.want {
				t.Errorf("status %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCTSInstancesNeverShareMapsWithTheirInput(t *testing.T) {
	labels := map[string]string{"app": "web"}
	services := []ctsService{{Namespace: "shop", Name: "web", Labels: labels, Endpoints: []poolMember{
		{Address: "10.0.0.7", Port: 80, Ready: true},
		{Address: "10.0.0.8", Port: 80, Ready: true},
	}}}
	got, err := ctsInstances(services)
	if err != nil {
		t.Fatal(err)
	}
	got["shop/web/10.0.0.7:80"].Meta["changed"] = "yes"
	if len(labels) != 1 || len(got["shop/web/10.0.0.8:80"].Meta) != 1 {
		t.Errorf("meta is shared: labels %v, other instance %v", labels, got["shop/web/10.0.0.8:80"].Meta)
	}
	want := ctsInstance{
		ID: "shop/web/10.0.0.8:80", Name: "web", Address: "10.0.0.8", NodeAddress: "10.0.0.8", Port: 80, Meta: map[string]string{"app": "web"},
		Tags: []string{}, Namespace: "shop", Status: "passing", NodeTaggedAddresses: map[string]string{},
		NodeMeta: map[string]string{}, CTSUserDefinedMeta: map[string]string{},
	}
	if !reflect.DeepEqual(got["shop/web/10.0.0.8:80"], want) {
		t.Errorf("instance\n%+v\nwant\n%+v", got["shop/web/10.0.0.8:80"], want)
	}
}

func TestCTSInstancesErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		services []ctsService
		want     string
	}{
		{"no name", []ctsService{{Namespace: "shop"}}, "needs a name and a namespace"},
		{"bad address", []ctsService{{Namespace: "shop", Name: "web", Endpoints: []poolMember{{Address: "web", Port: 80}}}},
			`service shop/web: address "web" is not an IP address`},
		{"same Service twice", []ctsService{
			{Namespace: "shop", Name: "web", Endpoints: []poolMember{{Address: "10.0.0.7", Port: 80}}},
			{Namespace: "shop", Name: "web", Endpoints: []poolMember{{Address: "10.0.0.7", Port: 80}}},
		}, "endpoint shop/web/10.0.0.7:80 is given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ctsInstances(tc.services)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
