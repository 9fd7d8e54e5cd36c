// Package metrics is the engine's Prometheus series: the machines'
// transitions (every row of the spec exported from 0), refused events, time
// in state, machines per state, and kubelet's equivalents (pod start, pod
// worker, PLEG relist, started containers, image pulls, running pods and
// containers). A nil *Metrics records nothing.
package metrics

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/fsm"
)

// Metrics are the engine's Prometheus series. A nil *Metrics records nothing.
type Metrics struct {
	transitions   *prometheus.CounterVec
	rejects       *prometheus.CounterVec
	stateDurs     *prometheus.HistogramVec
	workers       prometheus.Gauge
	machineStates *prometheus.Desc

	// kubelet's equivalents, with kubelet's buckets.
	podStart       prometheus.Histogram
	podStartSLI    prometheus.Histogram
	podWorker      *prometheus.HistogramVec
	relist         prometheus.Histogram
	relistInterval prometheus.Histogram
	streamUp       prometheus.Counter
	streamErr      prometheus.Counter
	streaming      prometheus.Gauge
	started        prometheus.Counter
	startErrors    *prometheus.CounterVec
	imagePull      prometheus.Histogram
	runningPods    *prometheus.Desc
	runningCtrs    *prometheus.Desc

	probes *probeSeries // RegisterProbes; nil: not kept
}

// podStartBuckets are kubelet's for pod_start_duration_seconds and
// pod_start_sli_duration_seconds.
var podStartBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// Machines calls add once for every machine the agent runs now, with its
// machine name and state (from the states the pod workers last published).
type Machines func(add func(machine, state string))

// New registers the series on reg; machines is read at each scrape. A nil
// reg gives a nil *Metrics. A series already registered (a second engine
// on one registry) is kept.
func New(reg prometheus.Registerer, machines Machines) (*Metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &Metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "speclet_transitions_total",
			Help: "State machine transitions taken, by machine, source state, target state and event (names from spec/*.hcl; every row of the spec starts at 0).",
		}, []string{"machine", "from", "to", "event"}),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "speclet_rejected_events_total",
			Help: "Events a machine refused because its state has no row for them (a late runtime event, a sync in a state that ignores it), by machine, state and event.",
		}, []string{"machine", "state", "event"}),
		stateDurs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "speclet_state_duration_seconds",
			Help:    "Time a machine spent in a state, observed when it leaves (or re-enters) the state.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12), // 1 ms .. about 70 min
		}, []string{"machine", "state"}),
		workers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "speclet_pod_workers",
			Help: "Pod workers the engine runs (one per pod UID).",
		}),
		machineStates: prometheus.NewDesc("speclet_machines",
			"Machines in each state now, by machine and state (from the states the pod workers last published).",
			[]string{"machine", "state"}, nil),
		podStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "speclet_pod_start_duration_seconds",
			Help:    "Time from the worker's first input of a pod to all its regular containers running (kubelet's pod_start_duration_seconds).",
			Buckets: podStartBuckets,
		}),
		podStartSLI: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "speclet_pod_start_sli_duration_seconds",
			Help:    "Pod start duration without the time spent pulling images (kubelet's pod_start_sli_duration_seconds).",
			Buckets: podStartBuckets,
		}),
		podWorker: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "speclet_pod_worker_duration_seconds",
			Help:    "Duration of one sync of a pod (sync_pod, kill_containers), by operation type: create (the first sync), sync, kill.",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation_type"}),
		relist: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "speclet_pleg_relist_duration_seconds",
			Help:    "Duration of one PLEG relist (ListContainers, ListPodSandbox and the diff).",
			Buckets: prometheus.DefBuckets,
		}),
		relistInterval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "speclet_pleg_relist_interval_seconds",
			Help:    "Interval between the starts of two PLEG relists.",
			Buckets: prometheus.DefBuckets,
		}),
		streamUp: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "speclet_evented_pleg_connection_success_count",
			Help: "Times the runtime's container event stream (GetContainerEvents) came up (kubelet's evented_pleg_connection_success_count).",
		}),
		streamErr: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "speclet_evented_pleg_connection_error_count",
			Help: "Times the runtime's container event stream ended with an error or was refused (kubelet's evented_pleg_connection_error_count).",
		}),
		streaming: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "speclet_pleg_evented",
			Help: "1 while the runtime's container event stream is up and the PLEG relists only as a safety net, 0 while it relists every second.",
		}),
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "speclet_started_containers_total",
			Help: "Containers started (StartContainer succeeded).",
		}),
		startErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "speclet_started_containers_errors_total",
			Help: "Container creates and starts that failed, by the CRI error class (code).",
		}, []string{"code"}),
		imagePull: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "speclet_image_pull_duration_seconds",
			Help:    "Duration of a PullImage that pulled (not the image check).",
			Buckets: []float64{0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
		}),
		runningPods: prometheus.NewDesc("speclet_running_pods",
			"Pods whose sandbox is ready (kubelet's running_pods).", nil, nil),
		runningCtrs: prometheus.NewDesc("speclet_running_containers",
			"Containers by state: running (running or stopping) and exited (terminated and not removed).",
			[]string{"container_state"}, nil),
	}
	for _, l := range TransitionLabels() {
		m.transitions.WithLabelValues(l[0], l[1], l[2], l[3])
	}
	for _, c := range []prometheus.Collector{m.transitions, m.rejects, m.stateDurs, m.workers, machinesCollector{m, machines},
		m.podStart, m.podStartSLI, m.podWorker, m.relist, m.relistInterval, m.streamUp, m.streamErr, m.streaming, m.started, m.startErrors, m.imagePull} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("register engine metrics: %w", err)
			}
		}
	}
	return m, nil
}

