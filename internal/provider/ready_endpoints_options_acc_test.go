package provider

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// The filters and guards beyond the contract, against the real control plane.

func TestAccTerminatingEndpointsPolicies(t *testing.T) {
	c := accCluster(t)
	ns := c.webNamespace(t, webServiceSpec("", httpPort),
		webPod("web-1", true, "10.244.7.1"), webPod("web-2", true, "10.244.7.2"),
		webPod("web-3", false, "10.244.7.3"))
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 2, 3))
	c.deletePod(t, ns, "web-2", 300) // draining: not ready, serving, terminating
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 1, 3))

	ready1 := podEndpoint("10.244.7.1", 8080, "IPv4", "web-1")
	draining2 := podEndpointWith("10.244.7.2", 8080, "IPv4", "web-2", false, true, true)
	with := func(policy string) string {
		return c.providerConfig() + dataSource(ns, fmt.Sprintf("terminating_endpoints = %q", policy))
	}
	parallelSteps(t,
		resource.TestStep{
			Config: c.providerConfig() + dataSource(ns, ""),
			ConfigStateChecks: []statecheck.StateCheck{
				expectEndpoints(ready1),
				webValue("terminating_endpoints", knownvalue.StringExact("exclude")),
			},
		},
		resource.TestStep{Config: with("include"), ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(ready1, draining2)}},
		resource.TestStep{Config: with("fallback"), ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(ready1)}},
		resource.TestStep{
			PreConfig: func() {
				c.deletePod(t, ns, "web-1", 0)
				c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 0, 2))
			},
			Config:            with("fallback"),
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(draining2)},
		},
		resource.TestStep{Config: with("exclude"), ConfigStateChecks: []statecheck.StateCheck{expectEndpoints()}},
	)
}

func TestAccAddressFamilyAndZoneFilters(t *testing.T) {
	c := accCluster(t)
	ns := c.webNamespace(t, dualStackWebServiceSpec("", corev1.IPv4Protocol, corev1.IPv6Protocol), webPod("web-a", true, "10.244.8.1", "fd00:10:244::8:1"))
	c.runPod(t, ns, podSpec{name: "web-b", labels: webLabels, ips: []string{"10.244.8.2", "fd00:10:244::8:2"}, ready: true, node: accNodeB})
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 2, 2), endpointCount(discoveryv1.AddressTypeIPv6, 2, 2))

	inZoneB := func(addr, family string) knownvalue.Check {
		return endpointValue(addr, 8080, family, knownvalue.StringExact("web-b"), knownvalue.StringExact(accNodeB),
			knownvalue.StringExact(accZoneB), knownvalue.Null())
	}
	parallelSteps(t,
		resource.TestStep{
			Config: c.providerConfig() + dataSource(ns, `address_type = "IPv6"`),
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(
				podEndpoint("fd00:10:244::8:1", 8080, "IPv6", "web-a"),
				inZoneB("fd00:10:244::8:2", "IPv6"),
			)},
		},
		resource.TestStep{
			Config:            c.providerConfig() + dataSource(ns, fmt.Sprintf("zones = [%q]", accZoneB)),
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(inZoneB("10.244.8.2", "IPv4"), inZoneB("fd00:10:244::8:2", "IPv6"))},
		},
		resource.TestStep{
			Config:            c.providerConfig() + dataSource(ns, fmt.Sprintf("address_type = \"IPv4\"\n  zones = [%q, \"elsewhere\"]", accZoneB)),
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(inZoneB("10.244.8.2", "IPv4"))},
		},
		resource.TestStep{
			Config:            c.providerConfig() + dataSource(ns, `zones = ["elsewhere"]`),
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints()},
		},
	)
}

func TestAccMinReadyStopsTheReadWithoutWaiting(t *testing.T) {
	c, ns := oneReadyPod(t, "10.244.9.1")

	parallelSteps(t,
		c.readsOnePod(ns, "min_ready = 1", "10.244.9.1"),
		resource.TestStep{
			Config: c.providerConfig() + dataSource(ns, "min_ready = 2"),
			ExpectError: phrase("Too Few Ready Endpoints", fmt.Sprintf("Service %s/web has too few ready endpoints", ns),
				"found 1, asked for 2 (min_ready)", "does not wait"),
		},
	)
}

