package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/fsm"
)

// sandboxState is the sandbox machine of a pod and the sandboxes the runtime
// holds for it. It implements fsm.SandboxGuards, SandboxActions and
// SandboxDurations. Only the pod's worker goroutine fires it.
type sandboxState struct {
	p       *podState
	machine *fsm.SandboxMachine

	id    string   // the current sandbox ("" before the first RunPodSandbox returned)
	ids   []string // every sandbox the pod had, oldest first; all are stopped and removed with the pod
	cfg   *runtimeapi.PodSandboxConfig
	podIP string
	err   error // the last action's error, for the sync's result

	run    runner[fsm.SandboxEvent, fsm.SandboxAction]
	events []fsm.SandboxEvent
}

var _ fsm.SandboxGuards = (*sandboxState)(nil)
var _ fsm.SandboxActions = (*sandboxState)(nil)
var _ fsm.SandboxDurations = (*sandboxState)(nil)

func newSandboxState(p *podState) *sandboxState {
	sb := &sandboxState{p: p}
	sb.machine = fsm.NewSandboxMachine(sb)
	sb.run = runner[fsm.SandboxEvent, fsm.SandboxAction]{
		kind: fsm.SandboxMachineName,
		who:  func() []any { return []any{"pod", p.key()} },
		fire: func(ev fsm.SandboxEvent) (step[fsm.SandboxAction], error) {
			st, err := sb.machine.Fire(ev)
			return stepOf(st.From, st.To, st.Event, st.Path, st.Actions, st.Row, st.Choices), err
		},
		run:    func(ctx context.Context, a fsm.SandboxAction) error { return fsm.RunSandboxAction(ctx, sb, a) },
		timers: func(time.Time) []timer { return nil }, // the sandbox machine has no timers
		state:  func() string { return sb.machine.State().String() },
		guard: func(i int) string {
			r := fsm.SandboxTransitionTable[i]
			return rowGuard(r.Guard, r.HasGuard)
		},
		choice: func(i int) string {
			c := fsm.SandboxChoiceTable[i]
			return branchString(c.Guard, c.HasGuard, c.To)
		},
		since: p.e.clock.Now(),
	}
	return sb
}

// fire delivers ev to the sandbox machine and carries out the steps.
func (sb *sandboxState) fire(ctx context.Context, ev fsm.SandboxEvent) {
	sb.err = nil
	fireLoop(ctx, sb.p.w, "sandbox", &sb.run, &sb.events, ev)
}

func (sb *sandboxState) raise(ev fsm.SandboxEvent) { sb.events = append(sb.events, ev) }

// ready: containers may start in the current sandbox.
func (sb *sandboxState) ready() bool { return sb.machine.State() == fsm.SandboxStateReady }

// --- guards ---

// RecreateForbidden: restartPolicy Never and a container of the pod has
// run (kubelet: no new sandbox; the pod fails).
func (sb *sandboxState) RecreateForbidden() bool {
	if sb.p.pod.Spec.RestartPolicy != v1.RestartPolicyNever {
		return false
	}
	for _, c := range sb.p.all() {
		if c.id != "" {
			return true
		}
	}
	return false
}

// --- actions ---

// RunSandbox creates a sandbox with the next attempt and reads its IP back;
// raises ready, create_failed, or status_failed (the ID is kept).
func (sb *sandboxState) RunSandbox(ctx context.Context) error {
	p := sb.p
	cfg := sandboxConfig(p.e.cfg.RootDir, p.pod, uint32(len(sb.ids)))
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return sb.fail(fsm.SandboxEventCreateFailed, fmt.Errorf("run sandbox of pod %q: create log directory: %w", p.key(), err))
	}
	id, err := p.e.rt.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		p.e.log.Warn("FailedCreatePodSandBox", "pod", p.key(), "uid", p.pod.UID, "err", err)
		p.event(eventWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
		return sb.fail(fsm.SandboxEventCreateFailed, fmt.Errorf("run sandbox of pod %q: %w", p.key(), err))
	}
	sb.id, sb.ids, sb.cfg, sb.podIP = id, append(sb.ids, id), cfg, ""
	if p.pod.Spec.HostNetwork {
		sb.raise(fsm.SandboxEventReady) // the node's network: no pod IP to read back
		return nil
	}
	return sb.readStatus(ctx)
}

// CheckSandbox reads the status of the sandbox whose status was unknown;
// raises ready, died or status_failed.
func (sb *sandboxState) CheckSandbox(ctx context.Context) error { return sb.readStatus(ctx) }

func (sb *sandboxState) readStatus(ctx context.Context) error {
	st, err := sb.p.e.rt.PodSandboxStatus(ctx, sb.id)
	switch {
	case cri.IsNotFound(err):
		sb.raise(fsm.SandboxEventDied)
		return nil
	case err != nil:
		return sb.fail(fsm.SandboxEventStatusFailed, fmt.Errorf("status of sandbox of pod %q: %w", sb.p.key(), err))
	case st.State != runtimeapi.PodSandboxState_SANDBOX_READY:
		sb.raise(fsm.SandboxEventDied)
		return nil
	}
	if n := st.GetNetwork(); n != nil {
		sb.podIP = n.Ip
	}
	sb.raise(fsm.SandboxEventReady)
	return nil
}

func (sb *sandboxState) fail(ev fsm.SandboxEvent, err error) error {
	sb.err = err
	sb.raise(ev)
	return err
}

// StopSandbox stops every sandbox of the pod; raises stopped when all calls
// succeeded.
func (sb *sandboxState) StopSandbox(ctx context.Context) error {
	var errs []error
	for _, id := range sb.ids {
		sb.p.e.pleg.ForgetSandbox(id) // stopping it is not news
		errs = append(errs, stopSandbox(ctx, sb.p.e.rt, sb.p.key(), id))
	}
	if err := errors.Join(errs...); err != nil {
		sb.err = err
		return err
	}
	sb.raise(fsm.SandboxEventStopped)
	return nil
}

// adopt takes over the pod's sandboxes from a previous run: the newest ready
// one becomes the current sandbox in state ready; the others are kept to be
// removed with the pod. It returns the ready sandbox, or nil.
func (sb *sandboxState) adopt(a *adoptedPod) *runtimeapi.PodSandbox {
	for i := len(a.Sandboxes) - 1; i >= 0; i-- {
		sb.ids = append(sb.ids, a.Sandboxes[i].Id)
	}
	ready := a.readySandbox()
	if ready == nil {
		return nil
	}
	sb.id = ready.Id
	sb.cfg = sandboxConfig(sb.p.e.cfg.RootDir, sb.p.pod, ready.GetMetadata().GetAttempt())
	sb.machine = fsm.NewSandboxMachineAt(fsm.SandboxStateReady, sb)
	return ready
}

// stopSandbox stops sandbox id of pod; a sandbox the runtime no longer knows
// counts as stopped.
func stopSandbox(ctx context.Context, rt cri.Runtime, pod, id string) error {
	if err := rt.StopPodSandbox(ctx, id); err != nil && !cri.IsNotFound(err) {
		return fmt.Errorf("stop sandbox of pod %q: %w", pod, err)
	}
	return nil
}

// removeSandbox removes sandbox id of pod and its containers.
func removeSandbox(ctx context.Context, rt cri.Runtime, pod, id string) error {
	if err := rt.RemovePodSandbox(ctx, id); err != nil && !cri.IsNotFound(err) {
		return fmt.Errorf("remove sandbox of pod %q: %w", pod, err)
	}
	return nil
}
