package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/handlers"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/inbox"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/prober"
	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// Probes (kubelet pkg/kubelet/prober): the probe machine of a container
// (spec/probe.hcl) and its workers, one per probe kind.
//
// Each worker keeps its schedule (when its next probe is due, on the ticks
// of its kind, probe_schedule.go); the machine's timer probe_due
// (spec/probe.hcl, duration next_probe) is armed for the earliest of them, as a machine timer of the pod worker (owner
// "probe/CONTAINER"), so it runs on the engine's clock and the sync tick
// finds it due. run_probe starts the due probes, each on its own goroutine
// (a slow probe never blocks the pod), and moves their schedules on; the
// probe posts its raw result to the pod worker as an input; the worker
// counts it against the thresholds and, when the thresholded result
// changes, fires the route of spec/routes.hcl. Everything but the probe
// call runs on the pod worker.

// ProbeKind names a probe of a container (engine/prober).
type ProbeKind = prober.Kind

const (
	ProbeLiveness  = prober.Liveness
	ProbeReadiness = prober.Readiness
	ProbeStartup   = prober.Startup
)

// ParseProbeKind returns the kind named s ("liveness", "readiness", "startup").
func ParseProbeKind(s string) (ProbeKind, bool) { return prober.ParseKind(s) }

// probeState is the probe machine of one container and its workers. It
// implements fsm.ProbeGuards, ProbeActions and ProbeDurations. Only the pod
// worker goroutine touches it.
type probeState struct {
	c       *ctrState
	machine *fsm.ProbeMachine
	workers [prober.Kinds]*probeWorker // by ProbeKind; nil when not running
	gen     uint64                     // bumped for every worker started: results of stopped workers are dropped
	// ticks are the anchors of each kind's ticks (probe_schedule.go):
	// the pod's first sync plus the jitter, readiness's last trigger; zero
	// until the pod is added to the prober. They outlive the instances.
	ticks [prober.Kinds]time.Time

	run fire.Run[fsm.ProbeState, fsm.ProbeEvent, fsm.ProbeAction, fsm.ProbeGuard, *probeState] // the probe machine in the fire loop
}

var _ fsm.ProbeGuards = (*probeState)(nil)
var _ fsm.ProbeActions = (*probeState)(nil)
var _ fsm.ProbeDurations = (*probeState)(nil)

// probeWorker probes one kind of probe of one running instance; the ticks
// it probes on are its kind's (probeState.ticks), kept across instances.
type probeWorker struct {
	kind     ProbeKind
	spec     *v1.Probe
	gen      uint64
	target   handlers.Target
	cancel   context.CancelFunc
	ctx      context.Context
	next     time.Time  // its next tick that may probe (next_probe)
	inFlight bool       // a probe runs: a turn that comes round meanwhile is skipped
	run      prober.Run // the run of equal raw results
}

func newProbeState(c *ctrState) *probeState {
	ps := &probeState{c: c}
	ps.machine = fsm.BindProbeMachine(fsm.ProbeInitialState, ps)
	ps.run = fire.NewRun(ps, probeObservers)
	return ps
}

// fire delivers ev to the probe machine and carries out the steps
// (engine/fire); probeEntered arms the timers of a state entered.
func (ps *probeState) fire(ctx context.Context, ev fsm.ProbeEvent) {
	fire.Fire(ctx, ps.machine, &ps.run, ev)
}

func (ps *probeState) raise(ev fsm.ProbeEvent) { ps.run.Raise(ev) }

func (ps *probeState) engine() *Engine       { return ps.c.p.e }
func (ps *probeState) Sinks() *observe.Sinks { return &ps.c.p.e.sinks }
func (ps *probeState) Now() time.Time        { return ps.c.p.e.clock.Now() }
func (ps *probeState) Logger() *slog.Logger  { return ps.c.p.e.log }
func (ps *probeState) LogAttrs() []any       { return ps.c.LogAttrs() }
func (ps *probeState) Record() *history.Log  { return &ps.c.p.w.hist }
func (ps *probeState) Instance() string      { return ps.c.name }
func (ps *probeState) PodUID() types.UID     { return ps.c.p.pod.UID }

