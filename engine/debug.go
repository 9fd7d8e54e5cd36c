package engine

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/worker"
)

// This file answers /debug/pods (engine/history keeps each pod's log): the
// pods the engine runs and, for a while, those it forgot.

// Bounds of the history of pods that are gone.
const (
	historyPods = 200              // pods gone from the engine whose history is kept
	historyKeep = 15 * time.Minute // how long the history of a pod that is gone is kept
)

// The debug view's types (engine/history).
type (
	Transition   = history.Transition
	ActionResult = history.ActionResult
	MachineState = history.MachineState
	PodDebug     = history.PodDebug
)

// goneHistory is the history of a pod the engine forgot.
type goneHistory struct {
	at  time.Time
	seq uint64 // the order it was forgotten in (goneEntry)
	pod PodDebug
	// final is the status the worker published after its pod machine
	// stopped (nil if none): PodStopped answers it for a purged worker,
	// so that the API status manager writes it even when housekeeping
	// purged the worker first. It holds the pod's identity (name,
	// namespace, UID) and status only: a gone pod's spec (up to a
	// 10 MiB manifest) is not kept for historyKeep.
	final *v1.Pod
}

// Debug returns every pod the engine runs, and those it forgot within the
// last minutes, with the current state of each of their machines.
func (e *Engine) Debug() []PodDebug {
	e.mu.RLock()
	ws := make([]*worker.Worker, 0, len(e.workers))
	for _, w := range e.workers {
		ws = append(ws, w)
	}
	var gone []PodDebug
	for _, g := range e.gone {
		gone = append(gone, g.pod)
	}
	e.mu.RUnlock()
	out := make([]PodDebug, 0, len(ws)+len(gone))
	for _, w := range ws {
		if d, ok := w.Debug(false); ok {
			out = append(out, d)
		}
	}
	for _, g := range gone {
		g.History = nil
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b PodDebug) int {
		if a.Namespace+"/"+a.Name != b.Namespace+"/"+b.Name {
			if a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name {
				return -1
			}
			return 1
		}
		return a.Machines[0].Since.Compare(b.Machines[0].Since)
	})
	return out
}

// PodHistory returns one pod's machines and their transition history, by
// UID, or by name (namespace/name, or a name in any namespace) for a pod of
// that name the engine still runs, else one it forgot.
func (e *Engine) PodHistory(key string) (PodDebug, bool) {
	e.mu.RLock()
	w := e.workers[types.UID(key)]
	g, isGone := e.gone[types.UID(key)]
	e.mu.RUnlock()
	if w != nil {
		return w.Debug(true)
	}
	if isGone {
		return g.pod, true
	}
	var best *PodDebug
	for _, d := range e.Debug() {
		if d.Name == key || d.Namespace+"/"+d.Name == key {
			if best == nil || best.Gone && !d.Gone {
				d := d
				best = &d
			}
		}
	}
	if best == nil {
		return PodDebug{}, false
	}
	return e.PodHistory(string(best.UID))
}

// goneEntry is a UID of Engine.gone in the order of forgetting: the entry
// is stale once its UID was forgotten again (its seq no longer gone's).
type goneEntry struct {
	uid types.UID
	seq uint64
}

// forgetLocked keeps the history of a purged worker for historyKeep, at
// most historyPods of them, the latest forgotten. The caller holds e.mu.
// It costs the same with 10,000 pods purged at once as with one: the
// oldest are found at the front of goneSeq, not by a scan of gone.
func (e *Engine) forgetLocked(w *worker.Worker) {
	if d, ok := w.Debug(true); ok {
		e.keepGoneLocked(d, w.FinalStatus())
	}
}

// keepGoneLocked keeps d, the history of a purged pod, and final, the
// status it published once stopped (nil: none), as goneHistory. The
// caller holds e.mu.
func (e *Engine) keepGoneLocked(d PodDebug, final *v1.Pod) {
	d.Gone = true
	now := e.clock.Now()
	e.goneN++
	g := goneHistory{at: now, seq: e.goneN, pod: d, final: final}
	e.gone[d.UID] = g
	e.goneSeq = append(e.goneSeq, goneEntry{uid: d.UID, seq: g.seq})
	for len(e.goneSeq) > 0 {
		first := e.goneSeq[0]
		if g, ok := e.gone[first.uid]; ok && g.seq == first.seq {
			if now.Sub(g.at) <= historyKeep && len(e.gone) <= historyPods {
				break
			}
			delete(e.gone, first.uid)
		}
		e.goneSeq[0] = goneEntry{}
		e.goneSeq = e.goneSeq[1:]
	}
}

// DebugPods is Debug for the read-only server (engine/server.Debugger).
func (e *Engine) DebugPods() any { return e.Debug() }

// DebugPod is PodHistory for the read-only server.
func (e *Engine) DebugPod(key string) (any, bool) { return e.PodHistory(key) }
