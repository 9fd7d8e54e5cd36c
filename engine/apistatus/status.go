// Package apistatus writes what the engine computes back to the API server,
// as kubelet's status manager and mirror client do: it is an effect at the
// edge, driven by the pods the pod workers publish (engine.Config's
// PublishedPod) and by where their pod machines are (engine.PodStopped);
// it never changes a pod's lifecycle.
//
// Contracts:
//   - Dirty set: Published marks a pod UID dirty; a UID is queued once
//     however often it is published, and when its turn comes the engine's
//     newest status is read (Engine.Pod), so only the newest is written and
//     none is lost. Workers (Config.Workers) write different pods at once;
//     one pod is never written by two at a time.
//   - Coalescing: a publish is written after Config.Batch (20 ms), so that
//     the publishes of one sync make one write. A status that only says
//     the pod is being created (Pending, containers ContainerCreating or
//     PodInitializing, no error) is held until Config.PendingHold (5 s)
//     after the pod's first publish, so that a pod Running within that
//     needs one write, not two; one whose only news is a started container
//     without readiness or startup probe not ready yet is held up to
//     ReadySoonHold (1 s), as its Ready follows at once. Anything else (an
//     error, Running and ready, a terminal phase) ends the hold. Once a
//     being-created status was written, further ones are not queued by a
//     publish, and a sweep writes one only when a container's state
//     changed (an init container finished); progress in conditions and
//     addresses alone (the sandbox ready, the pod IP) is carried by the
//     next status that says more.
//   - A write is a strategic merge patch of pods/status (kubelet's): the
//     difference between the status the API server last acknowledged for
//     that object (its answer to the previous write, else the pod cache's,
//     else after a failure a fresh read) and the engine's status with the
//     conditions others own (PodScheduled, readiness gates, ...) kept;
//     metadata.uid is its precondition. A status that differs in nothing
//     is not written. A pod that is gone or was replaced (another UID) is
//     dropped.
//   - A failed write (API server unreachable, 5xx, a refused credential)
//     is retried with exponential backoff per pod (client-go workqueue's
//     rate limiter, 100 ms doubling to 10 s), reading the newest status
//     again. A run of failures is logged once (apierr.Once). Rate limiting
//     of requests is the client's (--kube-api-qps, --kube-api-burst).
//   - Once nothing of a pod marked for deletion runs (engine.PodStopped),
//     its final status (terminal phase, containers terminated) is written,
//     and only once that write succeeded is its object deleted with grace
//     period 0 and a UID precondition.
//   - A static pod (file or URL source) gets a mirror pod of the same name:
//     annotation kubernetes.io/config.mirror = its config hash, an owner
//     reference to the Node. A mirror pod that is deleted is created again (one
//     deleted gracefully is deleted with grace 0 first: nobody else ends it);
//     one whose hash differs (the manifest changed) is replaced; one whose
//     static pod is gone is deleted once every source delivered its first
//     snapshot. An outdated or orphaned mirror pod stays until the pod it
//     mirrors (its hash is that pod's UID) has stopped, as kubelet keeps it
//     through the grace period.
//     The static pod's status is written to its mirror pod.
//   - At the start and every Resync (10 s), a sweep marks every declared pod and
//     every API pod marked for deletion dirty (unchanged ones cost no
//     request) and deletes orphaned mirror pods.
//
// # Usage
//
//	m := apistatus.New(apistatus.Config{Client: cs, Engine: eng, Pods: watch, NodeName: n, NodeUID: nd.UID})
//	engine.Config{PublishedPod: m.Published}
//	go m.Run(ctx)
package apistatus

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"

	"github.com/speclet/speclet/engine/apierr"
	"github.com/speclet/speclet/engine/config"
)

// Engine is what the manager reads of the engine.
type Engine interface {
	// Pods are the declared pods with their current status.
	Pods() []*v1.Pod
	// Pod is declared pod uid with its current status; nil when it is not
	// declared (marked for deletion, gone) or published nothing yet.
	Pod(uid types.UID) *v1.Pod
	// Declared reports what Pod would return non-nil for, without a copy.
	Declared(uid types.UID) bool
	// PodStopped reports that nothing of the pod runs (its machine is
	// terminated or finished, or it has no worker) and gives the status
	// published since (nil when it has no worker).
	PodStopped(uid types.UID) (final *v1.Pod, stopped bool)
	// SourcesReady reports every pod source delivered its first snapshot.
	SourcesReady() bool
}

