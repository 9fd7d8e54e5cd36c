package engine

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/eviction"
	"github.com/speclet/speclet/engine/inbox"
	"github.com/speclet/speclet/engine/nodestats"
	"github.com/speclet/speclet/engine/worker"
	"github.com/speclet/speclet/fsm"
)

// This file is the engine's side of kubelet's eviction manager
// (engine/reclaim runs it on the node machine): the pods it may rank, the
// eviction order a pod worker carries out through its pod machine, and the
// node's pressure conditions.

// evictionOrder is what evict_pod tells a pod worker.
type evictionOrder struct {
	grace   int64
	message string
}

// Pressure is the eviction manager's node conditions (MemoryPressure,
// DiskPressure, PIDPressure), all false without one.
func (e *Engine) Pressure() map[v1.NodeConditionType]bool {
	if e.cfg.Eviction == nil {
		return map[v1.NodeConditionType]bool{v1.NodeMemoryPressure: false, v1.NodeDiskPressure: false, v1.NodePIDPressure: false}
	}
	return e.cfg.Eviction.Conditions()
}

// defaultSignals measures the host (engine/nodestats): nodefs on the root
// directory, imagefs on the image filesystem's mountpoint.
func (e *Engine) defaultSignals(_ context.Context, imageFs string) (eviction.Observations, error) {
	return nodestats.Host{}.Measure(e.cfg.RootDir, imageFs)
}

// enginePods is the engine's pods as eviction sees them (reclaim.Pods).
type enginePods struct{ e *Engine }

// Evictable lists the admitted pods the workers published that are not
// completed or terminating, and are Running or Pending.
func (p enginePods) Evictable() []*v1.Pod {
	e := p.e
	e.mu.RLock()
	defer e.mu.RUnlock()
	var out []*v1.Pod
	for _, w := range e.workers {
		st, pub := w.Published()
		if w.Refusal() != nil || pub == nil || w.Pod() == nil {
			continue
		}
		switch st {
		case fsm.PodStateTerminating, fsm.PodStateTerminated, fsm.PodStateFinished, fsm.PodStateCompleted:
			continue
		}
		if pub.Status.Phase != v1.PodRunning && pub.Status.Phase != v1.PodPending {
			continue
		}
		out = append(out, pub)
	}
	return out
}

// Evict posts the eviction order to uid's worker.
func (p enginePods) Evict(uid types.UID, grace int64, message string) {
	p.e.mu.RLock()
	w := p.e.workers[uid]
	p.e.mu.RUnlock()
	if w != nil {
		w.Post(worker.Input{Kind: inbox.Evict, P: worker.Payload{Evict: &worker.Eviction{Grace: grace, Message: message}}})
	}
}

// Terminating reports whether uid has a worker whose pod machine is neither
// terminated nor finished (its memory or disk is not free yet).
func (p enginePods) Terminating(uid types.UID) bool {
	p.e.mu.RLock()
	w := p.e.workers[uid]
	p.e.mu.RUnlock()
	if w == nil {
		return false
	}
	st := w.MachineState()
	return st != fsm.PodStateTerminated && st != fsm.PodStateFinished
}
