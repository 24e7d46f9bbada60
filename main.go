package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/vigie/terraform-provider-k8s/internal/provider"
)

// version is set by goreleaser (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		// The provider's full source address, which Terraform needs to attach
		// a debugger to it.
		Address: "registry.terraform.io/vigie/k8s",
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err.Error())
	}
}
