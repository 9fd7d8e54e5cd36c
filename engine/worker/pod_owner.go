package worker

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/pods"
	"github.com/speclet/speclet/fsm"
)

// What the embedded pods.Pod reads of the pod, the node and the pod's other
// machines, and how it reports and delivers (pods.Owner). None of these
// names is one of the Pod's own methods, which a method here would hide.

var _ pods.Owner = (*podState)(nil)

func (s *podState) Spec() *v1.Pod                           { return s.pod }
func (s *podState) Key() string                             { return s.key() }
func (s *podState) Clock() clock.Clock                      { return s.h.Clock }
func (s *podState) Runtime() cri.Runtime                    { return s.h.Runtime }
func (s *podState) Raise(ev fsm.PodEvent)                   { s.raise(ev) }
func (s *podState) SyncFrequency() time.Duration            { return s.h.SyncFrequency }
func (s *podState) Volumes() pods.Volumes                   { return s.h.Volumes }
func (s *podState) RootDir() string                         { return s.h.RootDir }
func (s *podState) AddProbes()                              { s.addProbes() }
func (s *podState) Publish()                                { s.w.publishStatus() }
func (s *podState) FreeName()                               { s.h.Engine.ReleaseName(FullName(s.pod), s.pod.UID) }
func (s *podState) SandboxState() fsm.SandboxState          { return s.sandbox.machine.State() }
func (s *podState) SandboxErr() error                       { return s.sandbox.Err() }
func (s *podState) DropSandboxConfig()                      { s.sandbox.DropConfig() }
func (s *podState) RemoveSandboxes(then func() op.Op) op.Op { return s.sandbox.Remove(then) }

// PodCgroup is the node's pod cgroups (Host.PodCgroups), or nil.
func (s *podState) PodCgroup() pods.Cgroup {
	if pc := s.h.PodCgroups; pc != nil {
		return pc
	}
	return nil
}

// Event records an event about the pod.
func (s *podState) Event(eventType, reason, format string, args ...any) {
	s.event(eventType, reason, format, args...)
}

// WorkerDuration counts what a pod action of kind took.
func (s *podState) WorkerDuration(kind string, d time.Duration) { s.h.Metrics.WorkerDuration(kind, d) }

// FireSandbox delivers ev to the sandbox machine.
func (s *podState) FireSandbox(ctx context.Context, ev fsm.SandboxEvent) { s.sandbox.fire(ctx, ev) }

// UpdateContainers delivers update to every container in turn.
func (s *podState) UpdateContainers(ctx context.Context) {
	for _, c := range s.all() {
		c.fire(ctx, fsm.ContainerEventUpdate)
	}
}

// StartContainers asks every container to start; its guards decide
// whether it may now. Ephemeral containers first, as kubelet starts them
// before init containers (a pod that cannot initialize can still be
// debugged), then init containers in order, then regular containers in
// order, each one's start (its pull, create, start and postStart hook)
// done before the next one's begins: kubelet's SyncPod starts them one
// after the other, so a postStart hook holds back the containers after it
// (e2e_node Containers Lifecycle "should not launch second container
// before PostStart of the first container completed").
func (s *podState) StartContainers(ctx context.Context) {
	for _, c := range s.ephemerals {
		c.fire(ctx, fsm.ContainerEventStart)
	}
	for _, c := range s.inits {
		c.fire(ctx, fsm.ContainerEventStart)
	}
	for _, c := range s.containers {
		c.fire(ctx, fsm.ContainerEventStart)
	}
}

// FireContainers delivers ev to every container: ephemeral and regular
// containers in parallel, then init containers and sidecars in parallel.
func (s *podState) FireContainers(ctx context.Context, ev fsm.ContainerEvent) {
	for _, group := range [][]*ctrState{append(append([]*ctrState(nil), s.ephemerals...), s.containers...), s.inits} {
		parallel(group, func(c *ctrState) { c.fire(ctx, ev) })
	}
}

// RemovedAll delivers removed to every container, their instances
// forgotten (the PLEG too), then to the sandbox, whose sandboxes the PLEG
// forgets: RemovePodSandbox removed them all.
func (s *podState) RemovedAll(ctx context.Context) {
	for _, c := range s.all() {
		for _, id := range c.Instances() {
			s.h.PLEG.Forget(id)
		}
		c.DropInstances()
		c.fire(ctx, fsm.ContainerEventRemoved)
	}
	for _, id := range s.sandbox.IDs() {
		s.h.PLEG.ForgetSandbox(id)
	}
	s.sandbox.fire(ctx, fsm.SandboxEventRemoved)
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
