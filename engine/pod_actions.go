// The pod machine's actions (spec/pod.hcl): sync, kill, stop, remove,
// volumes and status of one pod.

package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/podstatus"
	"github.com/speclet/speclet/engine/volume"
	"github.com/speclet/speclet/fsm"
)

// Reason and message of a pod that ran past its activeDeadlineSeconds
// (kubelet's active deadline handler).
const (
	ReasonDeadlineExceeded  = podstatus.ReasonDeadlineExceeded
	MessageDeadlineExceeded = podstatus.MessageDeadlineExceeded
)

// ExceedDeadline records that the pod ran past spec.activeDeadlineSeconds,
// with kubelet's DeadlineExceeded event (type Normal, as kubelet's).
func (s *podState) ExceedDeadline(context.Context) error {
	s.deadlineExceeded = true
	s.e.log.Info("pod ran past its active deadline", "pod", s.key(), "startTime", s.startTime)
	s.event(eventNormal, ReasonDeadlineExceeded, "%s", MessageDeadlineExceeded)
	return nil
}

// SyncPod is kubelet's SyncPod over the machines: the newest spec goes to
// every container (a running one whose spec changed stops), a dead sandbox's
// containers are stopped, the sandbox is asked to be ready, and then every
// container is asked to start; its guards decide whether it may now. Regular
// containers start in parallel, like a direct CRI client: their machines are
// independent. Raises sync_failed when a volume did not mount, there is no
// ready sandbox or ctx ended, else sync_ok: a failed container start is the
// container machine's (start_failed and its back-off).
func (s *podState) SyncPod(ctx context.Context) error {
	kind := "sync"
	if s.syncs == 0 {
		kind = "create"
	}
	s.syncs++
	defer func(t0 time.Time) { s.e.metrics.WorkerDuration(kind, s.e.clock.Since(t0)) }(s.e.clock.Now())
	// The sandbox config RunPodSandbox got serves the creates of this
	// sync; a later one builds it again (sandbox.Sandbox.Config).
	defer s.sandbox.DropConfig()
	return op.Exec(ctx, s.e.rt, s.syncPod())
}

// syncPod is SyncPod's operations: the newest spec to every container and
// a dead sandbox's death to them, the volumes, the sandbox, then the
// containers' starts.
func (s *podState) syncPod() op.Op {
	if s.startTime.IsZero() {
		s.startTime = s.e.clock.Now()
	}
	return op.Deliver(fsm.ContainerEventUpdate.String(), "containers", func(ctx context.Context) {
		for _, c := range s.all() {
			c.fire(ctx, fsm.ContainerEventUpdate)
		}
	}, func(error) op.Op {
		if s.sandbox.machine.State() == fsm.SandboxStateDead {
			return op.Deliver(fsm.ContainerEventSandboxDied.String(), "containers", func(ctx context.Context) {
				s.each(ctx, fsm.ContainerEventSandboxDied)
			}, func(error) op.Op { return s.mountThenSandbox() })
		}
		return s.mountThenSandbox()
	})
}

// mountThenSandbox mounts the volumes (mount_volumes, which the spec lets
// sync_pod call) and asks the sandbox to be ready; sync_failed when either
// fails.
func (s *podState) mountThenSandbox() op.Op {
	return op.Do(fsm.PodActionMountVolumes.String(), s.pod.UID, func(ctx context.Context) error {
		return fsm.RunPodAction(ctx, s, fsm.PodActionMountVolumes)
	}, func(err error) op.Op {
		if err != nil {
			s.raise(fsm.PodEventSyncFailed)
			return op.Done(err)
		}
		s.addProbes() // kubelet's AddPod: the probes' ticks start here
		return op.Deliver(fsm.SandboxEventCreate.String(), "sandbox", func(ctx context.Context) {
			s.sandbox.fire(ctx, fsm.SandboxEventCreate)
		}, func(err error) op.Op {
			if s.sandbox.machine.State() != fsm.SandboxStateReady {
				// The spec decides what a done pod does without a sandbox
				// (syncing: sync_failed guarded by pod_done).
				s.raise(fsm.PodEventSyncFailed)
				return op.Done(errors.Join(err, s.sandbox.Err()))
			}
			s.w.publishStatus() // Pending with ContainerCreating while images pull
			return s.startContainers()
		})
	})
}

