// Package benchrun is the run the benches share: the work directory, the
// provider built release-style (and the baseline's), the local control
// plane, the environment and CLI configuration of the CLIs they run, and
// the report written to -out. Each bench (internal/bench, syncbench,
// imagebench, trafficbench) measures on a Run that `bench` has prepared.
package benchrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/testcluster"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/fixture"
)

// Log is where the benches say what they do.
var Log io.Writer = os.Stderr

// Run is one bench run.
type Run struct {
	// Root is the repository, Work the work directory (removed at the end).
	Root, Work string
	// Out is the report's file (-out), relative to Root unless absolute.
	Out string
	// LoadStart is the load average at the start.
	LoadStart string
	Cluster   *testcluster.Cluster
	// Env is the environment of the CLIs the benches run (CLIEnv).
	Env []string
	// Provider is the release-style build.
	Provider string
	// BaselineProvider is the same build at the baseline revision,
	// BaselineCommit that revision's commit and CurrentCommit the one the
	// current build comes from (with "+ uncommitted changes" when the tree
	// has some).
	BaselineProvider, BaselineCommit, CurrentCommit string
}

// Say tells what the bench does next.
func (r *Run) Say(format string, args ...any) {
	fmt.Fprintf(Log, "\n==> "+format+"\n", args...)
}

// DirOf is the directory of the configuration name.
func (r *Run) DirOf(name string) string { return filepath.Join(r.Work, "tf", name) }

// Config writes main as the main.tf of the configuration name and gives
// its directory.
func (r *Run) Config(name, main string) (string, error) {
	dir := r.DirOf(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "main.tf"), []byte(main), 0o644)
}

// BuildAt builds the provider at the git revision rev into program, as
// the bench builds the current one (stripped: -ldflags "-s -w"; else with
// its symbols), from that revision's tree (git archive: nothing of the
// repository changes) in the work directory, which bench removes at the
// end, and gives the revision's commit. It sets CurrentCommit too.
func (r *Run) BuildAt(ctx context.Context, rev, program string, stripped bool) (string, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = r.Root
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	commit, err := git("rev-parse", "--verify", "--short", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("the baseline %q is not a revision of this repository: %w", rev, err)
	}
	if r.CurrentCommit, err = git("rev-parse", "--short", "HEAD"); err != nil {
		return "", err
	}
	if changes, err := git("status", "--porcelain", "--untracked-files=no"); err != nil {
		return "", err
	} else if changes != "" {
		r.CurrentCommit += " + uncommitted changes"
	}
	src := filepath.Join(r.Work, "src-"+commit)
	tarball := filepath.Join(r.Work, "src-"+commit+".tar")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	if _, err := git("archive", "--format=tar", "-o", tarball, commit); err != nil {
		return "", err
	}
	if out, err := exec.CommandContext(ctx, "tar", "-x", "-f", tarball, "-C", src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("tar -x %s: %w\n%s", tarball, err, out)
	}
	args := []string{"-o", program, "."}
	if stripped {
		args = append([]string{"-ldflags", "-s -w"}, args...)
	}
	return commit, GoBuild(ctx, src, args...)
}

// CommitOf is the current commit, with "+ uncommitted changes" when the
// tree has some.
func (r *Run) CommitOf(ctx context.Context) string {
	if r.CurrentCommit != "" {
		return r.CurrentCommit
	}
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD")
	cmd.Dir = r.Root
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	cmd = exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no")
	cmd.Dir = r.Root
	if changes, err := cmd.Output(); err == nil && strings.TrimSpace(string(changes)) != "" {
		commit += " + uncommitted changes"
	}
	return commit
}

// GoBuild runs go build -trimpath with args in dir, as the release builds.
func GoBuild(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-trimpath"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v in %s: %w\n%s", args, dir, err, out)
	}
	return nil
}

// CLIEnv is the environment of the CLIs the bench runs: the CLI
// configuration rc (none when "": the caller adds its own) and nothing of
// the machine's or the environment's: no plugin cache, no logging, no
// version pin of the test framework.
func CLIEnv(rc, kubeconfig string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TF_") || name == "KUBECONFIG" {
			continue
		}
		env = append(env, kv)
	}
	if rc != "" {
		env = append(env, "TF_CLI_CONFIG_FILE="+rc)
	}
	return append(env, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "KUBECONFIG="+kubeconfig)
}