// started: the startup probe succeeded (or there is none) for the running
// instance.
func (ps *probeState) started() bool {
	switch ps.machine.State() {
	case fsm.ProbeStateUnready, fsm.ProbeStateReady, fsm.ProbeStateKilling:
		return true
	}
	return false
}

func (ps *probeState) ready() bool { return ps.machine.State() == fsm.ProbeStateReady }

// killed: a failed liveness or startup probe killed the current instance,
// and no new attempt has begun since.
func (ps *probeState) killed() bool { return ps.machine.State() == fsm.ProbeStateKilled }

// containerEntered tells the probe machine about the container machine
// entering state s.
func (ps *probeState) containerEntered(ctx context.Context, s fsm.ContainerState) {
	switch s {
	case fsm.ContainerStateCheckingImage, fsm.ContainerStatePulling, fsm.ContainerStateCreating, fsm.ContainerStateStarting, fsm.ContainerStateRunning:
		if ps.killed() {
			ps.fire(ctx, fsm.ProbeEventContainerStarting)
		}
	}
	switch st := ps.machine.State(); {
	case s == fsm.ContainerStateRunning && st == fsm.ProbeStateOff:
		ps.fire(ctx, fsm.ProbeEventContainerRunning)
	case s != fsm.ContainerStateRunning && st != fsm.ProbeStateOff && st != fsm.ProbeStateKilled:
		ps.fire(ctx, fsm.ProbeEventContainerStopped)
	}
}

func (ps *probeState) probeSpec(k ProbeKind) *v1.Probe { return prober.Of(ps.c.spec, k) }

// --- actions ---

// StartStartup starts the startup worker, or raises startup_ok when the
// container has no startup probe.
func (ps *probeState) StartStartup(ctx context.Context) error {
	if !ps.startWorker(ProbeStartup) {
		ps.raise(fsm.ProbeEventStartupOk)
	}
	return nil
}

// StartProbes stops the startup worker and starts the liveness and
// readiness workers; raises ready when there is no readiness probe.
func (ps *probeState) StartProbes(ctx context.Context) error {
	ps.stopWorker(ProbeStartup)
	ps.startWorker(ProbeLiveness)
	if !ps.startWorker(ProbeReadiness) {
		ps.raise(fsm.ProbeEventReady)
	}
	return nil
}

// KillContainer stops the workers and kills the container through its
// machine with the failed probe's grace period, or the pod's.
func (ps *probeState) KillContainer(ctx context.Context) error {
	c := ps.c
	kind, what := ProbeLiveness, "liveness"
	if ps.machine.State() == fsm.ProbeStateKilling && ps.workers[ProbeStartup] != nil {
		kind, what = ProbeStartup, "startup"
	}
	grace := int64(-1)
	if p := ps.probeSpec(kind); p != nil && p.TerminationGracePeriodSeconds != nil {
		grace = *p.TerminationGracePeriodSeconds
	}
	ps.stopAll()
	msg := fmt.Sprintf("Container %s failed %s probe, will be restarted", c.name, what)
	c.p.e.log.Info("Killing", "pod", c.p.key(), "container", c.name, "message", msg)
	c.event(eventNormal, "Killing", "%s", msg)
	c.probeGrace = grace
	if grace >= 0 {
		c.probeDeadline = c.p.e.clock.Now().Add(time.Duration(grace) * time.Second)
	}
	c.fire(ctx, fsm.ContainerEventLivenessFailed)
	return nil
}

// StopProbes stops the workers of the instance that left running.
func (ps *probeState) StopProbes(ctx context.Context) error {
	ps.stopAll()
	return nil
}

func (ps *probeState) stopAll() {
	for k := range ps.workers {
		ps.stopWorker(ProbeKind(k))
	}
}

// --- workers ---

