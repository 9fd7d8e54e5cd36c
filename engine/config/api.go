package config

import (
	"context"
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
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
// complete list (mirror pods and pods in a terminal phase left out,
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
	push := func(objs []any) {
		pods := make([]*v1.Pod, 0, len(objs))
		for _, o := range objs {
			p, ok := o.(*v1.Pod)
			if !ok || p.Annotations[AnnotationMirror] != "" {
				continue
			}
			// As kubelet's pod workers: a pod whose phase in the API is
			// terminal never runs again (after a restart of speclet, say);
			// the API server deletes such pods without grace.
			if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
				continue
			}
			p = p.DeepCopy()
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[AnnotationSource] = SourceAPI
			pods = append(pods, p)
		}
		if err := m.Set(ctx, SourceAPI, pods); err != nil && ctx.Err() == nil {
			log.Error("API pod source: hand pods to the sync loop", "err", err)
		}
	}
	w := &APIWatch{store: cache.NewUndeltaStore(push, cache.MetaNamespaceKeyFunc)}
	r := cache.NewReflectorWithOptions(lw, &v1.Pod{}, w.store, cache.ReflectorOptions{Name: fmt.Sprintf("pods on node %s", src.NodeName)})
	go r.Run(ctx.Done())
	return w
}
