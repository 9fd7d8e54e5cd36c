package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/speclet/speclet/fsm"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// adoptedPod is what the runtime still holds of a pod speclet started before
// it restarted: rebuilt from the labels and annotations on its CRI objects.
type adoptedPod struct {
	UID       types.UID
	Name      string
	Namespace string
	Grace     int64 // from the sandbox annotation; -1 when unknown

	// Sandboxes, newest first. The first READY one is reused.
	Sandboxes []*runtimeapi.PodSandbox
	// Containers by container name, newest first.
	Containers map[string][]*runtimeapi.Container
}

// readySandbox returns the newest ready sandbox, or nil.
func (a *adoptedPod) readySandbox() *runtimeapi.PodSandbox {
	for _, s := range a.Sandboxes {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			return s
		}
	}
	return nil
}

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
	pods := groupRuntimePods(sbs, cs)
	e.mu.Lock()
	e.adopted = pods
	// A pod that ran before the restart still holds its full name: a new
	// pod of the same name waits until it is adopted or stopped.
	for _, a := range pods {
		if a.readySandbox() != nil {
			e.queueNameLocked(a.Name+"_"+a.Namespace, a.UID)
		}
	}
	e.mu.Unlock()
	e.pleg.Seed(sbs, cs)
	if len(pods) > 0 {
		e.log.Info("found pods in the runtime from a previous run", "pods", len(pods))
	}
	return nil
}

// groupRuntimePods groups speclet's sandboxes and containers by pod UID,
// newest first.
func groupRuntimePods(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) map[types.UID]*adoptedPod {
	pods := map[types.UID]*adoptedPod{}
	get := func(labels map[string]string) *adoptedPod {
		uid := podUIDOf(labels)
		if uid == "" {
			return nil
		}
		a := pods[uid]
		if a == nil {
			a = &adoptedPod{UID: uid, Name: labels[LabelPodName], Namespace: labels[LabelPodNamespace], Grace: -1,
				Containers: map[string][]*runtimeapi.Container{}}
			pods[uid] = a
		}
		return a
	}
	for _, s := range sbs {
		a := get(s.Labels)
		if a == nil {
			continue
		}
		a.Sandboxes = append(a.Sandboxes, s)
		if g, err := strconv.ParseInt(s.Annotations[AnnotationGracePeriod], 10, 64); err == nil && a.Grace < 0 {
			a.Grace = g
		}
	}
	for _, c := range cs {
		a := get(c.Labels)
		if a == nil {
			continue
		}
		name := c.Labels[LabelContainerName]
		a.Containers[name] = append(a.Containers[name], c)
	}
	for _, a := range pods {
		sortNewestFirst(a)
	}
	return pods
}

func sortNewestFirst(a *adoptedPod) {
	sbs := a.Sandboxes
	for i := 1; i < len(sbs); i++ {
		for j := i; j > 0 && sbs[j].CreatedAt > sbs[j-1].CreatedAt; j-- {
			sbs[j], sbs[j-1] = sbs[j-1], sbs[j]
		}
	}
	for _, cs := range a.Containers {
		for i := 1; i < len(cs); i++ {
			for j := i; j > 0 && newer(cs[j], cs[j-1]); j-- {
				cs[j], cs[j-1] = cs[j-1], cs[j]
			}
		}
	}
}

func newer(a, b *runtimeapi.Container) bool {
	ra, rb := restartCountOf(a.Annotations), restartCountOf(b.Annotations)
	if ra != rb {
		return ra > rb
	}
	return a.CreatedAt > b.CreatedAt
}

// orphanPod is the stand-in pod of an orphan: only what the labels say, and
// the grace period its sandbox recorded.
func orphanPod(a *adoptedPod) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: a.UID, Name: a.Name, Namespace: a.Namespace}}
	if a.Grace >= 0 {
		g := a.Grace
		p.Spec.TerminationGracePeriodSeconds = &g
	}
	for name := range a.Containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: name})
	}
	return p
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
		pod := orphanPod(a)
		if w := e.worker(a.UID, true, pod); w != nil {
			w.post(input{kind: inputOrphan, pod: pod})
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
	for i := len(cs) - 1; i >= 0; i-- {
		c.ids = append(c.ids, cs[i].Id)
		c.setCreated(cs[i].Id, time.Unix(0, cs[i].CreatedAt))
	}
	newest := cs[0]
	c.id = newest.Id
	c.restartCount = restartCountOf(newest.Annotations)
	c.runHash = newest.Annotations[AnnotationContainerHash]
	c.imageRef = newest.ImageRef
	if newest.State == runtimeapi.ContainerState_CONTAINER_CREATED {
		c.machine = fsm.BindContainerMachine(fsm.ContainerStateWaiting, c)
		return
	}
	c.startedAt = time.Unix(0, newest.CreatedAt)
	c.machine = fsm.BindContainerMachine(fsm.ContainerStateRunning, c)
	switch {
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
		s.startTime = time.Unix(0, sb.CreatedAt)
		s.machine = fsm.BindPodMachine(fsm.PodStateSynced, s)
		s.w.setPodState(fsm.PodStateSynced)
		s.w.setTimers(podOwner, s.timers(s.e.clock.Now()))
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
		c.adopt(cs, cs[0].PodSandboxId == s.sandbox.id && ready)
	}
}
