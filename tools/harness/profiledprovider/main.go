// Command profiledprovider is the k8s provider, served as main.go serves it,
// that profiles its own process: with $K8S_TF_CPUPROFILE_DIR set, a CPU
// profile in cpu-<pid>.pprof there; with $K8S_TF_HEAPPROFILE_DIR set, heap
// profiles there, one byte in 4 KiB sampled: heap-<pid>.pprof written as it
// exits (alloc_space: every allocation of its life; inuse_space: what the
// last collection kept) and heap-peak-<pid>.pprof, rewritten each time the
// live heap that a collection leaves grows by an eighth, so that its
// inuse_space is the heap at its largest. make bench PROFILE=1 plans with it
// (see bench/README.md); releases never contain it.
package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"time"

	"github.com/vigie/terraform-provider-k8s/internal/provider"
)

// heapSampleRate is the heap profile's sampling rate (runtime.MemProfileRate,
// 512 KiB by default: too few samples for a read that allocates tens of MB).
const heapSampleRate = 4096

func init() {
	// As early as main's package can: the allocations of the packages'
	// own initialisation before it are sampled at the default rate.
	if os.Getenv("K8S_TF_HEAPPROFILE_DIR") != "" {
		runtime.MemProfileRate = heapSampleRate
	}
}

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
	if dir := os.Getenv("K8S_TF_HEAPPROFILE_DIR"); dir != "" {
		stop := watchPeak(filepath.Join(dir, fmt.Sprintf("heap-peak-%d.pprof", os.Getpid())))
		defer func() {
			stop()
			writeHeap(filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", os.Getpid())))
		}()
	}
	if err := provider.Serve("profile", false); err != nil {
		log.Print(err)
	}
}

// watchPeak writes the heap profile to path whenever the live heap after a
// collection (/gc/heap/live:bytes) has grown by an eighth since the last
// write, polling every 2 ms, until stop is called; stop writes it once more
// if the heap grew since.
func watchPeak(path string) (stop func()) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	live := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var written uint64
	check := func() {
		if n := live(); n > written+written/8 {
			writeHeap(path)
			written = n
		}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				check()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		check()
	}
}

func writeHeap(path string) {
	f, err := os.Create(path)
	if err != nil {
		log.Print(err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		log.Print(err)
	}
}
