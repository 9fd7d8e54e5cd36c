package fsm

import (
	"context"
	"testing"
)

func TestActionFrom(t *testing.T) {
	ctx := context.Background()
	if m, a, ok := ActionFrom(ctx); ok || m != "" || a != "" {
		t.Fatalf("untagged context: %q %q %v", m, a, ok)
	}
	outer := WithAction(ctx, "pod", "sync_pod")
	inner := WithAction(outer, "container", "pull_image")
	if m, a, ok := ActionFrom(inner); !ok || m != "container" || a != "pull_image" {
		t.Fatalf("inner: %q %q %v", m, a, ok)
	}
	if m, a, ok := ActionFrom(outer); !ok || m != "pod" || a != "sync_pod" {
		t.Fatalf("outer: %q %q %v", m, a, ok)
	}
}

// tagRecorder records the action each dispatched operation found in its
// ctx. Its operations are functions of the action's context.
type tagRecorder struct{ got []string }

type recOp = func(context.Context) error

// runRec is the recorder's Exec: it calls the operation.
func runRec(ctx context.Context, o recOp) error { return o(ctx) }

func (r *tagRecorder) rec(ctx context.Context) error {
	m, a, _ := ActionFrom(ctx)
	r.got = append(r.got, m+"/"+a)
	return nil
}
func (r *tagRecorder) SyncPod() recOp {
	// An action that runs another machine's action (sync_pod delivers
	// create to the sandbox): the inner one is tagged with its own name,
	// the outer one keeps its tag.
	return func(ctx context.Context) error {
		if err := RunSandboxAction(ctx, r, runRec, SandboxActionRunSandbox); err != nil {
			return err
		}
		return r.rec(ctx)
	}
}
func (r *tagRecorder) CheckSandbox() recOp    { return r.rec }
func (r *tagRecorder) KillContainers() recOp  { return r.rec }
func (r *tagRecorder) MountVolumes() recOp    { return r.rec }
func (r *tagRecorder) EnsurePodCgroup() recOp { return r.rec }
func (r *tagRecorder) ReleaseName() recOp     { return r.rec }
func (r *tagRecorder) RemovePod() recOp       { return r.rec }
func (r *tagRecorder) RemovePodCgroup() recOp { return r.rec }
func (r *tagRecorder) ReportStatus() recOp    { return r.rec }
func (r *tagRecorder) ExceedDeadline() recOp  { return r.rec }
func (r *tagRecorder) RunSandbox() recOp      { return r.rec }
func (r *tagRecorder) StopSandbox() recOp     { return r.rec }
func (r *tagRecorder) UnmountVolumes() recOp  { return r.rec }

func TestRunActionTagsContext(t *testing.T) {
	r := &tagRecorder{}
	for _, a := range []PodAction{PodActionSyncPod, PodActionStopSandbox} {
		if err := RunPodAction(context.Background(), r, runRec, a); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"sandbox/run_sandbox", "pod/sync_pod", "pod/stop_sandbox"}
	if len(r.got) != len(want) {
		t.Fatalf("tags %v, want %v", r.got, want)
	}
	for i := range want {
		if r.got[i] != want[i] {
			t.Fatalf("tags %v, want %v", r.got, want)
		}
	}
	if got := SandboxActionCRI[SandboxActionRunSandbox]; len(got) != 2 || got[0] != "RunPodSandbox" {
		t.Errorf("run_sandbox cri = %v, want [RunPodSandbox PodSandboxStatus]", got)
	}
	if got := PodActionCalls[PodActionStopSandbox]; len(got) != 0 {
		t.Errorf("stop_sandbox calls = %v, want none", got)
	}
}

