package companion

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The reference of every flag of sync and check and of every metric sync
// serves is generated from the code, never written by hand: the flags from
// each subcommand's own flag set (its -h, which the flag package prints from
// the set), the metrics from what newMetrics registers. `make docs` writes
// it to ReferenceTemplate (go run ./internal/companion/cmd/companion-reference),
// tfplugindocs renders it into docs/guides/, and TestTheReferenceIsCurrent
// fails when the template is behind the code.

// ReferenceTemplate is the reference's tfplugindocs template, relative to
// the repository's root.
const ReferenceTemplate = "templates/guides/companion-reference.md.tmpl"

// A flagDoc is one flag as its flag set prints it.
type flagDoc struct {
	name, kind, usage, def string
}

// A metricDoc is one metric as its collector describes it.
type metricDoc struct {
	name, kind, help string
	labels           []string
}

var (
	// flagLine is the first line PrintDefaults writes for a flag: its name
	// and, for a flag that takes a value, the value's kind.
	flagLine = regexp.MustCompile(`^  -([^ \t]+)(?: ([^ \t]+))?(?:\t(.*))?$`)
	// defaultSuffix is what PrintDefaults appends for a default that is not
	// the zero value: a Go-quoted string, or a word (a duration, a number,
	// true).
	defaultSuffix = regexp.MustCompile(` \(default ("(?:[^"\\]|\\.)*"|[^ ()"]+)\)$`)
	descString    = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), .*variableLabels: \{([^}]*)\}\}$`)
)

// subcommandHelp is the -h of a subcommand: what it does and its exit codes
// (the text before "Flags:"), and its flags.
func subcommandHelp(name string) (header string, flags []flagDoc, err error) {
	// The image sets the CLI's default by this variable; the reference gives
	// the binary's own.
	if v, ok := os.LookupEnv("K8S_SYNC_TERRAFORM"); ok {
		os.Unsetenv("K8S_SYNC_TERRAFORM")
		defer os.Setenv("K8S_SYNC_TERRAFORM", v)
	}
	var out bytes.Buffer
	var code int
	switch name {
	case "sync":
		code = runSync(context.Background(), []string{"-h"}, &out)
	case "check":
		code = runCheck(context.Background(), []string{"-h"}, &out, &out)
	default:
		return "", nil, fmt.Errorf("no subcommand %q", name)
	}
	if code != exitOK {
		return "", nil, fmt.Errorf("%s -h exited %d: %s", name, code, out.String())
	}
	text := out.String()
	head, list, ok := strings.Cut(text, "\nFlags:\n")
	if !ok {
		return "", nil, fmt.Errorf("%s -h has no \"Flags:\" line: %s", name, text)
	}
	if _, rest, ok := strings.Cut(head, "\n\n"); ok {
		head = rest // the usage line is the reference's heading
	}
	for _, line := range strings.Split(strings.TrimRight(list, "\n"), "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			kind := m[2]
			if kind == "" {
				kind = "bool"
			}
			flags = append(flags, flagDoc{name: m[1], kind: kind, usage: m[3]})
			continue
		}
		if len(flags) == 0 || !strings.HasPrefix(line, "    \t") {
			return "", nil, fmt.Errorf("%s -h: a line that is no flag's: %q", name, line)
		}
		f := &flags[len(flags)-1]
		f.usage = strings.TrimSpace(f.usage + " " + strings.TrimPrefix(line, "    \t"))
	}
	for i := range flags {
		f := &flags[i]
		if m := defaultSuffix.FindStringSubmatchIndex(f.usage); m != nil {
			def := f.usage[m[2]:m[3]]
			if s, err := strconv.Unquote(def); err == nil {
				def = s
			}
			f.def, f.usage = def, f.usage[:m[0]]
		}
	}
	if len(flags) == 0 {
		return "", nil, fmt.Errorf("%s -h lists no flags", name)
	}
	return strings.TrimSpace(head), flags, nil
}

// capture is a Registerer that keeps what is registered with it.
type capture struct{ collectors []prometheus.Collector }

func (c *capture) Register(col prometheus.Collector) error {
	c.collectors = append(c.collectors, col)
	return nil
}

func (c *capture) MustRegister(cols ...prometheus.Collector) {
	c.collectors = append(c.collectors, cols...)
}

func (c *capture) Unregister(prometheus.Collector) bool { return false }

// workspaceMetrics are the metrics of a workspace, as newMetrics makes and
// registers them, sorted by name.
func workspaceMetrics() ([]metricDoc, error) {
	var reg capture
	newMetrics(&reg)
	var docs []metricDoc
	for _, col := range reg.collectors {
		kind := metricKind(col)
		descs := make(chan *prometheus.Desc, 16)
		go func() { col.Describe(descs); close(descs) }()
		for d := range descs {
			m := descString.FindStringSubmatch(d.String())
			if m == nil {
				return nil, fmt.Errorf("a metric's description in an unknown form: %s", d)
			}
			name, err1 := strconv.Unquote(m[1])
			help, err2 := strconv.Unquote(m[2])
			if err1 != nil || err2 != nil || name == "" {
				return nil, fmt.Errorf("a metric's description in an unknown form: %s", d)
			}
			var labels []string
			if m[3] != "" {
				labels = strings.Split(m[3], ",")
			}
			docs = append(docs, metricDoc{name: name, kind: kind, help: help, labels: labels})
		}
	}
	slices.SortFunc(docs, func(a, b metricDoc) int { return strings.Compare(a.name, b.name) })
	return docs, nil
}

// metricKind is a collector's Prometheus type: a vector's by its Go type
// (it has no child to write before a label is given), a single metric's
// by what it writes.
func metricKind(col prometheus.Collector) string {
	switch col.(type) {
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	}
	m, ok := col.(prometheus.Metric)
	if !ok {
		return "untyped"
	}
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		return "untyped"
	}
	switch {
	case out.Gauge != nil:
		return "gauge"
	case out.Counter != nil:
		return "counter"
	case out.Histogram != nil:
		return "histogram"
	case out.Summary != nil:
		return "summary"
	}
	return "untyped"
}

// cell makes text fit a Markdown table's cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// Reference renders the reference: a tfplugindocs template.
func Reference() (string, error) {
	var b strings.Builder
	b.WriteString(`---
