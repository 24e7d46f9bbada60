package imagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
)

// podman runs the containers of a pod spec the way the kubelet would give
// them what they see: the ServiceAccount's token from the TokenRequest API,
// ca.crt and namespace at /var/run/secrets/kubernetes.io/serviceaccount,
// KUBERNETES_SERVICE_HOST and _PORT, ConfigMap volumes as read-only files,
// emptyDirs writable by the pod's fsGroup, the security context (user,
// read-only root filesystem, no capabilities). No kubeconfig. The host's
// network: the API server listens on loopback.
type podman struct {
	// env makes podman use its own storage and configuration.
	env []string
	// apiHost and apiPort are the API server's, as the Service "kubernetes"
	// would give them.
	apiHost, apiPort string
	caFile           string
	client           kubernetes.Interface
	// images maps an image of a pod spec to the one loaded here.
	images map[string]string
}

// newPodman is a podman with storage and configuration of its own
// (testcluster.PodmanEnv) under dir.
func newPodman(dir, server, caFile string, client kubernetes.Interface) (*podman, error) {
	hostPort := strings.TrimPrefix(server, "https://")
	host, port, ok := strings.Cut(hostPort, ":")
	if !ok {
		return nil, fmt.Errorf("API server %s: no port", server)
	}
	env, err := testcluster.PodmanEnv(dir)
	if err != nil {
		return nil, err
	}
	return &podman{env: env, apiHost: host, apiPort: port, caFile: caFile, client: client, images: map[string]string{}}, nil
}

func (p *podman) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// run runs podman to its end and gives its output.
func (p *podman) run(ctx context.Context, args ...string) (string, error) {
	out, err := p.command(ctx, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// load loads a docker-archive image and gives its name.
func (p *podman) load(ctx context.Context, archive string) (string, error) {
	out, err := p.run(ctx, "load", "-i", archive)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(line, "Loaded image: "); ok {
			return strings.TrimSpace(name), nil
		}
	}
	return "", fmt.Errorf("podman load %s: no image named in %q", archive, out)
}

// pod is a pod spec made ready to run here: its volumes on the host.
type pod struct {
	p         *podman
	name      string
	namespace string
	spec      corev1.PodSpec
	// volumes are the host directories of the spec's volumes, by name.
	volumes map[string]string
	// secretsDir holds the ServiceAccount's token, ca.crt and namespace.
	secretsDir string
	// uid is the UID of the pod's object in the API server, for the
	// downward API ("" when the pod has none).
	uid string
}

// newPod makes what the kubelet makes before the first container starts:
// the token of the pod's ServiceAccount, its volumes.
func (p *podman) newPod(ctx context.Context, t *testing.T, namespace, name string, spec corev1.PodSpec) *pod {
	t.Helper()
	root := t.TempDir()
	pd := &pod{p: p, name: name, namespace: namespace, spec: spec, volumes: map[string]string{}, secretsDir: filepath.Join(root, "serviceaccount")}
	group := 0
	if sc := spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		group = int(*sc.FSGroup)
	}
	expiry := int64(3600)
	token, err := p.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for ServiceAccount %s/%s: %v", namespace, spec.ServiceAccountName, err)
	}
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, pd.secretsDir, group, map[string][]byte{"token": []byte(token.Status.Token), "ca.crt": ca, "namespace": []byte(namespace)})
	for _, v := range spec.Volumes {
		dir := filepath.Join(root, "volumes", v.Name)
		switch {
		case v.ConfigMap != nil:
			cm, err := p.client.CoreV1().ConfigMaps(namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("volume %s: ConfigMap %s/%s: %v", v.Name, namespace, v.ConfigMap.Name, err)
			}
			files := map[string][]byte{}
			for k, content := range cm.Data {
				files[k] = []byte(content)
			}
			writeFiles(t, dir, group, files)
		case v.EmptyDir != nil:
			if err := os.MkdirAll(dir, 0o2775); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, 0, group); err != nil {
				t.Fatal(err)
			}
			// MkdirAll's mode goes through the umask.
			if err := os.Chmod(dir, 0o2775); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("volume %s: only ConfigMap and emptyDir volumes are run here", v.Name)
		}
		pd.volumes[v.Name] = dir
	}
	return pd
}

// writeFiles writes files readable by group (the kubelet's projected and
// ConfigMap volumes with an fsGroup).
func writeFiles(t *testing.T, dir string, group int, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, content, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, 0, group); err != nil {
			t.Fatal(err)
		}
	}
}