func TestAccMinReadyWaitsForTheRolloutWithAWatch(t *testing.T) {
	c, ns := oneReadyPod(t, "10.244.10.1")
	// The documented Role, plus watch, through a proxy that counts requests.
	watchRole := slices.Clone(documentedRole)
	watchRole[1].Verbs = []string{"list", "watch"}
	proxy := c.startFaultProxy(t, nil)
	withWatch := proxy.providerVia(c.identityToken(t, ns, "watcher", watchRole), "15s")
	withTimeout := func(provider string, minReady int, timeout string) string {
		return provider + dataSource(ns, fmt.Sprintf("min_ready = %d\n  timeouts {\n    read = %q\n  }", minReady, timeout))
	}
	// Without watch on endpointslices, waiting fails with the rule to add.
	noWatch := kubeconfigProvider(c.identity(t, ns, "no-watch", documentedRole))

	parallelSteps(t,
		resource.TestStep{
			// The second pod becomes ready while the read waits.
			PreConfig: func() {
				proxy.changeOnceWatching(t, func() {
					c.runPod(t, ns, podSpec{name: "web-2", labels: webLabels, ips: []string{"10.244.10.2"}, ready: true})
				})
			},
			Config: withTimeout(withWatch, 2, "2m"),
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(
				podEndpoint("10.244.10.1", 8080, "IPv4", "web-1"),
				podEndpoint("10.244.10.2", 8080, "IPv4", "web-2"),
			)},
		},
		resource.TestStep{
			PreConfig: func() {
				// Only the first read had to wait, and it waited on one WATCH.
				if got := proxy.count("WATCH endpointslices"); got != 1 {
					t.Errorf("%d WATCH requests while waiting, want 1", got)
				}
			},
			Config: withTimeout(withWatch, 3, "3s"),
			ExpectError: phrase("Too Few Ready Endpoints", "found 2, asked for 3 (min_ready)",
				"waited 3s (timeouts.read)"),
		},
		resource.TestStep{
			Config: withTimeout(noWatch, 3, "30s"),
			ExpectError: phrase("Unable to Watch EndpointSlices", "Waiting needs `watch` on `endpointslices`",
				fmt.Sprintf("watch endpointslices of service %s/web:", ns), "forbidden"),
		},
	)
}

func TestAccExpiryAnnotationOnMirroredEndpoints(t *testing.T) {
	c := accCluster(t)
	ns := c.namespace(t)
	c.createService(t, selectorlessWebService(ns, 9090))
	// A registrar heartbeats a hand-managed Endpoints object; Kubernetes
	// mirrors it, with its annotations, into EndpointSlices.
	const annotation = "lb.example.com/expires"
	setEndpoints := func(expires string) {
		eps := &corev1.Endpoints{ //nolint:staticcheck // a hand-managed Endpoints object is the case under test
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Annotations: map[string]string{annotation: expires}},
			Subsets: []corev1.EndpointSubset{{ //nolint:staticcheck // idem
				Addresses: []corev1.EndpointAddress{{IP: "192.0.2.20"}},
				Ports:     []corev1.EndpointPort{{Name: "http", Port: 9090}}, //nolint:staticcheck // idem
			}},
		}
		api := c.client.CoreV1().Endpoints(ns) //nolint:staticcheck // idem
		existing, err := api.Get(c.ctx(t), "web", metav1.GetOptions{})
		if err == nil {
			eps.ResourceVersion = existing.ResourceVersion
			_, err = api.Update(c.ctx(t), eps, metav1.UpdateOptions{})
		} else {
			_, err = api.Create(c.ctx(t), eps, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		c.waitForSlices(t, ns, func(slices []discoveryv1.EndpointSlice) string {
			for _, s := range slices {
				if s.Annotations[annotation] == expires && len(s.Endpoints) == 1 {
					return ""
				}
			}
			return "a mirrored slice annotated " + annotation + "=" + expires
		})
	}
	config := c.providerConfig() + dataSource(ns, fmt.Sprintf("expiry_annotation = %q", annotation))
	parallelSteps(t,
		resource.TestStep{
			PreConfig:         func() { setEndpoints(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)) },
			Config:            config,
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(bareIPv4("192.0.2.20", 9090))},
		},
		resource.TestStep{
			// The registrar stopped heartbeating an hour ago.
			PreConfig:         func() { setEndpoints(fmt.Sprint(time.Now().Add(-time.Hour).Unix())) },
			Config:            config,
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints()},
		},
		resource.TestStep{
			// Without expiry_annotation the stale endpoint is still given.
			Config:            c.providerConfig() + dataSource(ns, ""),
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(bareIPv4("192.0.2.20", 9090))},
		},
		resource.TestStep{
			// An unreadable time keeps the endpoint (and warns).
			PreConfig:         func() { setEndpoints("whenever") },
			Config:            config,
			ConfigStateChecks: []statecheck.StateCheck{expectEndpoints(bareIPv4("192.0.2.20", 9090))},
		},
	)
}

func TestAccLastChangeTriggerTime(t *testing.T) {
	c := accCluster(t)
	ns := c.webNamespace(t, webServiceSpec("", httpPort),
		webPod("web-1", true, "10.244.11.1"), webPod("web-2", true, "10.244.11.2"))
	c.waitForSlices(t, ns, endpointCount(discoveryv1.AddressTypeIPv4, 2, 2))
	list, err := c.client.DiscoveryV1().EndpointSlices(ns).List(c.ctx(t), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
	if err != nil {
		t.Fatal(err)
	}
	var latest time.Time
	for _, s := range list.Items {
		if v, err := time.Parse(time.RFC3339Nano, s.Annotations[endpoints.LastChangeTriggerTimeAnnotation]); err == nil && v.After(latest) {
			latest = v
		}
	}
	if latest.IsZero() {
		t.Fatal("the EndpointSlice controller wrote no last-change-trigger-time")
	}
	parallelSteps(t, resource.TestStep{
		Config: c.providerConfig() + dataSource(ns, ""),
		ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("data.k8s_ready_endpoints.web",
			tfjsonpath.New("last_change_trigger_time"), knownvalue.StringExact(latest.UTC().Format(time.RFC3339Nano)))},
	})
}
