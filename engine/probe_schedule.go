package engine

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/prober"
	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// The probe machine's timer and its workers' schedules (spec/probe.hcl,
// duration next_probe). Each worker keeps its next tick that may probe; the
// states in which workers run arm probe_due for the earliest of them. The
// timer is armed once the step's actions ran (probeEntered), since those
// actions start the workers (start_startup, start_probes), trigger
// readiness (trigger_readiness) and move their schedules on (run_probe).

// probeOwner is the timer owner of a probe machine: "probe/CONTAINER".
const probeOwner = "probe/"

// probeStep is a step of a probe machine as its observers see it.
type probeStep = fire.Step[fsm.ProbeState, fsm.ProbeEvent, fsm.ProbeAction, fsm.ProbeGuard, *probeState]

// probeEntered arms the timers of the state the probe machine entered, after
// the step's actions: a state without timers, or whose next_probe is
// negative (no worker runs), cancels them. An action that moved the machine
// on (kill_container, through the container machine) armed the timers of
// the state it entered already; arming them again at the same instant gives
// the same deadlines.
func probeEntered(_ context.Context, st *probeStep) {
	if !st.Entered() {
		return
	}
	ps := st.Owner
	ts := schedule.Of(ps.machine.Timers(), ps.c.p.e.clock.Now(),
		func(d fsm.ProbeDuration) time.Duration { return fsm.ProbeDurationOf(ps, d) },
		func(ctx context.Context, ev fsm.ProbeEvent, _ fsm.ProbeDuration) { ps.fire(ctx, ev) })
	ps.c.p.w.setTimers(probeOwner+ps.c.name, ts)
}

// NextProbe is the duration next_probe: until the earliest next probe of
// the running workers, 0 when one is due already, negative (no timer) when
// none runs.
func (ps *probeState) NextProbe() time.Duration {
	var first time.Time
	for _, pw := range ps.workers {
		if pw != nil && (first.IsZero() || pw.next.Before(first)) {
			first = pw.next
		}
	}
	if first.IsZero() {
		return -1
	}
	return max(first.Sub(ps.c.p.e.clock.Now()), 0)
}

// The ticks of a probe kind (kubelet's prober worker.go run and doProbe).
// kubelet makes one worker per container and probe kind when the pod is
// added to the prober (AddPod, in each sync, after the volumes mounted and
// before the containers start) and keeps it until the pod is removed: its
// ticker has the probe's period, its phase is the worker's start, after a
// sleep of a random part of the period when the kubelet started less than
// one period before; doProbe runs at the start and at every tick and skips
// while the container does not run, within initialDelaySeconds of its start
// (int32(seconds since) < initialDelaySeconds: whole seconds, so a tick
// probes at or after start + initialDelaySeconds), before the startup probe
// succeeded (liveness, readiness) and after a kill until a new container.
// Here the kind's anchor (probeState.ticks) is that phase, set by addProbes
// at the pod's first sync that mounted its volumes and kept across the
// container's instances; a worker of an instance probes on the anchor's
// ticks that come after its start (firstProbe). The manual trigger of the
// readiness worker (TriggerReadiness) moves its anchor to now, as kubelet's
// ticker Reset.

// addProbes anchors the ticks of every probe kind of the pod's containers
// that has none yet: kubelet's AddPod, which SyncPod calls once the volumes
// mounted; a later sync anchors only a probe that a spec update added.
func (s *podState) addProbes() {
	for _, c := range s.all() {
		for k := range c.probe.ticks {
			if spec := c.probe.probeSpec(ProbeKind(k)); spec != nil {
				c.probe.anchor(ProbeKind(k), spec)
			}
		}
	}
}

// anchor returns the anchor of kind k's ticks, setting it to now (plus the
// jitter, when the engine started less than one period ago) when the pod was
// not added yet (a container adopted running after a restart of the engine
// starts its probes before the pod's first sync).
func (ps *probeState) anchor(k ProbeKind, spec *v1.Probe) time.Time {
	if ps.ticks[k].IsZero() {
		e := ps.c.p.e
		now := e.clock.Now()
		period := prober.Period(spec)
		ps.ticks[k] = now
		if now.Sub(e.startedAt) < period {
			ps.ticks[k] = now.Add(e.probeJitter(period))
		}
	}
	return ps.ticks[k]
}

// firstProbe is the first tick of kind k on which a worker that starts now
// probes: after now (the tick at this very instant is the one that found
// the container not running yet, or not started) and at or after the
// container's start plus initialDelaySeconds.
func (ps *probeState) firstProbe(k ProbeKind, spec *v1.Probe) time.Time {
	return prober.FirstProbe(spec, ps.anchor(k, spec), ps.c.p.e.clock.Now(), ps.c.startedAt)
}

// TriggerReadiness is kubelet's manual trigger of the readiness worker
// (prober_manager.go UpdatePodStatus, in the sync that finds the container
// started and running and its readiness not success): the worker probes at
// once, unless the instance is within its initial delay or the worker's
// previous probe still runs, and its ticks restart from now (the ticker's
// Reset). A worker still waiting for its first tick after the jitter takes
// the trigger there (kubelet's worker reads its trigger channel only after
// its first doProbe).
func (ps *probeState) TriggerReadiness(ctx context.Context) error {
	pw := ps.workers[ProbeReadiness]
	if pw == nil {
		return nil
	}
	now := ps.c.p.e.clock.Now()
	if ps.ticks[ProbeReadiness].After(now) {
		return nil
	}
	ps.ticks[ProbeReadiness] = now
	period := prober.Period(pw.spec)
	if end := prober.InitialDelayEnd(pw.spec, ps.c.startedAt); now.Before(end) {
		pw.next = schedule.TickAtOrAfter(now, period, end)
		return nil
	}
	if !pw.inFlight {
		ps.probe(pw, fsm.ProbeActionTriggerReadiness)
	}
	pw.next = now.Add(period)
	return nil
}
