package engine

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/fsm"
	"github.com/speclet/speclet/spec/podphase"
)

// TestViewRemovedBeforeExitRecorded: a container removed while it was
// being stopped, before any exit was recorded (stopping --removed-->
// removed), shows kubelet's ContainerStatusUnknown exit, so the phase is
// Failed, not Pending as for a container that never ran; one removed that
// never had an instance has not started.
func TestViewRemovedBeforeExitRecorded(t *testing.T) {
	now := time.Unix(1000, 0)
	pod := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "app", Image: "img"}}}}
	for _, tc := range []struct {
		name, id  string
		wantPhase v1.PodPhase
	}{
		{"ran", "abc", v1.PodFailed},
		{"never created", "", v1.PodPending},
	} {
		c := &ctrState{p: &podState{pod: pod}, name: "app", spec: &pod.Spec.Containers[0], id: tc.id}
		if tc.id != "" {
			c.startedAt = now
		}
		c.machine = fsm.NewContainerMachineAt(fsm.ContainerStateRemoved, c)
		cv := c.view()
		v := &podView{Pod: pod, Containers: []containerView{cv}, Terminating: true, Terminated: true}
		if got := podPhase(pod, v); got != tc.wantPhase {
			t.Errorf("%s: phase %s, want %s (view %+v)", tc.name, got, tc.wantPhase, cv)
		}
		if tc.id != "" {
			if cv.Phase != phaseTerminated || cv.Current == nil || cv.Current.ExitCode != 137 || cv.Current.Reason != ReasonContainerStatusUnknown {
				t.Errorf("%s: view %+v, want terminated with exit 137 %s", tc.name, cv, ReasonContainerStatusUnknown)
			}
		}
	}
}

// TestPhaseFacts: how a container view reads as the facts podphase.Of
// takes (the model reads the same facts from the machines' states, see
// spec/system.hcl's phase block).
func TestPhaseFacts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		view       containerView
		wantState  string
		wantFailed bool
	}{
		{"waiting, never ran", containerView{Phase: phaseWaiting}, "not started", false},
		{"running", containerView{Phase: phaseRunning}, "runs", false},
		{"running again after a failure", containerView{Phase: phaseRunning, Last: &termination{ExitCode: 1}}, "runs", false},
		{"terminated 0", containerView{Phase: phaseTerminated, Current: &termination{ExitCode: 0}}, "exited", false},
		{"terminated 1", containerView{Phase: phaseTerminated, Current: &termination{ExitCode: 1}}, "exited", true},
		{"terminated, exit unknown", containerView{Phase: phaseTerminated}, "exited", true},
		{"CrashLoopBackOff after 0", containerView{Phase: phaseWaiting, WaitingReason: ReasonCrashLoopBackOff, Last: &termination{ExitCode: 0}}, "exited", false},
		{"CrashLoopBackOff after 2", containerView{Phase: phaseWaiting, WaitingReason: ReasonCrashLoopBackOff, Last: &termination{ExitCode: 2}}, "exited", true},
	} {
		f := phaseFacts(podphase.Regular, &tc.view)
		state := map[podphase.State]string{podphase.NotStarted: "not started", podphase.Runs: "runs", podphase.Exited: "exited"}[f.State]
		if state != tc.wantState || f.Failed != tc.wantFailed || f.Kind != podphase.Regular {
			t.Errorf("%s: facts %+v (%s), want %s, failed %v", tc.name, f, state, tc.wantState, tc.wantFailed)
		}
	}
}
