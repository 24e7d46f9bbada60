package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/vigie/terraform-provider-k8s/internal/traffic"
)

// haproxy runs HAProxy on a rendered backend file (internal/traffic): a
// frontend on 127.0.0.1 and [::1], master-worker mode. It writes the port to
// the -ready file, reloads on SIGHUP (after rewriting the backend file: what
// a companion or a provisioner does), and stops on SIGTERM or SIGINT, when
// the process that started it exits, or after 30 minutes.
func haproxy(ctx context.Context, args []string) error {
	flags := flag.NewFlagSet("haproxy", flag.ExitOnError)
	dir := flags.String("dir", "", "directory of HAProxy's configuration and log (required)")
	backend := flags.String("backend", "", "the rendered backend file (required)")
	port := flags.Int("port", 0, "frontend port on 127.0.0.1 and [::1]; 0 picks a free one")
	ready := flags.String("ready", "", "file to write the port to once HAProxy serves")
	_ = flags.Parse(args)
	if *dir == "" || *backend == "" {
		return errors.New("haproxy needs -dir and -backend")
	}
	// Before the start: a SIGHUP that comes early is not lost.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	h, err := traffic.StartHAProxy(ctx, traffic.HAProxyOptions{Dir: *dir, Backend: *backend, Port: *port})
	if err != nil {
		return err
	}
	defer h.Stop()
	fmt.Printf("  HAProxy %d serving %s and %s (master-worker; reload: kill -HUP %d)\n", h.PID(), h.URL(false), h.URL(true), os.Getpid())
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte(strconv.Itoa(h.Port())+"\n"), 0o600); err != nil {
			return err
		}
	}
	parent := os.Getppid()
	deadline := time.After(30 * time.Minute)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-deadline:
			return nil
		case <-tick.C:
			if os.Getppid() != parent {
				return nil
			}
		case <-hup:
			if err := h.Reload(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "harness haproxy: reload:", err)
				continue
			}
			fmt.Println("  HAProxy reloaded: new workers on the new backend, the old ones finish their connections")
		}
	}
}
