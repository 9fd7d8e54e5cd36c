// Package runtimepods is speclet's pods as the runtime holds them: the
// labels and annotations speclet puts on every CRI object it creates, and
// the pods those objects group back into when the engine starts again. The
// labels are the only state speclet keeps about its pods: after a restart
// (even kill -9) the engine rebuilds its workers from them, as kubelet does
// from its io.kubernetes.* labels. Objects without LabelPodUID are not
// speclet's and are never touched. It is pure: the engine lists the
// runtime.
package runtimepods

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The labels and annotations of speclet's CRI objects.
const (
	LabelPodUID        = "speclet.io/pod-uid"
	LabelPodName       = "speclet.io/pod-name"
	LabelPodNamespace  = "speclet.io/pod-namespace"
	LabelContainerName = "speclet.io/container-name"

	AnnotationContainerHash = "speclet.io/container-hash"
	AnnotationRestartCount  = "speclet.io/restart-count"
	AnnotationGracePeriod   = "speclet.io/termination-grace-period"
	AnnotationInitContainer = "speclet.io/init-container"
	AnnotationConfigSource  = "speclet.io/config-source"
	// kubelet's annotations of a static pod's config, on its sandbox.
	AnnotationKubeConfigSource = "kubernetes.io/config.source"
	AnnotationKubeConfigHash   = "kubernetes.io/config.hash"
)

// PodLabels are the labels of a pod's sandbox.
func PodLabels(pod *v1.Pod) map[string]string {
	return map[string]string{
		LabelPodUID:       string(pod.UID),
		LabelPodName:      pod.Name,
		LabelPodNamespace: pod.Namespace,
	}
}

// ContainerLabels are the labels of an instance of the pod's container name.
func ContainerLabels(pod *v1.Pod, name string) map[string]string {
	l := PodLabels(pod)
	l[LabelContainerName] = name
	return l
}

// ContainerHash identifies a container's spec: a change of it restarts the
// container (kubelet's io.kubernetes.container.hash).
func ContainerHash(c *v1.Container) string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("marshal container %q: %v", c.Name, err)) // v1.Container always marshals
	}
	h := fnv.New64a()
	h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}

// PodUIDOf returns the pod UID label of a CRI object, or "" when the object
// is not speclet's.
func PodUIDOf(labels map[string]string) types.UID {
	return types.UID(labels[LabelPodUID])
}

// Identify is how the PLEG knows speclet's objects: the pod UID label and
// the container name label.
func Identify(labels map[string]string) (types.UID, string) {
	return PodUIDOf(labels), labels[LabelContainerName]
}

// RestartCountOf is the restart count an instance was created with; 0 when
// its annotation is missing or not a number.
func RestartCountOf(annotations map[string]string) int32 {
	n, err := strconv.ParseInt(annotations[AnnotationRestartCount], 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

// Pod is what the runtime holds of one pod of speclet's: what its labels
// say, and its objects.
type Pod struct {
	UID       types.UID
	Name      string
	Namespace string
	Grace     int64 // from the sandbox annotation; -1 when unknown

	// Sandboxes, newest first.
	Sandboxes []*runtimeapi.PodSandbox
	// Containers by container name, each newest first: the highest
	// restart count, then the latest created.
	Containers map[string][]*runtimeapi.Container
}

// ReadySandbox returns the newest ready sandbox, or nil.
func (a *Pod) ReadySandbox() *runtimeapi.PodSandbox {
	for _, s := range a.Sandboxes {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			return s
		}
	}
	return nil
}

// Group groups speclet's sandboxes and containers by pod UID; objects
// without the pod UID label are left out.
func Group(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) map[types.UID]*Pod {
	pods := map[types.UID]*Pod{}
	get := func(labels map[string]string) *Pod {
		uid := PodUIDOf(labels)
		if uid == "" {
			return nil
		}
		a := pods[uid]
		if a == nil {
			a = &Pod{UID: uid, Name: labels[LabelPodName], Namespace: labels[LabelPodNamespace], Grace: -1,
				Containers: map[string][]*runtimeapi.Container{}}
			pods[uid] = a
		}
		return a
	}
	for _, s := range sbs {
		if a := get(s.Labels); a != nil {
			a.Sandboxes = append(a.Sandboxes, s)
		}
	}
	for _, c := range cs {
		if a := get(c.Labels); a != nil {
			name := c.Labels[LabelContainerName]
			a.Containers[name] = append(a.Containers[name], c)
		}
	}
	for _, a := range pods {
		slices.SortStableFunc(a.Sandboxes, func(x, y *runtimeapi.PodSandbox) int { return cmp.Compare(y.CreatedAt, x.CreatedAt) })
		for _, s := range a.Sandboxes {
			if g, err := strconv.ParseInt(s.Annotations[AnnotationGracePeriod], 10, 64); err == nil {
				a.Grace = g
				break
			}
		}
		for _, cs := range a.Containers {
			slices.SortStableFunc(cs, func(x, y *runtimeapi.Container) int {
				if rx, ry := RestartCountOf(x.Annotations), RestartCountOf(y.Annotations); rx != ry {
					return cmp.Compare(ry, rx)
				}
				return cmp.Compare(y.CreatedAt, x.CreatedAt)
			})
		}
	}
	return pods
}

// Orphan is the stand-in pod of a runtime pod no source declares: only what
// the labels say, and the grace period its sandbox recorded.
func Orphan(a *Pod) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: a.UID, Name: a.Name, Namespace: a.Namespace}}
	if a.Grace >= 0 {
		g := a.Grace
		p.Spec.TerminationGracePeriodSeconds = &g
	}
	for name := range a.Containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: name})
	}
	return p
}
