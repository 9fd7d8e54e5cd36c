package engine

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/inbox"
	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/pods"
	"github.com/speclet/speclet/engine/prober"
	"github.com/speclet/speclet/fsm"
)

// This file turns a pod worker's inputs into machine events through the
// routes of spec/routes.hcl (fsm.Route).

var opInputs = map[config.Op]fsm.Input{
	config.OpAdd:       fsm.InputConfigAdd,
	config.OpUpdate:    fsm.InputConfigUpdate,
	config.OpRemove:    fsm.InputConfigRemove,
	config.OpDelete:    fsm.InputConfigDelete,
	config.OpReconcile: fsm.InputConfigReconcile,
	config.OpRestore:   fsm.InputConfigRestore,
}

var plegInputs = [...]fsm.Input{
	pleg.ContainerStarted: fsm.InputContainerStarted,
	pleg.ContainerDied:    fsm.InputContainerDied,
	pleg.ContainerRemoved: fsm.InputContainerRemoved,
	pleg.ContainerChanged: fsm.InputContainerChanged,
	pleg.SandboxDied:      fsm.InputSandboxDied,
}

func newPodWorker(h *host, pod *v1.Pod, ad *adoptedPod) *podWorker {
	return &podWorker{h: h, uid: pod.UID, inbox: inbox.New[payload](pods.Grace), adopted: ad}
}

// handle turns one input into machine events through fsm.Route and fires
// them: the container or sandbox event first (it records what the runtime
// said), then the pod event.
func (w *podWorker) handle(ctx context.Context, in input) {
	s := w.st
	if s == nil {
		if in.Pod == nil {
			return // runtime news about a pod no source declared yet
		}
		s = newPodState(w, in.Pod, w.adopted)
		w.adopted = nil
		w.st = s
		for _, a := range s.adoptEvents {
			a.c.fire(ctx, a.ev)
		}
		s.adoptEvents = nil
		for _, c := range s.all() {
			// Adopted running containers: their probes start over.
			c.probe.containerEntered(ctx, c.machine.State())
		}
		w.publishStatus() // listed (Pending) before its first sync ends
	}
	switch in.Kind {
	case inbox.Config:
		r := fsm.Route(opInputs[in.Op])
		if !r.HasPod {
			return
		}
		switch r.Pod {
		case fsm.PodEventKill:
			s.Kill(pods.Grace(in.Pod), pods.ForcedKill(in.Pod))
		case fsm.PodEventUpdate:
			if !s.terminating() {
				s.setSpec(in.Pod)
			}
		case fsm.PodEventSync:
			if in.Op == config.OpReconcile && in.Pod != nil {
				// A status-only change: the conditions others own
				// (readiness gates) are read from the newest status;
				// the spec stays the one the worker runs.
				p := *s.pod
				p.Status = *in.Pod.Status.DeepCopy()
				s.pod = &p
			}
		}
		s.fire(ctx, r.Pod)
	case inbox.Orphan:
		s.Kill(pods.Grace(s.pod), false)
		s.fire(ctx, fsm.Route(fsm.InputConfigRemove).Pod)
	case inbox.PLEG:
		r := fsm.Route(plegInputs[in.P.pleg.Type])
		if r.HasSandbox && in.P.pleg.SandboxID == s.sandbox.ID() && s.sandbox.ID() != "" {
			s.sandbox.fire(ctx, r.Sandbox)
		}
		if c := s.byName(in.P.pleg.Name); c != nil && in.P.pleg.Type == pleg.ContainerRemoved && in.P.pleg.ContainerID != c.ID() {
			// An older instance removed by the node's container GC
			// (or behind speclet's back): no machine event, the
			// container forgets it.
			c.Forget(in.P.pleg.ContainerID)
		}
		if c := s.byName(in.P.pleg.Name); c != nil && r.HasContainer && in.P.pleg.ContainerID == c.ID() {
			if st := in.P.pleg.Status; st != nil {
				// Only an exit's status is read (record_exit); one of a
				// running instance is not kept, and it makes an older
				// exit's stale.
				c.NoteStatus(st)
			}
			c.fire(ctx, r.Container)
		}
		if r.HasPod {
			s.fire(ctx, r.Pod)
		}
	case inbox.Sync:
		w.fireDue(ctx)
	case inbox.Probe:
		c := s.byName(in.P.probe.Container)
		if c == nil {
			return
		}
		var pin fsm.Input
		var ok bool
		if in.P.probe.Worker != 0 {
			pin, ok = c.probe.Result(in.P.probe) // a raw result of a worker
		} else {
			pin, ok = prober.Input(in.P.probe.Kind, in.P.probe.Success)
		}
		if !ok {
			return
		}
		r := fsm.Route(pin)
		if r.HasProbe {
			c.probe.fire(ctx, r.Probe)
		}
		if r.HasContainer {
			c.fire(ctx, r.Container)
		}
		if r.HasPod {
			s.fire(ctx, r.Pod)
		}
	case inbox.NameFree:
		s.fire(ctx, fsm.PodEventNameFree)
	case inbox.Evict:
		if s.evicted == nil {
			s.evicted = in.P.evict
		}
		s.Kill(in.P.evict.grace, false)
		s.w.publishStatus()
		s.fire(ctx, fsm.Route(fsm.InputEvicted).Pod)
	}
}
