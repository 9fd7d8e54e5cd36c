package engine

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// inputKind is the channel an input came from; fsm.Route maps it (with the
// op or runtime event) to machine events.
type inputKind uint8

const (
	inputConfig   inputKind = iota // a config update (op + newest pod spec)
	inputPLEG                      // a runtime container event
	inputSync                      // a machine timer ran out (found by the sync tick)
	inputProbe                     // a probe result
	inputOrphan                    // a runtime pod no source declares
	inputNameFree                  // the static pod name this worker waits for is free
	inputEvict                     // the eviction manager evicts the pod
)

// input is one message to a pod worker.
type input struct {
	kind  inputKind
	op    config.Op
	pod   *v1.Pod
	pleg  pleg.Event
	probe ProbeResult
	evict *evictionOrder
}

// podWorker is the one serialized worker of a pod UID. Inputs are queued by
// post from any goroutine; the worker goroutine alone touches the machines
// and calls the runtime. Config inputs coalesce: only the newest pending pod
// spec counts, but a pending kill is never lost.
//
// Its fields describe the input queue, never a machine: killPosted and
// killGrace record the kills posted (a kill may wait in the queue while an
// action runs, so the poster decides from them whether to cancel that
// action; housekeeping tells a pod that was killed and declared again from
// a completed pod its source still lists), and podState is a copy of the pod
// machine's state that the worker publishes for the sync loop.
type podWorker struct {
	e   *Engine
	uid types.UID

	mu         sync.Mutex
	queue      []input
	cfg        *input // newest pending config input (coalesced)
	wake       chan struct{}
	cancel     context.CancelFunc // cancels the running actions (a kill arrived)
	timers     schedule.Set       // the machines' armed timers
	killGrace  int64              // grace period of the last kill posted
	pub        *v1.Pod            // last published pod with status
	pubState   fsm.PodState       // the pod machine's state pub was computed in
	killPosted bool               // a kill (config REMOVE/DELETE, orphan) was posted
	orphan     bool               // a runtime pod no source declares, being stopped
	syncQueued bool               // an inputSync waits in the queue
	stopped    bool               // purged: the goroutine ends
	// podState is the pod machine's state, published for the sync loop
	// (housekeeping purges workers whose machine is finished).
	podState fsm.PodState
	// hist is the pod's transitions and where each machine is now, for
	// /debug/pods and the speclet_machines gauge.
	hist history.Log

	adopted *adoptedPod // what the runtime held of the pod at start, until the first input
	// pod, refusal and runtimeHandler are set at creation and never change: the pod as
	// first declared (its requests count against allocatable) and why it
	// was refused admission (nil: admitted).
	pod     *v1.Pod
	refusal *refusal
	// runtimeHandler is the CRI runtime handler of the pod's
	// runtimeClassName, resolved at admission ("" = the default).
	runtimeHandler string
	st             *podState // owned by the worker goroutine
}

func (w *podWorker) post(in input) {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	if in.kind == inputConfig {
		if w.cfg != nil && isKillOp(w.cfg.op) && !isKillOp(in.op) {
			// A pending kill is never replaced by a later non-kill: the
			// worker has seen termination.
		} else if w.cfg != nil && in.op == config.OpReconcile && w.cfg.op != config.OpReconcile {
			// A status-only change after a pending add or update keeps
			// that op (the spec change still has to be applied) with
			// the newest pod.
			w.cfg.pod = in.pod
		} else {
			c := in
			w.cfg = &c
		}
		if isKillOp(in.op) {
			g := podGrace(in.pod)
			if (!w.killPosted || g < w.killGrace) && w.cancel != nil {
				// Interrupt a slow pull or start, or a stop running with a
				// longer grace period: the kill comes first.
				w.cancel()
			}
			if !w.killPosted || g < w.killGrace {
				w.killGrace = g
			}
			w.killPosted = true
		}
	} else {
		if in.kind == inputSync {
			if w.syncQueued {
				w.mu.Unlock()
				return
			}
			w.syncQueued = true
		}
		if in.kind == inputOrphan {
			w.killPosted, w.orphan = true, true
		}
		if in.kind == inputEvict && w.cancel != nil {
			// The eviction comes first (it is not a kill of the source:
			// the evicted pod keeps its Failed status while a source
			// lists it).
			w.cancel()
		}
		w.queue = append(w.queue, in)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func isKillOp(op config.Op) bool { return op == config.OpRemove || op == config.OpDelete }

// declaresPod reports an op after which the source declares the pod: the
// engine wants it and creates its worker if it has none.
func declaresPod(op config.Op) bool {
	switch op {
	case config.OpAdd, config.OpUpdate, config.OpRestore, config.OpReconcile:
		return true
	}
	return false
}

// take returns the queued inputs, the coalesced config input first, and a
// context for the actions they trigger that a kill cancels.
func (w *podWorker) take(ctx context.Context) ([]input, context.Context, context.CancelFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ins []input
	if w.cfg != nil {
		ins = append(ins, *w.cfg)
		w.cfg = nil
	}
	ins = append(ins, w.queue...)
	// The queue's array is reused: its slots must not keep the inputs
	// taken (a PLEG event holds the runtime's whole container status).
	clear(w.queue)
	w.queue = w.queue[:0]
	w.syncQueued = false
	actx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	return ins, actx, cancel
}

// snapshot returns the last published pod; nil for an orphan (a runtime pod
// no source declares is stopped but not listed).
func (w *podWorker) snapshot() *v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.orphan {
		return nil
	}
	return w.pub
}

func (w *podWorker) isOrphan() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.orphan
}

// setPodState publishes the pod machine's state after it entered one.
func (w *podWorker) setPodState(s fsm.PodState) {
	w.mu.Lock()
	w.podState = s
	w.mu.Unlock()
}

func (w *podWorker) publish(p *v1.Pod, st fsm.PodState) {
	w.mu.Lock()
	w.pub, w.pubState = p, st
	w.mu.Unlock()
	if f := w.e.cfg.PublishedPod; f != nil && !w.isOrphan() {
		f(p)
	}
}

// run is the worker goroutine: it waits for inputs and handles them in order
// until the pod is finished (then purged by housekeeping) or ctx ends.
func (w *podWorker) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		w.mu.Lock()
		stopped := w.stopped
		if stopped {
			w.queue, w.cfg = nil, nil
		}
		w.mu.Unlock()
		if stopped {
			return
		}
		if err := w.e.waitRuntime(ctx); err != nil {
			return
		}
		ins, actx, cancel := w.take(ctx)
		for i, in := range ins {
			w.handle(actx, in)
			if actx.Err() != nil && ctx.Err() == nil {
				// A kill cancelled the running actions: put back what is
				// left and start over with a fresh context so the kill runs.
				w.mu.Lock()
				w.queue = append(append([]input(nil), ins[i+1:]...), w.queue...)
				w.cancel = nil
				w.mu.Unlock()
				select {
				case w.wake <- struct{}{}:
				default:
				}
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
