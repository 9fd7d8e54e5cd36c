package worker

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/containers"
	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/images"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// ctrState is one container of a pod: its identity (name, spec, role),
// its machine, and its probe machine. The machine's guards, actions and
// durations are engine/containers' Container (the runtime's instances and
// the lifecycle) and engine/images' Puller (the image), both embedded;
// ctrState is their containers.Owner and images.Container
// (container_owner.go). Only one goroutine at a time fires a container's
// machine (the pod worker, or one goroutine per container that the worker
// waits for).
type ctrState struct {
	images.Puller        // the image guards and actions
	containers.Container // the instances, and every other guard, action and duration

	p       *podState
	name    string
	spec    *v1.Container // nil: a container adopted from the runtime that the spec no longer has
	hash    string        // runtimepods.ContainerHash(spec), "" without spec; set with spec by setSpec
	init    bool
	sidecar bool
	// ephemeral: an ephemeral container (engine/ephemeral.go); never
	// restarted, never ready, started whether or not the pod is initialized.
	ephemeral bool
	machine   *fsm.ContainerMachine

	// probe is the probe machine of the container.
	probe *probeState

	run fire.Run[fsm.ContainerState, fsm.ContainerEvent, fsm.ContainerAction, fsm.ContainerGuard, *ctrState] // the container machine in the fire loop
}

// ctrStep is a step of a container machine as its observers see it
// (observe.go).
type ctrStep = fire.Step[fsm.ContainerState, fsm.ContainerEvent, fsm.ContainerAction, fsm.ContainerGuard, *ctrState]

var _ fsm.ContainerImpl[op.Op] = (*ctrState)(nil)

func newCtrState(p *podState, c *v1.Container, init, sidecar bool) *ctrState {
	cs := &ctrState{p: p, name: c.Name, init: init, sidecar: sidecar}
	cs.bind()
	cs.probe = newProbeState(cs)
	cs.setSpec(c)
	cs.machine = fsm.BindContainerMachine(fsm.ContainerInitialState, cs)
	cs.run = fire.NewRun(cs, ctrObservers)
	return cs
}

func (c *ctrState) key() string {
	return string(c.p.pod.UID) + "/" + c.name
}

// fire delivers ev to the container machine and carries out the steps
// (engine/fire).
func (c *ctrState) fire(ctx context.Context, ev fsm.ContainerEvent) {
	fire.Fire(ctx, c.machine, &c.run, ev)
}

// containerOwner prefixes the timer owner of a container machine.
const containerOwner = "container/"

func (c *ctrState) raise(ev fsm.ContainerEvent) { c.run.Raise(ev) }

func (c *ctrState) Sinks() *observe.Sinks { return &c.p.h.Sinks }
func (c *ctrState) Now() time.Time        { return c.p.h.Clock.Now() }
func (c *ctrState) Logger() *slog.Logger  { return c.p.h.Log }
func (c *ctrState) LogAttrs() []any       { return []any{"pod", c.p.key(), "container", c.name} }
func (c *ctrState) Record() *history.Log  { return &c.p.w.hist }
func (c *ctrState) Instance() string      { return c.name }
func (c *ctrState) PodUID() types.UID     { return c.p.pod.UID }

// containerEntered re-arms the timers of the state the container machine
// entered (a timer that fires lets the pod sync through the sync tick's
// route: the container may start again) and runs enterHook.
func containerEntered(ctx context.Context, st *ctrStep) {
	if !st.Entered() {
		return
	}
	c := st.Owner
	ts := schedule.Of(c.machine.Timers(), c.p.h.Clock.Now(),
		func(d fsm.ContainerDuration) time.Duration { return fsm.ContainerDurationOf(c, d) },
		func(ctx context.Context, ev fsm.ContainerEvent, _ fsm.ContainerDuration) {
			c.fire(ctx, ev)
			c.p.fire(ctx, fsm.Route(fsm.InputSyncTick).Pod)
		})
	c.p.w.setTimers(containerOwner+c.name, ts)
	c.Entered(ctx, st.To)
}

// bind makes c the owner of its embedded Puller and Container.
func (c *ctrState) bind() {
	c.Puller.Bind(c)
	c.Container.Bind(c)
}

// initDone: an init container completed successfully, or a sidecar runs.
func (c *ctrState) initDone() bool {
	if c.sidecar {
		return c.machine.State() == fsm.ContainerStateRunning
	}
	return c.final() && c.Current() != nil && c.Current().ExitCode == 0
}

// final: the machine is terminated or removed; it never runs again.
func (c *ctrState) final() bool {
	st := c.machine.State()
	return st == fsm.ContainerStateTerminated || st == fsm.ContainerStateRemoved
}

// stopped: nothing of this container runs.
func (c *ctrState) stopped() bool {
	switch c.machine.State() {
	case fsm.ContainerStateWaiting, fsm.ContainerStatePullBackoff, fsm.ContainerStateCrashloopBackoff,
		fsm.ContainerStateExited, fsm.ContainerStateTerminated, fsm.ContainerStateRemoved:
		return true
	}
	return false
}

// setSpec installs the container's spec (nil: the spec no longer has it)
// and its hash, computed once per spec rather than at every sync.
func (c *ctrState) setSpec(spec *v1.Container) {
	c.spec, c.hash = spec, ""
	if spec != nil {
		c.hash = runtimepods.ContainerHash(spec)
	}
}

func (c *ctrState) backoffKey() string {
	return c.key() + "/" + c.hash
}
