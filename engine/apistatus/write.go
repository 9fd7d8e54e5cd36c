// Writing one pod's status to the API server, and deleting a finished one.

package apistatus

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/engine/config"
)

// sync writes pod uid's newest status, or, once it stopped after being
// marked for deletion, its final status and then the deletion. An error
// means: retry with backoff.
func (m *Manager) sync(ctx context.Context, uid types.UID) error {
	if p := m.cfg.Engine.Pod(uid); p != nil {
		target := m.cfg.Pods.GetPod(p.Namespace, p.Name)
		if config.IsStatic(p) {
			target = m.mirror(ctx, p)
		}
		if target == nil || (!config.IsStatic(p) && target.UID != uid) {
			return nil // not (yet) in the API: the next sweep
		}
		return m.write(ctx, uid, target, p.Status)
	}
	m.mu.Lock()
	key, ok := m.names[uid]
	m.mu.Unlock()
	if !ok {
		return nil
	}
	ns, name, _ := splitKey(key)
	cur := m.cfg.Pods.GetPod(ns, name)
	if cur == nil || cur.UID != uid || cur.DeletionTimestamp == nil {
		return nil
	}
	m.mu.Lock()
	done := m.deleted[uid]
	m.mu.Unlock()
	if done {
		// Deleted already; the watch has not said so yet. Its final status
		// went out before the delete: a write now could only answer 404.
		return nil
	}
	final, stopped := m.cfg.Engine.PodStopped(uid)
	if !stopped {
		return nil // published again once it stopped
	}
	if final != nil {
		if err := m.write(ctx, uid, cur, final.Status); err != nil {
			return err // the final status first
		}
	}
	return m.deleteFinished(ctx, cur)
}

func splitKey(key string) (ns, name string, ok bool) {
	for i := range len(key) {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return "", key, false
}

// write patches st onto API object target (engine pod uid) unless it is
// what was written last or changes nothing. nil: the API object has st,
// or is gone or replaced.
func (m *Manager) write(ctx context.Context, uid types.UID, target *v1.Pod, st v1.PodStatus) error {
	m.mu.Lock()
	last, written := m.sent[target.UID]
	base, acked := m.acked[target.UID]
	stale := m.stale[target.UID]
	wasCreating := m.sentCreating[uid]
	m.mu.Unlock()
	if written && apiequality.Semantic.DeepEqual(last, st) {
		return nil
	}
	if written && wasCreating && m.cfg.PendingHold > 0 && creating(&v1.Pod{Status: st}) && sameContainerStates(last, st) {
		// Still being created, and only conditions or addresses moved on
		// (the sandbox is ready, the pod has its IP): the next status that
		// says more carries them.
		return nil
	}
	pods := m.cfg.Client.CoreV1().Pods(target.Namespace)
	key := target.Namespace + "/" + target.Name
	if stale {
		// A failed write may have landed: read what the API has.
		cur, err := pods.Get(ctx, target.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && cur.UID != target.UID {
			return nil
		}
		if err != nil {
			m.fails.Fail(err, "pod", key, "uid", target.UID)
			return err
		}
		base, acked = cur.Status, true
	}
	if !acked {
		base = target.Status
	}
	patch, err := statusPatch(target.UID, base, merge(base, st))
	if err != nil {
		m.log.Error("write pod status", "pod", key, "uid", target.UID, "err", err)
		return nil // not retried: the same status makes the same error
	}
	got := &v1.Pod{Status: base}
	if patch != nil {
		got, err = pods.Patch(ctx, target.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			return nil // gone, or replaced (the UID precondition)
		case err != nil:
			m.mu.Lock()
			m.stale[target.UID] = true
			m.mu.Unlock()
			if ctx.Err() == nil {
				m.fails.Fail(err, "pod", key, "uid", target.UID)
			}
			return err
		}
		m.fails.OK()
	}
	m.mu.Lock()
	m.sent[target.UID] = *st.DeepCopy()
	m.acked[target.UID] = got.Status
	delete(m.stale, target.UID)
	m.sentCreating[uid] = st.Phase == v1.PodPending && creating(&v1.Pod{Status: st})
	m.mu.Unlock()
	return nil
}

func (m *Manager) deleteFinished(ctx context.Context, p *v1.Pod) error {
	m.mu.Lock()
	done := m.deleted[p.UID]
	m.mu.Unlock()
	if done {
		return nil
	}
	err := m.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(p.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		if ctx.Err() == nil {
			m.fails.Fail(err, "pod", p.Namespace+"/"+p.Name, "uid", p.UID)
		}
		return err
	}
	m.fails.OK()
	m.mu.Lock()
	m.deleted[p.UID] = true
	m.mu.Unlock()
	m.log.Info("pod object deleted", "pod", p.Namespace+"/"+p.Name, "uid", p.UID)
	return nil
}