// PodCache is the API source's view of the node's pods (mirror pods included).
type PodCache interface {
	GetPod(namespace, name string) *v1.Pod
	ListPods() []*v1.Pod
}

// Defaults of Config.
const (
	DefaultResync      = 10 * time.Second
	DefaultBatch       = 20 * time.Millisecond
	DefaultPendingHold = 5 * time.Second
	DefaultWorkers     = 10
)

// Config configures a Manager.
type Config struct {
	Client   kubernetes.Interface
	Engine   Engine
	Pods     PodCache
	NodeName string
	// NodeUID is the registered Node's UID ("" before registration: no
	// mirror pod is created until then).
	NodeUID func() types.UID
	// Resync is the period of a sweep (DefaultResync).
	Resync time.Duration
	// Batch is how long a publish waits before its write (DefaultBatch).
	Batch time.Duration
	// PendingHold is how long after its first publish a pod's status is
	// held while it is being created (DefaultPendingHold; negative: no
	// hold at all).
	PendingHold time.Duration
	// Workers write different pods at once (DefaultWorkers).
	Workers int
	Log     *slog.Logger
}

// Manager writes statuses, deletes finished pods and keeps mirror pods.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	queue workqueue.TypedRateLimitingInterface[types.UID]
	fails *apierr.Once

	mu    sync.Mutex
	names map[types.UID]string       // namespace/name of each pod UID seen (engine UIDs)
	first map[types.UID]time.Time    // first publish, by engine UID (the Pending hold)
	sent  map[types.UID]v1.PodStatus // the engine's status last written, by API (or mirror) UID
	acked map[types.UID]v1.PodStatus // the API's status after the last write, by API (or mirror) UID
	stale map[types.UID]bool         // the last write failed: read the object before the next
	// sentCreating: the last status written only said the pod is being
	// created, by engine UID.
	sentCreating map[types.UID]bool
	deleted      map[types.UID]bool // deletions sent
}

// New returns a Manager; Run starts it.
func New(cfg Config) *Manager {
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.PendingHold == 0 {
		cfg.PendingHold = DefaultPendingHold
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Manager{cfg: cfg, log: cfg.Log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](100*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "pod-status"}),
		fails: &apierr.Once{Log: cfg.Log, What: "write pod status"},
		names: map[types.UID]string{}, first: map[types.UID]time.Time{},
		sent: map[types.UID]v1.PodStatus{}, acked: map[types.UID]v1.PodStatus{},
		stale: map[types.UID]bool{}, deleted: map[types.UID]bool{}, sentCreating: map[types.UID]bool{}}
}

// Published marks pod p dirty (engine.Config.PublishedPod); it never
// blocks and does not keep p.
func (m *Manager) Published(p *v1.Pod) { m.mark(p, false) }

// mark queues p's UID; a sweep's (swept) is never skipped.
func (m *Manager) mark(p *v1.Pod, swept bool) {
	now := time.Now()
	m.mu.Lock()
	skip := !swept && creating(p) && m.sentCreating[p.UID] && m.cfg.PendingHold > 0
	m.mu.Unlock()
	if skip && m.cfg.Engine.Declared(p.UID) {
		// Progress while being created after such a status was written:
		// carried by the next other status or the next sweep. (A pod no
		// longer declared is being deleted: never skipped.)
		return
	}
	m.mu.Lock()
	m.names[p.UID] = p.Namespace + "/" + p.Name
	first, ok := m.first[p.UID]
	if !ok {
		first = now
		m.first[p.UID] = now
	}
	m.mu.Unlock()
	delay := m.cfg.Batch
	if p.DeletionTimestamp == nil && m.cfg.PendingHold > 0 {
		switch {
		case creating(p):
			delay = max(delay, first.Add(m.cfg.PendingHold).Sub(now))
		case readySoon(p):
			delay = max(delay, ReadySoonHold)
		}
	}
	m.queue.AddAfter(p.UID, delay)
}

// ReadySoonHold is how long a status is held whose only news is a started
// container without a readiness or startup probe that is not ready yet
// (it is within moments).
const ReadySoonHold = time.Second

// creating reports that p's status says only that it is being created:
// Pending, and no container waits for another reason than
// ContainerCreating or PodInitializing nor failed.
func creating(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodPending {
		return false
	}
	for _, cs := range append(append([]v1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return false
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return false
		}
	}
	return true
}

