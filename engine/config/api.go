package config

import (
	"context"
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// AnnotationMirror marks a mirror pod: the API object speclet creates for a
// static pod (kubelet's kubetypes.ConfigMirrorAnnotationKey). Its value is
// the static pod's config hash.
const AnnotationMirror = "kubernetes.io/config.mirror"

// APISource is the API server source: the pods whose spec.nodeName is
// NodeName, watched with a client-go reflector and a field selector.
type APISource struct {
	Client   kubernetes.Interface
	NodeName string
}

// APIWatch is a running API source. Its Store holds every pod bound to the
// node as the API server last said, mirror pods included (the status
// manager reads them); the merger gets the others.
type APIWatch struct {
	store cache.Store
}

// GetPod returns the API's copy of namespace/name (a mirror pod too), from
// the watch cache; nil when unknown. The caller must not modify it.
func (w *APIWatch) GetPod(namespace, name string) *v1.Pod {
	obj, ok, err := w.store.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	return obj.(*v1.Pod)
}

// ListPods returns the API's copies of every pod bound to the node (mirror
// pods too). The caller must not modify them.
func (w *APIWatch) ListPods() []*v1.Pod {
	objs := w.store.List()
	out := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*v1.Pod))
	}
	return out
}

// StartAPI starts the source: each change of the watched pods hands the
// complete list (mirror pods left out, and pods already in a terminal
// phase when first listed,
// AnnotationSource set to "api") to
// m.Set as one snapshot of SourceAPI, the first only after the first full
// list, so the source is ready exactly when the API server has answered
// once. Like kubelet's, the reflector relists and rewatches with backoff on
// its own while the API server is unreachable. It runs until ctx ends.
func StartAPI(ctx context.Context, src APISource, m *Merger, log *slog.Logger) *APIWatch {
	if log == nil {
		log = slog.Default()
	}
	lw := cache.NewListWatchFromClient(src.Client.CoreV1().RESTClient(), "pods", v1.NamespaceAll,
		fields.OneTermEqualSelector("spec.nodeName", src.NodeName))
	// listed are the UIDs handed on while not terminal; the store calls
	// push from one goroutine.
	listed := map[types.UID]bool{}
	push := func(objs []any) {
		pods := apiPods(objs, listed)
		if err := m.Set(ctx, SourceAPI, pods); err != nil && ctx.Err() == nil {
			log.Error("API pod source: hand pods to the sync loop", "err", err)
		}
	}
	w := &APIWatch{store: cache.NewUndeltaStore(push, cache.MetaNamespaceKeyFunc)}
	r := cache.NewReflectorWithOptions(lw, &v1.Pod{}, w.store, cache.ReflectorOptions{Name: fmt.Sprintf("pods on node %s", src.NodeName)})
	go r.Run(ctx.Done())
	return w
}

// apiPods is one snapshot of the API source: the pods bound to the node,
// mirror pods left out, with AnnotationSource set. As kubelet's pod
// workers, a pod whose phase in the API is terminal when the node first
// sees it never runs (after a restart of speclet, say), so it is left out;
// a pod that became terminal while listed stays listed until it is
// deleted, as in kubelet's pod manager: its containers, status and logs stay
// readable. listed holds the UIDs handed on while not terminal; apiPods
// updates it.
func apiPods(objs []any, listed map[types.UID]bool) []*v1.Pod {
	pods := make([]*v1.Pod, 0, len(objs))
	seen := make(map[types.UID]bool, len(objs))
	for _, o := range objs {
		p, ok := o.(*v1.Pod)
		if !ok || p.Annotations[AnnotationMirror] != "" {
			continue
		}
		seen[p.UID] = true
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			if !listed[p.UID] {
				continue
			}
		} else {
			listed[p.UID] = true
		}
		p = p.DeepCopy()
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[AnnotationSource] = SourceAPI
		pods = append(pods, p)
	}
	for uid := range listed {
		if !seen[uid] {
			delete(listed, uid)
		}
	}
	return pods
}
