package main

import (
	"strings"
	"testing"
)

func TestBenchRefusesABadTrafficFlag(t *testing.T) {
	for _, args := range [][]string{{"-traffic-samples", "0"}, {"-traffic-samples", "101"}, {"-only", "traffic", "-traffic-samples", "-1"}} {
		if err := runBench(t.Context(), args); err == nil || !strings.Contains(err.Error(), "want 1 to 100") {
			t.Errorf("bench %v: %v, want -traffic-samples refused", args, err)
		}
	}
	if err := runBench(t.Context(), []string{"-only", "plans"}); err == nil || !strings.Contains(err.Error(), "sync, traffic and image") {
		t.Errorf("bench -only plans: %v, want the parts named", err)
	}
}
