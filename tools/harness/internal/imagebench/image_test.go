package imagebench

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/benchrun"
	"github.com/vigie/terraform-provider-k8s/tools/harness/internal/textcheck"
)

func TestTheImageSectionOfAFixedRun(t *testing.T) {
	r := &Results{pools: 500, container: []float64{1.2, 1.0, 1.1}, binary: []float64{0.5, 0.4, 0.6},
		readyContainer: []float64{2.0, 2.2}, readyBinary: []float64{1.0, 1.4}}
	if err := json.Unmarshal([]byte(`{"compressed_bytes": 42000000, "layers": [
		{"compressed_bytes": 1000000, "uncompressed_bytes": 2000000},
		{"compressed_bytes": 20000000, "uncompressed_bytes": 60000000},
		{"compressed_bytes": 21000000, "uncompressed_bytes": 70000000}]}`), &r.report); err != nil {
		t.Fatal(err)
	}
	got := Section(r)
	textcheck.Contains(t, "the section", got,
		"## The companion's image (`make image`)",
		"| the CLI (OpenTofu) | 20.0 MB | 60.0 MB |",
		"| **the image** | **42.0 MB** | |",
		"median 1.10 s (min–max 1.00–1.20 s), the plain binary with the same OpenTofu median 0.50 s (min–max 0.40–0.60 s), 3 rounds",
		"in the container median 2.10 s, p90 2.20 s (min–max 2.00–2.20 s); the plain binary median 1.20 s, p90 1.40 s",
	)
	r.skipped = "no podman"
	if got := Section(r); !strings.Contains(got, "Cold starts not measured: no podman.") || strings.Contains(got, "Cold start of") {
		t.Errorf("skipped cold starts:\n%s", got)
	}
	if Section(nil) != "" {
		t.Error("no image part gave a section")
	}
	notBuilt := &Results{notBuilt: "the image is not built"}
	if got := Section(notBuilt); !strings.Contains(got, "Not measured: the image is not built.") || strings.Contains(got, "| layer") {
		t.Errorf("image not built:\n%s", got)
	}
}

// bench -image-part on a tree where make image did not run: the part says
// so and the bench goes on to write what the other parts measured.
func TestAnImageNotBuiltIsSkippedAndSaid(t *testing.T) {
	r, err := Measure(t.Context(), &benchrun.Run{Root: t.TempDir()}, nil, Options{report: "bin/image/report.json"})
	if err != nil {
		t.Fatalf("Measure without the image: %v", err)
	}
	if got := Section(r); !strings.Contains(got, "Not measured: the image is not built: bin/image/report.json is missing") {
		t.Errorf("section:\n%s", got)
	}
}
