package main

import (
	"context"
	"flag"
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

	"github.com/vigie/terraform-provider-k8s/internal/testcluster"
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

// demo makes the demo's dual-stack Service web with pods in every state:
// two ready, one starting (not ready), one terminating; then waits for the
// EndpointSlice controller and prints the slices. With -network, each pod
// gets a real network (testcluster.NetKubelet: its own network namespace,
// its IPs, a server that answers with its name), and with -hold the command
// then writes the file named and keeps the networks until SIGTERM or SIGINT,
// until the process that started it exits, or for 30 minutes at most.
// With -add-pod FILE, it then waits for FILE to exist and adds a ready pod,
// web-3 (with -network, serving): what the companion of the demo picks up.
func demo(ctx context.Context, args []string) error {
	flags := flag.NewFlagSet("demo", flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	ns := flags.String("namespace", "demo", "namespace of the demo, deleted first if it exists")
	withNetwork := flags.Bool("network", false, "give each pod a real network (root and iproute2)")
	hold := flags.String("hold", "", "write this file once the pods are there (with -network: serve), and keep running (and their networks) until stopped")
	addPod := flags.String("add-pod", "", "with -hold: when this file exists, add a ready pod web-3, then write FILE.done")
	_ = flags.Parse(args)
	client, err := clientFor(*kubeconfig)
	if err != nil {
		return err
	}
	holdCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	runPod := func(ctx context.Context, pod testcluster.Pod) error {
		return testcluster.RunPod(ctx, client, *ns, pod)
	}
	if *withNetwork {
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
		runPod = func(ctx context.Context, pod testcluster.Pod) error { return k.RunPod(ctx, *ns, pod) }
	}
	if err := testcluster.EnsureNode(ctx, client, "demo-node", "demo-zone-a"); err != nil {
		return err
	}
	if err := testcluster.DeleteNamespace(ctx, client, *ns); err != nil {
		return err
	}
	for { // a namespace being deleted cannot be created again
		_, err := client.CoreV1().Namespaces().Get(ctx, *ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s is still being deleted: %w", *ns, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: *ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := testcluster.WaitForServiceAccount(ctx, client, *ns, time.Minute); err != nil {
		return err
	}
	dual := corev1.IPFamilyPolicyPreferDualStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: *ns, Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector:       map[string]string{"app": "web"},
			IPFamilyPolicy: &dual,
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports:          []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := client.CoreV1().Services(*ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
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
	if err := client.CoreV1().Pods(*ns).Delete(ctx, "web-stopping", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		return err
	}
	fmt.Println("  web-stopping     deleted with a 300 s grace period: terminating")
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		if err := testcluster.WaitForSlices(ctx, client, *ns, "web", time.Minute, testcluster.EndpointCount(family, 2, 4)); err != nil {
			return err
		}
	}
	slices, err := client.DiscoveryV1().EndpointSlices(*ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
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
	if *hold == "" {
		return nil
	}
	if err := os.WriteFile(*hold, []byte("serving\n"), 0o600); err != nil {
		return err
	}
	if *addPod != "" {
		if !waitForFile(holdCtx, *addPod, 30*time.Minute) {
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
		if err := os.WriteFile(*addPod+".done", []byte("added\n"), 0o600); err != nil {
			return err
		}
	}
	holdUntilStopped(holdCtx, 30*time.Minute)
	return nil
}

// waitForFile is whether name exists before ctx ends, the process that
// started this one exits, or bound passes.
func waitForFile(ctx context.Context, name string, bound time.Duration) bool {
	parent := os.Getppid()
	deadline := time.After(bound)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(name); err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return false
		case <-tick.C:
			if os.Getppid() != parent {
				return false
			}
		}
	}
}

// holdUntilStopped returns on SIGTERM or SIGINT (ctx), when the process that
// started this one exits, or after bound.
func holdUntilStopped(ctx context.Context, bound time.Duration) {
	parent := os.Getppid()
	deadline := time.After(bound)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			return
		case <-tick.C:
			if os.Getppid() != parent {
				return
			}
		}
	}
}

func boolText(b *bool) string {
	if b == nil {
		return "-"
	}
	return fmt.Sprint(*b)
}
