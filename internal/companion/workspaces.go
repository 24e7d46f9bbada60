package companion

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Many workspaces in one companion: -workspaces names a file (or a
// directory of them) that lists working directories, each with the
// settings its flags would give; what a workspace does not set, the flags
// say. Each workspace has its own decisions, runs, metrics (label
// workspace), health and, with -leader-elect, Lease; they share the
// clusters (hub.go).

// workspace is one working directory the companion keeps current.
type workspace struct {
	name string
	opts SyncOptions
}

// workspaceSpec is a workspace as a file gives it; nil fields are the
// flags'.
type workspaceSpec struct {
	Name             string            `json:"name"`
	Dir              string            `json:"dir"`
	Terraform        *string           `json:"terraform"`
	ProviderAlias    *string           `json:"provider_alias"`
	SettleQuiet      *duration         `json:"settle_quiet"`
	SettleMax        *duration         `json:"settle_max"`
	LockTimeout      *duration         `json:"lock_timeout"`
	RetryInitial     *duration         `json:"retry_initial"`
	RetryMax         *duration         `json:"retry_max"`
	MaxShrink        *float64          `json:"max_shrink"`
	AllowEmpty       *bool             `json:"allow_empty"`
	Allow            []string          `json:"allow"`
	Command          *string           `json:"command"`
	CommandRepeat    *duration         `json:"command_repeat"`
	Refresh          *bool             `json:"refresh"`
	TargetChanged    *bool             `json:"target_changed"`
	FullPlanInterval *duration         `json:"full_plan_interval"`
	StateInterval    *duration         `json:"state_interval"`
	StateTimeout     *duration         `json:"state_timeout"`
	Clusters         []string          `json:"clusters"`
	Env              map[string]string `json:"env"`
}

// workspacesFile is a file of -workspaces.
type workspacesFile struct {
	Workspaces []workspaceSpec `json:"workspaces"`
}

// duration is a Go duration written as a string ("1s", "5m").
type duration time.Duration

func (d *duration) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"5s\" or \"10m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

// workspaceName is what a workspace's name may be: it names its Lease and
// its metrics.
var workspaceName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$`)

// loadWorkspaces reads the workspaces of path (a file, or a directory of
// .yaml, .yml and .json files), with defaults for what each leaves out.
// A workspace's dir is relative to its file.
func loadWorkspaces(path string, defaults SyncOptions) ([]workspace, error) {
	files := []string{path}
	if info, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("-workspaces %s: %w", path, err)
	} else if info.IsDir() {
		files = nil
		for _, pattern := range []string{"*.yaml", "*.yml", "*.json"} {
			found, _ := filepath.Glob(filepath.Join(path, pattern))
			files = append(files, found...)
		}
		slices.Sort(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("-workspaces %s: the directory has no .yaml, .yml or .json file", path)
		}
	}
	var out []workspace
	where := map[string]string{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("-workspaces: %w", err)
		}
		asJSON, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		var f workspacesFile
		dec := json.NewDecoder(bytes.NewReader(asJSON))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("%s: %w (a file has workspaces: [{name, dir, ...}])", file, err)
		}
		for i, spec := range f.Workspaces {
			w, err := spec.workspace(filepath.Dir(file), defaults)
			if err != nil {
				return nil, fmt.Errorf("%s: workspace %d (%q): %w", file, i+1, spec.Name, err)
			}
			if other, twice := where[w.name]; twice {
				return nil, fmt.Errorf("%s: workspace %q is also in %s: give each a name of its own", file, w.name, other)
			}
			where[w.name] = file
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-workspaces %s lists no workspace", path)
	}
	return out, nil
}

// workspace is spec's workspace, its dir relative to base.
func (spec workspaceSpec) workspace(base string, defaults SyncOptions) (workspace, error) {
	if !workspaceName.MatchString(spec.Name) {
		return workspace{}, fmt.Errorf("name %q: give 1 to 40 lowercase letters, digits and '-', starting and ending with a letter or digit", spec.Name)
	}
	if strings.HasPrefix(spec.Name, "member-") {
		// LEASE-NAME-member-IDENTITY are the replicas' own Leases.
		return workspace{}, fmt.Errorf("name %q: a name starting with member- would be the Lease of a replica: give another", spec.Name)
	}
	if spec.Dir == "" {
		return workspace{}, errors.New("dir: give the working directory of the configuration, initialized")
	}
	o := defaults
	o.Dir = spec.Dir
	if !filepath.IsAbs(o.Dir) {
		o.Dir = filepath.Join(base, o.Dir)
	}
	set := func(to *time.Duration, from *duration) {
		if from != nil {
			*to = time.Duration(*from)
		}
	}
	set(&o.Quiet, spec.SettleQuiet)
	set(&o.MaxWait, spec.SettleMax)
	set(&o.LockTimeout, spec.LockTimeout)
	set(&o.RetryInitial, spec.RetryInitial)
	set(&o.RetryMax, spec.RetryMax)
	set(&o.CommandRepeat, spec.CommandRepeat)
	set(&o.FullPlanInterval, spec.FullPlanInterval)
	set(&o.StateInterval, spec.StateInterval)
	set(&o.StateTimeout, spec.StateTimeout)
	for to, from := range map[*string]*string{&o.Terraform: spec.Terraform, &o.Alias: spec.ProviderAlias, &o.Command: spec.Command} {
		if from != nil {
			*to = *from
		}
	}
	for to, from := range map[*bool]*bool{&o.AllowEmpty: spec.AllowEmpty, &o.Refresh: spec.Refresh, &o.TargetChanged: spec.TargetChanged} {
		if from != nil {
			*to = *from
		}
	}
	if spec.MaxShrink != nil {
		o.MaxShrink = *spec.MaxShrink
	}
	if spec.Allow != nil {
		o.Allowed = spec.Allow
	}
	if spec.Clusters != nil {
		o.Clusters = spec.Clusters
	}
	o.Env = slices.Clone(defaults.Env)
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return workspace{}, fmt.Errorf("env: %q is not a variable's name", k)
		}
		o.Env = append(o.Env, k+"="+spec.Env[k])
	}
	if err := validateSync(o); err != nil {
		return workspace{}, fmt.Errorf("%w (%s)", err, "its attributes are the flags' names, with _ for -")
	}
	if info, err := os.Stat(o.Dir); err != nil || !info.IsDir() {
		return workspace{}, fmt.Errorf("dir %q is not a directory", o.Dir)
	}
	return workspace{name: spec.Name, opts: o}, nil
}
