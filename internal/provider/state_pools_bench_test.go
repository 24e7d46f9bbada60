package provider

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// fleetStateJSON is the attributes of a k8s_services in state: n Services
// of 10 endpoints each, in one namespace.
func fleetStateJSON(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"namespaces": ["bench-scale-00"], "port_name": "http", "services": {`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"bench-scale-00/svc-%05d": {"namespace": "bench-scale-00", "name": "svc-%05d", "endpoints": [`, i, i)
		for e := range 10 {
			if e > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"address": "10.%d.%d.%d", "port": 8080, "ready": true, "serving": true, "terminating": false}`, i/250, i%250, e+1)
		}
		b.WriteString("]}")
	}
	b.WriteString(`}, "skipped": []}`)
	return []byte(b.String())
}

// BenchmarkStatePoolHeldBytesPerService: what the sync companion holds of
// a k8s_services of state for each of its Services (of 10 endpoints), once
// the state is read: the pool's name, the digest of its encoding and its
// members packed, and how they are kept.
func BenchmarkStatePoolHeldBytesPerService(b *testing.B) {
	const n = 5000
	attributes := fleetStateJSON(n)
	ctx := context.Background()
	for range b.N {
		before := heapAfterGC()
		pool, err := DecodeStatePool(ctx, ServicesType, attributes)
		if err != nil {
			b.Fatal(err)
		}
		after := heapAfterGC()
		b.ReportMetric(float64(after-before)/n, "bytes/service")
		runtime.KeepAlive(pool)
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
