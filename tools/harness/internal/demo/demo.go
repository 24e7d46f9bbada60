// Package demo is what make demo shows: the demo's Service with pods in
// every state (command demo), and HAProxy on a rendered backend, reloaded
// by the companion (command haproxy).
package demo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

func clientFor(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	// client-go's default of 5 QPS would turn a thousand pods into minutes.
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.UserAgent = "harness"
	return kubernetes.NewForConfig(cfg)
}

// Options are the demo's flags (main.go parses them).
type Options struct {
	// Kubeconfig is the cluster's, Namespace the demo's (deleted first if
	// it exists).
	Kubeconfig, Namespace string
	// Network gives each pod a real network.
	Network bool
	// Hold and AddPod are files: see Run.
	Hold, AddPod string
}

// Run makes the demo's dual-stack Service web with pods in every state:
// two ready, one starting (not ready), one terminating; then waits for the
// EndpointSlice controller and prints the slices. With -network, each pod
// gets a real network (testcluster.NetKubelet: its own network namespace,
// its IPs, a server that answers with its name), and with -hold the command
// then writes the file named and keeps the networks until SIGTERM or SIGINT,
// until the process that started it exits, or for 30 minutes at most.
// With -add-pod FILE, it then waits for FILE to exist and adds a ready pod,
// web-3 (with -network, serving): what the companion of the demo picks up.
func Run(ctx context.Context, o Options) error {
	client, err := clientFor(o.Kubeconfig)
	if err != nil {
		return err
	}
	holdCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	runPod := func(ctx context.Context, pod testcluster.Pod) error {
		return testcluster.RunPod(ctx, client, o.Namespace, pod)
	}
	if o.Network {
		n, err := testcluster.StartNetwork(ctx)
		if err != nil {
			return err
		}
		defer n.Close()
		k, err := testcluster.StartNetKubelet(ctx, client, n)
		if err != nil {
			return err
		}
		defer k.Stop()
		runPod = func(ctx context.Context, pod testcluster.Pod) error { return k.RunPod(ctx, o.Namespace, pod) }
	}
	if err := testcluster.EnsureNode(ctx, client, "demo-node", "demo-zone-a"); err != nil {
		return err
	}
	if err := testcluster.DeleteNamespace(ctx, client, o.Namespace); err != nil {
		return err
	}
	for { // a namespace being deleted cannot be created again
		_, err := client.CoreV1().Namespaces().Get(ctx, o.Namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s is still being deleted: %w", o.Namespace, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := testcluster.WaitForServiceAccount(ctx, client, o.Namespace, time.Minute); err != nil {
		return err
	}
	dual := corev1.IPFamilyPolicyPreferDualStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector:       map[string]string{"app": "web"},
			IPFamilyPolicy: &dual,
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports:          []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := client.CoreV1().Services(o.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, p := range []struct {
		name  string
		ready bool
		last  int
	}{{"web-1", true, 10}, {"web-2", true, 9}, {"web-starting", false, 11}, {"web-stopping", true, 12}} {
		pod := testcluster.Pod{
			Name: p.name, Labels: map[string]string{"app": "web"}, Ready: p.ready, Node: "demo-node",
			IPs:   []string{fmt.Sprintf("10.244.0.%d", p.last), fmt.Sprintf("fd00:10:244::%d", p.last)},
			Ports: map[string]int32{"http": 8080},
		}
		if err := runPod(ctx, pod); err != nil {
			return err
		}
		fmt.Printf("  %-16s ready=%-5t %s %s\n", pod.Name, pod.Ready, pod.IPs[0], pod.IPs[1])
	}
	// Deleted with a grace period and no kubelet to confirm it, this pod stays
	// terminating: Kubernetes marks it not ready.
	grace := int64(300)
	if err := client.CoreV1().Pods(o.Namespace).Delete(ctx, "web-stopping", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		return err
	}
	fmt.Println("  web-stopping     deleted with a 300 s grace period: terminating")
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		if err := testcluster.WaitForSlices(ctx, client, o.Namespace, "web", time.Minute, testcluster.EndpointCount(family, 2, 4)); err != nil {
			return err
		}
	}
	slices, err := client.DiscoveryV1().EndpointSlices(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
	if err != nil {
		return err
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SLICE\tTYPE\tADDRESS\tPOD\tREADY\tTERMINATING")
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			pod := ""
			if e.TargetRef != nil {
				pod = e.TargetRef.Name
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.AddressType, strings.Join(e.Addresses, ","), pod, boolText(e.Conditions.Ready), boolText(e.Conditions.Terminating))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if o.Hold == "" {
		return nil
	}
	if err := os.WriteFile(o.Hold, []byte("serving\n"), 0o600); err != nil {
		return err
	}
	if o.AddPod != "" {
		if !waitForFile(holdCtx, o.AddPod, 30*time.Minute) {
			return nil
		}
		pod := testcluster.Pod{
			Name: "web-3", Labels: map[string]string{"app": "web"}, Ready: true, Node: "demo-node",
			IPs:   []string{"10.244.0.13", "fd00:10:244::13"},
			Ports: map[string]int32{"http": 8080},
		}
		addCtx, cancel := context.WithTimeout(holdCtx, time.Minute)
		err := runPod(addCtx, pod)
		cancel()
		if err != nil {
			return err
		}
		fmt.Printf("  %-16s ready=%-5t %s %s\n", pod.Name, pod.Ready, pod.IPs[0], pod.IPs[1])
		if err := os.WriteFile(o.AddPod+".done", []byte("added\n"), 0o600); err != nil {
			return err
		}
	}
	holdUntilStopped(holdCtx, 30*time.Minute)
	return nil
}

// waitForFile is whether name exists before ctx ends, the process that
// started this one exits, or bound passes.
func waitForFile(ctx context.Context, name string, bound time.Duration) bool {
	h := startHold(ctx, bound, 100*time.Millisecond)
	defer h.stop()
	for {
		if _, err := os.Stat(name); err == nil {
			return true
		}
		if _, ok := h.next(nil); !ok {
			return false
		}
	}
}

// holdUntilStopped returns on SIGTERM or SIGINT (ctx), when the process that
// started this one exits, or after bound.
func holdUntilStopped(ctx context.Context, bound time.Duration) {
	h := startHold(ctx, bound, time.Second)
	defer h.stop()
	for {
		if _, ok := h.next(nil); !ok {
			return
		}
	}
}

// hold is a wait that ends with ctx, when the process that started this
// one exits (looked at every tick), or after its bound.
type hold struct {
	ctx      context.Context
	parent   int
	deadline <-chan time.Time
	tick     *time.Ticker
}

func startHold(ctx context.Context, bound, every time.Duration) *hold {
	return &hold{ctx: ctx, parent: os.Getppid(), deadline: time.After(bound), tick: time.NewTicker(every)}
}

// next waits for the next tick or a signal on wake (nil: none) and gives
// the signal; false once the hold is over.
func (h *hold) next(wake <-chan os.Signal) (os.Signal, bool) {
	select {
	case <-h.ctx.Done():
		return nil, false
	case <-h.deadline:
		return nil, false
	case <-h.tick.C:
		return nil, os.Getppid() == h.parent
	case s := <-wake:
		return s, true
	}
}

func (h *hold) stop() { h.tick.Stop() }

func boolText(b *bool) string {
	if b == nil {
		return "-"
	}
	return fmt.Sprint(*b)
}
