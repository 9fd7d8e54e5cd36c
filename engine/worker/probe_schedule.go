package worker

import (
	"context"
	"time"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// The probe machine's timer (spec/probe.hcl, duration next_probe). Each
// worker keeps its next tick that may probe (engine/probes); the states in
// which workers run arm probe_due for the earliest of them. The
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
	ts := schedule.Of(ps.machine.Timers(), ps.c.p.h.Clock.Now(),
		func(d fsm.ProbeDuration) time.Duration { return fsm.ProbeDurationOf(ps, d) },
		func(ctx context.Context, ev fsm.ProbeEvent, _ fsm.ProbeDuration) { ps.fire(ctx, ev) })
	ps.c.p.w.setTimers(probeOwner+ps.c.name, ts)
}

// addProbes anchors the ticks of every probe kind of the pod's containers
// that has none yet (probes.Workers.Add): kubelet's AddPod, which SyncPod
// calls once the volumes mounted.
func (s *podState) addProbes() {
	for _, c := range s.all() {
		c.probe.Add()
	}
}
