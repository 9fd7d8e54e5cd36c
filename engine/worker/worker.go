package worker

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/inbox"
	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/probes"
	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// Input is one message to a pod worker (engine/inbox): its kind, the
// config op and pod, and what else it carries.
type Input = inbox.Input[Payload]

// Payload is what an input carries besides its config op and pod: the
// runtime's event (inbox.PLEG), a probe's result (inbox.Probe) or the
// eviction manager's order (inbox.Evict).
type Payload struct {
	PLEG  pleg.Event
	Probe probes.Report
	Evict *Eviction
}

// Eviction is what the eviction manager's evict_pod tells a pod worker:
// the grace period of the kill and the status message.
type Eviction struct {
	Grace   int64
	Message string
}

// Worker is the one serialized worker of a pod UID. Inputs are queued
// in its inbox (engine/inbox: config inputs coalesce, a kill cancels the
// running actions) from any goroutine; the worker goroutine alone touches
// the machines and calls the runtime. The engine reads what it published
// (the pod with its status, the pod machine's state) from any goroutine.
type Worker struct {
	h     *Host
	uid   types.UID
	inbox *inbox.Inbox[Payload]

	mu     sync.Mutex
	timers schedule.Set // the machines' armed timers
	// pubPod and pubStatus are the last published pod: the pod object its
	// status was computed for (its source's, read-only) and that status.
	// Snapshot builds the v1.Pod from them when asked: a copy of the pod
	// kept per worker would be 1,152 bytes besides the status.
	pubPod    *v1.Pod
	pubStatus *v1.PodStatus
	pubState  fsm.PodState // the pod machine's state pubStatus was computed in
	// podState is the pod machine's state, published for the sync loop
	// (housekeeping purges workers whose machine is finished).
	podState fsm.PodState
	// hist is the pod's transitions and where each machine is now, for
	// /debug/pods and the speclet_machines gauge.
	hist history.Log

	adopted *Adopted // what the runtime held of the pod at start, until the first input
	// pod, refusal and runtimeHandler are set at creation and never
	// change: the pod as first declared (its requests count against
	// allocatable) and why it was refused admission (nil: admitted).
	pod     *v1.Pod
	refusal *Refusal
	// runtimeHandler is the CRI runtime handler of the pod's
	// runtimeClassName, resolved at admission ("" = the default).
	runtimeHandler string
	st             *podState // owned by the worker goroutine
}

// Post queues in for the worker; it never blocks (engine/inbox).
func (w *Worker) Post(in Input) { w.inbox.Post(in) }

// UID is the pod's UID.
func (w *Worker) UID() types.UID { return w.uid }

// Pod is the pod as first declared: its requests count against the node's
// allocatable while it is active (admission).
func (w *Worker) Pod() *v1.Pod { return w.pod }

// Refusal is why admission refused the pod, nil when it was admitted.
func (w *Worker) Refusal() *Refusal { return w.refusal }

// Orphan: the worker stops a runtime pod no source declares (engine/inbox).
func (w *Worker) Orphan() bool { return w.inbox.Orphan() }

// KillPosted: a kill (config REMOVE or DELETE, an orphan stop) was ever
// posted (engine/inbox).
func (w *Worker) KillPosted() bool { return w.inbox.KillPosted() }

// Queued is how many inputs wait in the worker's inbox (engine/inbox).
func (w *Worker) Queued() int { return w.inbox.Len() }

// Stop makes the worker drop what it holds and every later post; its
// goroutine returns.
func (w *Worker) Stop() { w.inbox.Stop() }

// States is where each of the pod's machines is now (the history's).
func (w *Worker) States() []history.MachineState { return w.hist.States() }

// Snapshot returns the last published pod; nil for an orphan (a runtime pod
// no source declares is stopped but not listed) or before the first
// publish. It is built at each call and shares the maps, slices and
// pointers of its pod object and status: read-only, as the published pod
// always was.
func (w *Worker) Snapshot() *v1.Pod {
	if w.inbox.Orphan() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.publishedLocked()
}

// publishedLocked is the last published pod, built from pubPod and
// pubStatus; nil before the first publish. The caller holds w.mu.
func (w *Worker) publishedLocked() *v1.Pod {
	if w.pubPod == nil {
		return nil
	}
	return publishedPod(w.pubPod, w.pubStatus, w.h.NodeName)
}

