package worker

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/sandbox"
	"github.com/speclet/speclet/fsm"
)

// sandboxState owns a pod's sandbox machine (spec/sandbox.hcl) and binds it
// to engine/sandbox's Sandbox, whose guards and actions it promotes; it is
// the Sandbox's sandbox.Pod. Only the pod's worker goroutine fires it.
type sandboxState struct {
	sandbox.Sandbox
	p       *podState
	machine *fsm.SandboxMachine

	run fire.Run[fsm.SandboxState, fsm.SandboxEvent, fsm.SandboxAction, fsm.SandboxGuard, *sandboxState] // the sandbox machine in the fire loop
}

// sandboxStep is a step of the sandbox machine as its observers see it
// (observe.go).
type sandboxStep = fire.Step[fsm.SandboxState, fsm.SandboxEvent, fsm.SandboxAction, fsm.SandboxGuard, *sandboxState]

var _ fsm.SandboxImpl[op.Op] = (*sandboxState)(nil)
var _ sandbox.Pod = (*sandboxState)(nil)

func newSandboxState(p *podState) *sandboxState {
	sb := &sandboxState{p: p}
	sb.Bind(sb)
	sb.machine = fsm.BindSandboxMachine(fsm.SandboxInitialState, sb)
	sb.run = fire.NewRun(sb, sandboxObservers)
	return sb
}

// fire delivers ev to the sandbox machine and carries out the steps.
func (sb *sandboxState) fire(ctx context.Context, ev fsm.SandboxEvent) {
	sb.ClearErr()
	fire.Fire(ctx, sb.machine, &sb.run, ev)
}

// ready: containers may start in the current sandbox.
func (sb *sandboxState) ready() bool { return sb.machine.State() == fsm.SandboxStateReady }

// adopt takes over the pod's sandboxes from a previous run (Sandbox.Adopt)
// and resumes the machine where they stand; it returns the ready sandbox,
// or nil.
func (sb *sandboxState) adopt(a *Adopted) *runtimeapi.PodSandbox {
	ready, st := sb.Adopt(a)
	if st != sb.machine.State() {
		sb.machine = fsm.BindSandboxMachine(st, sb)
	}
	return ready
}

// The machine's observers (observe.Owner) see the pod's.
func (sb *sandboxState) Sinks() *observe.Sinks { return &sb.p.h.Sinks }
func (sb *sandboxState) Now() time.Time        { return sb.p.h.Clock.Now() }
func (sb *sandboxState) Logger() *slog.Logger  { return sb.p.h.Log }
func (sb *sandboxState) LogAttrs() []any       { return sb.p.LogAttrs() }
func (sb *sandboxState) Record() *history.Log  { return &sb.p.w.hist }
func (sb *sandboxState) Instance() string      { return "" }
func (sb *sandboxState) PodUID() types.UID     { return sb.p.pod.UID }

// What the Sandbox reads of its pod and node (sandbox.Pod).
func (sb *sandboxState) Spec() *v1.Pod             { return sb.p.pod }
func (sb *sandboxState) Key() string               { return sb.p.key() }
func (sb *sandboxState) Done() bool                { return sb.p.PodDone() }
func (sb *sandboxState) RuntimeHandler() string    { return sb.p.w.runtimeHandler }
func (sb *sandboxState) Runtime() cri.Runtime      { return sb.p.h.Runtime }
func (sb *sandboxState) Raise(ev fsm.SandboxEvent) { sb.run.Raise(ev) }
func (sb *sandboxState) Stopping(id string)        { sb.p.h.PLEG.ForgetSandbox(id) }
func (sb *sandboxState) Event(eventType, reason, format string, args ...any) {
	sb.p.event(eventType, reason, format, args...)
}

// Ran: a container of the pod has run (ctrState.ran).
func (sb *sandboxState) Ran() bool {
	for _, c := range sb.p.all() {
		if c.Ran() {
			return true
		}
	}
	return false
}

// Cgroups is the node's pod cgroups (Host.PodCgroups), or nil.
func (sb *sandboxState) Cgroups() sandbox.Cgroups {
	if pc := sb.p.h.PodCgroups; pc != nil {
		return pc
	}
	return nil
}

// BuildConfig builds the sandbox config of attempt for the pod; a rebuilt
// one records no DNS warning, which was recorded when the sandbox was made.
func (sb *sandboxState) BuildConfig(attempt uint32, rebuilt bool) (*runtimeapi.PodSandboxConfig, error) {
	n := sb.p.h.Node
	if rebuilt {
		n.Warn = nil
	}
	userns, err := sb.p.userNamespace()
	if err != nil {
		return nil, err
	}
	return sandboxConfig(n, sb.p.pod, attempt, sb.p.cgroupParent(), userns)
}

// userNamespace is the user namespace option of the pod's sandbox and
// containers (Host.UserNamespace); nil without one.
func (p *podState) userNamespace() (*runtimeapi.UserNamespace, error) {
	if p.h.UserNamespace == nil {
		return nil, nil
	}
	return p.h.UserNamespace(p.pod, p.w.runtimeHandler)
}

// cgroupParent is the CgroupParent of the pod's sandbox ("" without pod
// cgroups).
func (p *podState) cgroupParent() string {
	if p.h.PodCgroups == nil {
		return ""
	}
	return p.h.PodCgroups.Parent(p.pod)
}
