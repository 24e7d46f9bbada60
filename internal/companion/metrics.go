package companion

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are a workspace's Prometheus metrics, on a registry of the
// companion's own (served at /metrics), so that nothing global is
// registered in the provider's binary; the workspaces of -workspaces each
// register theirs with the label workspace.
type metrics struct {
	poolsWatched      prometheus.Gauge
	poolsDiffering    prometheus.Gauge
	poolsComputed     prometheus.Counter
	poolsUnreadable   prometheus.Gauge
	drift             prometheus.Counter
	runs              *prometheus.CounterVec
	lastRun           prometheus.Gauge
	settleDelay       prometheus.Histogram
	runDuration       prometheus.Histogram
	stateReadFailures *prometheus.CounterVec
	scopeFailures     prometheus.Counter
	clusterReachable  *prometheus.GaugeVec
	clusterPools      *prometheus.GaugeVec
	leading           prometheus.Gauge
	slicesLeftOut     prometheus.Gauge
	// gates are the pods waiting for a readiness gate, which the gauges
	// k8s_sync_gate_waiting_pods and k8s_sync_gate_oldest_wait_seconds read
	// at each scrape (at now).
	gates                 *gateWaits
	now                   func() time.Time
	gateWait              prometheus.Histogram
	gatesOpenedAfterBound prometheus.Counter
}

// labelShrinkRefused is the runs metric's label of changes the shrink
// guard refused: no run was made (the machine's note, not a result).
const labelShrinkRefused = "shrink_refused"

// runLabels are the values of the runs metric's label, made from the
// results.
func runLabels() []string {
	labels := []string{labelShrinkRefused}
	for _, r := range runResults {
		labels = append(labels, r.String())
	}
	return labels
}

// processCollectors are the Go runtime's and the process's metrics, once
// a registry.
func processCollectors() []prometheus.Collector {
	return []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}

// newMetrics makes a workspace's metrics, registered with reg.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		poolsWatched: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "k8s_sync_pools_watched", Help: "Pool data source instances of the state that the companion watches.",
		}),
		drift: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "k8s_sync_drift_detected_total", Help: "Times a pool of the cluster was found to differ from state.",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "k8s_sync_runs_total",
			Help: "Runs by result: applied, state_updated (no resource changed; the state's pools brought current), " +
				"no_changes (the plan had nothing to do), refused (the plan changed more than pools), shrink_refused " +
				"(the shrink guard), failed, delivered (-command succeeded), waiting (nothing plannable without an " +
				"unreadable pool), stopped.",
		}, []string{"result"}),
		lastRun: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "k8s_sync_last_run_timestamp_seconds", Help: "When the last run ended, in Unix seconds.",
		}),
		settleDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "k8s_sync_settle_delay_seconds", Help: "Time from the first change seen to the start of its run.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 10),
		}),
		runDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "k8s_sync_run_duration_seconds", Help: "Duration of runs (plan and apply, or the command).",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 10),
		}),
	}
	m.poolsComputed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "k8s_sync_service_pools_computed_total",
		Help: "Pools of one Service computed from the cache: a k8s_ready_endpoints, or a Service of a k8s_services (a change of one Service of a fleet computes that one).",
	})
	m.poolsDiffering = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "k8s_sync_pools_differing", Help: "Pool data source instances that differ from state now.",
	})
	m.poolsUnreadable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "k8s_sync_pools_unreadable", Help: "Pool data source instances whose read would fail now (their dependents are left out of runs).",
	})
	m.stateReadFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "k8s_sync_state_read_failures_total", Help: "Failed reads of the state (terraform state pull), by backend type.",
	}, []string{"backend"})
	m.scopeFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "k8s_sync_scope_failures_total", Help: "Times the informers of a new scope (a namespace state names) did not start.",
	})
	m.clusterReachable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "k8s_sync_cluster_reachable", Help: "1 when the cluster of a provider configuration answers its probe, 0 when it does not (its pools are left out of runs).",
	}, []string{"cluster"})
	m.clusterPools = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "k8s_sync_cluster_pools_watched", Help: "Pool data source instances watched, by the cluster of their provider configuration.",
	}, []string{"cluster"})
	m.leading = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "k8s_sync_leading", Help: "1 while this replica runs the workspace (holds its Lease, with -leader-elect), else 0.",
	})
	m.slicesLeftOut = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "k8s_sync_slices_left_out",
		Help: "EndpointSlices labelled for a Service with a selector that the pools leave out now: their manager is not trusted (trusted_slice_managers).",
	})
	reg.MustRegister(m.slicesLeftOut)
	m.gates, m.now = &gateWaits{}, time.Now
	m.gateWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "k8s_sync_gate_wait_seconds",
		Help:    "How long pods waited for their readiness gate, from when the companion saw them wait to when it saw the wait end (gate open, or pod gone).",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 12),
	})
	m.gatesOpenedAfterBound = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "k8s_sync_gates_opened_after_bound_total",
		Help: "Readiness gates the companion opened itself because their pod waited -gate-open-after while its pool was not applied.",
	})
	reg.MustRegister(m.gateWait, m.gatesOpenedAfterBound, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "k8s_sync_gate_waiting_pods",
		Help: "Pods in the pools that wait for their readiness gate (gate_pending): in the pool, not yet Ready until a run applies it.",
	}, func() float64 { return float64(m.gates.count()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "k8s_sync_gate_oldest_wait_seconds",
		Help: "How long the pod that has waited longest for its readiness gate has waited; 0 when none waits.",
	}, func() float64 { return m.gates.oldest(m.now()).Seconds() }))
	for _, label := range runLabels() {
		m.runs.WithLabelValues(label)
	}
	reg.MustRegister(m.poolsWatched, m.poolsDiffering, m.poolsUnreadable, m.drift, m.runs, m.lastRun, m.settleDelay,
		m.runDuration, m.stateReadFailures, m.scopeFailures, m.clusterReachable, m.clusterPools, m.poolsComputed, m.leading)
	return m
}
