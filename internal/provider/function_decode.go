package provider

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// Decoding of the values the functions take as `dynamic`: the objects of
// k8s_ready_endpoints and k8s_services as Terraform hands them over, or the
// same shapes written as literals (objects where the data sources have maps,
// tuples where they have lists).

// fieldsOf gives the attributes of an object or the elements of a map.
func fieldsOf(v tftypes.Value) (map[string]tftypes.Value, bool) {
	if v.IsNull() || !v.IsKnown() {
		return nil, false
	}
	switch v.Type().(type) {
	case tftypes.Object, tftypes.Map:
		var m map[string]tftypes.Value
		if err := v.As(&m); err != nil {
			return nil, false
		}
		return m, true
	}
	return nil, false
}

// elementsOf gives the elements of a list, tuple or set.
func elementsOf(v tftypes.Value) ([]tftypes.Value, bool) {
	if v.IsNull() || !v.IsKnown() {
		return nil, false
	}
	switch v.Type().(type) {
	case tftypes.List, tftypes.Tuple, tftypes.Set:
		var l []tftypes.Value
		if err := v.As(&l); err != nil {
			return nil, false
		}
		return l, true
	}
	return nil, false
}

// optionalString is the string attribute name of fields, "" when absent or null.
func optionalString(fields map[string]tftypes.Value, name string) (string, error) {
	v, ok := fields[name]
	if !ok || v.IsNull() {
		return "", nil
	}
	if !v.Type().Is(tftypes.String) {
		return "", fmt.Errorf("%s must be a string", name)
	}
	var s string
	if err := v.As(&s); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// requiredString is the string attribute name of fields, an error when
// absent, null or empty.
func requiredString(fields map[string]tftypes.Value, name string) (string, error) {
	s, err := optionalString(fields, name)
	if err == nil && s == "" {
		err = fmt.Errorf("%s is missing", name)
	}
	return s, err
}

// firstString is the first of the string attributes names of fields that is
// set and not empty, "" when none is.
func firstString(fields map[string]tftypes.Value, names ...string) (string, error) {
	for _, name := range names {
		if s, err := optionalString(fields, name); err != nil || s != "" {
			return s, err
		}
	}
	return "", nil
}

// optionalBool is the bool attribute name of fields, def when absent or null.
func optionalBool(fields map[string]tftypes.Value, name string, def bool) (bool, error) {
	v, ok := fields[name]
	if !ok || v.IsNull() {
		return def, nil
	}
	if !v.Type().Is(tftypes.Bool) {
		return false, fmt.Errorf("%s must be a bool", name)
	}
	var b bool
	if err := v.As(&b); err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	return b, nil
}

// requiredInt is the whole-number attribute name of fields.
func requiredInt(fields map[string]tftypes.Value, name string) (int64, error) {
	v, ok := fields[name]
	if !ok || v.IsNull() {
		return 0, fmt.Errorf("%s is missing", name)
	}
	if !v.Type().Is(tftypes.Number) {
		return 0, fmt.Errorf("%s must be a number", name)
	}
	var f big.Float
	if err := v.As(&f); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	n, acc := f.Int64()
	if acc != big.Exact {
		return 0, fmt.Errorf("%s must be a whole number, not %s", name, f.String())
	}
	return n, nil
}

// stringMap is a map (or object) of strings; absent or null is empty.
func stringMap(fields map[string]tftypes.Value, name string) (map[string]string, error) {
	v, ok := fields[name]
	if !ok || v.IsNull() {
		return map[string]string{}, nil
	}
	elems, ok := fieldsOf(v)
	if !ok {
		return nil, fmt.Errorf("%s must be a map of strings", name)
	}
	out := make(map[string]string, len(elems))
	for k := range elems {
		s, err := optionalString(elems, k)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[k] = s
	}
	return out, nil
}

// decodeEndpoints reads a list of endpoint objects as the data sources give
// them: address and port required, the rest optional.
func decodeEndpoints(v tftypes.Value) ([]poolMember, error) {
	elems, ok := elementsOf(v)
	if !ok {
		return nil, errors.New("endpoints must be a list of objects with address and port")
	}
	out := make([]poolMember, 0, len(elems))
	for i, ev := range elems {
		e, err := decodeEndpoint(ev)
		if err != nil {
			return nil, fmt.Errorf("endpoint %d: %w", i, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func decodeEndpoint(v tftypes.Value) (poolMember, error) {
	fields, ok := fieldsOf(v)
	if !ok {
		return poolMember{}, errors.New("not an object with address and port")
	}
	var e poolMember
	var err error
	if e.Address, err = requiredString(fields, "address"); err != nil {
		return e, err
	}
	if e.Port, err = requiredInt(fields, "port"); err != nil {
		return e, err
	}
	if err := checkMember(e.Address, e.Port); err != nil {
		return e, err
	}
	for name, to := range map[string]*string{"pod": &e.Pod, "node_name": &e.NodeName, "zone": &e.Zone} {
		if *to, err = optionalString(fields, name); err != nil {
			return e, err
		}
	}
	// The discovery/v1 defaults for absent conditions.
	for _, c := range []struct {
		name string
		to   *bool
		def  bool
	}{{"ready", &e.Ready, true}, {"serving", &e.Serving, true}, {"terminating", &e.Terminating, false}} {
		if *c.to, err = optionalBool(fields, c.name, c.def); err != nil {
			return e, err
		}
	}
	return e, nil
}

// decodeService reads one Service: an object with endpoints, a name (or
// service, as k8s_ready_endpoints calls it), a namespace ("default" when
// absent) and optional labels.
func decodeService(fields map[string]tftypes.Value) (ctsService, error) {
	var s ctsService
	var err error
	if s.Name, err = firstString(fields, "name", "service"); err != nil {
		return s, err
	}
	if s.Name == "" {
		return s, errors.New("the service has no name: give name (or service, as k8s_ready_endpoints does)")
	}
	if s.Namespace, err = optionalString(fields, "namespace"); err != nil {
		return s, err
	}
	if s.Namespace == "" {
		s.Namespace = defaultNamespace
	}
	if s.Labels, err = stringMap(fields, "labels"); err != nil {
		return s, err
	}
	if s.Endpoints, err = decodeEndpoints(fields["endpoints"]); err != nil {
		return s, err
	}
	return s, nil
}

// decodeServices reads either one Service (an object with endpoints: a
// k8s_ready_endpoints data source, or an object written for the call) or a
// map of them, as k8s_services gives in its services attribute.
func decodeServices(v tftypes.Value) ([]ctsService, error) {
	fields, ok := fieldsOf(v)
	if !ok {
		return nil, errors.New("expected a k8s_ready_endpoints data source, an object with name, namespace and endpoints, " +
			"or the services map of k8s_services")
	}
	if _, single := fields["endpoints"]; single {
		s, err := decodeService(fields)
		if err != nil {
			return nil, err
		}
		return []ctsService{s}, nil
	}
	out := make([]ctsService, 0, len(fields))
	for key, sv := range fields {
		sf, ok := fieldsOf(sv)
		if !ok {
			return nil, fmt.Errorf("services[%q] is not an object with name, namespace and endpoints", key)
		}
		if _, has := sf["endpoints"]; !has {
			return nil, fmt.Errorf("services[%q] has no endpoints", key)
		}
		s, err := decodeService(sf)
		if err != nil {
			return nil, fmt.Errorf("services[%q]: %w", key, err)
		}
		out = append(out, s)
	}
	return out, nil
}
