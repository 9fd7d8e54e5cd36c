package metrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"
)

// Kubelet's prober series (pkg/kubelet/prober), which kubelet serves on
// /metrics/probes rather than /metrics: prober_probe_total by probe_type
// (liveness, readiness, startup), result (successful, failed, unknown),
// container, pod, namespace and pod_uid, and prober_probe_duration_seconds
// of the successful probes, by probe_type, container, pod and namespace
// (kubelet's default buckets). The pod's series go when the pod goes
// (ForgetProbes), as kubelet's go when its probe workers stop.
type probeSeries struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// RegisterProbes registers the prober series and process_start_time_seconds
// on reg (/metrics/probes). On a nil *Metrics it does nothing.
func (m *Metrics) RegisterProbes(reg prometheus.Registerer) error {
	if m == nil || reg == nil {
		return nil
	}
	p := &probeSeries{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "prober", Name: "probe_total",
			Help: "[BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "prober", Name: "probe_duration_seconds",
			Help:    "[ALPHA] Duration in seconds for a probe response.",
			Buckets: prometheus.DefBuckets,
		}, []string{"probe_type", "container", "pod", "namespace"}),
	}
	start := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "process_start_time_seconds",
		Help: "[ALPHA] Start time of the process since unix epoch in seconds.",
	}, processStart)
	for i, c := range []prometheus.Collector{p.total, p.duration, start} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return fmt.Errorf("register prober metrics: %w", err)
			}
			switch i { // a second engine on one registry shares the series
			case 0:
				p.total = are.ExistingCollector.(*prometheus.CounterVec)
			case 1:
				p.duration = are.ExistingCollector.(*prometheus.HistogramVec)
			}
		}
	}
	m.probes = p
	return nil
}

func processStart() float64 {
	p, err := procfs.Self()
	if err != nil {
		return 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0
	}
	t, err := st.StartTime()
	if err != nil {
		return 0
	}
	return t
}

// Probed counts one probe's result of a pod's container (kind liveness,
// readiness or startup); a success's duration is observed, as kubelet's
// worker observes it.
func (m *Metrics) Probed(kind string, success bool, container, pod, namespace, uid string, d time.Duration) {
	if m == nil || m.probes == nil {
		return
	}
	result := "failed"
	if success {
		result = "successful"
		m.probes.duration.WithLabelValues(kind, container, pod, namespace).Observe(d.Seconds())
	}
	m.probes.total.WithLabelValues(kind, result, container, pod, namespace, uid).Inc()
}

// ForgetProbes drops the prober series of a pod that is gone.
func (m *Metrics) ForgetProbes(pod, namespace, uid string) {
	if m == nil || m.probes == nil {
		return
	}
	m.probes.total.DeletePartialMatch(prometheus.Labels{"pod_uid": uid})
	m.probes.duration.DeletePartialMatch(prometheus.Labels{"pod": pod, "namespace": namespace})
}
