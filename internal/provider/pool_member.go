package provider

import (
	"fmt"
	"net"
	"strconv"
)

// poolMember is what the provider functions need of one endpoint, whatever
// the data source (k8s_ready_endpoints or k8s_services) it comes from.
type poolMember struct {
	Address string
	Port    int64
	// Pod, NodeName and Zone are empty when the endpoint does not name them.
	Pod, NodeName, Zone string
	// Conditions, with the discovery/v1 defaults when absent: ready and
	// serving true, terminating false.
	Ready, Serving, Terminating bool
}

// hostPortMember is the address and port as a load balancer or a URL takes
// them: "10.0.0.7:8080", and for IPv6 the brackets of RFC 3986, "[fd00::7]:8080".
func hostPortMember(address string, port int64) string {
	return net.JoinHostPort(address, strconv.FormatInt(port, 10))
}

// checkMember refuses what is not an endpoint of the data sources: an address
// that is not an IP, a port outside 1-65535.
func checkMember(address string, port int64) error {
	if net.ParseIP(address) == nil {
		return fmt.Errorf("address %q is not an IP address", address)
	}
	if port < 1 || port > 65535 {
		return fmt.Errorf("port %d of %s is outside 1-65535", port, address)
	}
	return nil
}
