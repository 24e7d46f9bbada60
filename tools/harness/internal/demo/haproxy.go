package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/traffic"
)

// HAProxyOptions are the flags of the command haproxy (main.go parses
// them): the directory of HAProxy's configuration and log, the rendered
// backend file, the frontend's port (0: a free one) and the file the port
// is written to once HAProxy serves ("": none).
type HAProxyOptions struct {
	Dir, Backend string
	Port         int
	Ready        string
}

// HAProxy runs HAProxy on a rendered backend file (test/traffic): a
// frontend on 127.0.0.1 and [::1], master-worker mode. It writes the port to
// the -ready file, reloads on SIGHUP (after rewriting the backend file: what
// a companion or a provisioner does), and stops on SIGTERM or SIGINT, when
// the process that started it exits, or after 30 minutes.
func HAProxy(ctx context.Context, o HAProxyOptions) error {
	if o.Dir == "" || o.Backend == "" {
		return errors.New("haproxy needs -dir and -backend")
	}
	// Before the start: a SIGHUP that comes early is not lost.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	h, err := traffic.StartHAProxy(ctx, traffic.HAProxyOptions{Dir: o.Dir, Backend: o.Backend, Port: o.Port})
	if err != nil {
		return err
	}
	defer h.Stop()
	fmt.Printf("  HAProxy %d serving %s and %s (master-worker; reload: kill -HUP %d)\n", h.PID(), h.URL(false), h.URL(true), os.Getpid())
	if o.Ready != "" {
		if err := os.WriteFile(o.Ready, []byte(strconv.Itoa(h.Port())+"\n"), 0o600); err != nil {
			return err
		}
	}
	wait := startHold(ctx, 30*time.Minute, time.Second)
	defer wait.stop()
	for {
		s, ok := wait.next(hup)
		if !ok {
			return nil
		}
		if s == nil {
			continue
		}
		if err := h.Reload(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "harness haproxy: reload:", err)
			continue
		}
		fmt.Println("  HAProxy reloaded: new workers on the new backend, the old ones finish their connections")
	}
}
