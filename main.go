package main

import (
	"flag"
	"log"

	"github.com/vigie/terraform-provider-k8s/internal/provider"
)

// version is set by goreleaser (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	if err := provider.Serve(version, debug); err != nil {
		log.Fatal(err.Error())
	}
}
