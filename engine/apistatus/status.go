// Package apistatus writes what the engine computes back to the API server,
// as kubelet's status manager and mirror client do: it is an effect at the
// edge, driven by the statuses the pod workers publish (engine.Pods) and by
// where their pod machines are (engine.PodStopped); it never changes a
// pod's lifecycle.
//
// Contracts:
//   - An API pod's status is written through the status subresource only
//     when it differs from the last one written for that UID. Each write is
//     versioned (resourceVersion) and retried on conflict with a fresh read;
//     a pod whose UID changed or that is gone is skipped. Conditions owned by
//     others (PodScheduled, ...) are kept. Rate limiting is the client's
//     (--kube-api-qps, --kube-api-burst).
//   - Once nothing of a pod marked for deletion runs (engine.PodStopped), its
//     final status (terminal phase, containers terminated) is written, and
//     only once that write succeeded is its object deleted with grace
//     period 0 and a UID precondition.
//   - A static pod (file or URL source) gets a mirror pod of the same name:
//     annotation kubernetes.io/config.mirror = its config hash, an owner
//     reference to the Node. A mirror pod that is deleted is created again; one
//     whose hash differs (the manifest changed) is replaced; one whose static
//     pod is gone is deleted once every source delivered its first snapshot.
//     The static pod's status is written to its mirror pod.
//
// # Usage
//
//	m := apistatus.New(apistatus.Config{Client: cs, Engine: eng, Pods: watch, NodeName: n, NodeUID: nd.UID})
//	engine.Config{Published: m.Wake}
//	go m.Run(ctx)
package apistatus

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/engine/config"
)

// Engine is what the manager reads of the engine.
type Engine interface {
	// Pods are the declared pods with their current status.
	Pods() []*v1.Pod
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

// Config configures a Manager.
type Config struct {
	Client   kubernetes.Interface
	Engine   Engine
	Pods     PodCache
	NodeName string
	// NodeUID is the registered Node's UID ("" before registration: no
	// mirror pod is created until then).
	NodeUID func() types.UID
	// Resync is the period of a full pass without a wake-up (default 10 s).
	Resync time.Duration
	Log    *slog.Logger
}

// Manager writes statuses, deletes finished pods and keeps mirror pods.
type Manager struct {
	cfg  Config
	log  *slog.Logger
	wake chan struct{}

	mu      sync.Mutex
	written map[types.UID]v1.PodStatus // last status written, by API (or mirror) UID
	deleted map[types.UID]bool         // deletions sent
}

// New returns a Manager; Run starts it.
func New(cfg Config) *Manager {
	if cfg.Resync <= 0 {
		cfg.Resync = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Manager{cfg: cfg, log: cfg.Log, wake: make(chan struct{}, 1),
		written: map[types.UID]v1.PodStatus{}, deleted: map[types.UID]bool{}}
}

// Wake asks for a pass soon; it never blocks (engine.Config.Published).
func (m *Manager) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run makes a pass on every wake-up and every Resync until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-t.C:
		}
		m.pass(ctx)
	}
}

func (m *Manager) pass(ctx context.Context) {
	live := map[types.UID]bool{}
	ready := m.cfg.Engine.SourcesReady()
	statics := map[string]bool{}
	for _, p := range m.cfg.Engine.Pods() {
		if config.IsStatic(p) {
			statics[p.Namespace+"/"+p.Name] = true
		}
		if ctx.Err() != nil {
			return
		}
		target := p
		if config.IsStatic(p) {
			mirror := m.mirror(ctx, p)
			if mirror == nil {
				continue
			}
			target = mirror
		} else {
			live[p.UID] = true
		}
		m.writeStatus(ctx, target, p.Status)
		live[target.UID] = true
	}
	// A pod marked for deletion leaves the engine's pods at once; its
	// object goes once nothing of it runs.
	for _, p := range m.cfg.Pods.ListPods() {
		if p.Annotations[config.AnnotationMirror] != "" {
			// A mirror pod whose static pod is gone goes too, once the
			// sources are complete.
			if ready && p.DeletionTimestamp == nil && !statics[p.Namespace+"/"+p.Name] {
				m.deleteMirror(ctx, p, "orphaned mirror pod deleted")
			}
			continue
		}
		if p.DeletionTimestamp == nil {
			continue
		}
		live[p.UID] = true
		final, stopped := m.cfg.Engine.PodStopped(p.UID)
		if !stopped {
			continue
		}
		if final != nil && !m.writeStatus(ctx, p, final.Status) {
			continue // the final status first; retried at the next pass
		}
		m.deleteFinished(ctx, p)
	}
	m.mu.Lock()
	for uid := range m.written {
		if !live[uid] {
			delete(m.written, uid)
		}
	}
	for uid := range m.deleted {
		if !live[uid] {
			delete(m.deleted, uid)
		}
	}
	m.mu.Unlock()
}