// startContainers asks every container to start; its guards decide whether
// it may now. Ephemeral containers first, as kubelet starts them before
// init containers (a pod that cannot initialize can still be debugged),
// then init containers in order, then regular containers in parallel.
func (s *podState) startContainers() op.Op {
	return op.Deliver(fsm.ContainerEventStart.String(), "containers", func(ctx context.Context) {
		for _, c := range s.ephemerals {
			c.fire(ctx, fsm.ContainerEventStart)
		}
		for _, c := range s.inits {
			c.fire(ctx, fsm.ContainerEventStart)
		}
		parallel(s.containers, func(c *ctrState) { c.fire(ctx, fsm.ContainerEventStart) })
	}, func(err error) op.Op {
		if err != nil {
			s.raise(fsm.PodEventSyncFailed)
			return op.Done(err)
		}
		s.raise(fsm.PodEventSyncOk)
		return op.Done(nil)
	})
}

// each delivers ev to every container: ephemeral and regular containers in
// parallel, then init containers and sidecars in parallel.
func (s *podState) each(ctx context.Context, ev fsm.ContainerEvent) {
	for _, group := range [][]*ctrState{append(append([]*ctrState(nil), s.ephemerals...), s.containers...), s.inits} {
		parallel(group, func(c *ctrState) { c.fire(ctx, ev) })
	}
}

// parallel runs f for every container of cs at once and returns when all
// returned. The last runs on the calling goroutine: a pod of one container
// starts no goroutine, and its CRI calls use the worker's stack, already
// grown by the sandbox's.
func parallel(cs []*ctrState, f func(*ctrState)) {
	if len(cs) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, c := range cs[:len(cs)-1] {
		wg.Add(1)
		go func() { defer wg.Done(); f(c) }()
	}
	f(cs[len(cs)-1])
	wg.Wait()
}

// kill records a termination request with grace period g seconds (forced: 0
// allowed); the effective grace period only shortens. It returns whether
// the grace period changed.
func (s *podState) kill(g int64, forced bool) bool {
	if !forced && g < 1 {
		g = 1
	}
	now := s.e.clock.Now()
	if s.grace < 0 || g < s.remainingGrace(now) {
		s.grace = g
		s.forced = forced && g == 0
		s.graceDeadline = now.Add(time.Duration(g) * time.Second)
		return true
	}
	return false
}

// remainingGrace is what is left of the effective grace period, at least 1 s
// unless the kill was forced; before any kill, the pod's own grace period.
func (s *podState) remainingGrace(now time.Time) int64 {
	if s.grace < 0 {
		return max(podGrace(s.pod), 1)
	}
	left := int64(s.graceDeadline.Sub(now).Round(time.Second) / time.Second)
	if s.forced {
		return max(left, 0)
	}
	return max(left, 1)
}

// KillContainers delivers kill to every container with the remaining grace
// period: regular containers in parallel, then init containers and
// sidecars. Raises termination_done.
func (s *podState) KillContainers(ctx context.Context) error {
	defer func(t0 time.Time) { s.e.metrics.WorkerDuration("kill", s.e.clock.Since(t0)) }(s.e.clock.Now())
	return op.Exec(ctx, s.e.rt, s.killContainers())
}

func (s *podState) killContainers() op.Op {
	if s.grace < 0 {
		s.kill(podGrace(s.pod), false)
	}
	return op.Deliver(fsm.ContainerEventKill.String(), "containers", func(ctx context.Context) {
		s.each(ctx, fsm.ContainerEventKill)
	}, func(err error) op.Op {
		s.raise(fsm.PodEventTerminationDone)
		return op.Done(err)
	})
}

// StopSandbox delivers stop to the sandbox machine.
func (s *podState) StopSandbox(ctx context.Context) error {
	return op.Exec(ctx, s.e.rt, s.stopSandbox())
}

func (s *podState) stopSandbox() op.Op {
	return op.Deliver(fsm.SandboxEventStop.String(), "sandbox", func(ctx context.Context) {
		s.sandbox.fire(ctx, fsm.SandboxEventStop)
	}, func(error) op.Op { return op.Done(s.sandbox.Err()) })
}

// RemovePod unmounts the pod's volumes (its containers are stopped with
// their sandbox, as kubelet's volume manager unmounts a terminated pod's),
// then removes every sandbox the pod had from the runtime, which removes
// their containers with them (the CRI contract of RemovePodSandbox; every
// container instance is created in one of them). Raises cleanup_done when
// all calls succeeded, after delivering removed to every container and the
// sandbox. A failure delivers and raises nothing (system.hcl's effect: it
// fails before any effect), so the retry finds the sandbox still stopped.
func (s *podState) RemovePod(ctx context.Context) error {
	return op.Exec(ctx, s.e.rt, s.removePod())
}

