package apistatus

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/engine/config"
)

// deleteMirror deletes mirror pod p (grace 0, UID precondition) and
// reports whether it is gone.
func (m *Manager) deleteMirror(ctx context.Context, p *v1.Pod, what string) bool {
	err := m.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(p.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		m.log.Error("delete mirror pod", "pod", p.Namespace+"/"+p.Name, "err", err)
		return false
	}
	m.log.Info(what, "pod", p.Namespace+"/"+p.Name, "uid", p.UID)
	return err == nil || apierrors.IsNotFound(err)
}

// mirrorsRunning reports that the static pod mirror pod mp was created for
// (its config.mirror annotation is that pod's hash, which is its UID) has
// not stopped: kubelet keeps an outdated or orphaned mirror pod while the
// pod it mirrors terminates (HandlePodCleanups asks
// IsPodForMirrorPodTerminatingByFullName), so that the mirror pod's life
// covers the static pod's grace period.
func (m *Manager) mirrorsRunning(mp *v1.Pod) bool {
	_, stopped := m.cfg.Engine.PodStopped(types.UID(mp.Annotations[config.AnnotationMirror]))
	return !stopped
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
		if cur.Annotations[config.AnnotationMirror] == "" {
			m.log.Error("static pod has no mirror pod: an API pod of the same name exists", "pod", p.Namespace+"/"+p.Name)
			return nil
		}
		switch {
		case cur.DeletionTimestamp != nil:
			// Someone deleted the mirror pod gracefully: nobody but
			// the node ends it, so it goes now and comes back at once
			// (kubelet's SyncPod deletes a mirror pod marked for
			// deletion).
			if !m.deleteMirror(ctx, cur, "mirror pod marked for deletion deleted") {
				return nil
			}
		case cur.Annotations[config.AnnotationMirror] == hash:
			return cur
		case m.mirrorsRunning(cur):
			return nil // the pod it mirrors still terminates
		default:
			if !m.deleteMirror(ctx, cur, "outdated mirror pod deleted") {
				return nil
			}
		}
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
