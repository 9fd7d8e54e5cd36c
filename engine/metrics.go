package engine

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the engine's Prometheus series. A nil *metrics records nothing.
type metrics struct {
	transitions *prometheus.CounterVec
	workers     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "speclet_transitions_total",
			Help: "State machine transitions taken, by machine, source state, target state and event (names from spec/*.hcl).",
		}, []string{"machine", "from", "to", "event"}),
		workers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "speclet_pod_workers",
			Help: "Pod workers the engine runs (one per pod UID).",
		}),
	}
	for _, c := range []prometheus.Collector{m.transitions, m.workers} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("register engine metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) transition(machine, from, to, event string) {
	if m == nil {
		return
	}
	m.transitions.WithLabelValues(machine, from, to, event).Inc()
}

func (m *metrics) setWorkers(n int) {
	if m == nil {
		return
	}
	m.workers.Set(float64(n))
}

// registerHealth registers the gauges that say what Healthz says:
// speclet_engine_recovered (1 once the state was rebuilt from the runtime)
// and speclet_engine_healthy (1 while Healthz returns nil).
func (m *metrics) registerHealth(reg prometheus.Registerer, e *Engine) error {
	if m == nil || reg == nil {
		return nil
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "speclet_engine_recovered",
			Help: "1 once the engine rebuilt its state from the runtime after start; 0 while it retries (see /healthz).",
		}, func() float64 { return b(e.recovered.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "speclet_engine_healthy",
			Help: "1 while /healthz answers ok: recovered, runtime answering, PLEG relisting.",
		}, func() float64 { return b(e.Healthz() == nil) }),
	} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return fmt.Errorf("register engine metrics: %w", err)
			}
		}
	}
	return nil
}
