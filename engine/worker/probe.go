package worker

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
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/prober"
	"github.com/speclet/speclet/engine/probes"
	"github.com/speclet/speclet/fsm"
)

// Probes (kubelet pkg/kubelet/prober): the probe machine of a container
// (spec/probe.hcl), bound to engine/probes' Workers, one per probe kind,
// which start the probes and count their results (engine/probes). The
// probe posts its raw result to the pod worker as an input; the worker
// counts it against the thresholds (Workers.Result) and, when the
// thresholded result changes, fires the route of spec/routes.hcl.
// The machine's timer probe_due is a machine timer of the pod worker
// (owner "probe/CONTAINER", probe_schedule.go), so it runs on the engine's
// clock and the sync tick finds it due.

// probeState owns the probe machine of one container and binds it to
// engine/probes' Workers, whose actions and duration it promotes; it is the
// Workers' probes.Container. Only the pod worker goroutine touches it.
type probeState struct {
	probes.Workers
	c       *ctrState
	machine *fsm.ProbeMachine

	run fire.Run[fsm.ProbeState, fsm.ProbeEvent, fsm.ProbeAction, fsm.ProbeGuard, *probeState] // the probe machine in the fire loop
}

var _ fsm.ProbeImpl[op.Op] = (*probeState)(nil)
var _ probes.Container = (*probeState)(nil)

func newProbeState(c *ctrState) *probeState {
	ps := &probeState{c: c}
	ps.Bind(ps)
	ps.machine = fsm.BindProbeMachine(fsm.ProbeInitialState, ps)
	ps.run = fire.NewRun(ps, probeObservers)
	return ps
}

// fire delivers ev to the probe machine and carries out the steps
// (engine/fire); probeEntered arms the timers of a state entered.
func (ps *probeState) fire(ctx context.Context, ev fsm.ProbeEvent) {
	fire.Fire(ctx, ps.machine, &ps.run, ev)
}

// The machine's observers (observe.Owner) see the container's.
func (ps *probeState) Sinks() *observe.Sinks { return &ps.c.p.h.Sinks }
func (ps *probeState) Now() time.Time        { return ps.c.p.h.Clock.Now() }
func (ps *probeState) Logger() *slog.Logger  { return ps.c.p.h.Log }
func (ps *probeState) LogAttrs() []any       { return ps.c.LogAttrs() }
func (ps *probeState) Record() *history.Log  { return &ps.c.p.w.hist }
func (ps *probeState) Instance() string      { return ps.c.name }
func (ps *probeState) PodUID() types.UID     { return ps.c.p.pod.UID }

// started: the startup probe succeeded (or there is none) for the running
// instance.
func (ps *probeState) started() bool {
	switch ps.machine.State() {
	case fsm.ProbeStateUnready, fsm.ProbeStateReady, fsm.ProbeStateStopping, fsm.ProbeStateKilling:
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
	case s == fsm.ContainerStateStopping:
		// The instance still runs (its preStop hook, StopContainer):
		// readiness goes on, the rest stop.
		switch st {
		case fsm.ProbeStateStartingUp, fsm.ProbeStateUnready, fsm.ProbeStateReady:
			ps.fire(ctx, fsm.ProbeEventContainerStopping)
		}
	case s != fsm.ContainerStateRunning && st != fsm.ProbeStateOff && st != fsm.ProbeStateKilled:
		ps.fire(ctx, fsm.ProbeEventContainerStopped)
	}
}

// What the Workers read of the container and tell it (probes.Container).
func (ps *probeState) Name() string             { return ps.c.name }
func (ps *probeState) Spec() *v1.Container      { return ps.c.spec }
func (ps *probeState) StartedAt() time.Time     { return ps.c.StartedAt() }
func (ps *probeState) Context() context.Context { return ps.c.p.h.Engine.Context() }
func (ps *probeState) State() fsm.ProbeState    { return ps.machine.State() }
func (ps *probeState) Raise(ev fsm.ProbeEvent)  { ps.run.Raise(ev) }

// After is the engine clock's timer; a free-running readiness worker waits
// on it from its own goroutine.
func (ps *probeState) After(d time.Duration) <-chan time.Time { return ps.c.p.h.Clock.After(d) }

// Target is the running instance, at the node's IP on the host's network.
func (ps *probeState) Target() handlers.Target {
	t := ps.c.HookTarget()
	if ps.c.p.pod.Spec.HostNetwork {
		t.PodIP = ps.c.p.h.NodeIP
	}
	return t
}

// Jitter is the engine's probe jitter while it started less than one
// period ago.
func (ps *probeState) Jitter(period time.Duration) time.Duration {
	return ps.c.p.h.Engine.FirstProbeDelay(period)
}

// Post hands a raw result to the pod worker as an input. It reads nothing
// the worker changes: it runs on the probe's goroutine.
func (ps *probeState) Post(r probes.Report) {
	ps.c.p.w.Post(Input{Kind: inbox.Probe, P: Payload{Probe: r}})
}

// Event records a probe's Unhealthy or ProbeWarning as a Warning event of
// the container.
func (ps *probeState) Event(reason, msg string) { ps.c.event(eventWarning, reason, "%s", msg) }

// Probed counts a probe's raw result in the engine's prober series.
func (ps *probeState) Probed(k prober.Kind, success bool, d time.Duration) {
	pod := ps.c.p.pod
	kind := k.String() // kubelet's probe_type is "Readiness", "Liveness", "Startup"
	ps.c.p.h.Sinks.Metrics.Probed(strings.ToUpper(kind[:1])+kind[1:], success, ps.c.name, pod.Name, pod.Namespace, string(pod.UID), d)
}

// Kill kills the container through its machine because its probe of kind
// k failed, with the probe's grace period (-1: the pod's).
func (ps *probeState) Kill(ctx context.Context, k prober.Kind, grace int64) {
	c := ps.c
	msg := fmt.Sprintf("Container %s failed %s probe, will be restarted", c.name, k)
	c.p.h.Log.Info("Killing", "pod", c.p.key(), "container", c.name, "message", msg)
	c.event(eventNormal, "Killing", "%s", msg)
	c.KilledByProbe(grace)
	c.fire(ctx, fsm.ContainerEventLivenessFailed)
}
