// What the engine answers about its pods and itself (the servers, the
// status manager and the health check read these).

package engine

import (
	"errors"
	"fmt"
	"net"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/worker"
	"github.com/speclet/speclet/fsm"
)

// Pods returns copies of the pods the sources declare with their current
// status. Like kubelet's pod manager, a pod leaves the list as soon as its
// source removes it, even while it still terminates.
func (e *Engine) Pods() []*v1.Pod {
	e.mu.RLock()
	ws := make([]*worker.Worker, 0, len(e.workers))
	for uid, w := range e.workers {
		if e.desired[uid] != nil {
			ws = append(ws, w)
		}
	}
	e.mu.RUnlock()
	out := make([]*v1.Pod, 0, len(ws))
	for _, w := range ws {
		if p := w.Snapshot(); p != nil {
			out = append(out, p.DeepCopy())
		}
	}
	config.SortPods(out)
	return out
}

// ActivePods returns copies of the pods Pods lists that are still active,
// as kubelet's GetActivePods filters its pod manager's (what its
// pod-resources List answers): without those admission refused and those
// whose pod worker is done with them (pod machine completed, terminated,
// finished: kubelet's IsPodKnownTerminated). A pod in a terminal phase is
// active while its containers are still being stopped (completing,
// terminating: kubelet's IsPodTerminationRequested).
func (e *Engine) ActivePods() []*v1.Pod {
	e.mu.RLock()
	ws := make([]*worker.Worker, 0, len(e.workers))
	for uid, w := range e.workers {
		if e.desired[uid] != nil && w.Refusal() == nil {
			ws = append(ws, w)
		}
	}
	e.mu.RUnlock()
	out := make([]*v1.Pod, 0, len(ws))
	for _, w := range ws {
		if w.Orphan() {
			continue
		}
		if st, p := w.Published(); p != nil && !worker.Stopped(st) && st != fsm.PodStateCompleted {
			out = append(out, p.DeepCopy())
		}
	}
	config.SortPods(out)
	return out
}

// Pod is the declared pod uid with its current status, as Pods lists it;
// nil when it is not declared (marked for deletion, gone, an orphan) or
// has published nothing yet.
func (e *Engine) Pod(uid types.UID) *v1.Pod {
	if w := e.declaredWorker(uid); w != nil {
		if p := w.Snapshot(); p != nil {
			return p.DeepCopy()
		}
	}
	return nil
}

// Declared reports that Pod(uid) would return the pod: a source declares
// it and its worker published it.
func (e *Engine) Declared(uid types.UID) bool {
	w := e.declaredWorker(uid)
	return w != nil && w.Snapshot() != nil
}

// declaredWorker is the worker of uid when a source declares the pod.
func (e *Engine) declaredWorker(uid types.UID) *worker.Worker {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.desired[uid] == nil {
		return nil
	}
	return e.workers[uid]
}

// sourcesReady reports whether every source of Config.Sources delivered its
// first snapshot and the first update is sourcesSettle old: only then may
// housekeeping kill pods no source declares. Called with e.mu held.
func (e *Engine) sourcesReady() bool {
	if e.firstUpd.IsZero() || e.clock.Since(e.firstUpd) < sourcesSettle {
		return false
	}
	for _, s := range e.cfg.Sources {
		if !e.spoke[s] {
			return false
		}
	}
	return true
}

// SourcesReady reports whether every source delivered its first snapshot
// (and sourcesSettle passed): what the engine's sources declare is then
// complete.
func (e *Engine) SourcesReady() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.sourcesReady()
}

// NodeIP is the node's address in pod statuses (Config.NodeIP or the one
// found on the machine).
func (e *Engine) NodeIP() string { return e.cfg.NodeIP }

// PodStopped reports whether nothing of pod uid runs: its pod machine
// reached terminated or finished (no container runs, the sandbox is
// stopped), or it has no worker (never started, or purged). final is the
// status the worker published once its pod machine had stopped (terminal
// phase, containers terminated); for a purged worker the one kept with
// its history (historyKeep, historyPods; its identity and status, no
// spec), else nil. While the
// machine has stopped but that status is not published yet, stopped is
// false. The API status manager writes final, then deletes a deleted
// pod's object, as kubelet's status manager does.
func (e *Engine) PodStopped(uid types.UID) (final *v1.Pod, stopped bool) {
	e.mu.RLock()
	w := e.workers[uid]
	var kept *v1.Pod
	if g, ok := e.gone[uid]; ok && g.final != nil {
		kept = g.final.DeepCopy()
	}
	e.mu.RUnlock()
	if w == nil {
		return kept, true // purged: its final status if kept (history.go)
	}
	return w.StoppedPod()
}

// Healthz returns nil once the state was rebuilt from the runtime, while
// the runtime answers and the PLEG relisted successfully within the last
// three minutes; otherwise an error naming each reason.
func (e *Engine) Healthz() error {
	if !e.recovered.Load() {
		if p := e.recoverErr.Load(); p != nil {
			return fmt.Errorf("not ready: rebuilding state from the runtime failed (retrying): %w", *p)
		}
		return errors.New("not ready: rebuilding state from the runtime has not completed")
	}
	var rtErr error
	if p := e.runtimeErr.Load(); p != nil && !errors.Is(*p, pleg.ErrUnhealthy) {
		rtErr = fmt.Errorf("container runtime is down: %w", *p)
	}
	return errors.Join(rtErr, e.pleg.Healthy())
}

// countRunning counts pods whose published phase is Running.
func (e *Engine) countRunning() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	n := 0
	for uid, w := range e.workers {
		if !w.Orphan() && e.desired[uid] != nil && w.PublishedPhase() == v1.PodRunning {
			n++
		}
	}
	return n
}

// nodeIP returns the first global unicast address of the machine's
// interfaces (IPv4 preferred), or "".
func nodeIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	var v6 string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() {
			continue
		}
		if n.IP.To4() != nil {
			return n.IP.String()
		}
		if v6 == "" {
			v6 = n.IP.String()
		}
	}
	return v6
}

// machines calls add for every machine of every pod worker, in the state
// the worker last published, and for the node machine (metrics.Machines).
func (e *Engine) machines(add func(machine, state string)) {
	e.mu.RLock()
	ws := make([]*worker.Worker, 0, len(e.workers))
	for _, w := range e.workers {
		ws = append(ws, w)
	}
	e.mu.RUnlock()
	for _, w := range ws {
		for _, s := range w.States() {
			add(s.Machine, s.State)
		}
	}
	add(fsm.NodeMachineName, e.node.StateName())
}

// Sinks are where the engine's machines' steps go besides their histories
// (its metrics, Config.Steps): a machine owned outside the engine (each
// device plugin's, engine/devicemanager) sends its steps there too, so
// speclet_transitions_total and Config.Steps count them.
func (e *Engine) Sinks() *observe.Sinks { return &e.sinks }
