package engine

import (
	"context"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/fsm"
)

// armed is a machine timer waiting for its deadline.
type armed struct {
	container string // "" for the pod machine
	event     uint8
	at        time.Time
}

func newPodWorker(e *Engine, pod *v1.Pod, ad *adoptedPod) *podWorker {
	return &podWorker{e: e, uid: pod.UID, wake: make(chan struct{}, 1), adopted: ad}
}

// armTimer arms a timer of the pod machine (container "") or of a container
// machine; clearTimers cancels a machine's timers when it leaves a state.
func (w *podWorker) armTimer(container string, _ int, event uint8, at time.Time) {
	w.mu.Lock()
	w.timers = append(w.timers, armed{container: container, event: event, at: at})
	w.mu.Unlock()
}

func (w *podWorker) clearTimers(container string) {
	w.mu.Lock()
	kept := w.timers[:0]
	for _, t := range w.timers {
		if t.container != container {
			kept = append(kept, t)
		}
	}
	w.timers = kept
	w.mu.Unlock()
}

// refreshAfter asks for a status refresh at the first sync tick after t.
func (w *podWorker) refreshAfter(t time.Time) {
	w.mu.Lock()
	w.refresh = t
	w.mu.Unlock()
}

// due reports whether one of the worker's timers has run out or a status
// refresh is due.
func (w *podWorker) due(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.refresh.IsZero() && !now.Before(w.refresh) {
		return true
	}
	for _, t := range w.timers {
		if !now.Before(t.at) {
			return true
		}
	}
	return false
}

// takeDue removes and returns the timers that ran out, earliest first.
func (w *podWorker) takeDue(now time.Time) []armed {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []armed
	kept := w.timers[:0]
	for _, t := range w.timers {
		if !now.Before(t.at) {
			out = append(out, t)
		} else {
			kept = append(kept, t)
		}
	}
	w.timers = kept
	if !w.refresh.IsZero() && !now.Before(w.refresh) {
		w.refresh = time.Time{}
	}
	slices.SortStableFunc(out, func(a, b armed) int { return a.at.Compare(b.at) })
	return out
}

// finish marks the worker finished: its machine reached a final state.
func (w *podWorker) finish() {
	w.mu.Lock()
	w.finished = true
	w.mu.Unlock()
}

var opInputs = map[config.Op]fsm.Input{
	config.OpAdd:       fsm.InputConfigAdd,
	config.OpUpdate:    fsm.InputConfigUpdate,
	config.OpRemove:    fsm.InputConfigRemove,
	config.OpDelete:    fsm.InputConfigDelete,
	config.OpReconcile: fsm.InputConfigReconcile,
	config.OpRestore:   fsm.InputConfigRestore,
}

var plegInputs = [...]fsm.Input{
	containerStarted: fsm.InputContainerStarted,
	containerDied:    fsm.InputContainerDied,
	containerRemoved: fsm.InputContainerRemoved,
	containerChanged: fsm.InputContainerChanged,
}

// handle turns one input into machine events through fsm.Route and fires
// them: the container event first (it records what the runtime said), then
// the pod event.
func (w *podWorker) handle(ctx context.Context, in input) {
	s := w.st
	if s == nil {
		if in.pod == nil {
			return // runtime news about a pod no source declared yet
		}
		s = newPodState(w, in.pod, w.adopted)
		w.adopted = nil
		w.st = s
		for _, a := range s.adoptEvents {
			a.c.fire(ctx, a.ev)
		}
		s.adoptEvents = nil
		w.publishStatus() // listed (Pending) before its first sync ends
	}
	switch in.kind {
	case inputConfig:
		r := fsm.Route(opInputs[in.op])
		if !r.HasPod {
			return
		}
		switch r.Pod {
		case fsm.PodEventKill:
			s.kill(podGrace(in.pod), forcedKill(in.pod))
		case fsm.PodEventUpdate:
			if !s.killed {
				s.setSpec(in.pod)
				// Only an update that arrives while a sync runs asks for
				// another one (update_pending); SyncPod reads the newest
				// spec anyway.
				s.updatePending = s.machine.State() == fsm.PodStateSyncing
			}
		}
		s.fire(ctx, r.Pod)
	case inputOrphan:
		s.kill(podGrace(s.pod), false)
		s.fire(ctx, fsm.Route(fsm.InputConfigRemove).Pod)
	case inputPLEG:
		r := fsm.Route(plegInputs[in.pleg.Type])
		if c := s.byName[in.pleg.Name]; c != nil && r.HasContainer && in.pleg.ContainerID == c.id {
			if in.pleg.Status != nil {
				c.exitStatus = in.pleg.Status
			}
			c.fire(ctx, r.Container)
		}
		if r.HasPod {
			s.fire(ctx, r.Pod)
		}
	case inputSync:
		s.noteBackoff()
		for _, t := range w.takeDue(w.e.clock.Now()) {
			if t.container == "" {
				s.fire(ctx, fsm.PodEvent(t.event))
				continue
			}
			if c := s.byName[t.container]; c != nil {
				c.fire(ctx, fsm.ContainerEvent(t.event))
				// The container may start again: let the pod sync.
				s.fire(ctx, fsm.Route(fsm.InputSyncTick).Pod)
			}
		}
	case inputProbe:
		in2 := fsm.InputReadinessChanged
		if in.probe.Liveness && !in.probe.Success {
			in2 = fsm.InputLivenessFailed
		}
		r := fsm.Route(in2)
		if c := s.byName[in.probe.Container]; c != nil && r.HasContainer {
			c.fire(ctx, r.Container)
		}
		if r.HasPod {
			s.fire(ctx, r.Pod)
		}
	case inputNameFree:
		s.fire(ctx, fsm.PodEventNameFree)
	}
}

