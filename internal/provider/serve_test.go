package provider

import (
	"maps"
	"testing"
)

func TestQuietLogsTurnLogsOffOnlyWhenNoneWasAskedFor(t *testing.T) {
	off := map[string]string{
		"TF_LOG_SDK": "off", "TF_LOG_SDK_PROTO": "off", "TF_LOG_SDK_FRAMEWORK": "off", "TF_LOG_PROVIDER_K8S": "off",
	}
	tests := []struct {
		name    string
		environ []string
		want    map[string]string
	}{
		{"no log asked for: every logger off", []string{"HOME=/home/u", "PATH=/bin", "TF_CLI_CONFIG_FILE=rc"}, off},
		{"TF_LOG asks for logs: left as the SDK sets them", []string{"TF_LOG=TRACE"}, nil},
		{"a log file alone is asking for logs", []string{"HOME=/home/u", "TF_LOG_PATH=/tmp/tf.log"}, nil},
		{"the provider's logs alone", []string{"TF_LOG_PROVIDER=DEBUG"}, nil},
		{"an empty TF_LOG is still a choice of the user", []string{"TF_LOG="}, nil},
		{"a variable that merely contains TF_LOG does not count", []string{"MY_TF_LOG=TRACE"}, off},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := QuietLogs(tt.environ); !maps.Equal(got, tt.want) {
				t.Errorf("QuietLogs(%q) = %v, want %v", tt.environ, got, tt.want)
			}
		})
	}
}

func TestTheProviderCollectsGarbageHalfAsOftenUnlessTheUserSetGOGC(t *testing.T) {
	if percent, set := gcPercent(""); !set || percent != 200 {
		t.Errorf("without GOGC: %d, %v; want 200, true", percent, set)
	}
	for _, gogc := range []string{"100", "off", "50"} {
		if _, set := gcPercent(gogc); set {
			t.Errorf("GOGC=%s was overridden", gogc)
		}
	}
}
