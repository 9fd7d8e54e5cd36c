// Package probes is one container's probe workers (kubelet
// pkg/kubelet/prober), one per probe kind, as the actions and the duration
// of its probe machine (spec/probe.hcl); engine/prober is their
// arithmetic, engine/handlers runs a probe. The engine owns the machine
// itself (its fire loop, observers and timers) and binds it to a Workers.
//
// Each worker keeps its schedule (when its next probe is due, on the ticks
// of its kind, schedule.go); the machine's timer probe_due (duration
// next_probe) is armed for the earliest of them. run_probe starts the due
// probes, each on its own goroutine (a slow probe never blocks the pod),
// and moves their schedules on; while the container stops, the readiness
// worker probes on its ticks by itself. A probe posts its raw result
// (Report) through Container.Post; Result counts it against the thresholds
// and says which input to route when the thresholded result changed.
//
// Contracts:
//   - Everything but the probe calls and the loop of a readiness worker
//     that runs free while its container stops (freeRun, which reads only
//     what does not change once the worker started) runs on the pod's
//     worker goroutine: a Workers keeps no lock.
//   - A result of a worker stopped meanwhile is never posted, or is
//     dropped by Result (each worker started has a new generation).
package probes

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/handlers"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/prober"
	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// Workers is one container's probe workers. The zero value runs none;
// Bind gives it its container.
type Workers struct {
	c       Container
	workers [prober.Kinds]*worker // by prober.Kind; nil when not running
	gen     uint64                // bumped for every worker started: results of stopped workers are dropped
	// ticks are the anchors of each kind's ticks: the pod's first sync
	// plus the jitter, readiness's last trigger; zero until the pod is
	// added (Add). They outlive the instances.
	ticks [prober.Kinds]time.Time
}

// Container is what a container's Workers read of it and tell it. Only the
// pod's worker goroutine calls it, but for Post.
type Container interface {
	// Name is the container's name, PodUID its pod's.
	Name() string
	PodUID() types.UID
	// Spec is the container's current spec (nil once the pod dropped it).
	Spec() *v1.Container
	// Target is the running instance the probes run against (its pod IP
	// the node's on the host's network).
	Target() handlers.Target
	// StartedAt is when the running instance started.
	StartedAt() time.Time
	// Now is the engine's clock; After its timer (any goroutine calls it).
	Now() time.Time
	After(d time.Duration) <-chan time.Time
	// Jitter is how far after now a kind with period's ticks begin when
	// the pod is added: up to a period while the engine started less than
	// one period ago (kubelet's prober worker sleeps that long), else 0.
	Jitter(period time.Duration) time.Duration
	// Context is what the workers' contexts derive from: the engine's,
	// done when it stops.
	Context() context.Context
	// Post hands a worker's raw result to the pod's worker. Any goroutine
	// calls it.
	Post(r Report)
	// State is the probe machine's state.
	State() fsm.ProbeState
	// Raise reports an action's outcome to the probe machine.
	Raise(ev fsm.ProbeEvent)
	// Kill kills the instance through the container machine because its
	// probe of kind k failed, with the probe's grace period in seconds
	// (-1: the pod's).
	Kill(ctx context.Context, k prober.Kind, grace int64)
	// Logger and LogAttrs are where and with which attributes (the pod,
	// the container) a probe's outcome is logged.
	Logger() *slog.Logger
	LogAttrs() []any
	// Event records a Warning event about the container, reason Unhealthy
	// or ProbeWarning.
	Event(reason, message string)
	// Probed counts a raw result of a current worker and how long the
	// probe took (kubelet's prober_probe_total and
	// prober_probe_duration_seconds).
	Probed(k prober.Kind, success bool, d time.Duration)
}

// Report is one probe outcome for a container of a pod: a raw result of
// one of the container's workers (Worker), counted against the probe's
// thresholds by Result, or, with no worker (Worker 0), a thresholded
// result routed as is.
type Report struct {
	UID       types.UID
	Container string
	Kind      prober.Kind
	Success   bool
	Output    string // what the probe said (Unhealthy, ProbeWarning)
	Worker    uint64 // the worker that ran it; 0: thresholded already
	// Duration is how long the probe took (a worker's result).
	Duration time.Duration
}

// worker probes one kind of probe of one running instance; the ticks it
// probes on are its kind's (Probes.ticks), kept across instances.
type worker struct {
	kind     prober.Kind
	spec     *v1.Probe
	gen      uint64
	target   handlers.Target
	cancel   context.CancelFunc
	ctx      context.Context
	next     time.Time  // its next tick that may probe (next_probe)
	inFlight bool       // a probe runs: a turn that comes round meanwhile is skipped
	run      prober.Run // the run of equal raw results
}

