package sandbox

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/fsm"
)

var _ fsm.SandboxActions[op.Op] = (*Sandbox)(nil) // spec/sandbox.hcl's actions, as operations

// RemovePodCgroup removes the pod's cgroup (Pod.Cgroups). A failure is
// logged; housekeeping retries.
func (s *Sandbox) RemovePodCgroup() op.Op {
	pc := s.pod.Cgroups()
	if pc == nil {
		return op.Done(nil)
	}
	uid := s.pod.Spec().UID
	return op.Do("RemovePodCgroup", uid, func(context.Context) error { return pc.Remove(uid) }, func(err error) op.Op {
		if err != nil {
			return op.Done(fmt.Errorf("pod %q: %w", s.pod.Key(), err))
		}
		return op.Done(nil)
	})
}

// RunSandbox creates a sandbox with the next attempt in it, in the pod's
// cgroup (the pod machine's ensure_pod_cgroup made it), and reads its IP
// back; raises ready, create_failed or status_failed (the ID is kept). Its
// operations: the sandbox config, its log directory, RunPodSandbox, then
// the new sandbox's status (created).
func (s *Sandbox) RunSandbox() op.Op { return s.buildConfig() }

// buildConfig builds the config of the next attempt (it reads the host's
// resolv.conf), makes its log directory and runs the sandbox.
func (s *Sandbox) buildConfig() op.Op {
	attempt := uint32(len(s.ids))
	return op.Host("SandboxConfig", attempt, func(context.Context) (*runtimeapi.PodSandboxConfig, error) {
		return s.pod.BuildConfig(attempt, false)
	}, func(cfg *runtimeapi.PodSandboxConfig, err error) op.Op {
		if err != nil {
			// kubelet's event of a config it cannot generate carries the
			// error as it is (a user namespace the runtime lacks, a bad
			// dnsConfig).
			s.pod.Event(v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			return s.failed(fsm.SandboxEventCreateFailed, fmt.Errorf("run sandbox of pod %q: %w", s.pod.Key(), err))
		}
		return op.Do("MakeLogDirectory", cfg.LogDirectory, func(context.Context) error {
			return podspec.EnsureDir(cfg.LogDirectory, 0o755)
		}, func(err error) op.Op {
			if err != nil {
				return s.failed(fsm.SandboxEventCreateFailed, fmt.Errorf("run sandbox of pod %q: create log directory: %w", s.pod.Key(), err))
			}
			return op.RunPodSandbox(cfg, s.pod.RuntimeHandler(), func(id string, err error) op.Op { return s.created(cfg, id, err) })
		})
	})
}

// created reads RunPodSandbox's reply for cfg: a new sandbox is read back
// (readStatus), one whose name an earlier attempt reserved is adopted once
// ready (adoptReserved), a failure is create_failed.
func (s *Sandbox) created(cfg *runtimeapi.PodSandboxConfig, id string, err error) op.Op {
	if err != nil {
		if prev := cri.ReservedFor(err); prev != "" {
			return op.PodSandboxStatus(prev, func(st *runtimeapi.PodSandboxStatus, err error) op.Op {
				return s.adoptReserved(prev, cfg, st, err)
			})
		}
		return s.createFailed(fmt.Errorf("run sandbox of pod %q: %w", s.pod.Key(), err))
	}
	s.id, s.ids, s.cfg, s.attempt, s.podIP = id, append(s.ids, id), cfg, cfg.GetMetadata().GetAttempt(), ""
	if s.pod.Spec().Spec.HostNetwork {
		// The node's network: no pod IP to read back. A sandbox an
		// interrupted earlier attempt left under the same name is never
		// taken for this one without its status (adoptReserved).
		s.pod.Raise(fsm.SandboxEventReady)
		return op.Done(nil)
	}
	return s.readStatus(true)
}

// createFailed is a sandbox that could not be made
// (FailedCreatePodSandBox): logged, a Kubernetes event, create_failed.
func (s *Sandbox) createFailed(err error) op.Op {
	s.pod.Logger().Warn("FailedCreatePodSandBox", "pod", s.pod.Key(), "uid", s.pod.Spec().UID, "err", err)
	s.pod.Event(v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
	return s.failed(fsm.SandboxEventCreateFailed, err)
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
func (s *Sandbox) adoptReserved(id string, cfg *runtimeapi.PodSandboxConfig, st *runtimeapi.PodSandboxStatus, err error) op.Op {
	switch {
	case err != nil:
		err = fmt.Errorf("run sandbox of pod %q: its name is reserved for %s, which the runtime does not describe yet: %w", s.pod.Key(), id, err)
	case st.State != runtimeapi.PodSandboxState_SANDBOX_READY:
		s.ids = append(s.ids, id)
		err = fmt.Errorf("run sandbox of pod %q: its name is reserved for %s, which is not ready (%s)", s.pod.Key(), id, st.State)
	default:
		s.id, s.ids, s.cfg, s.attempt, s.podIP = id, append(s.ids, id), cfg, cfg.GetMetadata().GetAttempt(), ""
		if n := st.GetNetwork(); n != nil && !s.pod.Spec().Spec.HostNetwork {
			s.podIP = n.Ip
		}
		s.pod.Raise(fsm.SandboxEventReady)
		return op.Done(nil)
	}
	return s.createFailed(err)
}

// CheckSandbox reads the status of the sandbox whose status was unknown;
// raises ready, died or status_failed.
func (s *Sandbox) CheckSandbox() op.Op { return s.readStatus(false) }

// readStatus reads the current sandbox's state and IP; fresh: right after
// RunPodSandbox, where a sandbox that is not ready is reported as
// status_failed (the creating state has no died row).
func (s *Sandbox) readStatus(fresh bool) op.Op {
	return op.PodSandboxStatus(s.id, func(st *runtimeapi.PodSandboxStatus, err error) op.Op {
		switch {
		case fresh && (cri.IsNotFound(err) || err == nil && st.State != runtimeapi.PodSandboxState_SANDBOX_READY):
			return s.failed(fsm.SandboxEventStatusFailed, fmt.Errorf("sandbox of pod %q is not ready right after RunPodSandbox (left by an interrupted attempt?)", s.pod.Key()))
		case cri.IsNotFound(err):
			s.pod.Raise(fsm.SandboxEventDied)
			return op.Done(nil)
		case err != nil:
			return s.failed(fsm.SandboxEventStatusFailed, fmt.Errorf("status of sandbox of pod %q: %w", s.pod.Key(), err))
		case st.State != runtimeapi.PodSandboxState_SANDBOX_READY:
			s.pod.Raise(fsm.SandboxEventDied)
			return op.Done(nil)
		}
		if n := st.GetNetwork(); n != nil && !s.pod.Spec().Spec.HostNetwork {
			s.podIP = n.Ip
		}
		s.pod.Raise(fsm.SandboxEventReady)
		return op.Done(nil)
	})
}

// failed ends the action with err, kept for the delivering pod action,
// and raises ev.
func (s *Sandbox) failed(ev fsm.SandboxEvent, err error) op.Op {
	s.err = err
	s.pod.Raise(ev)
	return op.Done(err)
}

// StopSandbox stops every sandbox of the pod; raises stopped when all calls
// succeeded.
func (s *Sandbox) StopSandbox() op.Op { return s.stopFrom(0, nil) }

// stopFrom stops the pod's sandboxes from the i-th on, after errs of those
// before; a sandbox the runtime no longer knows counts as stopped.
func (s *Sandbox) stopFrom(i int, errs []error) op.Op {
	if i == len(s.ids) {
		if err := errors.Join(errs...); err != nil {
			s.err = err
			return op.Done(err)
		}
		s.pod.Raise(fsm.SandboxEventStopped)
		return op.Done(nil)
	}
	id := s.ids[i]
	s.pod.Stopping(id)
	return op.StopPodSandbox(id, func(err error) op.Op {
		if err = cri.UnlessGone(err, fmt.Sprintf("stop sandbox of pod %q", s.pod.Key())); err != nil {
			errs = append(errs, err)
		}
		return s.stopFrom(i+1, errs)
	})
}

// Remove removes every sandbox of the pod, and their containers with them;
// a sandbox the runtime no longer knows counts as removed. When all are
// removed the action goes on with then; otherwise it ends with their
// errors.
func (s *Sandbox) Remove(then func() op.Op) op.Op { return s.removeFrom(0, nil, then) }

// removeFrom removes the pod's sandboxes from the i-th on, after the
// failures errs of those before.
func (s *Sandbox) removeFrom(i int, errs []error, then func() op.Op) op.Op {
	if i == len(s.ids) {
		if err := errors.Join(errs...); err != nil {
			return op.Done(err)
		}
		return then()
	}
	return op.RemovePodSandbox(s.ids[i], func(err error) op.Op {
		if err = cri.UnlessGone(err, fmt.Sprintf("remove sandbox of pod %q", s.pod.Key())); err != nil {
			errs = append(errs, err)
		}
		return s.removeFrom(i+1, errs, then)
	})
}
