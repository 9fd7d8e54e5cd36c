// The sync loop's dispatch: config updates, PLEG events, probe results and
// the sync tick, each to the pod worker that owns the pod.

package engine

import (
	"context"
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/inbox"
	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/worker"
)

// handleUpdate hands each pod of u to its worker, creating workers for new
// UIDs. Only the newest pending update of a worker counts.
func (e *Engine) handleUpdate(u config.PodUpdate) {
	e.mu.Lock()
	if e.firstUpd.IsZero() {
		e.firstUpd = e.clock.Now()
	}
	if e.spoke == nil {
		e.spoke = map[string]bool{}
	}
	e.spoke[u.Source] = true
	declares := declaresPod(u.Op)
	for _, pod := range u.Pods {
		if pod == nil || pod.UID == "" {
			continue
		}
		switch {
		case declares && pod.DeletionTimestamp == nil:
			e.desired[pod.UID] = pod
		case declares, inbox.IsKill(u.Op):
			// A pod marked for deletion is never declared again: the
			// updates of its object (its status, its grace period) until
			// it is deleted reach its worker only (kubelet's pod workers
			// never restart a UID that was terminated).
			delete(e.desired, pod.UID)
		}
	}
	e.mu.Unlock()
	for _, pod := range u.Pods {
		if pod == nil || pod.UID == "" {
			e.log.Warn("pod update without UID ignored", "op", u.Op.String(), "source", u.Source)
			continue
		}
		// kubelet's "SyncLoop ADD/UPDATE/REMOVE" lines.
		level := slog.LevelInfo
		if u.Op == config.OpReconcile {
			level = LevelVerbose
		}
		e.log.Log(context.Background(), level, "SyncLoop "+u.Op.String(), "pod", pod.Namespace+"/"+pod.Name, "uid", pod.UID, "source", u.Source)
		op, create := u.Op, declares
		if declares && pod.DeletionTimestamp != nil {
			// A worker is made for it only to stop what a previous run
			// left in the runtime, and is told to kill.
			e.mu.RLock()
			_, create = e.adopted[pod.UID]
			e.mu.RUnlock()
			if e.worker(pod.UID, false, nil) == nil {
				op = config.OpDelete
			}
		}
		w := e.worker(pod.UID, create, pod)
		if w == nil {
			continue
		}
		w.Post(worker.Input{Kind: inbox.Config, Op: op, Pod: pod})
	}
}

// declaresPod reports an op after which the source declares the pod: the
// engine wants it and creates its worker if it has none.
func declaresPod(op config.Op) bool {
	switch op {
	case config.OpAdd, config.OpUpdate, config.OpRestore, config.OpReconcile:
		return true
	}
	return false
}

// worker returns the worker of uid, creating it when create is set.
func (e *Engine) worker(uid types.UID, create bool, pod *v1.Pod) *worker.Worker {
	e.mu.RLock()
	w := e.workers[uid]
	e.mu.RUnlock()
	if w != nil || !create {
		return w
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if w = e.workers[uid]; w != nil {
		return w
	}
	ad := e.adopted[uid]
	delete(e.adopted, uid)
	handler, refusal := e.admitLocked(pod, ad != nil)
	if refusal != nil {
		e.log.Warn("pod refused admission", "pod", pod.Namespace+"/"+pod.Name, "uid", uid, "reason", refusal.Reason, "message", refusal.Message)
	}
	w = worker.New(&e.host, pod, ad, handler, refusal)
	if config.IsStatic(pod) {
		e.names.Add(worker.FullName(pod), uid)
	}
	e.workers[uid] = w
	e.metrics.SetWorkers(len(e.workers))
	e.wg.Add(1)
	go func() { defer e.wg.Done(); w.Run(e.runCtx) }()
	return w
}

func (e *Engine) handlePLEG(ev pleg.Event) {
	if e.log.Enabled(context.Background(), LevelVerbose) {
		e.log.Log(context.Background(), LevelVerbose, "SyncLoop (PLEG)", "uid", ev.UID, "event", fmt.Sprint(ev.Type), "container", ev.Name, "container-id", ev.ContainerID)
	}
	if w := e.worker(ev.UID, false, nil); w != nil {
		w.Post(worker.Input{Kind: inbox.PLEG, P: worker.Payload{PLEG: ev}})
	}
}

// handleProbe posts a probe result to its pod's worker, if the pod has one.
// It is safe to call from any goroutine.
func (e *Engine) handleProbe(r ProbeResult) {
	if w := e.worker(r.UID, false, nil); w != nil {
		w.Post(worker.Input{Kind: inbox.Probe, P: worker.Payload{Probe: r}})
	}
}

// syncDue posts a sync to every worker whose requeue time has come.
func (e *Engine) syncDue() {
	now := e.clock.Now()
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, w := range e.workers {
		if w.Due(now) {
			w.Post(worker.Input{Kind: inbox.Sync})
		}
	}
}
