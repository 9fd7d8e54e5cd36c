package engine

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/fsm"
)

// sandboxState is the sandbox machine of a pod and the sandboxes the runtime
// holds for it. It implements fsm.SandboxGuards, SandboxActions and
// SandboxDurations. Only the pod's worker goroutine fires it.
type sandboxState struct {
	p       *podState
	machine *fsm.SandboxMachine

	id  string   // the current sandbox ("" before the first RunPodSandbox returned)
	ids []string // every sandbox the pod had, oldest first; all are stopped and removed with the pod
	// cfg is the config RunPodSandbox got, kept only until the end of the
	// sync that made the sandbox (SyncPod); config() builds it again for
	// a later CRI call that takes it.
	cfg     *runtimeapi.PodSandboxConfig
	attempt uint32 // the current sandbox's attempt (its metadata)
	podIP   string
	// err is the error of the sandbox action the last delivery ran, which
	// the pod action that delivered it (sync_pod, stop_sandbox) returns for
	// its log line; nothing decides on it.
	err error

	run fire.Run[fsm.SandboxState, fsm.SandboxEvent, fsm.SandboxAction, fsm.SandboxGuard, *sandboxState] // the sandbox machine in the fire loop
}

// sandboxStep is a step of the sandbox machine as its observers see it
// (observe.go).
type sandboxStep = fire.Step[fsm.SandboxState, fsm.SandboxEvent, fsm.SandboxAction, fsm.SandboxGuard, *sandboxState]

var _ fsm.SandboxGuards = (*sandboxState)(nil)
var _ fsm.SandboxActions = (*sandboxState)(nil)
var _ fsm.SandboxDurations = (*sandboxState)(nil)

func newSandboxState(p *podState) *sandboxState {
	sb := &sandboxState{p: p}
	sb.machine = fsm.BindSandboxMachine(fsm.SandboxInitialState, sb)
	sb.run = fire.NewRun(sb, sandboxObservers)
	return sb
}

// fire delivers ev to the sandbox machine and carries out the steps.
func (sb *sandboxState) fire(ctx context.Context, ev fsm.SandboxEvent) {
	sb.err = nil
	fire.Fire(ctx, sb.machine, &sb.run, ev)
}

func (sb *sandboxState) raise(ev fsm.SandboxEvent) { sb.run.Raise(ev) }

func (sb *sandboxState) engine() *Engine       { return sb.p.e }
func (sb *sandboxState) Sinks() *observe.Sinks { return &sb.p.e.sinks }
func (sb *sandboxState) Now() time.Time        { return sb.p.e.clock.Now() }
func (sb *sandboxState) Logger() *slog.Logger  { return sb.p.e.log }
func (sb *sandboxState) LogAttrs() []any       { return sb.p.LogAttrs() }
func (sb *sandboxState) Record() *history.Log  { return &sb.p.w.hist }
func (sb *sandboxState) Instance() string      { return "" }
func (sb *sandboxState) PodUID() types.UID     { return sb.p.pod.UID }

// ready: containers may start in the current sandbox.
func (sb *sandboxState) ready() bool { return sb.machine.State() == fsm.SandboxStateReady }

// --- guards ---

// RecreateForbidden: no container would start in a new sandbox, as
// kubelet's computePodActions decides: restartPolicy Never and a container
// of the pod has run, or the pod is done (every regular container finished
// and may not restart, e.g. OnFailure after exit 0).
//
// A container whose only instance was created and never started has not
// run (ctrState.ran). kubelet counts any container status here, so a Never
// pod whose sandbox died before its container started stays Pending under
// kubelet with no sandbox for good; speclet gives it its one run in a new
// sandbox. This is also how a Never pod resumes after speclet was killed
// with such a container left in a stopped sandbox.
func (sb *sandboxState) RecreateForbidden() bool {
	if sb.p.PodDone() {
		return true
	}
	if sb.p.pod.Spec.RestartPolicy != v1.RestartPolicyNever {
		return false
	}
	for _, c := range sb.p.all() {
		if c.ran() {
			return true
		}
	}
	return false
}