func (s *podState) removePod() op.Op {
	if s.sandbox.machine.State() != fsm.SandboxStateStopped {
		return op.Done(errors.New("sandbox not stopped yet"))
	}
	return op.Do(fsm.PodActionUnmountVolumes.String(), s.pod.UID, func(ctx context.Context) error {
		return fsm.RunPodAction(ctx, s, fsm.PodActionUnmountVolumes)
	}, func(err error) op.Op {
		if err != nil {
			return op.Done(err)
		}
		return s.sandbox.Remove(func() op.Op {
			return op.Deliver(fsm.ContainerEventRemoved.String(), "containers and sandbox", func(ctx context.Context) {
				for _, c := range s.all() {
					for _, id := range c.Instances() {
						s.e.pleg.Forget(id)
					}
					c.DropInstances()
					c.fire(ctx, fsm.ContainerEventRemoved)
				}
				for _, id := range s.sandbox.IDs() {
					s.e.pleg.ForgetSandbox(id)
				}
				s.sandbox.fire(ctx, fsm.SandboxEventRemoved)
			}, func(error) op.Op {
				s.raise(fsm.PodEventCleanupDone)
				return op.Done(nil)
			})
		})
	})
}

// MountVolumes sets up the pod's volumes (engine/volume). Every volume that
// fails is logged and recorded as a Warning event with kubelet's reason
// FailedMount and message ("MountVolume.SetUp failed for volume %q : cause"). It returns an error, so that sync_pod reports
// sync_failed before any runtime call, only when a volume failed that
// never mounted before (in this worker, or on disk from the agent's
// previous run): a running pod whose configMap refresh fails keeps its
// last files, as under kubelet.
func (s *podState) MountVolumes(ctx context.Context) error {
	err := s.e.volumes.Setup(ctx, s.pod)
	failed := map[string]bool{}
	var blocking []error
	for _, me := range mountErrors(err) {
		failed[me.Volume] = true
		s.e.log.Warn("volume mount failed", "reason", ReasonFailedMount, "pod", s.key(), "volume", me.Volume, "type", me.Type, "err", me.Err)
		s.event(eventWarning, ReasonFailedMount, "MountVolume.SetUp failed for volume %q : %v", me.Volume, me.Err)
		if !s.mounted[me.Volume] && !s.volumePresent(me.Volume) {
			blocking = append(blocking, me)
		}
	}
	if s.mounted == nil {
		s.mounted = map[string]bool{}
	}
	for _, v := range s.pod.Spec.Volumes {
		if !failed[v.Name] {
			s.mounted[v.Name] = true
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
func (s *podState) volumePresent(name string) bool {
	for i := range s.pod.Spec.Volumes {
		if v := &s.pod.Spec.Volumes[i]; v.Name == name {
			return volume.Present(s.e.cfg.RootDir, s.pod, v)
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
// Its directories are removed when the worker is purged (cleanup.go).
func (s *podState) UnmountVolumes(ctx context.Context) error {
	if err := s.e.volumes.TearDown(s.pod.UID); err != nil {
		return fmt.Errorf("unmount volumes of %s: %w", s.key(), err)
	}
	s.mounted = nil
	return nil
}

// ReleaseName leaves the static pod full name's queue; the next UID waiting
// for it gets name_free.
//
// The name is not freed while a sandbox of the pod may still run (its stop
// failed): the successor would run beside it, and kubelet frees it only
// once the pod's termination, sandbox stop included, succeeded. The
// terminated state's timer retries the stop, then this.
func (s *podState) ReleaseName(ctx context.Context) error {
	switch s.sandbox.machine.State() {
	case fsm.SandboxStateCreating, fsm.SandboxStateUnknown, fsm.SandboxStateChecking, fsm.SandboxStateReady, fsm.SandboxStateStopping:
		return errors.New("sandbox not stopped yet: the static pod's name stays taken")
	}
	s.e.releaseName(fullName(s.pod), s.pod.UID)
	return nil
}

// ReportStatus recomputes the pod status from the machine states and
// publishes it.
func (s *podState) ReportStatus(ctx context.Context) error {
	s.w.publishStatus()
	return nil
}

// podGrace is the grace period a kill of pod asks for:
// deletionGracePeriodSeconds when set, else terminationGracePeriodSeconds
// (default 30 s, the container machine's grace_period duration).
func podGrace(pod *v1.Pod) int64 {
	g := int64(fsm.ContainerDurationDefaults[fsm.ContainerDurationGracePeriod] / time.Second)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if d := pod.DeletionGracePeriodSeconds; d != nil && *d < g {
		g = *d
	}
	return g
}

// forcedKill reports a kill that asked for 0 seconds explicitly.
func forcedKill(pod *v1.Pod) bool {
	return pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
}
