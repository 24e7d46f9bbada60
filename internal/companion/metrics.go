package companion

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the companion's Prometheus metrics, on a registry of its own
// (served at /metrics), so that nothing global is registered in the
// provider's binary.
type metrics struct {
	registry     *prometheus.Registry
	poolsWatched prometheus.Gauge
	drift        prometheus.Counter
	runs         *prometheus.CounterVec
	lastRun      prometheus.Gauge
	settleDelay  prometheus.Histogram
	runDuration  prometheus.Histogram
}

// Run results, the values of the runs metric's label.
const (
	resultApplied       = "applied"
	resultNoChanges     = "no_changes"
	resultRefused       = "refused"
	resultShrinkRefused = "shrink_refused"
	resultFailed        = "failed"
)

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		poolsWatched: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "k8s_sync_pools_watched", Help: "Pool data source instances of the state that the companion watches.",
		}),
		drift: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "k8s_sync_drift_detected_total", Help: "Times a pool of the cluster was found to differ from state.",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "k8s_sync_runs_total",
			Help: "Runs by result: applied, no_changes (the plan had nothing to do), refused (the plan changed more than pools), " +
				"shrink_refused (the shrink guard), failed.",
		}, []string{"result"}),
		lastRun: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "k8s_sync_last_run_timestamp_seconds", Help: "When the last run ended, in Unix seconds.",
		}),
		settleDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "k8s_sync_settle_delay_seconds", Help: "Time from the first change seen to the start of its run.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 10),
		}),
		runDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "k8s_sync_run_duration_seconds", Help: "Duration of runs (plan, show and apply, or the command).",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 10),
		}),
	}
	for _, r := range []string{resultApplied, resultNoChanges, resultRefused, resultShrinkRefused, resultFailed} {
		m.runs.WithLabelValues(r)
	}
	m.registry.MustRegister(m.poolsWatched, m.drift, m.runs, m.lastRun, m.settleDelay, m.runDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