// runArgs are podman run's arguments for container c of the pod, with args
// (when not nil) instead of the container's.
func (pd *pod) runArgs(t *testing.T, c corev1.Container, args []string) []string {
	t.Helper()
	image, ok := pd.p.images[c.Image]
	if !ok {
		t.Fatalf("container %s: image %s is not one this test loaded", c.Name, c.Image)
	}
	run := []string{"run", "--rm", "--network=host", "--pull=never", "--hostname=" + pd.name,
		"-e", "KUBERNETES_SERVICE_HOST=" + pd.p.apiHost, "-e", "KUBERNETES_SERVICE_PORT=" + pd.p.apiPort,
		"-v", pd.secretsDir + ":/var/run/secrets/kubernetes.io/serviceaccount:ro"}
	if user := runAs(pd.spec.SecurityContext, c.SecurityContext); user != "" {
		run = append(run, "--user", user)
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
			// --read-only-tmpfs=false: /tmp is what the spec mounts, or nothing.
			run = append(run, "--read-only", "--read-only-tmpfs=false")
		}
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			run = append(run, "--security-opt=no-new-privileges")
		}
		if sc.Capabilities != nil {
			for _, capability := range sc.Capabilities.Drop {
				run = append(run, "--cap-drop="+strings.ToLower(string(capability)))
			}
		}
	}
	for _, m := range c.VolumeMounts {
		dir, ok := pd.volumes[m.Name]
		if !ok {
			t.Fatalf("container %s mounts volume %s, which the pod does not have", c.Name, m.Name)
		}
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		run = append(run, "-v", dir+":"+m.MountPath+":"+mode)
	}
	// The container's environment, and the $(NAME) of its args made from
	// it, as the kubelet does.
	vars := map[string]string{}
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			value = pd.fieldRef(t, c.Name, e)
		}
		vars[e.Name] = value
		run = append(run, "-e", e.Name+"="+value)
	}
	for _, from := range c.EnvFrom {
		if from.SecretRef == nil {
			t.Fatalf("container %s: envFrom other than a Secret is not run here", c.Name)
		}
		secret, err := pd.p.client.CoreV1().Secrets(pd.namespace).Get(context.Background(), from.SecretRef.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("container %s: envFrom Secret %s: %v", c.Name, from.SecretRef.Name, err)
		}
		for k, v := range secret.Data {
			run = append(run, "-e", k+"="+string(v))
		}
	}
	if len(c.Command) > 0 {
		run = append(run, "--entrypoint", c.Command[0])
	}
	run = append(run, image)
	if len(c.Command) > 1 {
		run = append(run, c.Command[1:]...)
	}
	if args == nil {
		args = c.Args
	}
	for _, a := range args {
		for name, value := range vars {
			a = strings.ReplaceAll(a, "$("+name+")", value)
		}
		run = append(run, a)
	}
	return run
}

// fieldRef is the value of env e from the downward API: the pod's name and
// UID are the fields run here.
func (pd *pod) fieldRef(t *testing.T, container string, e corev1.EnvVar) string {
	t.Helper()
	switch f := e.ValueFrom.FieldRef; {
	case f == nil:
		t.Fatalf("container %s: env %s from a reference other than the pod's fields is not run here", container, e.Name)
	case f.FieldPath == "metadata.name":
		return pd.name
	case f.FieldPath == "metadata.uid" && pd.uid != "":
		return pd.uid
	default:
		t.Fatalf("container %s: env %s from field %s is not run here (metadata.uid needs the pod's object)", container, e.Name, f.FieldPath)
	}
	return ""
}

func runAs(pod *corev1.PodSecurityContext, c *corev1.SecurityContext) string {
	var user, group *int64
	if pod != nil {
		user, group = pod.RunAsUser, pod.RunAsGroup
	}
	if c != nil && c.RunAsUser != nil {
		user = c.RunAsUser
	}
	if c != nil && c.RunAsGroup != nil {
		group = c.RunAsGroup
	}
	if user == nil {
		return ""
	}
	if group == nil {
		return strconv.FormatInt(*user, 10)
	}
	return fmt.Sprintf("%d:%d", *user, *group)
}

// result is how a container ended.
type result struct {
	code           int
	stdout, stderr string
}

// exec runs container c (of the spec's init containers or containers, by
// name) to its end, with args instead of its own when not nil.
func (pd *pod) exec(ctx context.Context, t *testing.T, name string, args []string) result {
	t.Helper()
	cmd := pd.p.command(ctx, pd.runArgs(t, pd.container(t, name), args)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return result{code: exit.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	case err != nil:
		t.Fatalf("podman run %s: %v\n%s", name, err, stderr.String())
	}
	return result{stdout: stdout.String(), stderr: stderr.String()}
}

// start starts the pod's sync container in the background, with args;
// stop sends it SIGTERM (the kubelet's stop) and gives how it ended.
func (pd *pod) start(ctx context.Context, t *testing.T, args []string) (stop func() result, stderr *syncBuffer) {
	t.Helper()
	name := syncContainer
	runArgs := pd.runArgs(t, pd.container(t, name), args)
	// --rm after the name's removal at the end: a container name of its own.
	cname := fmt.Sprintf("%s-%s-%d", pd.name, name, time.Now().UnixNano())
	runArgs = append([]string{runArgs[0], "--name", cname}, runArgs[1:]...)
	cmd := pd.p.command(ctx, runArgs...)
	var stdout bytes.Buffer
	stderr = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	var res result
	stop = func() result {
		if stopped {
			return res
		}
		stopped = true
		stopCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, _ = pd.p.run(stopCtx, "stop", "--time=30", cname)
		err := <-done
		res = result{stdout: stdout.String(), stderr: stderr.String()}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			res.code = exit.ExitCode()
		}
		return res
	}
	t.Cleanup(func() { stop() })
	return stop, stderr
}

func (pd *pod) container(t *testing.T, name string) corev1.Container {
	t.Helper()
	for _, c := range append(append([]corev1.Container{}, pd.spec.InitContainers...), pd.spec.Containers...) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the pod spec has no container %s", name)
	return corev1.Container{}
}
