package worker

import (
	"errors"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/internal/suite"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/op/optest"
	"github.com/speclet/speclet/fsm"
)

// reply is one operation an action asks for, as the test expects it
// (name, and what it is about), and the result the test feeds it.
type reply struct {
	Op, About string
	V         any
	Err       error
}

// runAction drives the action of ops named name, owned by b, with the
// replies (optest.RunReplies) and returns the op that ends it.
func runAction[B any](t *testing.T, ops map[string]optest.Action[B], name string, b B, replies []reply) op.Op {
	t.Helper()
	return optest.RunReplies(t, ops, name, b, replies)
}

// podOps are the pod machine's actions that call the runtime or deliver
// events to the pod's other machines, by spec name.
var podOps = map[string]optest.Action[*podState]{
	fsm.PodActionSyncPod.String():        {CRI: fsm.PodActionCRI[fsm.PodActionSyncPod], First: (*podState).SyncPod},
	fsm.PodActionKillContainers.String(): {CRI: fsm.PodActionCRI[fsm.PodActionKillContainers], First: (*podState).KillContainers},
	fsm.PodActionStopSandbox.String():    {CRI: fsm.PodActionCRI[fsm.PodActionStopSandbox], First: (*podState).StopSandbox},
	fsm.PodActionRemovePod.String():      {CRI: fsm.PodActionCRI[fsm.PodActionRemovePod], First: (*podState).RemovePod},
}

// ctrOps are the container machine's actions that call the runtime, by
// spec name.
var ctrOps = map[string]optest.Action[*ctrState]{
	fsm.ContainerActionCheckImage.String():         {CRI: fsm.ContainerActionCRI[fsm.ContainerActionCheckImage], First: (*ctrState).CheckImage},
	fsm.ContainerActionPullImage.String():          {CRI: fsm.ContainerActionCRI[fsm.ContainerActionPullImage], First: (*ctrState).PullImage},
	fsm.ContainerActionCreateContainer.String():    {CRI: fsm.ContainerActionCRI[fsm.ContainerActionCreateContainer], First: (*ctrState).CreateContainer},
	fsm.ContainerActionStartContainer.String():     {CRI: fsm.ContainerActionCRI[fsm.ContainerActionStartContainer], First: (*ctrState).StartContainer},
	fsm.ContainerActionStopContainer.String():      {CRI: fsm.ContainerActionCRI[fsm.ContainerActionStopContainer], First: (*ctrState).StopContainer},
	fsm.ContainerActionForceStopContainer.String(): {CRI: fsm.ContainerActionCRI[fsm.ContainerActionForceStopContainer], First: (*ctrState).ForceStopContainer},
	fsm.ContainerActionRecordExit.String():         {CRI: fsm.ContainerActionCRI[fsm.ContainerActionRecordExit], First: (*ctrState).RecordExit},
	fsm.ContainerActionRemoveContainer.String():    {CRI: fsm.ContainerActionCRI[fsm.ContainerActionRemoveContainer], First: (*ctrState).RemoveContainer},
}

// TestRuntimeActionsAreDriven: every action of the pod and container
// machines whose spec declares CRI calls has its operations driven by the
// tests of each machine (the sandbox machine's: engine/sandbox's).
func TestRuntimeActionsAreDriven(t *testing.T) {
	optest.Complete(t, "container", fsm.ContainerActionCRI[:], func(i int) string { return fsm.ContainerAction(i).String() }, ctrOps)
	optest.Complete(t, "pod", fsm.PodActionCRI[:], func(i int) string { return fsm.PodAction(i).String() }, podOps)
}

// errNotFound is the runtime's reply about an object it does not know.
var errNotFound = &cri.Error{Op: "PodSandboxStatus", Class: cri.ClassNotFound, Err: errors.New("not found")}

// testPod is a new pod of a worker whose runtime answers nothing: the
// test feeds the replies.
func testPod(t *testing.T) *podState {
	t.Helper()
	pod := suite.Pod(0)
	return newPodState(New(testHost(t), pod, nil, "", nil), pod, nil)
}

// withSandboxes gives the pod the sandboxes ids (oldest first) as after a
// restart: the last is current, ready if ready.
func withSandboxes(s *podState, ready bool, ids ...string) {
	a := &Adopted{}
	for i := len(ids) - 1; i >= 0; i-- {
		a.Sandboxes = append(a.Sandboxes, &runtimeapi.PodSandbox{Id: ids[i], State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY})
	}
	if ready {
		a.Sandboxes[0].State = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	s.sandbox.adopt(a)
}
