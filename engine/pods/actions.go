package pods

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/podstatus"
	"github.com/speclet/speclet/engine/volume"
	"github.com/speclet/speclet/fsm"
)

var _ fsm.PodActions[op.Op] = (*Pod)(nil) // spec/pod.hcl's actions, as operations

// ExceedDeadline records that the pod ran past spec.activeDeadlineSeconds,
// with kubelet's DeadlineExceeded event (type Normal, as kubelet's).
func (p *Pod) ExceedDeadline() op.Op {
	p.deadlineExceeded = true
	p.o.Logger().Info("pod ran past its active deadline", "pod", p.o.Key(), "startTime", p.startTime)
	p.o.Event(v1.EventTypeNormal, podstatus.ReasonDeadlineExceeded, "%s", podstatus.MessageDeadlineExceeded)
	return op.Done(nil)
}

// SyncPod is kubelet's SyncPod over the machines: the newest spec goes to
// every container (a running one whose spec changed stops), a dead sandbox's
// containers are stopped, the pod's cgroup is made and its volumes mounted,
// the sandbox is asked to be ready, and then every container is asked to
// start (in the pod's order, Owner.StartContainers); its guards decide
// whether it may now. Raises sync_failed when the pod cgroup could not be
// made, a volume did not mount, there is no ready sandbox or the action's
// context ended, else sync_ok: a failed
// container start is the container machine's (start_failed and its
// back-off). Its end records kubelet's pod worker duration (create for the
// first sync).
func (p *Pod) SyncPod() op.Op {
	kind := "sync"
	if p.syncs == 0 {
		kind = "create"
	}
	p.syncs++
	clk := p.o.Clock()
	t0 := clk.Now()
	if p.startTime.IsZero() {
		p.startTime = t0
	}
	return op.Then(p.syncOps(), func(err error) op.Op {
		// The sandbox config RunPodSandbox got serves the creates of
		// this sync; a later one builds it again (sandbox.Sandbox.Config).
		p.o.DropSandboxConfig()
		p.o.WorkerDuration(kind, clk.Since(t0))
		return op.Done(err)
	})
}

// syncOps are SyncPod's operations: the newest spec to every container and
// a dead sandbox's death to them, the pod cgroup, the volumes, the sandbox,
// then the containers' starts.
func (p *Pod) syncOps() op.Op {
	return op.Deliver(fsm.ContainerEventUpdate.String(), "containers", p.o.UpdateContainers, func(error) op.Op {
		if p.o.SandboxState() == fsm.SandboxStateDead {
			return op.Deliver(fsm.ContainerEventSandboxDied.String(), "containers", func(ctx context.Context) {
				p.o.FireContainers(ctx, fsm.ContainerEventSandboxDied)
			}, func(error) op.Op { return p.setUpThenSandbox() })
		}
		return p.setUpThenSandbox()
	})
}

// setUpThenSandbox makes the pod's cgroup and mounts the volumes
// (ensure_pod_cgroup and mount_volumes, which the spec lets sync_pod call),
// then asks the sandbox to be ready; sync_failed when any fails.
func (p *Pod) setUpThenSandbox() op.Op {
	return p.ensurePodCgroup(func(err error) op.Op {
		if err != nil {
			return p.syncFailed(err)
		}
		return p.mountVolumes(func(err error) op.Op {
			if err != nil {
				return p.syncFailed(err)
			}
			return p.sandboxThenStart()
		})
	})
}

// syncFailed raises sync_failed and ends the sync with err.
func (p *Pod) syncFailed(err error) op.Op {
	p.o.Raise(fsm.PodEventSyncFailed)
	return op.Done(err)
}

// sandboxThenStart asks the sandbox to be ready, then the containers to
// start; sync_failed when there is no ready sandbox.
func (p *Pod) sandboxThenStart() op.Op {
	p.o.AddProbes() // kubelet's AddPod: the probes' ticks start here
	return op.Deliver(fsm.SandboxEventCreate.String(), "sandbox", func(ctx context.Context) {
		p.o.FireSandbox(ctx, fsm.SandboxEventCreate)
	}, func(err error) op.Op {
		if p.o.SandboxState() != fsm.SandboxStateReady {
			// The spec decides what a done pod does without a sandbox
			// (syncing: sync_failed guarded by pod_done).
			return p.syncFailed(errors.Join(err, p.o.SandboxErr()))
		}
		p.o.Publish() // Pending with ContainerCreating while images pull
		return p.startContainers()
	})
}