// config is the current sandbox's config for the CRI calls that take one
// (CreateContainer, PullImage): the one RunPodSandbox got during the sync
// that made the sandbox, otherwise built again from the pod as kubelet
// builds it for every sync. A config that cannot be built again is logged
// and nil: the sandbox runs already, its containers are created with what
// the runtime has. It is safe to call from the goroutines of one parallel
// delivery: the worker sets and drops cfg outside them.
func (sb *sandboxState) config() *runtimeapi.PodSandboxConfig {
	if sb.cfg != nil {
		return sb.cfg
	}
	n := sb.p.e.podNode()
	n.Warn = nil // DNS warnings were recorded when the sandbox was made
	cfg, err := sandboxConfig(n, sb.p.pod, sb.attempt, sb.p.cgroupParent())
	if err != nil {
		sb.p.e.log.Warn("rebuild sandbox config", "pod", sb.p.key(), "err", err)
		return nil
	}
	return cfg
}

// --- actions ---

// RemovePodCgroup removes the pod's cgroup (Config.PodCgroups). A failure
// is logged; housekeeping retries (cleanup.go).
func (sb *sandboxState) RemovePodCgroup(ctx context.Context) error {
	return op.Exec(ctx, sb.p.e.rt, sb.removePodCgroup())
}

func (sb *sandboxState) removePodCgroup() op.Op {
	pc := sb.p.e.cfg.PodCgroups
	if pc == nil {
		return op.Done(nil)
	}
	uid := sb.p.pod.UID
	return op.Do("RemovePodCgroup", uid, func(context.Context) error { return pc.Remove(uid) }, func(err error) op.Op {
		if err != nil {
			return op.Done(fmt.Errorf("pod %q: %w", sb.p.key(), err))
		}
		return op.Done(nil)
	})
}

// cgroupParent is the CgroupParent of the pod's sandbox ("" without pod
// cgroups).
func (p *podState) cgroupParent() string {
	if p.e.cfg.PodCgroups == nil {
		return ""
	}
	return p.e.cfg.PodCgroups.Parent(p.pod)
}

// RunSandbox creates or updates the pod's cgroup (Config.PodCgroups), then
// creates a sandbox with the next attempt in it and reads its IP back;
// raises ready, create_failed (also when the cgroup could not be made), or
// status_failed (the ID is kept). Its operations are runSandbox's.
func (sb *sandboxState) RunSandbox(ctx context.Context) error {
	return op.Exec(ctx, sb.p.e.rt, sb.runSandbox())
}

// runSandbox is RunSandbox's first operation: the pod's cgroup, the
// sandbox config, its log directory, RunPodSandbox, then the new
// sandbox's status (created).
func (sb *sandboxState) runSandbox() op.Op {
	p := sb.p
	pc := p.e.cfg.PodCgroups
	if pc == nil {
		return sb.buildConfig()
	}
	return op.Do("EnsurePodCgroup", p.pod.UID, func(context.Context) error { return pc.Ensure(p.pod) },
		func(err error) op.Op {
			if err != nil {
				return sb.failed(fsm.SandboxEventCreateFailed, fmt.Errorf("create cgroup of pod %q: %w", p.key(), err))
			}
			return sb.buildConfig()
		})
}

// buildConfig builds the config of the next attempt (it reads the host's
// resolv.conf), makes its log directory and runs the sandbox.
func (sb *sandboxState) buildConfig() op.Op {
	p := sb.p
	attempt := uint32(len(sb.ids))
	return op.Host("SandboxConfig", attempt, func(context.Context) (*runtimeapi.PodSandboxConfig, error) {
		return sandboxConfig(p.e.podNode(), p.pod, attempt, p.cgroupParent())
	}, func(cfg *runtimeapi.PodSandboxConfig, err error) op.Op {
		if err != nil {
			return sb.failed(fsm.SandboxEventCreateFailed, fmt.Errorf("run sandbox of pod %q: %w", p.key(), err))
		}
		return op.Do("MakeLogDirectory", cfg.LogDirectory, func(context.Context) error {
			return podspec.EnsureDir(cfg.LogDirectory, 0o755)
		}, func(err error) op.Op {
			if err != nil {
				return sb.failed(fsm.SandboxEventCreateFailed, fmt.Errorf("run sandbox of pod %q: create log directory: %w", p.key(), err))
			}
			return op.RunPodSandbox(cfg, p.w.runtimeHandler, func(id string, err error) op.Op { return sb.created(cfg, id, err) })
		})
	})
}

