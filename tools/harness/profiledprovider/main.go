// Command profiledprovider is the k8s provider, served as main.go serves it,
// that writes a CPU profile of its process to
// $K8S_TF_CPUPROFILE_DIR/cpu-<pid>.pprof. make bench PROFILE=1 runs a plan
// with it (see bench/README.md); releases never contain it.
package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"

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
	if err := provider.Serve("profile", false); err != nil {
		log.Print(err)
	}
}