// claimName gives the static full name to uid when it is free; otherwise
// uid waits FIFO for it and claimName returns false.
func (e *Engine) claimName(full string, uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch owner, ok := e.names[full]; {
	case !ok:
		e.names[full] = uid
		return true
	case owner == uid:
		return true
	}
	for _, q := range e.queued[full] {
		if q == uid {
			return false
		}
	}
	e.queued[full] = append(e.queued[full], uid)
	return false
}

// releaseName frees full (held or waited for by uid) and hands it to the
// first successor still alive, which gets a name_free input.
func (e *Engine) releaseName(full string, uid types.UID) {
	e.mu.Lock()
	q := e.queued[full]
	for i, u := range q {
		if u == uid {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	var next *podWorker
	if e.names[full] == uid {
		delete(e.names, full)
		for len(q) > 0 && next == nil {
			u := q[0]
			q = q[1:]
			if w := e.workers[u]; w != nil {
				e.names[full] = u
				next = w
			}
		}
	}
	if len(q) == 0 {
		delete(e.queued, full)
	} else {
		e.queued[full] = q
	}
	e.mu.Unlock()
	if next != nil {
		next.post(input{kind: inputNameFree})
	}
}

// purgeFinished forgets finished workers whose pod no source declares any
// more (SyncKnownPods). A UID that was killed and declared again gets a new
// worker: a terminated UID restarts only after this purge.
func (e *Engine) purgeFinished() {
	e.mu.Lock()
	var restart []*v1.Pod
	for uid, w := range e.workers {
		w.mu.Lock()
		fin, killed := w.finished, w.killReq
		w.mu.Unlock()
		if !fin {
			continue
		}
		want := e.desired[uid]
		if want != nil && !killed {
			continue // a completed pod its source still lists: keep its status
		}
		delete(e.workers, uid)
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
		if want != nil {
			restart = append(restart, want)
		}
	}
	n := len(e.workers)
	e.mu.Unlock()
	e.metrics.setWorkers(n)
	for _, pod := range restart {
		if w := e.worker(pod.UID, true, pod); w != nil {
			w.post(input{kind: inputConfig, op: config.OpAdd, pod: pod})
		}
	}
}

// view collects what the status needs from the machines.
func (s *podState) view() *podView {
	v := &podView{
		Pod: s.pod, SandboxReady: s.sandboxReady, PodIP: s.podIP, HostIP: s.e.cfg.NodeIP, StartTime: s.startTime,
		Terminating: s.killed, RuntimeName: s.e.runtimeName,
	}
	if s.pod.Spec.HostNetwork && s.sandboxReady {
		v.PodIP = s.e.cfg.NodeIP // a hostNetwork pod has the node's address
	}
	st := s.machine.State()
	v.Terminated = st == fsm.PodStateTerminated || st == fsm.PodStateFinished
	initsDone := true
	for _, c := range s.inits {
		if !c.initDone() {
			initsDone = false
		}
	}
	for _, c := range s.inits {
		if c.spec != nil {
			v.Inits = append(v.Inits, c.view(true))
		}
	}
	for _, c := range s.containers {
		if c.spec == nil {
			continue
		}
		cv := c.view(initsDone)
		v.Containers = append(v.Containers, cv)
	}
	return v
}

func (c *ctrState) view(initsDone bool) containerView {
	cv := containerView{
		Name: c.name, Image: c.spec.Image, ImageID: c.imageRef, Init: c.init, Sidecar: c.sidecar,
		ContainerID: c.id, StartedAt: c.startedAt, RestartCount: c.restartCount,
		WaitingReason: c.waitingReason, WaitingMessage: c.waitingMessage,
	}
	switch c.machine.State() {
	case fsm.ContainerStateRunning, fsm.ContainerStateStopping:
		cv.Phase = phaseRunning
		cv.Ready = c.machine.State() == fsm.ContainerStateRunning && !c.p.killed && (!c.init || c.sidecar)
		if c.current != nil && c.current.ContainerID != c.id {
			cv.Last = c.current
		}
	case fsm.ContainerStateExited, fsm.ContainerStateTerminated, fsm.ContainerStateRemoved:
		if c.current != nil {
			cv.Phase = phaseTerminated
			cv.Current, cv.Last = c.current, c.last
		} else if cv.WaitingReason == "" {
			cv.WaitingReason = ReasonContainerCreating
			if !initsDone && !c.init {
				cv.WaitingReason = ReasonPodInitializing
			}
		}
	default:
		cv.Last = c.current
		if cv.WaitingReason == "" || c.machine.State() == fsm.ContainerStateWaiting && c.current == nil {
			switch {
			case !initsDone && !c.init:
				cv.WaitingReason = ReasonPodInitializing
			case cv.WaitingReason == "":
				cv.WaitingReason = ReasonContainerCreating
			}
		}
	}
	return cv
}

// publishStatus recomputes the status from the machines and publishes a
// copy of the pod carrying it. Phase never goes backwards.
func (w *podWorker) publishStatus() {
	s := w.st
	if s == nil {
		return
	}
	st := computeStatus(s.lastStatus, s.view(), w.e.clock.Now())
	s.lastStatus = &st
	p := &v1.Pod{TypeMeta: s.pod.TypeMeta, ObjectMeta: s.pod.ObjectMeta, Spec: s.pod.Spec, Status: st}
	p.Spec.NodeName = w.e.cfg.NodeName
	w.publish(p)
}