// created reads RunPodSandbox's reply for cfg: a new sandbox is read back
// (readStatus), one whose name an earlier attempt reserved is adopted once
// ready (adoptReserved), a failure is create_failed.
func (sb *sandboxState) created(cfg *runtimeapi.PodSandboxConfig, id string, err error) op.Op {
	p := sb.p
	if err != nil {
		if prev := cri.ReservedFor(err); prev != "" {
			return op.PodSandboxStatus(prev, func(st *runtimeapi.PodSandboxStatus, err error) op.Op {
				return sb.adoptReserved(prev, cfg, st, err)
			})
		}
		return sb.createFailed(fmt.Errorf("run sandbox of pod %q: %w", p.key(), err))
	}
	sb.id, sb.ids, sb.cfg, sb.attempt, sb.podIP = id, append(sb.ids, id), cfg, cfg.GetMetadata().GetAttempt(), ""
	if p.pod.Spec.HostNetwork {
		// The node's network: no pod IP to read back. A sandbox an
		// interrupted earlier attempt left under the same name is never
		// taken for this one without its status (adoptReserved).
		sb.raise(fsm.SandboxEventReady)
		return op.Done(nil)
	}
	return sb.readStatus(true)
}

// createFailed is a sandbox that could not be made
// (FailedCreatePodSandBox): logged, a Kubernetes event, create_failed.
func (sb *sandboxState) createFailed(err error) op.Op {
	p := sb.p
	p.e.log.Warn("FailedCreatePodSandBox", "pod", p.key(), "uid", p.pod.UID, "err", err)
	p.event(eventWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
	return sb.failed(fsm.SandboxEventCreateFailed, err)
}

// adoptReserved takes over the sandbox id an earlier, unanswered
// RunPodSandbox of the same attempt made (containerd answered the retry
// that the name is reserved for id), from id's status st: only once the
// runtime describes it as ready. While the earlier call still runs,
// containerd reserves the name before the sandbox exists
// (PodSandboxStatus: not found); the create fails and the retry after
// sync_backoff asks again, keeping the attempt. A sandbox that exists but
// is not ready is kept to be stopped and removed with the pod, and the
// retry makes the next attempt.
func (sb *sandboxState) adoptReserved(id string, cfg *runtimeapi.PodSandboxConfig, st *runtimeapi.PodSandboxStatus, err error) op.Op {
	p := sb.p
	switch {
	case err != nil:
		err = fmt.Errorf("run sandbox of pod %q: its name is reserved for %s, which the runtime does not describe yet: %w", p.key(), id, err)
	case st.State != runtimeapi.PodSandboxState_SANDBOX_READY:
		sb.ids = append(sb.ids, id)
		err = fmt.Errorf("run sandbox of pod %q: its name is reserved for %s, which is not ready (%s)", p.key(), id, st.State)
	default:
		sb.id, sb.ids, sb.cfg, sb.attempt, sb.podIP = id, append(sb.ids, id), cfg, cfg.GetMetadata().GetAttempt(), ""
		if n := st.GetNetwork(); n != nil && !p.pod.Spec.HostNetwork {
			sb.podIP = n.Ip
		}
		sb.raise(fsm.SandboxEventReady)
		return op.Done(nil)
	}
	return sb.createFailed(err)
}

// CheckSandbox reads the status of the sandbox whose status was unknown;
// raises ready, died or status_failed.
func (sb *sandboxState) CheckSandbox(ctx context.Context) error {
	return op.Exec(ctx, sb.p.e.rt, sb.readStatus(false))
}

// readStatus reads the current sandbox's state and IP; fresh: right after
// RunPodSandbox, where a sandbox that is not ready is reported as
// status_failed (the creating state has no died row).
func (sb *sandboxState) readStatus(fresh bool) op.Op {
	return op.PodSandboxStatus(sb.id, func(st *runtimeapi.PodSandboxStatus, err error) op.Op {
		switch {
		case fresh && (cri.IsNotFound(err) || err == nil && st.State != runtimeapi.PodSandboxState_SANDBOX_READY):
			return sb.failed(fsm.SandboxEventStatusFailed, fmt.Errorf("sandbox of pod %q is not ready right after RunPodSandbox (left by an interrupted attempt?)", sb.p.key()))
		case cri.IsNotFound(err):
			sb.raise(fsm.SandboxEventDied)
			return op.Done(nil)
		case err != nil:
			return sb.failed(fsm.SandboxEventStatusFailed, fmt.Errorf("status of sandbox of pod %q: %w", sb.p.key(), err))
		case st.State != runtimeapi.PodSandboxState_SANDBOX_READY:
			sb.raise(fsm.SandboxEventDied)
			return op.Done(nil)
		}
		if n := st.GetNetwork(); n != nil && !sb.p.pod.Spec.HostNetwork {
			sb.podIP = n.Ip
		}
		sb.raise(fsm.SandboxEventReady)
		return op.Done(nil)
	})
}

// failed ends the action with err, kept for the delivering pod action,
// and raises ev.
func (sb *sandboxState) failed(ev fsm.SandboxEvent, err error) op.Op {
	sb.err = err
	sb.raise(ev)
	return op.Done(err)
}

// StopSandbox stops every sandbox of the pod; raises stopped when all calls
// succeeded.
func (sb *sandboxState) StopSandbox(ctx context.Context) error {
	return op.Exec(ctx, sb.p.e.rt, sb.stopFrom(0, nil))
}

// stopFrom stops the pod's sandboxes from the i-th on, after errs of those
// before; a sandbox the runtime no longer knows counts as stopped.
func (sb *sandboxState) stopFrom(i int, errs []error) op.Op {
	if i == len(sb.ids) {
		if err := errors.Join(errs...); err != nil {
			sb.err = err
			return op.Done(err)
		}
		sb.raise(fsm.SandboxEventStopped)
		return op.Done(nil)
	}
	id := sb.ids[i]
	sb.p.e.pleg.ForgetSandbox(id) // stopping it is not news
	return op.StopPodSandbox(id, func(err error) op.Op {
		if err = unlessGone(err, fmt.Sprintf("stop sandbox of pod %q", sb.p.key())); err != nil {
			errs = append(errs, err)
		}
		return sb.stopFrom(i+1, errs)
	})
}

// adopt takes over the pod's sandboxes from a previous run: the newest ready
// one becomes the current sandbox in state ready; the others are kept to be
// removed with the pod. It returns the ready sandbox, or nil.
func (sb *sandboxState) adopt(a *adoptedPod) *runtimeapi.PodSandbox {
	for i := len(a.Sandboxes) - 1; i >= 0; i-- {
		sb.ids = append(sb.ids, a.Sandboxes[i].Id)
	}
	ready := a.ReadySandbox()
	if ready == nil {
		if len(a.Sandboxes) > 0 {
			// The newest sandbox is no longer ready: a pod that completed
			// (its sandbox stopped, its dead containers kept) or whose
			// sandbox died. The machine resumes in dead, so the next sync
			// decides as for a death it saw: recreate_forbidden keeps a
			// completed pod's outcome instead of running it again.
			sb.id = a.Sandboxes[0].Id
			sb.machine = fsm.BindSandboxMachine(fsm.SandboxStateDead, sb)
		}
		return nil
	}
	// The adopted sandbox's config is built again when a CRI call needs it
	// (config).
	sb.id, sb.attempt = ready.Id, ready.GetMetadata().GetAttempt()
	sb.machine = fsm.BindSandboxMachine(fsm.SandboxStateReady, sb)
	return ready
}

// removeFrom removes the pod's sandboxes from the i-th on, and their
// containers with them, after the failures errs of those before; a sandbox
// the runtime no longer knows counts as removed. When all are removed the
// action goes on with then.
func (sb *sandboxState) removeFrom(i int, errs []error, then func() op.Op) op.Op {
	if i == len(sb.ids) {
		if err := errors.Join(errs...); err != nil {
			return op.Done(err)
		}
		return then()
	}
	return op.RemovePodSandbox(sb.ids[i], func(err error) op.Op {
		if err = unlessGone(err, fmt.Sprintf("remove sandbox of pod %q", sb.p.key())); err != nil {
			errs = append(errs, err)
		}
		return sb.removeFrom(i+1, errs, then)
	})
}