// publishedPod is pod with status on node: a shallow copy.
func publishedPod(pod *v1.Pod, status *v1.PodStatus, node string) *v1.Pod {
	p := &v1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta, Spec: pod.Spec, Status: *status}
	p.Spec.NodeName = node
	return p
}

// PublishedPhase is the phase of the last published status, "" before the
// first publish.
func (w *Worker) PublishedPhase() v1.PodPhase {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pubStatus == nil {
		return ""
	}
	return w.pubStatus.Phase
}

// MachineState is the pod machine's state as last published.
func (w *Worker) MachineState() fsm.PodState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.podState
}

// Published is the pod machine's state with the last published pod (nil
// before the first publish), read together.
func (w *Worker) Published() (fsm.PodState, *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.podState, w.publishedLocked()
}

// StoppedPod is the final pod for PodStopped: stopped when the pod machine
// is terminated or finished; final is the last published pod then, if it
// was published in such a state (nil when stopped before any publish), a
// deep copy.
func (w *Worker) StoppedPod() (final *v1.Pod, stopped bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !Stopped(w.podState) {
		return nil, false
	}
	if w.pubPod == nil {
		return nil, true
	}
	if !Stopped(w.pubState) {
		return nil, false
	}
	return w.publishedLocked().DeepCopy(), true
}

// FinalStatus is the identity and status the worker published after its
// pod machine stopped, nil if none: what a purged worker leaves for
// the engine's PodStopped. The spec is not kept.
func (w *Worker) FinalStatus() *v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pubPod == nil || !Stopped(w.pubState) {
		return nil
	}
	return &v1.Pod{TypeMeta: w.pubPod.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: w.pubPod.Name, Namespace: w.pubPod.Namespace, UID: w.pubPod.UID},
		Status: *w.pubStatus.DeepCopy()}
}

// Finished reports whether the pod machine finished, with the pod object
// last published (nil before the first publish).
func (w *Worker) Finished() (bool, *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.podState == fsm.PodStateFinished, w.pubPod
}

// Debug is where the worker's machines are now, with the history when
// asked: one snapshot, so the states agree with the newest transitions
// (a machine's state is the To of its last transition), also in the middle
// of a batch. The phase is the last published status's. ok is false before
// the worker handled its first input.
func (w *Worker) Debug(withHistory bool) (history.PodDebug, bool) {
	w.mu.Lock()
	d := history.PodDebug{UID: w.uid}
	if w.pubPod != nil {
		d.Namespace, d.Name, d.Phase = w.pubPod.Namespace, w.pubPod.Name, string(w.pubStatus.Phase)
	}
	w.mu.Unlock()
	d.Machines, d.History = w.hist.Snapshot(withHistory)
	if len(d.Machines) == 0 {
		return d, false
	}
	return d, true
}

// setPodState publishes the pod machine's state after it entered one.
func (w *Worker) setPodState(s fsm.PodState) {
	w.mu.Lock()
	w.podState = s
	w.mu.Unlock()
}

// publish makes status, computed for the pod object pod in the pod
// machine's state st, the published one; neither is changed afterwards.
func (w *Worker) publish(pod *v1.Pod, status *v1.PodStatus, st fsm.PodState) {
	w.mu.Lock()
	w.pubPod, w.pubStatus, w.pubState = pod, status, st
	w.mu.Unlock()
	if f := w.h.PublishedPod; f != nil && !w.inbox.Orphan() {
		f(publishedPod(pod, status, w.h.NodeName))
	}
}

// Run is the worker goroutine: it waits for inputs and handles them in order
// until the pod is finished (then purged by housekeeping) or ctx ends.
func (w *Worker) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.inbox.Wake():
		}
		if w.inbox.Stopped() {
			return
		}
		if err := w.h.Engine.WaitRuntime(ctx); err != nil {
			return
		}
		ins, actx, cancel, ok := w.inbox.Take(ctx)
		if !ok {
			return
		}
		for i, in := range ins {
			w.handle(actx, in)
			if actx.Err() != nil && ctx.Err() == nil {
				// A kill cancelled the running actions: put back what is
				// left and start over with a fresh context so the kill runs.
				w.inbox.PutBack(ins[i+1:])
				break
			}
		}
		if actx.Err() == nil {
			w.fireDueNow(actx)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		w.publishStatus()
	}
}