// Transition counts a step of a machine (speclet_transitions_total).
func (m *Metrics) Transition(machine, from, to, event string) {
	if m == nil {
		return
	}
	m.transitions.WithLabelValues(machine, from, to, event).Inc()
}

// SetWorkers sets how many pod workers run (speclet_pod_workers).
func (m *Metrics) SetWorkers(n int) {
	if m == nil {
		return
	}
	m.workers.Set(float64(n))
}

// Rejected counts an event a machine's state has no row for
// (speclet_rejected_events_total).
func (m *Metrics) Rejected(machine, state, event string) {
	if m == nil {
		return
	}
	m.rejects.WithLabelValues(machine, state, event).Inc()
}

// StateDuration observes the time a machine spent in a state it left
// (speclet_state_duration_seconds).
func (m *Metrics) StateDuration(machine, state string, d time.Duration) {
	if m == nil {
		return
	}
	m.stateDurs.WithLabelValues(machine, state).Observe(d.Seconds())
}

// machinesCollector counts, at each scrape, the machines of every pod
// worker in each state, from the states the workers last published.
type machinesCollector struct {
	m        *Metrics
	machines Machines
}

func (c machinesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.machineStates
	ch <- c.m.runningPods
	ch <- c.m.runningCtrs
}

func (c machinesCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[[2]string]int{}
	for _, l := range StateLabels() {
		counts[l] = 0
	}
	c.machines(func(machine, state string) { counts[[2]string{machine, state}]++ })
	for l, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.m.machineStates, prometheus.GaugeValue, float64(n), l[0], l[1])
	}
	ch <- prometheus.MustNewConstMetric(c.m.runningPods, prometheus.GaugeValue, float64(counts[[2]string{fsm.SandboxMachineName, "ready"}]))
	running := counts[[2]string{fsm.ContainerMachineName, "running"}] + counts[[2]string{fsm.ContainerMachineName, "stopping"}]
	ch <- prometheus.MustNewConstMetric(c.m.runningCtrs, prometheus.GaugeValue, float64(running), "running")
	ch <- prometheus.MustNewConstMetric(c.m.runningCtrs, prometheus.GaugeValue, float64(counts[[2]string{fsm.ContainerMachineName, "terminated"}]), "exited")
}

// PodStarted observes a pod's start: total from the worker's first input to
// all regular containers running, pulling the part spent pulling images.
func (m *Metrics) PodStarted(total, pulling time.Duration) {
	if m == nil {
		return
	}
	m.podStart.Observe(total.Seconds())
	m.podStartSLI.Observe((total - pulling).Seconds())
}

// WorkerDuration observes one sync of a pod by operation type (create,
// sync, kill).
func (m *Metrics) WorkerDuration(op string, d time.Duration) {
	if m == nil {
		return
	}
	m.podWorker.WithLabelValues(op).Observe(d.Seconds())
}