// startContainers asks every container to start (Owner.StartContainers);
// its guards decide whether it may now.
func (p *Pod) startContainers() op.Op {
	return op.Deliver(fsm.ContainerEventStart.String(), "containers", p.o.StartContainers, func(err error) op.Op {
		if err != nil {
			return p.syncFailed(err)
		}
		p.o.Raise(fsm.PodEventSyncOk)
		return op.Done(nil)
	})
}

// KillContainers delivers kill to every container with the remaining grace
// period: regular containers in parallel, then init containers and
// sidecars; a pod killed without a kill asked for (its spec's grace) gets
// its own grace period. Raises termination_done, and records kubelet's pod
// worker duration of a kill.
func (p *Pod) KillContainers() op.Op {
	clk := p.o.Clock()
	t0 := clk.Now()
	if !p.killed {
		p.Kill(Grace(p.o.Spec()), false)
	}
	return op.Deliver(fsm.ContainerEventKill.String(), "containers", func(ctx context.Context) {
		p.o.FireContainers(ctx, fsm.ContainerEventKill)
	}, func(err error) op.Op {
		p.o.Raise(fsm.PodEventTerminationDone)
		p.o.WorkerDuration("kill", clk.Since(t0))
		return op.Done(err)
	})
}

// StopSandbox delivers stop to the sandbox machine; its error is the
// sandbox action's.
func (p *Pod) StopSandbox() op.Op {
	return op.Deliver(fsm.SandboxEventStop.String(), "sandbox", func(ctx context.Context) {
		p.o.FireSandbox(ctx, fsm.SandboxEventStop)
	}, func(error) op.Op { return op.Done(p.o.SandboxErr()) })
}

// RemovePod unmounts the pod's volumes (its containers are stopped with
// their sandbox, as kubelet's volume manager unmounts a terminated pod's),
// then removes every sandbox the pod had from the runtime, which removes
// their containers with them (the CRI contract of RemovePodSandbox; every
// container instance is created in one of them). Raises cleanup_done when
// all calls succeeded, after delivering removed to every container and the
// sandbox. A failure delivers and raises nothing (system.hcl's effect: it
// fails before any effect), so the retry finds the sandbox still stopped.
func (p *Pod) RemovePod() op.Op {
	if p.o.SandboxState() != fsm.SandboxStateStopped {
		return op.Done(errors.New("sandbox not stopped yet"))
	}
	return p.unmountVolumes(func(err error) op.Op {
		if err != nil {
			return op.Done(err)
		}
		return p.o.RemoveSandboxes(func() op.Op {
			return op.Deliver(fsm.ContainerEventRemoved.String(), "containers and sandbox", p.o.RemovedAll, func(error) op.Op {
				p.o.Raise(fsm.PodEventCleanupDone)
				return op.Done(nil)
			})
		})
	})
}

// EnsurePodCgroup creates or updates the pod's cgroup (Owner.PodCgroup)
// when it has no ready sandbox: the first sync, and one that replaces a
// dead sandbox, make it before anything else of the pod exists, as
// kubelet's SyncPod (pcm.EnsureExists before the volumes). A failure is
// kubelet's FailedToCreatePodContainer event and the error.
func (p *Pod) EnsurePodCgroup() op.Op { return p.ensurePodCgroup(op.Done) }

// ensurePodCgroup is EnsurePodCgroup followed by then, which sync_pod runs
// (the spec's calls); nothing to do goes straight to then.
func (p *Pod) ensurePodCgroup(then func(error) op.Op) op.Op {
	pc := p.o.PodCgroup()
	if pc == nil || p.o.SandboxState() == fsm.SandboxStateReady {
		return then(nil)
	}
	pod := p.o.Spec()
	return op.Do(fsm.PodActionEnsurePodCgroup.String(), pod.UID, func(context.Context) error { return pc.Ensure(pod) },
		func(err error) op.Op {
			if err != nil {
				p.o.Event(v1.EventTypeWarning, ReasonFailedToCreatePodContainer, "unable to ensure pod container exists: %v", err)
				return then(fmt.Errorf("create cgroup of pod %q: %w", p.o.Key(), err))
			}
			return then(nil)
		})
}

