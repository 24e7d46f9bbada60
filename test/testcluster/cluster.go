// Package testcluster runs a throwaway Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager; no nodes, no kubelet, no
// containers) on 127.0.0.1, for the acceptance tests, the bench and the demo.
// It is modelled on controller-runtime's envtest control plane, without
// importing it: the binaries are built from Go modules (tools/cluster, see
// Binaries), the certificates are made with crypto/x509, the ports are chosen
// by the kernel, and the daemons die with the process that started them.
//
// Pods run nowhere: a Node object without a kubelet is created and the pods'
// status is written the way a kubelet would (see RunPod); the cluster's own
// EndpointSlice controller writes the slices, as it does in production.
package testcluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options of a control plane.
type Options struct {
	// Version of Kubernetes, "v1.X.Y"; empty is the version pinned in
	// tools/cluster/go.mod. Another version is built on first use (minutes).
	Version string
	// Dir holds the state: certificates, kubeconfigs, etcd data, logs. Empty
	// is a new temporary directory, removed by Stop; a given one is emptied
	// first and kept.
	Dir string
	// Audit writes a Metadata-level audit log to Dir/audit.log, one line per
	// request (the bench counts the provider's requests there).
	Audit bool
	// KindControllers runs kube-controller-manager with the controllers a
	// kind cluster runs (kubeadm's: every default controller, node lifecycle
	// included, and the bootstrap token ones) instead of only those that give
	// API objects their behaviour without nodes: to see the suite as CI on
	// kind sees it, where Nodes that no kubelet renews are tainted.
	KindControllers bool
	// Root of the repository (where tools/cluster is); empty: found from the
	// working directory.
	Root string
	// Log receives progress; nil discards it.
	Log io.Writer
}

// Files in the state directory that callers use.
const (
	// KubeconfigFile has the contexts admin (current; group system:masters)
	// and cert-user (a client certificate, no RBAC rights).
	KubeconfigFile = "kubeconfig"
	// CAFile is the CA of the serving certificate and of client certificates.
	CAFile = "ca.crt"
	// CertUserCert and CertUserKey are cert-user's client certificate and key.
	CertUserCert = "cert-user.crt"
	CertUserKey  = "cert-user.key"
	// AuditLog is the audit log, with Options.Audit.
	AuditLog = "audit.log"
)

// Cluster is a running control plane.
type Cluster struct {
	// Dir is the state directory; Dir/kubeconfig the admin kubeconfig.
	Dir string
	// Server is the API server's URL.
	Server string
	// Version is the Kubernetes version the API server reports.
	Version string

	opts      Options
	bin       string
	removeDir bool

	mu        sync.Mutex // guards the processes
	etcd      *process
	apiserver *process
	kcm       *process
	client    kubernetes.Interface
	// etcdURL is etcd's client URL, for its health check on a restart.
	etcdURL string
}

// Kubeconfig is the path of the admin kubeconfig.
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.Dir, KubeconfigFile) }

// Client is a clientset of the cluster's admin, with client-go's default
// rate limits.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// RESTConfig is a client configuration as admin.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
}

// Bounds of the start and stop of each daemon.
const (
	readyTimeout = 90 * time.Second
	stopBound    = 15 * time.Second
	// apiServerStopBound: while the controller manager is connected, a
	// graceful stop of the API server waits for its watches, up to a minute
	// (when the whole cluster stops, the controller manager goes first and the
	// API server takes about a second).
	apiServerStopBound = 3 * time.Second
	startTries         = 3
)

// freePort asks the kernel for a free port on loopback. Another process may
// take it before the daemon binds it: Start then tries again with new ports.
// A variable so that the tests can lose that race on purpose.
var freePort = func() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}