var _ fsm.ProbeDurations = (*Workers)(nil)

// Bind gives p its container.
func (p *Workers) Bind(c Container) { p.c = c }

// spec is the container's probe of kind k, or nil.
func (p *Workers) spec(k prober.Kind) *v1.Probe { return prober.Of(p.c.Spec(), k) }

// --- actions ---
//
// A probe itself runs on its own goroutine, not as an operation.

var _ fsm.ProbeActions[op.Op] = (*Workers)(nil)

// StartStartup starts the startup worker, or raises startup_ok when the
// container has no startup probe.
func (p *Workers) StartStartup() op.Op {
	if !p.startWorker(prober.Startup) {
		p.c.Raise(fsm.ProbeEventStartupOk)
	}
	return op.Done(nil)
}

// StartProbes stops the startup worker and starts the liveness and
// readiness workers; raises ready when there is no readiness probe.
func (p *Workers) StartProbes() op.Op {
	p.stopWorker(prober.Startup)
	p.startWorker(prober.Liveness)
	if !p.startWorker(prober.Readiness) {
		p.c.Raise(fsm.ProbeEventReady)
	}
	return op.Done(nil)
}

// KillContainer stops the liveness and startup workers and kills the
// container with the failed probe's grace period, or the pod's; the
// readiness worker goes on by itself while the container stops (kubelet's
// does during its preStop hook; freeRun).
func (p *Workers) KillContainer() op.Op {
	kind := prober.Liveness
	if p.c.State() == fsm.ProbeStateKilling && p.workers[prober.Startup] != nil {
		kind = prober.Startup
	}
	grace := int64(-1)
	if s := p.spec(kind); s != nil && s.TerminationGracePeriodSeconds != nil {
		grace = *s.TerminationGracePeriodSeconds
	}
	p.stopLivenessAndStartup(fsm.ProbeActionKillContainer)
	return op.Deliver(fsm.ContainerEventKill.String(), "container", func(ctx context.Context) { p.c.Kill(ctx, kind, grace) },
		func(error) op.Op { return op.Done(nil) })
}

// StopLivenessAndStartup stops the liveness and startup workers of the
// instance that stops; its readiness worker goes on by itself until it no
// longer runs (kubelet's StopLivenessAndStartup when the pod terminates;
// freeRun).
func (p *Workers) StopLivenessAndStartup() op.Op {
	p.stopLivenessAndStartup(fsm.ProbeActionStopLivenessAndStartup)
	return op.Done(nil)
}

// stopLivenessAndStartup stops the liveness and startup workers and lets
// the readiness worker run free; its probes belong to action a.
func (p *Workers) stopLivenessAndStartup(a fsm.ProbeAction) {
	p.stopWorker(prober.Liveness)
	p.stopWorker(prober.Startup)
	if w := p.workers[prober.Readiness]; w != nil {
		p.freeRun(w, a)
	}
}

// freeRun probes w on its own goroutine at each of its ticks from its next
// one, one probe at a time, until the worker is stopped (StopProbes): while
// the container stops, the pod's worker runs the stop (preStop,
// StopContainer) and serves no probe_due timer until it returns, so w
// probes by itself, as each kubelet worker does. Its results are posted as
// run_probe's are; the goroutine reads only what no one changes once the
// worker started (its kind, spec, target, context and generation).
func (p *Workers) freeRun(w *worker, a fsm.ProbeAction) {
	c := p.c
	next, period := w.next, prober.Period(w.spec)
	r0, ctx := p.report(w), a.Tag(w.ctx)
	go func() {
		for {
			if d := next.Sub(c.Now()); d > 0 {
				select {
				case <-w.ctx.Done():
					return
				case <-c.After(d):
				}
			}
			r, ok := w.probeOnce(ctx, r0)
			if !ok {
				return // stopped meanwhile
			}
			c.Post(r)
			next = schedule.TickAfter(next, period, c.Now())
		}
	}()
}

// StopProbes stops the workers of the instance that left running.
func (p *Workers) StopProbes() op.Op {
	p.stopAll()
	return op.Done(nil)
}

func (p *Workers) stopAll() {
	for k := range p.workers {
		p.stopWorker(prober.Kind(k))
	}
}

// --- workers ---

