package provider

import (
	"fmt"
	"maps"

	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/vigie/terraform-provider-k8s/internal/endpoints"
)

// Reads build their state as Terraform values directly. The framework's
// State.Set would walk a slice of structs by reflection, compiling a regexp
// for every field of every endpoint: most of the provider's CPU per read, and
// nearly all of it for a Service with thousands of endpoints. A test checks
// that these types are the schema's.

// endpointType is the type of one element of `endpoints`.
var endpointType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
	"address":      tftypes.String,
	"port":         tftypes.Number,
	"address_type": tftypes.String,
	"pod":          tftypes.String,
	"node_name":    tftypes.String,
	"zone":         tftypes.String,
	"hostname":     tftypes.String,
	"ready":        tftypes.Bool,
	"serving":      tftypes.Bool,
	"terminating":  tftypes.Bool,
	// local_endpoints: null for a pod, a count for a node.
	"local_endpoints": tftypes.Number,
}}

var endpointListType = tftypes.List{ElementType: endpointType}

// endpointsValue is the `endpoints` list of state: never null, an empty list
// when there is no endpoint.
func endpointsValue(eps []endpoints.Endpoint) tftypes.Value {
	elems := make([]tftypes.Value, len(eps))
	for i, e := range eps {
		local := tftypes.NewValue(tftypes.Number, nil)
		if e.LocalEndpoints != nil {
			local = tftypes.NewValue(tftypes.Number, int64(*e.LocalEndpoints))
		}
		elems[i] = tftypes.NewValue(endpointType, map[string]tftypes.Value{
			"address":         tftypes.NewValue(tftypes.String, e.Address),
			"port":            tftypes.NewValue(tftypes.Number, int64(e.Port)),
			"address_type":    tftypes.NewValue(tftypes.String, string(e.AddressType)),
			"pod":             stringOrNullValue(e.Pod),
			"node_name":       stringOrNullValue(e.NodeName),
			"zone":            stringOrNullValue(e.Zone),
			"hostname":        stringOrNullValue(e.Hostname),
			"ready":           tftypes.NewValue(tftypes.Bool, e.Ready),
			"serving":         tftypes.NewValue(tftypes.Bool, e.Serving),
			"terminating":     tftypes.NewValue(tftypes.Bool, e.Terminating),
			"local_endpoints": local,
		})
	}
	return tftypes.NewValue(endpointListType, elems)
}

// stringOrNullValue is s, or null when s is empty: the API gives no value.
func stringOrNullValue(s string) tftypes.Value {
	if s == "" {
		return tftypes.NewValue(tftypes.String, nil)
	}
	return tftypes.NewValue(tftypes.String, s)
}

// stateFromConfig is the state of a data source: its configuration as given,
// with the computed attributes set. Every computed attribute must be given,
// so that no unknown value from the configuration is left in state.
func stateFromConfig(config tftypes.Value, computed map[string]tftypes.Value) (tftypes.Value, error) {
	var given map[string]tftypes.Value
	if err := config.As(&given); err != nil {
		return tftypes.Value{}, fmt.Errorf("reading the configuration: %w", err)
	}
	// As hands out the configuration's own map: write to a copy, or the
	// request's configuration would change under the framework.
	attrs := maps.Clone(given)
	for name, v := range computed {
		if _, ok := attrs[name]; !ok {
			return tftypes.Value{}, fmt.Errorf("the schema has no attribute %q", name)
		}
		attrs[name] = v
	}
	if err := tftypes.ValidateValue(config.Type(), attrs); err != nil {
		return tftypes.Value{}, err
	}
	return tftypes.NewValue(config.Type(), attrs), nil
}