// Start finds or builds the binaries, then starts etcd, kube-apiserver and
// kube-controller-manager and waits until they are ready: the API server
// answers /readyz and the controllers have made the default ServiceAccount.
// A start that loses a port to another process is retried with other ports.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Root == "" {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		opts.Root = root
	}
	bin, version, err := Binaries(ctx, opts.Root, opts.Version, opts.Log)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: opts.Dir, Version: version, opts: opts, bin: bin}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "testcluster-"); err != nil {
			return nil, err
		}
		c.removeDir = true
	} else {
		if err := os.RemoveAll(c.Dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(c.Dir, 0o700); err != nil {
			return nil, err
		}
	}
	if c.Dir, err = filepath.Abs(c.Dir); err != nil {
		return nil, err
	}
	if err := c.writeCredentials(); err != nil {
		c.Stop()
		return nil, err
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err = c.launch(ctx)
		if err == nil {
			break
		}
		c.stopProcesses()
		if !errors.Is(err, errPortTaken) || attempt == startTries {
			c.Stop()
			return nil, fmt.Errorf("start the local control plane (state in %s): %w", c.Dir, err)
		}
		fmt.Fprintf(opts.Log, "a port was taken meanwhile; starting again with other ports\n")
		if err := os.RemoveAll(filepath.Join(c.Dir, "etcd")); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(opts.Log, "Kubernetes %s control plane ready in %s: %s\n", c.Version, time.Since(start).Round(100*time.Millisecond), c.Server)
	return c, nil
}

// writeCredentials makes the CA, the API server's certificate, the client
// certificates of admin and cert-user, the service account keys and the
// audit policy.
func (c *Cluster) writeCredentials() error {
	ca, err := newAuthority()
	if err != nil {
		return err
	}
	serving, err := ca.serving()
	if err != nil {
		return err
	}
	admin, err := ca.client("admin", "system:masters")
	if err != nil {
		return err
	}
	// No group: RBAC gives it nothing but what system:authenticated gets.
	certUser, err := ca.client("cert-user")
	if err != nil {
		return err
	}
	saKey, saPub, err := serviceAccountKeys()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		CAFile:          ca.pem,
		"apiserver.crt": serving.cert, "apiserver.key": serving.key,
		"admin.crt": admin.cert, "admin.key": admin.key,
		CertUserCert: certUser.cert, CertUserKey: certUser.key,
		"sa.key": saKey, "sa.pub": saPub,
		// Metadata level: who asked for what, and the answer's code, no
		// bodies. RequestReceived is omitted so that each request is one line.
		"audit-policy.yaml": []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"),
	}
	return writeFiles(c.Dir, files)
}

// writeKubeconfig writes the admin kubeconfig (also used by the controller
// manager) for the current server.
func (c *Cluster) writeKubeconfig() error {
	read := func(name string) []byte {
		data, _ := os.ReadFile(filepath.Join(c.Dir, name))
		return data
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: read(CAFile)}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: read("admin.crt"), ClientKeyData: read("admin.key")}
	cfg.AuthInfos["cert-user"] = &clientcmdapi.AuthInfo{ClientCertificateData: read(CertUserCert), ClientKeyData: read(CertUserKey)}
	for _, user := range []string{"admin", "cert-user"} {
		cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	}
	cfg.CurrentContext = "admin"
	return clientcmd.WriteToFile(*cfg, c.Kubeconfig())
}

func (c *Cluster) path(name string) string { return filepath.Join(c.Dir, name) }

