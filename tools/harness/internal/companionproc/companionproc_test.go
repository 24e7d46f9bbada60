package companionproc

import (
	"math"
	"testing"
	"time"

	"github.com/vigie/terraform-provider-k8s/test/syncproc"
)

func TestChangeLatencyFromTheLogLine(t *testing.T) {
	e, ok := syncproc.Parse(`{"time":"2026-12-01T10:00:01.450000000Z","level":"INFO","msg":"run started","data_sources":"data.k8s_ready_endpoints.lat","settled":"201ms"}`)
	if !ok || e.Msg != "run started" {
		t.Fatalf("Parse = %+v, %v", e, ok)
	}
	written := time.Date(2026, 12, 1, 10, 0, 1, 0, time.UTC)
	lat, det, err := ChangeLatency(written, e, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(lat-0.25) > 1e-9 || math.Abs(det-0.249) > 1e-9 {
		t.Errorf("latency %v detection %v, want 0.25 and 0.249", lat, det)
	}
	noSettled, _ := syncproc.Parse(`{"time":"2026-12-01T10:00:01Z","msg":"run started"}`)
	if _, _, err := ChangeLatency(written, noSettled, 0); err == nil {
		t.Error("a line without settled gave no error")
	}
	for _, bad := range []string{"not json", `{"msg":"x"}`, `{"time":"2026-12-01T10:00:01Z"}`} {
		if _, ok := syncproc.Parse(bad); ok {
			t.Errorf("syncproc.Parse(%q) accepted it", bad)
		}
	}
}