// sameContainerStates reports that a and b give every container the same
// state (waiting and its reason, running, terminated and its exit code)
// and restart count.
func sameContainerStates(a, b v1.PodStatus) bool {
	key := func(st v1.PodStatus) string {
		var k strings.Builder
		for _, cs := range append(append(append([]v1.ContainerStatus(nil), st.InitContainerStatuses...), st.ContainerStatuses...), st.EphemeralContainerStatuses...) {
			fmt.Fprintf(&k, "%s/%d/", cs.Name, cs.RestartCount)
			switch s := cs.State; {
			case s.Waiting != nil:
				fmt.Fprintf(&k, "waiting:%s;", s.Waiting.Reason)
			case s.Running != nil:
				k.WriteString("running;")
			case s.Terminated != nil:
				fmt.Fprintf(&k, "terminated:%d;", s.Terminated.ExitCode)
			default:
				k.WriteString(";")
			}
		}
		return k.String()
	}
	return key(a) == key(b)
}

// readySoon reports that p is Running and a running container without a
// readiness or startup probe is not ready yet: it will be at its next
// publish.
func readySoon(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning {
		return false
	}
	probed := map[string]bool{}
	for _, c := range p.Spec.Containers {
		probed[c.Name] = c.ReadinessProbe != nil || c.StartupProbe != nil
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil && !cs.Ready && !probed[cs.Name] {
			return true
		}
	}
	return false
}

// Run runs the workers, and a sweep at the start and every Resync,
// until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	defer m.queue.ShutDown()
	for range m.cfg.Workers {
		go m.worker(ctx)
	}
	t := time.NewTicker(m.cfg.Resync)
	defer t.Stop()
	for {
		for _, p := range m.sweep(ctx) {
			m.mark(p, true)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Manager) worker(ctx context.Context) {
	for {
		uid, shutdown := m.queue.Get()
		if shutdown {
			return
		}
		if err := m.sync(ctx, uid); err != nil && ctx.Err() == nil {
			m.queue.AddRateLimited(uid)
		} else {
			m.queue.Forget(uid)
		}
		m.queue.Done(uid)
	}
}

// pass sweeps and writes every dirty pod now, in order (tests).
func (m *Manager) pass(ctx context.Context) {
	for _, p := range m.sweep(ctx) {
		_ = m.sync(ctx, p.UID)
	}
}

// sweep returns the pods to mark dirty: the declared ones and the API pods
// marked for deletion. It deletes orphaned mirror pods and forgets what
// it kept of pods that are neither.
func (m *Manager) sweep(ctx context.Context) []*v1.Pod {
	ready := m.cfg.Engine.SourcesReady()
	statics := map[string]bool{}
	live := map[types.UID]bool{}
	out := m.cfg.Engine.Pods()
	for _, p := range out {
		live[p.UID] = true
		if config.IsStatic(p) {
			statics[p.Namespace+"/"+p.Name] = true
		}
	}
	for _, p := range m.cfg.Pods.ListPods() {
		live[p.UID] = true // a mirror pod's UID keys sent and acked
		if p.Annotations[config.AnnotationMirror] != "" {
			// A mirror pod whose static pod is gone goes too, once the
			// sources are complete and that pod stopped.
			if ready && !statics[p.Namespace+"/"+p.Name] && !m.mirrorsRunning(p) && ctx.Err() == nil {
				m.deleteMirror(ctx, p, "orphaned mirror pod deleted")
			}
			continue
		}
		if p.DeletionTimestamp != nil {
			out = append(out, p)
		}
	}
	m.mu.Lock()
	for _, p := range out {
		m.names[p.UID] = p.Namespace + "/" + p.Name
	}
	for _, mp := range []map[types.UID]bool{m.stale, m.deleted, m.sentCreating} {
		for uid := range mp {
			if !live[uid] {
				delete(mp, uid)
			}
		}
	}
	for _, mp := range []map[types.UID]v1.PodStatus{m.sent, m.acked} {
		for uid := range mp {
			if !live[uid] {
				delete(mp, uid)
			}
		}
	}
	for uid := range m.names {
		if !live[uid] {
			delete(m.names, uid)
			delete(m.first, uid)
		}
	}
	m.mu.Unlock()
	return out
}
