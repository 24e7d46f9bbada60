package provider

import (
	"context"
	"log"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/vigie/terraform-provider-k8s/internal/pools"
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
		podPagesGC.low = podPagesGCPercent
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

// podPagesGCPercent is the collector's target while a fleet's Pods are
// listed page by page for its health checks, when the provider set the
// target (gcPercent): each page is garbage once its checks are taken, and
// the heap's goal was set by what the Services and slices left live, so at
// 200 the pages fill the heap up to three times that before a collection
// (bench/README.md). A GOGC of the user's is left as it is here too.
const podPagesGCPercent = 100

// podPagesGC lowers the collector's target while any read lists Pods page
// by page, and puts it back once none does. low is 0 (nothing changed)
// unless Serve set the process's target.
var podPagesGC scopedGC

// scopedGC sets the collector's target to low while at least one caller is
// between enter and leave, and back to what it was once the last leaves.
type scopedGC struct {
	mu    sync.Mutex
	low   int
	in    int
	saved int
}

func (g *scopedGC) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.low == 0 {
		return
	}
	if g.in == 0 {
		g.saved = debug.SetGCPercent(g.low)
	}
	g.in++
}

func (g *scopedGC) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.in == 0 { // none in: low is 0, or a leave too many
		return
	}
	if g.in--; g.in == 0 {
		debug.SetGCPercent(g.saved)
	}
}

// podPagesUnder is src whose PodPages (when it has them) run under g.
func podPagesUnder(g *scopedGC, src pools.Reader) pools.Reader {
	if pager, ok := src.(pools.PodPager); ok {
		return scopedPodPages{Reader: src, pager: pager, gc: g}
	}
	return src
}

type scopedPodPages struct {
	pools.Reader
	pager pools.PodPager
	gc    *scopedGC
}

func (r scopedPodPages) PodPages(ctx context.Context, namespace, selector string, each func(pods []corev1.Pod, restart bool)) error {
	r.gc.enter()
	defer r.gc.leave()
	return r.pager.PodPages(ctx, namespace, selector, each)
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
