package main

import (
	"flag"
	"log"
	"os"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/vigie/terraform-provider-k8s/internal/provider"
)

// version is set by goreleaser (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	for name, value := range quietLogs(os.Environ()) {
		if err := os.Setenv(name, value); err != nil {
			log.Fatal(err.Error())
		}
	}
	var opts []tf6server.ServeOpt
	if debug {
		opts = append(opts, tf6server.WithManagedDebug())
	}
	newServer := provider.NewServer(version)
	// The provider's full source address, which Terraform needs to attach a
	// debugger to it.
	err := tf6server.Serve("registry.terraform.io/vigie/k8s", func() tfprotov6.ProviderServer {
		server, err := newServer()
		if err != nil {
			log.Fatal(err.Error())
		}
		return server
	}, opts...)
	if err != nil {
		log.Fatal(err.Error())
	}
}

// quietLogs are the variables that turn the SDK's, the framework's and the
// provider's own logs off when the user asked for no log (no TF_LOG*
// variable at all). Terraform throws those logs away then, but the provider
// would still build every entry, trace level included, encode it as JSON
// and send it over: a sixth of the provider's CPU in a plan of many reads.
// Any TF_LOG* variable leaves logging as the SDK sets it up.
func quietLogs(environ []string) map[string]string {
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