// startWorker starts the worker of kind k; false when the container has no
// such probe.
func (p *Workers) startWorker(k prober.Kind) bool {
	spec := p.spec(k)
	if spec == nil {
		return false
	}
	p.gen++
	ctx, cancel := context.WithCancel(p.c.Context())
	w := &worker{kind: k, spec: spec, gen: p.gen, target: p.c.Target(), ctx: ctx, cancel: cancel}
	w.next = p.firstProbe(k, spec)
	p.workers[k] = w
	return true
}

func (p *Workers) stopWorker(k prober.Kind) {
	w := p.workers[k]
	if w == nil {
		return
	}
	w.cancel()
	p.workers[k] = nil
}

// RunProbe runs every worker whose probe is due, each on its own goroutine
// (a slow probe never blocks the pod), unless its previous probe still
// runs, and moves each due worker's next probe on by whole periods past now;
// each raw result comes back through Container.Post.
func (p *Workers) RunProbe() op.Op {
	now := p.c.Now()
	for _, w := range p.workers {
		if w == nil || w.next.After(now) {
			continue
		}
		if !w.inFlight {
			p.probe(w, fsm.ProbeActionRunProbe)
		}
		w.next = schedule.TickAfter(w.next, prober.Period(w.spec), now)
	}
	return op.Done(nil)
}

// probe runs one probe of w on its own goroutine; its call belongs to
// action a (run_probe, trigger_readiness), though it returns after it.
func (p *Workers) probe(w *worker, a fsm.ProbeAction) {
	w.inFlight = true
	c := p.c
	r, ctx := p.report(w), a.Tag(w.ctx)
	go func() {
		if r, ok := w.probeOnce(ctx, r); ok {
			c.Post(r)
		}
	}()
}

// report is a result of w, its outcome still to be filled in.
func (p *Workers) report(w *worker) Report {
	return Report{UID: p.c.PodUID(), Container: p.c.Name(), Kind: w.kind, Worker: w.gen}
}

// probeOnce runs one probe of w with ctx and returns r with its outcome;
// false when w was stopped meanwhile. Any goroutine calls it.
func (w *worker) probeOnce(ctx context.Context, r Report) (Report, bool) {
	start := time.Now()
	out, err := w.target.Probe(ctx, w.spec, prober.Timeout(w.spec))
	if w.ctx.Err() != nil {
		return r, false
	}
	r.Success, r.Output, r.Duration = err == nil, out, time.Since(start)
	if err != nil {
		r.Output = err.Error()
	}
	return r, true
}

// Result counts a raw result of a worker against its thresholds and returns
// the input to route when the thresholded result changed (ok false: none).
// A failure is an Unhealthy event; a success that said something, a
// ProbeWarning. While the container stops (stopping, killing) nothing is
// routed: a stopping container does not serve (spec/probe.hcl).
func (p *Workers) Result(r Report) (fsm.Input, bool) {
	w := p.workers[r.Kind]
	if w == nil || w.gen != r.Worker {
		return 0, false // a result of a stopped worker
	}
	w.inFlight = false
	p.c.Probed(r.Kind, r.Success, r.Duration)
	if !r.Success {
		msg := fmt.Sprintf("%s%s probe failed: %s", strings.ToUpper(r.Kind.String()[:1]), r.Kind.String()[1:], r.Output)
		p.c.Logger().Warn("Unhealthy", append(p.c.LogAttrs(), "message", msg)...)
		p.c.Event("Unhealthy", msg)
	}
	if r.Success && r.Output != "" {
		msg := fmt.Sprintf("%s probe warning: %s", r.Kind, r.Output)
		p.c.Logger().Info("ProbeWarning", append(p.c.LogAttrs(), "message", msg)...)
		p.c.Event("ProbeWarning", msg)
	}
	if got := w.run.Add(w.spec, r.Success); got == prober.Unknown || got == p.reported(r.Kind) {
		return 0, false
	}
	if st := p.c.State(); st == fsm.ProbeStateStopping || st == fsm.ProbeStateKilling {
		return 0, false
	}
	return prober.Input(r.Kind, r.Success)
}

// reported is the thresholded result of kind k the probe machine holds:
// readiness is its state, ready or unready. Liveness and startup hold none:
// a reported failure kills and stops every worker, a startup success stops
// its worker, and a liveness success is never reported (prober.Input).
func (p *Workers) reported(k prober.Kind) prober.Result {
	if k != prober.Readiness {
		return prober.Unknown
	}
	if p.c.State() == fsm.ProbeStateReady {
		return prober.Success
	}
	return prober.Failure
}
