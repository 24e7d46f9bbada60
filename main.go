package main

import (
	"flag"
	"log"
	"os"

	"github.com/vigie/terraform-provider-k8s/internal/companion"
	"github.com/vigie/terraform-provider-k8s/internal/provider"
)

// version is set by goreleaser (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	// `terraform-provider-k8s sync` and `check` are the companion; Terraform
	// starts the provider with no argument, and gets the plugin server.
	if command, ok := companion.IsCommand(os.Args[1:]); ok {
		os.Exit(companion.Main(command, os.Args[2:], os.Stdout, os.Stderr))
	}
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	if err := provider.Serve(version, debug); err != nil {
		log.Fatal(err.Error())
	}
}