// writeStatus writes st to the API object target (same UID) unless it is
// what was written last. It reports whether the API object now has st (or
// is gone).
func (m *Manager) writeStatus(ctx context.Context, target *v1.Pod, st v1.PodStatus) bool {
	m.mu.Lock()
	last, ok := m.written[target.UID]
	m.mu.Unlock()
	if ok && reflect.DeepEqual(last, st) {
		return true
	}
	pods := m.cfg.Client.CoreV1().Pods(target.Namespace)
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := m.cfg.Pods.GetPod(target.Namespace, target.Name)
		if cur == nil || !first {
			var err error
			if cur, err = pods.Get(ctx, target.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		first = false
		if cur.UID != target.UID {
			return apierrors.NewNotFound(v1.Resource("pods"), target.Name) // replaced: not ours
		}
		next := cur.DeepCopy()
		next.Status = merge(cur.Status, st)
		if reflect.DeepEqual(next.Status, cur.Status) {
			return nil
		}
		_, err := pods.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		return err
	})
	switch {
	case err == nil:
		m.mu.Lock()
		m.written[target.UID] = *st.DeepCopy()
		m.mu.Unlock()
	case apierrors.IsNotFound(err):
	default:
		if ctx.Err() == nil {
			m.log.Error("write pod status", "pod", target.Namespace+"/"+target.Name, "uid", target.UID, "err", err)
		}
		return false
	}
	return true
}

// merge is the engine's status with the conditions others own kept.
func merge(api, ours v1.PodStatus) v1.PodStatus {
	out := *ours.DeepCopy()
	have := map[v1.PodConditionType]bool{}
	for _, c := range out.Conditions {
		have[c.Type] = true
	}
	for _, c := range api.Conditions {
		if !have[c.Type] {
			out.Conditions = append(out.Conditions, c)
		}
	}
	if out.NominatedNodeName == "" {
		out.NominatedNodeName = api.NominatedNodeName
	}
	if out.QOSClass == "" {
		out.QOSClass = api.QOSClass
	}
	return out
}

func (m *Manager) deleteFinished(ctx context.Context, p *v1.Pod) {
	m.mu.Lock()
	done := m.deleted[p.UID]
	m.deleted[p.UID] = true
	m.mu.Unlock()
	if done {
		return
	}
	err := m.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(p.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		m.mu.Lock()
		delete(m.deleted, p.UID) // retry at the next pass
		m.mu.Unlock()
		m.log.Error("delete terminated pod", "pod", p.Namespace+"/"+p.Name, "uid", p.UID, "err", err)
		return
	}
	m.log.Info("pod object deleted", "pod", p.Namespace+"/"+p.Name, "uid", p.UID)
}

// deleteMirror deletes mirror pod p (grace 0, UID precondition).
func (m *Manager) deleteMirror(ctx context.Context, p *v1.Pod, what string) {
	err := m.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(p.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		m.log.Error("delete mirror pod", "pod", p.Namespace+"/"+p.Name, "err", err)
		return
	}
	m.log.Info(what, "pod", p.Namespace+"/"+p.Name, "uid", p.UID)
}

// mirror returns the mirror pod of static pod p, creating or replacing it
// as needed; nil while it does not exist (yet).
func (m *Manager) mirror(ctx context.Context, p *v1.Pod) *v1.Pod {
	nodeUID := m.cfg.NodeUID()
	if nodeUID == "" {
		return nil
	}
	hash := p.Annotations[config.AnnotationHash]
	pods := m.cfg.Client.CoreV1().Pods(p.Namespace)
	cur := m.cfg.Pods.GetPod(p.Namespace, p.Name)
	if cur != nil {
		if cur.DeletionTimestamp != nil {
			return nil // going; created again once gone
		}
		if cur.Annotations[config.AnnotationMirror] == hash {
			return cur
		}
		if cur.Annotations[config.AnnotationMirror] == "" {
			m.log.Error("static pod has no mirror pod: an API pod of the same name exists", "pod", p.Namespace+"/"+p.Name)
			return nil
		}
		m.deleteMirror(ctx, cur, "outdated mirror pod deleted")
		return nil
	}
	mp := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, Labels: p.Labels,
			Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: m.cfg.NodeName, UID: nodeUID, Controller: ptr.To(true),
			}},
		},
		Spec: *p.Spec.DeepCopy(),
	}
	for k, v := range p.Annotations {
		if k != config.AnnotationSeen {
			mp.Annotations[k] = v
		}
	}
	mp.Annotations[config.AnnotationMirror] = hash
	mp.Spec.NodeName = m.cfg.NodeName
	created, err := pods.Create(ctx, mp, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // the cache is behind; next pass
	}
	if err != nil {
		m.log.Error("create mirror pod", "pod", p.Namespace+"/"+p.Name, "err", err)
		return nil
	}
	m.log.Info("mirror pod created", "pod", p.Namespace+"/"+p.Name, "uid", created.UID)
	return created
}
