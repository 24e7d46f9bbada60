// Command benchfixture is the helper of scripts/bench.sh (make bench); it is
// not part of the provider.
//
//	benchfixture create -kubeconfig FILE [-namespace bench] [-services 100] [-pods 10]
//	benchfixture delete -kubeconfig FILE [-namespace bench]
//	benchfixture rss-wrap LOG PROVIDER
//	benchfixture sizes BINARY
//
// create makes Services with ready pods the way the acceptance tests do: a Node
// object without a kubelet, pods bound to it with spec.nodeName, and a status
// update that makes them Running and Ready. It then waits until the cluster's
// own EndpointSlice controller has published every pod as a ready endpoint, so
// that the provider reads what it would read in production. Requests are sent
// concurrently: a thousand pods one by one would take longer than the benchmark.
//
// delete removes the namespace again (force-deleting its pods, which no
// kubelet would ever confirm) and the Node.
//
// rss-wrap runs PROVIDER with the wrapper's standard streams and environment,
// so that Terraform talks to it as to the provider itself, and appends the
// provider's peak RSS to LOG when it exits. Terraform starts the provider more
// than once per command, and only the parent of a process can read its peak
// after it has gone; sampling /proc could miss the last moments.
//
// sizes attributes the bytes of an unstripped build to the modules and
// packages its symbols come from, as Markdown tables: what a release binary
// would lose if a dependency went.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	nodeName = "bench-node"
	zone     = "bench-zone-a"
	// workers is how many requests are in flight at once: enough to keep the
	// API server busy, few enough not to queue behind each other.
	workers = 32
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "create", "delete":
		err = fixture(os.Args[1], os.Args[2:])
	case "rss-wrap":
		if len(os.Args) != 4 {
			usage()
		}
		os.Exit(rssWrap(os.Args[2], os.Args[3]))
	case "sizes":
		if len(os.Args) != 3 {
			usage()
		}
		err = sizes(os.Args[2])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchfixture:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: benchfixture create|delete -kubeconfig FILE [-namespace NS] [-services N] [-pods N]")
	fmt.Fprintln(os.Stderr, "       benchfixture rss-wrap LOG PROVIDER")
	fmt.Fprintln(os.Stderr, "       benchfixture sizes BINARY")
	os.Exit(2)
}

type cluster struct {
	core      corev1client.CoreV1Interface
	discovery discoveryv1client.DiscoveryV1Interface
}

func fixture(cmd string, args []string) error {
	flags := flag.NewFlagSet(cmd, flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	namespace := flags.String("namespace", "bench", "namespace of the fixture")
	services := flags.Int("services", 100, "number of Services")
	pods := flags.Int("pods", 10, "ready pods per Service (at most 254)")
	timeout := flags.Duration("timeout", 5*time.Minute, "give up after this long")
	_ = flags.Parse(args)
	if *kubeconfig == "" || *services < 1 || *pods < 1 || *pods > 254 || *services > 65536 {
		usage()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	// client-go's default of 5 QPS would turn a thousand pods into minutes.
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.UserAgent = "benchfixture"
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	disc, err := discoveryv1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c := &cluster{core: core, discovery: disc}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if cmd == "delete" {
		return c.delete(ctx, *namespace)
	}
	return c.create(ctx, *namespace, *services, *pods)
}

func serviceName(i int) string { return fmt.Sprintf("svc-%03d", i) }

func (c *cluster) create(ctx context.Context, namespace string, services, pods int) error {
	start := time.Now()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	if _, err := c.core.Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node: %w", err)
	}
	if err := c.waitNamespaceGone(ctx, namespace, true); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := c.core.Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace: %w", err)
	}
	// Services first: a pod created before its Service would be published
	// only when the controller gets to the Service, which is the same end
	// state, but ordering keeps the controller's work queue short.
	err := parallel(ctx, services, func(ctx context.Context, i int) error {
		return c.createService(ctx, namespace, i)
	})
	if err != nil {
		return err
	}
	err = parallel(ctx, services*pods, func(ctx context.Context, k int) error {
		return c.runPod(ctx, namespace, k/pods, k%pods)
	})
	if err != nil {
		return err
	}
	created := time.Since(start)
	if err := c.waitForSlices(ctx, namespace, services, pods); err != nil {
		return err
	}
	fmt.Printf("fixture: %d Services x %d ready pods in namespace %s: created in %.1f s, all published as ready endpoints after %.1f s\n",
		services, pods, namespace, created.Seconds(), time.Since(start).Seconds())
	return nil
}