page_title: "The companion's flags and metrics"
subcategory: ""
description: |-
  Every flag of terraform-provider-k8s sync and check, and every metric that sync serves.
---

# The companion's flags and metrics

Every flag of ` + "`terraform-provider-k8s sync`" + ` and ` + "`check`" + `, and every metric ` + "`sync`" + ` serves on
` + "`-listen`" + `. This page is generated from the companion's code (its flag sets and its metrics
registry), so it is the version you run: ` + "`terraform-provider-k8s sync -h`" + ` and ` + "`check -h`" + ` print the
same flags. How the companion uses them: [Keeping pools current](sync.md).

A flag is given as ` + "`-name=value`" + ` or ` + "`-name value`" + ` (a ` + "`bool`" + ` as ` + "`-name`" + ` or ` + "`-name=false`" + `); a
` + "`duration`" + ` as Go writes one (` + "`500ms`" + `, ` + "`5s`" + `, ` + "`10m`" + `). A flag of kind ` + "`value`" + ` takes a string, and may
be repeated where its description says so. With ` + "`-workspaces`" + `, a workspace's attributes set the
flags of ` + "`sync`" + ` for that workspace ([Many configurations](sync.md#many-configurations)).
`)
	for _, name := range Commands {
		head, flags, err := subcommandHelp(name)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\n## `%s`\n\n```text\nterraform-provider-k8s %s [flags]\n```\n\n%s\n\n", name, name, head)
		b.WriteString("| flag | kind | default | what it does |\n|---|---|---|---|\n")
		for _, f := range flags {
			def := ""
			if f.def != "" {
				def = "`" + cell(f.def) + "`"
			}
			fmt.Fprintf(&b, "| `-%s` | %s | %s | %s |\n", f.name, f.kind, def, cell(f.usage))
		}
	}
	metrics, err := workspaceMetrics()
	if err != nil {
		return "", err
	}
	b.WriteString("\n## Metrics\n\n" + `Served in the Prometheus text format at ` + "`/metrics`" + ` on ` + "`-listen`" + `. With ` + "`-workspaces`" + `, each
metric below carries the label ` + "`workspace`" + `, the workspace's name. The Go runtime's and the
process's metrics (` + "`go_*`" + `, ` + "`process_*`" + `) are served too.

| metric | type | labels | what it counts |
|---|---|---|---|
`)
	for _, m := range metrics {
		labels := ""
		if len(m.labels) > 0 {
			labels = "`" + strings.Join(m.labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.kind, labels, cell(m.help))
	}
	return b.String(), nil
}