// startWorker starts the worker of kind k; false when the container has no
// such probe.
func (ps *probeState) startWorker(k ProbeKind) bool {
	spec := ps.probeSpec(k)
	if spec == nil {
		return false
	}
	e := ps.c.p.e
	ps.gen++
	ctx, cancel := context.WithCancel(e.ctx())
	pw := &probeWorker{kind: k, spec: spec, gen: ps.gen, target: ps.c.hookTarget(), ctx: ctx, cancel: cancel}
	if ps.c.p.pod.Spec.HostNetwork {
		pw.target.PodIP = e.cfg.NodeIP
	}
	pw.next = ps.firstProbe(k, spec)
	ps.workers[k] = pw
	return true
}

func (ps *probeState) stopWorker(k ProbeKind) {
	pw := ps.workers[k]
	if pw == nil {
		return
	}
	pw.cancel()
	ps.workers[k] = nil
}

// RunProbe runs every worker whose probe is due, each on its own goroutine
// (a slow probe never blocks the pod), unless its previous probe still
// runs, and moves each due worker's next probe on by whole periods past now;
// each raw result comes back to the pod worker as an input.
func (ps *probeState) RunProbe(ctx context.Context) error {
	now := ps.c.p.e.clock.Now()
	for _, pw := range ps.workers {
		if pw == nil || pw.next.After(now) {
			continue
		}
		if !pw.inFlight {
			ps.probe(pw, fsm.ProbeActionRunProbe)
		}
		pw.next = schedule.TickAfter(pw.next, prober.Period(pw.spec), now)
	}
	return nil
}

// probe runs one probe of pw on its own goroutine; its call belongs to
// action a (run_probe, trigger_readiness), though it returns after it.
func (ps *probeState) probe(pw *probeWorker, a fsm.ProbeAction) {
	pw.inFlight = true
	w := ps.c.p.w
	r := ProbeResult{UID: ps.c.p.pod.UID, Container: ps.c.name, Kind: pw.kind, gen: pw.gen}
	ctx := a.Tag(pw.ctx)
	go func() {
		out, err := pw.target.Probe(ctx, pw.spec, prober.Timeout(pw.spec))
		if pw.ctx.Err() != nil {
			return // stopped meanwhile
		}
		r.Success, r.Output = err == nil, out
		if err != nil {
			r.Output = err.Error()
		}
		w.post(input{Kind: inbox.Probe, P: payload{probe: r}})
	}()
}

// result counts a raw result of a worker against its thresholds and returns
// the input to route when the thresholded result changed (ok false: none).
func (ps *probeState) result(r ProbeResult) (fsm.Input, bool) {
	pw := ps.workers[r.Kind]
	if pw == nil || pw.gen != r.gen {
		return 0, false // a result of a stopped worker
	}
	pw.inFlight = false
	e, c := ps.c.p.e, ps.c
	if !r.Success {
		msg := fmt.Sprintf("%s%s probe failed: %s", strings.ToUpper(r.Kind.String()[:1]), r.Kind.String()[1:], r.Output)
		e.log.Warn("Unhealthy", "pod", c.p.key(), "container", c.name, "message", msg)
		c.event(eventWarning, "Unhealthy", "%s", msg)
	}
	if r.Success && r.Output != "" {
		msg := fmt.Sprintf("%s probe warning: %s", r.Kind, r.Output)
		e.log.Info("ProbeWarning", "pod", c.p.key(), "container", c.name, "message", msg)
		c.event(eventWarning, "ProbeWarning", "%s", msg)
	}
	if got := pw.run.Add(pw.spec, r.Success); got == prober.Unknown || got == ps.reported(r.Kind) {
		return 0, false
	}
	return prober.Input(r.Kind, r.Success)
}

// reported is the thresholded result of kind k the probe machine holds:
// readiness is its state, ready or unready. Liveness and startup hold none:
// a reported failure kills and stops every worker, a startup success stops
// its worker, and a liveness success is never reported (probeInput).
func (ps *probeState) reported(k ProbeKind) prober.Result {
	if k != ProbeReadiness {
		return prober.Unknown
	}
	if ps.ready() {
		return prober.Success
	}
	return prober.Failure
}
