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
		w.post(input{Kind: inbox.Config, Op: op, Pod: pod})
	}
}

// worker returns the worker of uid, creating it when create is set.
func (e *Engine) worker(uid types.UID, create bool, pod *v1.Pod) *podWorker {
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
	w = newPodWorker(&e.host, pod, ad)
	w.pod = pod
	if w.runtimeHandler, w.refusal = e.admitLocked(pod, ad != nil); w.refusal != nil {
		e.log.Warn("pod refused admission", "pod", pod.Namespace+"/"+pod.Name, "uid", uid, "reason", w.refusal.Reason, "message", w.refusal.Message)
	}
	if config.IsStatic(pod) {
		e.names.Add(fullName(pod), uid)
	}
	e.workers[uid] = w
	e.metrics.SetWorkers(len(e.workers))
	e.wg.Add(1)
	go func() { defer e.wg.Done(); w.run(e.runCtx) }()
	return w
}

func (e *Engine) handlePLEG(ev pleg.Event) {
	if e.log.Enabled(context.Background(), LevelVerbose) {
		e.log.Log(context.Background(), LevelVerbose, "SyncLoop (PLEG)", "uid", ev.UID, "event", fmt.Sprint(ev.Type), "container", ev.Name, "container-id", ev.ContainerID)
	}
	if w := e.worker(ev.UID, false, nil); w != nil {
		w.post(input{Kind: inbox.PLEG, P: payload{pleg: ev}})
	}
}

// handleProbe posts a probe result to its pod's worker, if the pod has one.
// It is safe to call from any goroutine.
func (e *Engine) handleProbe(r ProbeResult) {
	if w := e.worker(r.UID, false, nil); w != nil {
		w.post(input{Kind: inbox.Probe, P: payload{probe: r}})
	}
}

// syncDue posts a sync to every worker whose requeue time has come.
func (e *Engine) syncDue() {
	now := e.clock.Now()
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, w := range e.workers {
		if w.due(now) {
			w.post(input{Kind: inbox.Sync})
		}
	}
}