func (c *cluster) createService(ctx context.Context, namespace string, i int) error {
	name := serviceName(i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	if _, err := c.core.Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service %s: %w", name, err)
	}
	return nil
}

// runPod creates pod j of Service i on the node and gives it the status a
// kubelet would: Running, an address, and a Ready condition.
func (c *cluster) runPod(ctx context.Context, namespace string, i, j int) error {
	name := fmt.Sprintf("%s-%d", serviceName(i), j)
	pods := c.core.Pods(namespace)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": serviceName(i)}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
			Name: "app", Image: "example.invalid/app:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		}}},
	}
	got, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A fixture left by an interrupted run: give it its status again.
		got, err = pods.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create pod %s: %w", name, err)
	}
	ip := fmt.Sprintf("10.%d.%d.%d", 200+i/256, i%256, j+1)
	got.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		PodIP:      ip,
		PodIPs:     []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
	}
	if _, err := pods.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set status of pod %s: %w", name, err)
	}
	return nil
}

// waitForSlices waits until every Service has exactly pods ready endpoints.
func (c *cluster) waitForSlices(ctx context.Context, namespace string, services, pods int) error {
	for {
		list, err := c.discovery.EndpointSlices(namespace).List(ctx, metav1.ListOptions{})
		waiting := ""
		if err != nil {
			waiting = err.Error()
		} else {
			ready := map[string]int{}
			for _, s := range list.Items {
				for _, e := range s.Endpoints {
					if e.Conditions.Ready == nil || *e.Conditions.Ready {
						ready[s.Labels[discoveryv1.LabelServiceName]]++
					}
				}
			}
			for i := range services {
				if n := ready[serviceName(i)]; n != pods {
					waiting = fmt.Sprintf("service %s has %d ready endpoints of %d", serviceName(i), n, pods)
					break
				}
			}
		}
		if waiting == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("EndpointSlices: still waiting (%s): %w", waiting, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *cluster) delete(ctx context.Context, namespace string) error {
	zero := int64(0)
	err := c.core.Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pods: %w", err)
	}
	if err := c.core.Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace: %w", err)
	}
	if err := c.waitNamespaceGone(ctx, namespace, false); err != nil {
		return err
	}
	if err := c.core.Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node: %w", err)
	}
	return nil
}

// waitNamespaceGone waits until the namespace no longer exists; with
// onlyIfTerminating, a namespace that exists and is not being deleted is
// fine too (it is reused).
func (c *cluster) waitNamespaceGone(ctx context.Context, namespace string, onlyIfTerminating bool) error {
	for {
		ns, err := c.core.Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("get namespace: %w", err)
		case onlyIfTerminating && ns.DeletionTimestamp == nil:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s is still being deleted: %w", namespace, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// parallel runs do(0) ... do(n-1) on a few workers and returns the first
// error, after which the remaining calls are skipped.
func parallel(ctx context.Context, n int, do func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for k := range jobs {
				if err := do(ctx, k); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for k := range n {
		select {
		case jobs <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// rssWrap runs the provider and appends "PEAK_RSS_KIB WALL_MS" to log.
func rssWrap(log, provider string) int {
	cmd := exec.Command(provider)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "benchfixture rss-wrap:", err)
		return 1
	}
	// Terraform stops its providers with signals too (on interrupt); they
	// must reach the provider, not only this wrapper.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		for s := range signals {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		fmt.Fprintln(os.Stderr, "benchfixture rss-wrap:", err)
		return 1
	}
	if usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		// One short write with O_APPEND: concurrent wrappers do not interleave.
		line := fmt.Sprintf("%d %d\n", usage.Maxrss, time.Since(start).Milliseconds())
		if f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			_, _ = f.WriteString(line)
			_ = f.Close()
		}
	}
	return cmd.ProcessState.ExitCode()
}
