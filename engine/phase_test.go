package engine

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/fsm"
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
