// Command profiledprovider is the k8s provider, served as main.go serves it,
// that writes a CPU profile of its process to
// $K8S_TF_CPUPROFILE_DIR/cpu-<pid>.pprof. make bench PROFILE=1 runs a plan
// with it (see bench/README.md); releases never contain it.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/vigie/terraform-provider-k8s/internal/provider"
)

func main() {
	if dir := os.Getenv("K8S_TF_CPUPROFILE_DIR"); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", os.Getpid())))
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	err := providerserver.Serve(context.Background(), provider.New("profile"), providerserver.ServeOpts{
		// Only debug mode uses the address; it must have a hostname.
		Address: "local.invalid/vigie/k8s",
	})
	if err != nil {
		log.Print(err)
	}
}
