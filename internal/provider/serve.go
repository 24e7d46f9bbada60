package provider

import (
	"log"
	"os"
	"runtime/debug"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
)

// Address is the provider's source address as tf6server prints it in debug
// mode's TF_REATTACH_PROVIDERS. Terraform and OpenTofu read that key as a
// source address, so the short form resolves to each CLI's own default
// registry, as `source = "vigie/k8s"` in a configuration does.
const Address = "vigie/k8s"

// Serve serves the provider over the plugin protocol, as main and the
// bench's profiled build do: logs off unless the user asked for them
// (QuietLogs), the server of NewServer (the direct path beside the
// framework's), and debug mode on request.
func Serve(version string, debugMode bool) error {
	for name, value := range QuietLogs(os.Environ()) {
		if err := os.Setenv(name, value); err != nil {
			return err
		}
	}
	if percent, set := gcPercent(os.Getenv("GOGC")); set {
		debug.SetGCPercent(percent)
	}
	var opts []tf6server.ServeOpt
	if debugMode {
		opts = append(opts, tf6server.WithManagedDebug())
	}
	newServer := NewServer(version)
	return tf6server.Serve(Address, func() tfprotov6.ProviderServer {
		server, err := newServer()
		if err != nil {
			// The framework fails only on a provider that defines two data
			// sources or functions of one name: a bug of this build.
			log.Fatal(err.Error())
		}
		return server
	}, opts...)
}

// gcPercent is the garbage collector's target for the provider's process
// when the user set no GOGC: 200 instead of Go's 100. Terraform starts the
// provider three times per plan, each process lives well under a second and
// most of what it allocates is garbage at once (requests, responses, state),
// so collecting half as often saves CPU for a little more peak memory
// (measured in bench/README.md). A GOGC of the user's is left as it is.
func gcPercent(gogc string) (int, bool) {
	if gogc != "" {
		return 0, false
	}
	return 200, true
}

// QuietLogs are the variables that turn the SDK's, the framework's and the
// provider's own logs off when the user asked for no log (no TF_LOG*
// variable at all). Terraform throws those logs away then, but the provider
// would still build every entry, trace level included, encode it as JSON
// and send it over, in every call of a plan (bench/README.md).
// Any TF_LOG* variable leaves logging as the SDK sets it up.
func QuietLogs(environ []string) map[string]string {
	for _, kv := range environ {
		if strings.HasPrefix(kv, "TF_LOG") {
			return nil
		}
	}
	return map[string]string{
		"TF_LOG_SDK":           "off",
		"TF_LOG_SDK_PROTO":     "off",
		"TF_LOG_SDK_FRAMEWORK": "off",
		"TF_LOG_PROVIDER_K8S":  "off",
	}
}
