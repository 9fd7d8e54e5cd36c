package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/speclet/speclet/fsm"
)

// TestPodActionsAsOperations drives the pod machine's actions through the
// operations they return: the deliveries to the pod's other machines (not
// run here: the test sets where those machines stand), the volumes and the
// sandboxes' removal, fed by hand.
func TestPodActionsAsOperations(t *testing.T) {
	sandboxIn := func(st fsm.SandboxState) func(*podState) {
		return func(s *podState) { s.sandbox.machine = fsm.BindSandboxMachine(st, s.sandbox) }
	}
	stopped := func(s *podState) {
		withSandboxes(s, false, "sb-0", "sb-1")
		sandboxIn(fsm.SandboxStateStopped)(s)
	}
	for _, tc := range []struct {
		name    string
		action  string // the spec name of an action of podOps
		setup   func(*podState)
		replies []reply
		raised  []fsm.PodEvent
		failed  bool
	}{
		{name: "sync_pod: the sandbox is ready, the containers are asked to start", action: "sync_pod",
			setup: sandboxIn(fsm.SandboxStateReady),
			replies: []reply{{"Deliver", "update to containers", nil, nil}, {"mount_volumes", "uid-p00000", nil, nil},
				{"Deliver", "create to sandbox", nil, nil}, {"Deliver", "start to containers", nil, nil}},
			raised: []fsm.PodEvent{fsm.PodEventSyncOk}},
		{name: "sync_pod: no ready sandbox, no container start", action: "sync_pod",
			replies: []reply{{"Deliver", "update to containers", nil, nil}, {"mount_volumes", "uid-p00000", nil, nil},
				{"Deliver", "create to sandbox", nil, nil}},
			raised: []fsm.PodEvent{fsm.PodEventSyncFailed}},
		{name: "sync_pod: a dead sandbox's containers hear of it first", action: "sync_pod",
			setup: sandboxIn(fsm.SandboxStateDead),
			replies: []reply{{"Deliver", "update to containers", nil, nil}, {"Deliver", "sandbox_died to containers", nil, nil},
				{"mount_volumes", "uid-p00000", nil, nil}, {"Deliver", "create to sandbox", nil, nil}},
			raised: []fsm.PodEvent{fsm.PodEventSyncFailed}},
		{name: "sync_pod: a volume that never mounted fails the sync before any runtime call", action: "sync_pod",
			replies: []reply{{"Deliver", "update to containers", nil, nil}, {"mount_volumes", "uid-p00000", nil, errors.New("FailedMount")}},
			raised:  []fsm.PodEvent{fsm.PodEventSyncFailed}, failed: true},
		{name: "sync_pod: a kill cancelled the starts", action: "sync_pod",
			setup: sandboxIn(fsm.SandboxStateReady),
			replies: []reply{{"Deliver", "update to containers", nil, nil}, {"mount_volumes", "uid-p00000", nil, nil},
				{"Deliver", "create to sandbox", nil, nil}, {"Deliver", "start to containers", nil, context.Canceled}},
			raised: []fsm.PodEvent{fsm.PodEventSyncFailed}, failed: true},
		{name: "kill_containers: every container, then termination_done", action: "kill_containers",
			replies: []reply{{"Deliver", "kill to containers", nil, nil}},
			raised:  []fsm.PodEvent{fsm.PodEventTerminationDone}},
		{name: "stop_sandbox: the sandbox's error is the action's", action: "stop_sandbox",
			setup: func(s *podState) {
				withSandboxes(s, true, "sb-0")
				s.sandbox.StopSandbox().Reply(nil, errors.New("stop refused")) // what the delivery ran
			},
			replies: []reply{{"Deliver", "stop to sandbox", nil, nil}},
			failed:  true},
		{name: "remove_pod: not before the sandbox stopped", action: "remove_pod",
			failed: true},
		{name: "remove_pod: volumes, every sandbox, then removed to the machines", action: "remove_pod", setup: stopped,
			replies: []reply{{"unmount_volumes", "uid-p00000", nil, nil}, {"RemovePodSandbox", "sb-0", nil, errNotFound},
				{"RemovePodSandbox", "sb-1", nil, nil}, {"Deliver", "removed to containers and sandbox", nil, nil}},
			raised: []fsm.PodEvent{fsm.PodEventCleanupDone}},
		{name: "remove_pod: a failed removal delivers and raises nothing", action: "remove_pod", setup: stopped,
			replies: []reply{{"unmount_volumes", "uid-p00000", nil, nil}, {"RemovePodSandbox", "sb-0", nil, errors.New("busy")},
				{"RemovePodSandbox", "sb-1", nil, nil}},
			failed: true},
		{name: "remove_pod: volumes that stay mounted keep the sandboxes", action: "remove_pod", setup: stopped,
			replies: []reply{{"unmount_volumes", "uid-p00000", nil, errors.New("device busy")}},
			failed:  true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testPod(t)
			if tc.setup != nil {
				tc.setup(s)
			}
			o := runAction(t, podOps, tc.action, s, tc.replies)
			if got, want := fmt.Sprint(s.run.Pending()), fmt.Sprint(tc.raised); got != want {
				t.Errorf("raised %s, want %s", got, want)
			}
			if (o.Err() != nil) != tc.failed {
				t.Errorf("action error %v, want failed %v", o.Err(), tc.failed)
			}
		})
	}
}