// Relisted observes a PLEG relist's duration and the interval since the
// previous one started (0: the first).
func (m *Metrics) Relisted(d, interval time.Duration) {
	if m == nil {
		return
	}
	m.relist.Observe(d.Seconds())
	if interval > 0 {
		m.relistInterval.Observe(interval.Seconds())
	}
}

// EventStream records the runtime's container event stream coming up (true)
// or ending with an error (false).
func (m *Metrics) EventStream(up bool) {
	if m == nil {
		return
	}
	if up {
		m.streamUp.Inc()
		m.streaming.Set(1)
		return
	}
	m.streamErr.Inc()
	m.streaming.Set(0)
}

// ContainerStarted counts a container start, or a failed create or start
// by the CRI error class of err.
func (m *Metrics) ContainerStarted(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.startErrors.WithLabelValues(cri.ClassOf(err).String()).Inc()
		return
	}
	m.started.Inc()
}

// ImagePulled observes a PullImage that pulled.
func (m *Metrics) ImagePulled(d time.Duration) {
	if m == nil {
		return
	}
	m.imagePull.Observe(d.Seconds())
}

// StateLabels lists (machine, state) of every state of the spec.
func StateLabels() [][2]string {
	states, _ := specLabels()
	return states
}

// TransitionLabels lists, once each, (machine, from, to, event) of every step the spec
// allows: each transition row, with a target that is a choice state
// resolved to every state its branches lead to, and an internal row's
// target its own state.
func TransitionLabels() [][4]string {
	_, steps := specLabels()
	return steps
}

// specLabels returns the state and transition labels of every machine kind.
func specLabels() (states [][2]string, steps [][4]string) {
	states, steps = kindLabels(states, steps, fsm.PodKind)
	states, steps = kindLabels(states, steps, fsm.SandboxKind)
	states, steps = kindLabels(states, steps, fsm.ContainerKind)
	states, steps = kindLabels(states, steps, fsm.ProbeKind)
	states, steps = kindLabels(states, steps, fsm.NodeKind)
	return kindLabels(states, steps, fsm.DevicePluginKind)
}

// kindLabels appends the state and transition labels of kind k.
func kindLabels[S, E, A, G fsm.Enum](states [][2]string, steps [][4]string, k fsm.Kind[S, E, A, G]) ([][2]string, [][4]string) {
	for _, s := range k.States {
		states = append(states, [2]string{k.Name, s.String()})
	}
	return states, kindTransitionLabels(steps, k)
}

// kindTransitionLabels appends the transition labels of kind k.
func kindTransitionLabels[S, E, A, G fsm.Enum](out [][4]string, k fsm.Kind[S, E, A, G]) [][4]string {
	branches := func(s S) (to []S) {
		for _, c := range k.Choices {
			if c.State == s {
				to = append(to, c.To)
			}
		}
		return to
	}
	for _, r := range k.Transitions {
		to := r.To
		if r.Internal {
			to = r.From
		}
		targets := []S{to}
		for seen := 0; seen < 8; seen++ { // choices may lead to choices
			var next []S
			changed := false
			for _, t := range targets {
				if bs := branches(t); len(bs) > 0 {
					next, changed = append(next, bs...), true
				} else {
					next = append(next, t)
				}
			}
			targets = next
			if !changed {
				break
			}
		}
		for _, t := range targets {
			if l := [4]string{k.Name, r.From.String(), t.String(), r.Event.String()}; !slices.Contains(out, l) {
				out = append(out, l) // two choice branches may lead to one state
			}
		}
	}
	return out
}

// RegisterHealth registers the gauges that say what the engine's Healthz
// says: speclet_engine_recovered (1 while recovered returns true: the state
// was rebuilt from the runtime) and speclet_engine_healthy (1 while healthy
// returns nil).
func (m *Metrics) RegisterHealth(reg prometheus.Registerer, recovered func() bool, healthy func() error) error {
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
		}, func() float64 { return b(recovered()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "speclet_engine_healthy",
			Help: "1 while /healthz answers ok: recovered, runtime answering, PLEG relisting.",
		}, func() float64 { return b(healthy() == nil) }),
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
