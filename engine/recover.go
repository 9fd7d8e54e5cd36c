package engine

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/inbox"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/fsm"
)

// recover lists the runtime's sandboxes and containers and groups speclet's
// by pod UID. A pod whose UID a source declares again is adopted by its new
// worker (running containers keep running, nothing starts twice); the rest are
// orphans, stopped and removed once the sources have spoken.
func (e *Engine) recover(ctx context.Context) error {
	sbs, err := e.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	cs, err := e.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	pods := runtimepods.Group(sbs, cs)
	e.mu.Lock()
	e.adopted = pods
	// A pod that ran before the restart still holds its full name: a new
	// pod of the same name waits until it is adopted or stopped.
	for _, a := range pods {
		if a.ReadySandbox() != nil {
			e.names.Add(a.Name+"_"+a.Namespace, a.UID)
		}
	}
	e.mu.Unlock()
	e.pleg.Seed(sbs, cs)
	if len(pods) > 0 {
		e.log.Info("found pods in the runtime from a previous run", "pods", len(pods))
	}
	return nil
}

// cleanupOrphans kills the runtime pods no source declared, once the first
// config update is sourcesSettle old: a worker for each drives it through
// the same terminating path as a removed pod.
func (e *Engine) cleanupOrphans() {
	e.mu.Lock()
	if !e.sourcesReady() || len(e.adopted) == 0 {
		e.mu.Unlock()
		return
	}
	orphans := e.adopted
	e.adopted = map[types.UID]*adoptedPod{}
	e.mu.Unlock()
	for _, a := range orphans {
		e.log.Info("stopping a pod no source declares", "pod", a.Namespace+"/"+a.Name, "uid", a.UID)
		e.mu.Lock()
		e.adopted[a.UID] = a
		e.mu.Unlock()
		pod := runtimepods.Orphan(a)
		if w := e.worker(a.UID, true, pod); w != nil {
			w.post(input{Kind: inbox.Orphan, Pod: pod})
		}
	}
}

// adopt rebuilds the machine from the runtime's instances of this container
// (newest first): a running instance in a ready sandbox keeps running; a dead
// one goes through died so the spec decides about its restart.
//
// A newest instance that was created and never started (speclet died
// between CreateContainer and StartContainer) never ran: as under kubelet
// it has no start time and no exit (its status is waiting, not a
// ContainerStatusUnknown termination), and the next sync starts a new
// instance at once whatever the restart policy (kubelet's
// ShouldContainerBeRestarted restarts a created container; doBackOff finds
// no exited instance), counted one restart more than the created one
// (kubelet's startContainer). The machine resumes in waiting with the
// created instance current, so create_container counts that restart; the
// created instance is an older dead one for container GC.
func (c *ctrState) adopt(cs []*runtimeapi.Container, sandboxOK bool) {
	st := c.Adopt(cs)
	c.machine = fsm.BindContainerMachine(st, c)
	if st != fsm.ContainerStateRunning {
		return
	}
	switch newest := cs[0]; {
	case newest.State == runtimeapi.ContainerState_CONTAINER_RUNNING && sandboxOK:
	case newest.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
		// Its sandbox is gone: the instance must die.
		c.p.adoptEvents = append(c.p.adoptEvents, adoptEvent{c, fsm.ContainerEventSandboxDied})
	default:
		c.p.adoptEvents = append(c.p.adoptEvents, adoptEvent{c, fsm.ContainerEventDied})
	}
}

// adopt takes over what the runtime holds of the pod from a previous run.
//
// A pod with a ready sandbox was synced before the restart: its machine
// resumes in synced (a later kill goes through terminating and honours the
// grace period; a later update syncs it).
func (s *podState) adopt(a *adoptedPod) {
	s.firstSeen = time.Time{} // it started before the restart: no start to observe
	sb := s.sandbox.adopt(a)
	if sb != nil {
		s.SetStartTime(time.Unix(0, sb.CreatedAt))
		s.machine = fsm.BindPodMachine(fsm.PodStateSynced, s)
		s.w.setPodState(fsm.PodStateSynced)
		s.w.setTimers(podOwner, s.timers(s.h.clock.Now()))
	}
	ready := s.sandbox.machine.State() == fsm.SandboxStateReady
	for name, cs := range a.Containers {
		c := s.byName(name)
		if c == nil {
			// A container the spec no longer has: keep a machine so it is
			// stopped and removed with the pod.
			c = newCtrState(s, &v1.Container{Name: name}, false, false)
			c.setSpec(nil)
			s.containers = append(s.containers, c)
		}
		c.adopt(cs, cs[0].PodSandboxId == s.sandbox.ID() && ready)
	}
}
