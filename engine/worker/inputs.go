package worker

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

// New returns the worker of pod on h, not yet running (Run): ad is what
// the runtime still holds of the pod from before a restart (nil: nothing),
// runtimeHandler the CRI runtime handler of its runtimeClassName ("": the
// default), refusal why admission refused it (nil: admitted).
func New(h *Host, pod *v1.Pod, ad *Adopted, runtimeHandler string, refusal *Refusal) *Worker {
	return &Worker{h: h, uid: pod.UID, inbox: inbox.New[Payload](pods.Grace), adopted: ad,
		pod: pod, runtimeHandler: runtimeHandler, refusal: refusal}
}

// handle turns one input into machine events through fsm.Route and fires
// them: the container or sandbox event first (it records what the runtime
// said), then the pod event.
func (w *Worker) handle(ctx context.Context, in Input) {
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
		r := fsm.Route(plegInputs[in.P.PLEG.Type])
		if r.HasSandbox && in.P.PLEG.SandboxID == s.sandbox.ID() && s.sandbox.ID() != "" {
			s.sandbox.fire(ctx, r.Sandbox)
		}
		if c := s.byName(in.P.PLEG.Name); c != nil && in.P.PLEG.Type == pleg.ContainerRemoved && in.P.PLEG.ContainerID != c.ID() {
			// An older instance removed by the node's container GC
			// (or behind speclet's back): no machine event, the
			// container forgets it.
			c.Forget(in.P.PLEG.ContainerID)
		}
		if c := s.byName(in.P.PLEG.Name); c != nil && r.HasContainer && in.P.PLEG.ContainerID == c.ID() {
			if st := in.P.PLEG.Status; st != nil {
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
		c := s.byName(in.P.Probe.Container)
		if c == nil {
			return
		}
		var pin fsm.Input
		var ok bool
		if in.P.Probe.Worker != 0 {
			pin, ok = c.probe.Result(in.P.Probe) // a raw result of a worker
		} else {
			pin, ok = prober.Input(in.P.Probe.Kind, in.P.Probe.Success)
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
			s.evicted = in.P.Evict
		}
		s.Kill(in.P.Evict.Grace, false)
		s.w.publishStatus()
		s.fire(ctx, fsm.Route(fsm.InputEvicted).Pod)
	}
}
