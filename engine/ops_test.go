package engine

import (
	"testing"

	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/op/optest"
	"github.com/speclet/speclet/fsm"
)

// reply is one operation an action asks for, as the test expects it
// (name, and what it is about), and the result the test feeds it.
type reply struct {
	op, about string
	v         any
	err       error
}

// drive feeds o the replies (optest.Drive, with about).
func drive(t *testing.T, o op.Op, declared []string, replies []reply) op.Op {
	t.Helper()
	steps := make([]optest.Step, len(replies))
	for i, r := range replies {
		steps[i] = optest.Step{Op: r.op, About: r.about, V: r.v, Err: r.err}
	}
	return optest.Drive(t, o, declared, steps)
}

// opAction is an action of a machine owned by B that calls the runtime:
// the CRI methods its spec declares, and its first operation.
type opAction[B any] struct {
	cri   []string
	first func(B) op.Op
}

// runAction drives the action of ops named name, owned by b, with the
// replies (drive) and returns the op that ends it.
func runAction[B any](t *testing.T, ops map[string]opAction[B], name string, b B, replies []reply) op.Op {
	t.Helper()
	a, ok := ops[name]
	if !ok {
		t.Fatalf("no action %q among the operations' actions", name)
	}
	return drive(t, a.first(b), a.cri, replies)
}

// sandboxOps are the sandbox machine's actions that call the runtime, by
// spec name.
var sandboxOps = map[string]opAction[*sandboxState]{
	fsm.SandboxActionRunSandbox.String():   {fsm.SandboxActionCRI[fsm.SandboxActionRunSandbox], (*sandboxState).runSandbox},
	fsm.SandboxActionCheckSandbox.String(): {fsm.SandboxActionCRI[fsm.SandboxActionCheckSandbox], func(sb *sandboxState) op.Op { return sb.readStatus(false) }},
	fsm.SandboxActionStopSandbox.String():  {fsm.SandboxActionCRI[fsm.SandboxActionStopSandbox], func(sb *sandboxState) op.Op { return sb.stopFrom(0, nil) }},
}

// podOps are the pod machine's actions that call the runtime or deliver
// events to the pod's other machines, by spec name.
var podOps = map[string]opAction[*podState]{
	fsm.PodActionSyncPod.String():        {fsm.PodActionCRI[fsm.PodActionSyncPod], (*podState).syncPod},
	fsm.PodActionKillContainers.String(): {fsm.PodActionCRI[fsm.PodActionKillContainers], (*podState).killContainers},
	fsm.PodActionStopSandbox.String():    {fsm.PodActionCRI[fsm.PodActionStopSandbox], (*podState).stopSandbox},
	fsm.PodActionRemovePod.String():      {fsm.PodActionCRI[fsm.PodActionRemovePod], (*podState).removePod},
}

// ctrOps are the container machine's actions that call the runtime, by
// spec name.
var ctrOps = map[string]opAction[*ctrState]{
	fsm.ContainerActionCheckImage.String():         {fsm.ContainerActionCRI[fsm.ContainerActionCheckImage], (*ctrState).checkImage},
	fsm.ContainerActionPullImage.String():          {fsm.ContainerActionCRI[fsm.ContainerActionPullImage], (*ctrState).pullImage},
	fsm.ContainerActionCreateContainer.String():    {fsm.ContainerActionCRI[fsm.ContainerActionCreateContainer], (*ctrState).createContainer},
	fsm.ContainerActionStartContainer.String():     {fsm.ContainerActionCRI[fsm.ContainerActionStartContainer], (*ctrState).startContainer},
	fsm.ContainerActionStopContainer.String():      {fsm.ContainerActionCRI[fsm.ContainerActionStopContainer], (*ctrState).stopContainer},
	fsm.ContainerActionForceStopContainer.String(): {fsm.ContainerActionCRI[fsm.ContainerActionForceStopContainer], func(c *ctrState) op.Op { return c.stop(0) }},
	fsm.ContainerActionRecordExit.String():         {fsm.ContainerActionCRI[fsm.ContainerActionRecordExit], (*ctrState).recordExit},
	fsm.ContainerActionRemoveContainer.String():    {fsm.ContainerActionCRI[fsm.ContainerActionRemoveContainer], (*ctrState).removeContainers},
}

// TestRuntimeActionsAreOperations: every action of the pod, sandbox and
// container machines whose spec declares CRI calls is written as
// operations, and is driven by the tests of each machine.
func TestRuntimeActionsAreOperations(t *testing.T) {
	for a, cri := range fsm.SandboxActionCRI {
		if name := fsm.SandboxAction(a).String(); len(cri) > 0 && sandboxOps[name].first == nil {
			t.Errorf("sandbox action %s calls %v but has no operations in sandboxOps", name, cri)
		}
	}
	for a, cri := range fsm.ContainerActionCRI {
		if name := fsm.ContainerAction(a).String(); len(cri) > 0 && ctrOps[name].first == nil {
			t.Errorf("container action %s calls %v but has no operations in ctrOps", name, cri)
		}
	}
	for a, cri := range fsm.PodActionCRI {
		if name := fsm.PodAction(a).String(); len(cri) > 0 && podOps[name].first == nil {
			t.Errorf("pod action %s calls %v but has no operations in podOps", name, cri)
		}
	}
}