// launch starts the three daemons on fresh ports, each once the one before is
// ready.
func (c *Cluster) launch(ctx context.Context) error {
	ports := make([]int, 4)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	etcdPort, peerPort, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]
	c.Server = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	if err := c.writeKubeconfig(); err != nil {
		return err
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}

	etcdURL := func(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }
	// --unsafe-no-fsync: the data is thrown away anyway, and fsync latency on
	// shared CI disks is the usual cause of etcd (and so API server) timeouts.
	c.mu.Lock()
	c.etcd, err = startProcess(c.Dir, c.bin, "etcd", []string{
		"--name=local", "--data-dir=" + c.path("etcd"),
		"--listen-client-urls=" + etcdURL(etcdPort), "--advertise-client-urls=" + etcdURL(etcdPort),
		"--listen-peer-urls=" + etcdURL(peerPort), "--initial-advertise-peer-urls=" + etcdURL(peerPort),
		"--initial-cluster=local=" + etcdURL(peerPort),
		"--unsafe-no-fsync", "--log-level=warn",
	})
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.etcdURL = etcdURL(etcdPort)
	if err := waitReady(ctx, c.etcd, c.etcdReady); err != nil {
		return err
	}

	// --endpoint-reconciler-type=none: the default reconciler would publish
	// 127.0.0.1 as the endpoint of the "kubernetes" Service, which Endpoints
	// validation rejects (loopback), and it would keep retrying.
	// Dual-stack service range: lets tests create IPv4+IPv6 Services.
	args := []string{
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + c.path("apiserver-certs"),
		"--etcd-servers=" + etcdURL(etcdPort),
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + c.path("apiserver.crt"), "--tls-private-key-file=" + c.path("apiserver.key"),
		"--client-ca-file=" + c.path(CAFile),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + c.path("sa.pub"),
		"--service-account-signing-key-file=" + c.path("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16,fd00:10:96::/112",
		"--allow-privileged=true",
	}
	if c.opts.Audit {
		// Off by default: the log grows with every request of the controllers too.
		args = append(args, "--audit-policy-file="+c.path("audit-policy.yaml"), "--audit-log-path="+c.path(AuditLog))
	}
	c.mu.Lock()
	c.apiserver, err = startProcess(c.Dir, c.bin, "kube-apiserver", args)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := waitReady(ctx, c.apiserver, c.apiServerReady); err != nil {
		return err
	}
	if err := c.checkVersion(ctx); err != nil {
		return err
	}

	// Only the controllers that give API objects their server-side behaviour
	// without nodes: EndpointSlices from Services and Pods, slices mirrored
	// from hand-made Endpoints, namespace deletion, default ServiceAccounts
	// and garbage collection of ownerReferences. No leader election: one
	// replica. The client CA is given directly (skip-lookup): otherwise it
	// keeps asking for a front-proxy CA that this API server does not have.
	c.mu.Lock()
	c.kcm, err = startProcess(c.Dir, c.bin, "kube-controller-manager", []string{
		"--kubeconfig=" + c.Kubeconfig(),
		"--authentication-kubeconfig=" + c.Kubeconfig(),
		"--authorization-kubeconfig=" + c.Kubeconfig(),
		"--authentication-skip-lookup=true", "--client-ca-file=" + c.path(CAFile),
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(kcmPort),
		"--cert-dir=" + c.path("kcm-certs"),
		"--controllers=" + c.controllers(),
		"--leader-elect=false",
		"--root-ca-file=" + c.path(CAFile),
	})
	c.mu.Unlock()
	if err != nil {
		return err
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // its own self-signed health endpoint on loopback
	if err := waitReady(ctx, c.kcm, func(ctx context.Context) error {
		return get(ctx, insecure, "https://127.0.0.1:"+strconv.Itoa(kcmPort)+"/healthz")
	}); err != nil {
		return err
	}
	// Ready for tests means the controllers have acted: the default
	// ServiceAccount is what pod admission waits for.
	return waitReady(ctx, c.kcm, func(ctx context.Context) error {
		_, err := c.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// controllers is kube-controller-manager's --controllers: the few the tests
// need, or with Options.KindControllers the set kind runs (kubeadm's).
func (c *Cluster) controllers() string {
	if c.opts.KindControllers {
		return "*,bootstrapsigner,tokencleaner"
	}
	// The Deployment and ReplicaSet controllers run rollouts as Kubernetes
	// runs them (test kubelets bind and start their pods).
	return "endpointslice-controller,endpointslice-mirroring-controller,namespace-controller,serviceaccount-controller,garbage-collector-controller," +
		"deployment-controller,replicaset-controller"
}

func (c *Cluster) apiServerReady(ctx context.Context) error {
	_, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

// checkVersion fails when the API server does not report the version it was
// built as: the binaries would not be what the cache key says.
func (c *Cluster) checkVersion(ctx context.Context) error {
	raw, err := c.client.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
	if err != nil {
		return err
	}
	var info struct{ GitVersion string }
	if err := json.Unmarshal(raw, &info); err != nil {
		return err
	}
	if info.GitVersion != c.Version {
		return fmt.Errorf("kube-apiserver reports %s, want %s", info.GitVersion, c.Version)
	}
	return nil
}

// waitReady polls ready until it succeeds, the process dies, or readyTimeout.
func waitReady(ctx context.Context, p *process, ready func(context.Context) error) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := ready(attempt)
		cancel()
		if err == nil {
			return nil
		}
		if done, _ := p.exited(); done {
			return p.died()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) not ready in %s: %w; end of its log:\n%s", p.name, p.pid(), readyTimeout, err, p.logTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after a short
// bound): clients then find its port closed. StartAPIServer starts it again.
func (c *Cluster) StopAPIServer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.apiserver.stop(apiServerStopBound)
}

// StartAPIServer starts the stopped kube-apiserver again, with the same
// command line, and waits until it is ready. A start that is not ready is
// killed and tried again, up to 3 times; the error carries each one's log.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiserver == nil {
		return errors.New("the control plane is stopped")
	}
	if done, _ := c.apiserver.exited(); !done {
		return errors.New("kube-apiserver is running")
	}
	var errs []error
	for range startTries {
		if err := c.apiserver.start(c.bin); err != nil {
			return err
		}
		err := waitReady(ctx, c.apiserver, c.apiServerReady)
		if err == nil {
			return nil
		}
		c.apiserver.kill()
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RestartAPIServer kills kube-apiserver, as a crash would (a graceful stop
// waits for the controllers' long-running watches), and starts it again.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	c.apiserver.kill()
	c.mu.Unlock()
	return c.StartAPIServer(ctx)
}

func (c *Cluster) etcdReady(ctx context.Context) error {
	return get(ctx, http.DefaultClient, c.etcdURL+"/health")
}

// RestartEtcd kills etcd, as a crash would, starts it again on the same
// data directory and ports, and waits until it answers /health and the API
// server /readyz (the API server keeps running and reconnects).
func (c *Cluster) RestartEtcd(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.etcd == nil {
		return errors.New("the control plane is stopped")
	}
	c.etcd.kill()
	if err := c.etcd.start(c.bin); err != nil {
		return err
	}
	if err := waitReady(ctx, c.etcd, c.etcdReady); err != nil {
		return err
	}
	return waitReady(ctx, c.apiserver, c.apiServerReady)
}

// PIDs of the running daemons, by name.
func (c *Cluster) PIDs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := map[string]int{}
	for _, p := range []*process{c.etcd, c.apiserver, c.kcm} {
		if p != nil && p.cmd != nil {
			if done, _ := p.exited(); !done {
				pids[p.name] = p.pid()
			}
		}
	}
	return pids
}

// stopProcesses stops the daemons, clients before their backend, so that
// nothing logs a storm of connection errors while shutting down.
func (c *Cluster) stopProcesses() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range []*process{c.kcm, c.apiserver, c.etcd} {
		p.stop(stopBound)
	}
	c.kcm, c.apiserver, c.etcd = nil, nil, nil
}

// Stop stops the daemons and removes a temporary state directory. It is
// safe to call more than once.
func (c *Cluster) Stop() {
	c.stopProcesses()
	if c.removeDir {
		_ = os.RemoveAll(c.Dir)
	}
}