// TestStepRowAndChoices: a step names the transition row it took and the
// choice branches it passed.
func TestStepRowAndChoices(t *testing.T) {
	m := NewContainerMachineAt(ContainerStateRunning, guards{"restart_allowed": true})
	st, err := m.Fire(ContainerEventDied)
	if err != nil {
		t.Fatal(err)
	}
	r := ContainerTransitionTable[st.Row]
	if r.From != ContainerStateRunning || r.Event != ContainerEventDied || r.To != ContainerStateExited {
		t.Errorf("row %d = %+v, want running -died-> exited", st.Row, r)
	}
	if len(st.Choices) != 0 {
		t.Errorf("died: choices %v, want none (exited is no choice state)", st.Choices)
	}
	st, err = m.Fire(ContainerEventExitRecorded)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Choices) != 2 {
		t.Fatalf("choices %v, want two branches", st.Choices)
	}
	c := ContainerChoiceTable[st.Choices[0]]
	if c.State != ContainerStateDeciding || c.Guard != ContainerGuardRestartAllowed || c.To != ContainerStateRestarting {
		t.Errorf("choice %d = %+v, want deciding [restart_allowed] -> restarting", st.Choices[0], c)
	}
	c = ContainerChoiceTable[st.Choices[1]]
	if c.State != ContainerStateRestarting || c.To != ContainerStateCrashloopBackoff {
		t.Errorf("choice %d = %+v, want restarting [otherwise] -> crashloop_backoff", st.Choices[1], c)
	}
	// An internal transition passes no choice.
	st, err = m.Fire(ContainerEventKill)
	if err != nil {
		t.Fatal(err)
	}
	if r := ContainerTransitionTable[st.Row]; r.From != ContainerStateCrashloopBackoff || r.Event != ContainerEventKill || len(st.Choices) != 0 {
		t.Errorf("kill: row %d = %+v, choices %v", st.Row, r, st.Choices)
	}
	// Guarded rows: the row index tells which of the rows on one event won.
	p := NewPodMachine(guards{"name_taken": true})
	st2, _ := p.Fire(PodEventUpdate)
	if r := PodTransitionTable[st2.Row]; !r.HasGuard || r.Guard != PodGuardNameTaken {
		t.Errorf("update with name_taken: row %d = %+v", st2.Row, r)
	}
}

// TestUncancellable: the generated tag of an action carries the calls its
// spec declares uncancellable (the keys of <Machine>ActionUncancellable),
// the innermost tag counts, and a tag of WithAction carries none.
func TestUncancellable(t *testing.T) {
	ctx := context.Background()
	start := ContainerActionStartContainer.Tag(ctx)
	if !Uncancellable(start, "StartContainer") || Uncancellable(start, "ExecSync") {
		t.Error("start_container: StartContainer must be uncancellable, its postStart ExecSync not")
	}
	if Uncancellable(ctx, "StartContainer") || Uncancellable(WithAction(ctx, "container", "start_container"), "StartContainer") {
		t.Error("StartContainer uncancellable outside a generated tag")
	}
	if Uncancellable(ContainerActionPullImage.Tag(start), "StartContainer") {
		t.Error("an inner action's tag does not replace the outer one's")
	}
	for _, m := range []struct {
		tags []actionTag
		unc  []map[string]string
	}{
		{podActionTags[:], PodActionUncancellable[:]}, {containerActionTags[:], ContainerActionUncancellable[:]},
		{sandboxActionTags[:], SandboxActionUncancellable[:]}, {probeActionTags[:], ProbeActionUncancellable[:]},
		{nodeActionTags[:], NodeActionUncancellable[:]},
	} {
		for i, tag := range m.tags {
			if len(tag.uncancellable) != len(m.unc[i]) {
				t.Errorf("%s/%s: tag spares %v, the table %v", tag.machine, tag.action, tag.uncancellable, m.unc[i])
			}
			for _, method := range tag.uncancellable {
				if m.unc[i][method] == "" {
					t.Errorf("%s/%s: tag spares %s, which the table does not", tag.machine, tag.action, method)
				}
			}
		}
	}
}

// TestHandlerTag: a handler's tag names its caller and itself, as an
// action's names its machine and itself.
func TestHandlerTag(t *testing.T) {
	for _, h := range Handlers {
		m, a, ok := ActionFrom(h.Tag(context.Background()))
		if !ok || m != h.Caller() || a != h.String() || m == "" || a == "" {
			t.Errorf("handler %d: tag %q/%q (%v), want %q/%q", h, m, a, ok, h.Caller(), h.String())
		}
	}
	if m, a, _ := ActionFrom(HandlerKubeletApiExec.Tag(context.Background())); m != KubeletApiCallerName || a != "exec" {
		t.Errorf("exec handler tagged %s/%s", m, a)
	}
	if HandlerCRI[HandlerLogRotationRotateOnce][len(HandlerCRI[HandlerLogRotationRotateOnce])-1] != "ReopenContainerLog" {
		t.Errorf("log rotation may call %v", HandlerCRI[HandlerLogRotationRotateOnce])
	}
}