// WriteRC writes the CLI configuration path whose dev_overrides give each
// provider source of overrides the directory wrapDir/overrides[source].
func WriteRC(path, wrapDir string, overrides map[string]string) error {
	var rc strings.Builder
	rc.WriteString("provider_installation {\n  dev_overrides {\n")
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&rc, "    %q = %q\n", k, filepath.Join(wrapDir, overrides[k]))
	}
	rc.WriteString("  }\n  direct {}\n}\n")
	return os.WriteFile(path, []byte(rc.String()), 0o600)
}

// ProviderBlock begins every configuration of the provider.
const ProviderBlock = "terraform {\n  required_providers {\n    k8s = { source = \"vigie/k8s\" }\n  }\n}\n\nprovider \"k8s\" {}\n"

// ReadyEndpointsEach is a configuration of n k8s_ready_endpoints
// (for_each) over the first n Services of the fixture, and an output
// "members" that sums their endpoints.
func ReadyEndpointsEach(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%q", fixture.ServiceName(i))
	}
	return ProviderBlock + fmt.Sprintf(
		"\nlocals {\n  services = toset([%s])\n}\n\ndata \"k8s_ready_endpoints\" \"svc\" {\n  for_each  = local.services\n  namespace = %q\n  service   = each.key\n  port_name = \"http\"\n}\n\noutput \"members\" {\n  value = sum([for s in data.k8s_ready_endpoints.svc : length(s.endpoints)])\n}\n",
		strings.Join(names, ", "), fixture.Namespace)
}

// LoadAverage is the load average over 1, 5 and 15 minutes.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// Machine names the cores and the memory of this machine.
func Machine() string {
	model := ""
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kib int64
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				_, _ = fmt.Sscan(strings.TrimPrefix(line, "MemTotal:"), &kib)
			}
		}
		mem = fmt.Sprintf("%.1f GiB", float64(kib)/1048576)
	}
	return fmt.Sprintf("%d cores (%s), %s memory", runtime.NumCPU(), model, mem)
}

// Versions are the Go and the terraform CLI the bench runs ("unknown"
// when terraform does not say).
func Versions() (goVersion, terraformVersion string) {
	terraformVersion = "unknown"
	if out, err := exec.Command("terraform", "version").Output(); err == nil {
		terraformVersion = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	out, _ := exec.Command("go", "env", "GOVERSION").Output()
	return strings.TrimSpace(string(out)), terraformVersion
}

// WriteReport writes the report to Out (relative to the repository) and
// prints it.
func (r *Run) WriteReport(report string) error {
	out := r.Out
	if !filepath.IsAbs(out) {
		out = filepath.Join(r.Root, out)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
		return err
	}
	r.Say("results (also in %s)", r.Out)
	fmt.Print(report)
	return nil
}

// WritePart stops the control plane and writes the report of a part run
// alone to Out: a header on the machine and the run, then its section.
func (r *Run) WritePart(title, by, section string) error {
	version := r.Cluster.Version
	r.Cluster.Stop()
	goVersion, terraformVersion := Versions()
	report := fmt.Sprintf("# %s results\n\nWritten by %s on %s; see [README.md](README.md) for what each number means and how to run it.\n\n"+
		"Machine: %s, Linux; %s, %s; Kubernetes %s (local control plane). Load average (1, 5, 15 min) %s at the start, %s at the end.\n\n",
		title, by, time.Now().UTC().Format("2006-01-02"), Machine(), goVersion, terraformVersion, version, r.LoadStart, LoadAverage()) + section
	return r.WriteReport(report)
}

// Section is a section of the report being written.
type Section struct{ strings.Builder }

// NewSection starts a section with its heading.
func NewSection(title string) *Section {
	s := &Section{}
	s.Line("## %s", title)
	s.Line("")
	return s
}

// Line writes one line.
func (s *Section) Line(format string, args ...any) { fmt.Fprintf(&s.Builder, format+"\n", args...) }

// Para writes a paragraph: its line, then a blank one.
func (s *Section) Para(format string, args ...any) {
	s.Line(format, args...)
	s.Line("")
}

// Table writes the head of a table: its columns, then their alignments.
func (s *Section) Table(columns, alignments string) {
	s.Line("%s", columns)
	s.Line("%s", alignments)
}
