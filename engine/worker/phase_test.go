package worker

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/containers"
	"github.com/speclet/speclet/engine/podstatus"
	"github.com/speclet/speclet/fsm"
	"github.com/speclet/speclet/spec"
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
		c := &ctrState{p: &podState{pod: pod}, name: "app", spec: &pod.Spec.Containers[0]}
		c.bind()
		if tc.id != "" {
			c.Adopt([]*runtimeapi.Container{{Id: tc.id, State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: now.UnixNano()}}, false)
		}
		c.machine = fsm.NewContainerMachineAt(fsm.ContainerStateRemoved, c)
		cv := c.view(false)
		v := &podView{Pod: pod, Containers: []containerView{cv}, Terminating: true, Terminated: true}
		if got := podstatus.PodPhase(pod, v); got != tc.wantPhase {
			t.Errorf("%s: phase %s, want %s (view %+v)", tc.name, got, tc.wantPhase, cv)
		}
		if tc.id != "" {
			if cv.Phase != phaseTerminated || cv.Current == nil || cv.Current.ExitCode != 137 || cv.Current.Reason != containers.ReasonContainerStatusUnknown {
				t.Errorf("%s: view %+v, want terminated with exit 137 %s", tc.name, cv, containers.ReasonContainerStatusUnknown)
			}
		}
	}
}

// TestPhaseBlockMatchesEngine: the state lists of spec/system.hcl's phase
// and conditions blocks (what the model reads as the facts of
// podphase.Of and podphase.ConditionsOf) are the engine's own notions, for
// every state of the machines: the container view's running, its showing
// an exit and its readiness, the pod's terminating and terminated, the
// probe's and the sandbox's ready.
func TestPhaseBlockMatchesEngine(t *testing.T) {
	s, diags := spec.Parse(spec.Embedded())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ph, cm := s.System.Phase, s.System.Conditions
	if ph == nil || cm == nil {
		t.Fatal("spec/system.hcl has no phase or conditions block")
	}
	in := func(refs []spec.MRef, state string) bool {
		return slices.ContainsFunc(refs, func(r spec.MRef) bool { return r.Name == state })
	}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "img"}}}}
	// world: a regular container in st with the probe machine in pst and the
	// pod machine in podSt; exit: an exit was recorded; reason: its waiting
	// reason.
	world := func(st fsm.ContainerState, pst fsm.ProbeState, podSt fsm.PodState, exit bool, reason string) *ctrState {
		ps := &podState{pod: pod}
		ps.machine = fsm.NewPodMachineAt(podSt, ps)
		c := &ctrState{p: ps, name: "app", spec: &pod.Spec.Containers[0]}
		c.bind()
		c.Adopt([]*runtimeapi.Container{{Id: "abc", State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: time.Unix(1000, 0).UnixNano()}}, false)
		c.SetWaiting(reason, "")
		if exit {
			c.SetExit(&termination{ContainerID: "abc", ExitCode: 0})
		}
		c.machine = fsm.NewContainerMachineAt(st, c)
		c.probe = &probeState{c: c}
		c.probe.Bind(c.probe)
		c.probe.machine = fsm.NewProbeMachineAt(pst, c.probe)
		return c
	}
	for _, st := range fsm.ContainerStates {
		name := st.String()
		// No exit recorded yet: the view runs exactly in running.
		if got := world(st, fsm.ProbeStateOff, fsm.PodStateSynced, false, "").view(false).Phase == phaseRunning; got != in(ph.Running, name) {
			t.Errorf("container %s: the view runs %v, the phase block's running says %v", name, got, !got)
		}
		// Entering a started state, it ran: its view runs there.
		if in(ph.Started, name) && !in(ph.Running, name) {
			t.Errorf("container %s: started but not running: the engine's view would show no exit for it", name)
		}
		if in(ph.Running, name) && !in(ph.Started, name) {
			t.Errorf("container %s runs but is not in started: a container that runs has run", name)
		}
		// An exit recorded, a waiting reason known: outside running, the
		// view shows the exit exactly in shows_exit.
		if !in(ph.Running, name) {
			if got := world(st, fsm.ProbeStateOff, fsm.PodStateSynced, true, containers.ReasonCrashLoopBackOff).view(false).Phase == phaseTerminated; got != in(cm.ShowsExit, name) {
				t.Errorf("container %s: the view shows the exit %v, the conditions block's shows_exit says %v", name, got, !got)
			}
		}
		// The probe says ready and the pod runs: ready exactly in serving.
		if got := world(st, fsm.ProbeStateReady, fsm.PodStateSynced, false, "").view(false).Ready; got != in(cm.Serving, name) {
			t.Errorf("container %s with its probe ready: the view's ready %v, the conditions block's serving says %v", name, got, !got)
		}
	}
	for _, pst := range fsm.ProbeStates {
		if got := world(fsm.ContainerStateRunning, pst, fsm.PodStateSynced, false, "").view(false).Ready; got != in(cm.ProbeReady, pst.String()) {
			t.Errorf("probe %s: a running container's ready %v, the conditions block's probe_ready says %v", pst, got, !got)
		}
	}
	for _, podSt := range fsm.PodStates {
		ps := &podState{pod: pod}
		ps.machine = fsm.NewPodMachineAt(podSt, ps)
		if got := ps.terminating(); got != in(ph.Terminating, podSt.String()) {
			t.Errorf("pod %s: terminating() %v, the phase block's terminating says %v", podSt, got, !got)
		}
		if got := ps.terminated(); got != in(ph.Terminated, podSt.String()) {
			t.Errorf("pod %s: terminated() %v, the phase block's terminated says %v", podSt, got, !got)
		}
	}
	for _, sbSt := range fsm.SandboxStates {
		sb := &sandboxState{}
		sb.machine = fsm.NewSandboxMachineAt(sbSt, sb)
		if got := sb.ready(); got != in(cm.SandboxReady, sbSt.String()) {
			t.Errorf("sandbox %s: ready() %v, the conditions block's sandbox_ready says %v", sbSt, got, !got)
		}
	}
}