// MountVolumes sets up the pod's volumes (engine/volume). Every volume that
// fails is logged and recorded as a Warning event with kubelet's reason
// FailedMount and message ("MountVolume.SetUp failed for volume %q :
// cause"). It ends with an error, so that sync_pod reports sync_failed
// before any runtime call, only when a volume failed that never mounted
// before (in this worker, or on disk from the agent's previous run): a
// running pod whose configMap refresh fails keeps its last files, as under
// kubelet.
func (p *Pod) MountVolumes() op.Op { return p.mountVolumes(op.Done) }

// mountVolumes is MountVolumes followed by then, which sync_pod runs (the
// spec's calls): a host step named after the action.
func (p *Pod) mountVolumes(then func(error) op.Op) op.Op {
	pod := p.o.Spec()
	return op.Do(fsm.PodActionMountVolumes.String(), pod.UID, func(ctx context.Context) error {
		return p.o.Volumes().Setup(ctx, pod)
	}, func(err error) op.Op { return then(p.setUp(pod, err)) })
}

// setUp records the volumes of pod that Setup mounted (it failed with
// err) and returns the error of those that block the sync.
func (p *Pod) setUp(pod *v1.Pod, err error) error {
	failed := map[string]bool{}
	var blocking []error
	for _, me := range mountErrors(err) {
		failed[me.Volume] = true
		p.o.Logger().Warn("volume mount failed", "reason", ReasonFailedMount, "pod", p.o.Key(), "volume", me.Volume, "type", me.Type, "err", me.Err)
		p.o.Event(v1.EventTypeWarning, ReasonFailedMount, "MountVolume.SetUp failed for volume %q : %v", me.Volume, me.Err)
		if !p.mounted[me.Volume] && !p.volumePresent(pod, me.Volume) {
			blocking = append(blocking, me)
		}
	}
	if p.mounted == nil {
		p.mounted = map[string]bool{}
	}
	for _, v := range pod.Spec.Volumes {
		if !failed[v.Name] {
			p.mounted[v.Name] = true
		}
	}
	if len(blocking) > 0 {
		return fmt.Errorf("%s: %w", ReasonFailedMount, errors.Join(blocking...))
	}
	return nil
}

// volumePresent reports a volume set up before this worker existed (the
// agent restarted while the pod ran): its files stay in use when their
// refresh fails.
func (p *Pod) volumePresent(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.Name == name {
			return volume.Present(p.o.RootDir(), pod, v)
		}
	}
	return false
}

// mountErrors unpacks the *volume.MountError of a Setup error.
func mountErrors(err error) []*volume.MountError {
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]*volume.MountError, 0, len(errs))
	for _, e := range errs {
		var me *volume.MountError
		if errors.As(e, &me) {
			out = append(out, me)
		} else {
			out = append(out, &volume.MountError{Volume: "?", Err: e})
		}
	}
	return out
}

// UnmountVolumes unmounts the pod's tmpfs volumes and forgets its tokens.
// Its directories are removed when the worker is purged.
func (p *Pod) UnmountVolumes() op.Op { return p.unmountVolumes(op.Done) }

// unmountVolumes is UnmountVolumes followed by then, which remove_pod runs
// (the spec's calls): a host step named after the action.
func (p *Pod) unmountVolumes(then func(error) op.Op) op.Op {
	uid := p.o.Spec().UID
	return op.Do(fsm.PodActionUnmountVolumes.String(), uid, func(context.Context) error { return p.o.Volumes().TearDown(uid) }, func(err error) op.Op {
		if err != nil {
			return then(fmt.Errorf("unmount volumes of %s: %w", p.o.Key(), err))
		}
		p.mounted = nil
		return then(nil)
	})
}

// ReleaseName leaves the static pod full name's queue; the next UID waiting
// for it gets name_free.
//
// The name is not freed while a sandbox of the pod may still run (its stop
// failed): the successor would run beside it, and kubelet frees it only
// once the pod's termination, sandbox stop included, succeeded. The
// terminated state's timer retries the stop, then this.
func (p *Pod) ReleaseName() op.Op {
	switch p.o.SandboxState() {
	case fsm.SandboxStateCreating, fsm.SandboxStateUnknown, fsm.SandboxStateChecking, fsm.SandboxStateReady, fsm.SandboxStateStopping:
		return op.Done(errors.New("sandbox not stopped yet: the static pod's name stays taken"))
	}
	p.o.FreeName()
	return op.Done(nil)
}

// ReportStatus recomputes the pod status from the machine states and
// publishes it.
func (p *Pod) ReportStatus() op.Op {
	p.o.Publish()
	return op.Done(nil)
}
