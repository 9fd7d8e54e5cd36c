package engine

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/fsm"
)

// The probe machine's timer and its workers' schedules (spec/probe.hcl,
// duration next_probe). Each worker keeps when its next probe is due; the
// states in which workers run arm probe_due for the earliest of them. The
// timer is armed once the step's actions ran (probeEntered), since those
// actions start the workers (start_startup, start_probes) and move their
// schedules on (run_probe).

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
	ts := stateTimers(ps.machine.Timers(), ps.c.p.e.clock.Now(),
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

// firstProbe is when the first probe of a worker of spec starting now is
// due: initialDelaySeconds after the container's start, or now when that
// has passed; a worker that starts within one period of the engine's start
// waits a further random part of the period (kubelet's jitter, so that a
// restarted agent does not probe everything at once).
func (ps *probeState) firstProbe(spec *v1.Probe) time.Time {
	e := ps.c.p.e
	now := e.clock.Now()
	period := probePeriod(spec)
	first := ps.c.startedAt.Add(time.Duration(spec.InitialDelaySeconds) * time.Second)
	if first.Before(now) {
		first = now
	}
	if now.Sub(e.startedAt) < period {
		first = first.Add(e.probeJitter(period))
	}
	return first
}

// nextPeriod moves a due probe time next on by whole periods until it is
// after now.
func nextPeriod(next time.Time, period time.Duration, now time.Time) time.Time {
	for !next.After(now) {
		next = next.Add(period)
	}
	return next
}

func probePeriod(p *v1.Probe) time.Duration {
	s := p.PeriodSeconds
	if s <= 0 {
		s = probeDefaultPeriod
	}
	return time.Duration(s) * time.Second
}

func probeTimeout(p *v1.Probe) time.Duration {
	s := p.TimeoutSeconds
	if s <= 0 {
		s = probeDefaultTimeout
	}
	return time.Duration(s) * time.Second
}
