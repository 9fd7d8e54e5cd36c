// Package runtimepods is speclet's pods as the runtime holds them: the
// labels and annotations speclet puts on every CRI object it creates, and
// the pods those objects group back into when the engine starts again. The
// labels are the only state speclet keeps about its pods: after a restart
// (even kill -9) the engine rebuilds its workers from them, as kubelet does
// from its io.kubernetes.* labels.
//
// speclet writes kubelet's labels and annotations too (KubeletPodUID and the
// others, with kubelet's meaning), and reads them where its own are missing:
// a pod kubelet started is grouped back like one of speclet's, and kubelet
// finds speclet's pods as its own. Objects with neither pod UID label are
// no agent's and are never touched. It is pure: the engine lists the
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
	"k8s.io/apimachinery/pkg/util/dump"
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

// kubelet's labels and annotations (k8s.io/kubelet/pkg/types,
// pkg/kubelet/kuberuntime/labels.go of kubelet v1.34), which speclet writes
// beside its own and reads where its own are missing.
const (
	KubeletPodUID        = "io.kubernetes.pod.uid"
	KubeletPodName       = "io.kubernetes.pod.name"
	KubeletPodNamespace  = "io.kubernetes.pod.namespace"
	KubeletContainerName = "io.kubernetes.container.name"

	// KubeletContainerHash is KubeletHash of the container, in hex.
	KubeletContainerHash             = "io.kubernetes.container.hash"
	KubeletRestartCount              = "io.kubernetes.container.restartCount"
	KubeletTerminationMessagePath    = "io.kubernetes.container.terminationMessagePath"
	KubeletTerminationMessagePolicy  = "io.kubernetes.container.terminationMessagePolicy"
	KubeletPodTerminationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
	// KubeletPreStopHandler is the JSON of the container's
	// lifecycle.preStop (a v1.LifecycleHandler), KubeletContainerPorts the
	// JSON of its ports (a []v1.ContainerPort): what kubelet v1.34.4 runs
	// the hook with when its container GC stops a container in an unknown
	// state (restoreSpecsFromContainerLabels), having no pod for it.
	KubeletPreStopHandler = "io.kubernetes.container.preStopHandler"
	KubeletContainerPorts = "io.kubernetes.container.ports"
)

// MaxHookAnnotationBytes bounds the two JSON annotations together
// (KubeletPreStopHandler, then KubeletContainerPorts), so that a container's
// runtime record stays bounded (engine/worker MaxContainerRecordBytes).
// kubelet writes them whole; the typical hook and ports fit.
const MaxHookAnnotationBytes = 448

// PodLabels are the labels of a pod's sandbox: speclet's and kubelet's.
func PodLabels(pod *v1.Pod) map[string]string {
	return map[string]string{
		LabelPodUID:         string(pod.UID),
		LabelPodName:        pod.Name,
		LabelPodNamespace:   pod.Namespace,
		KubeletPodUID:       string(pod.UID),
		KubeletPodName:      pod.Name,
		KubeletPodNamespace: pod.Namespace,
	}
}

// ContainerLabels are the labels of an instance of the pod's container name.
func ContainerLabels(pod *v1.Pod, name string) map[string]string {
	l := PodLabels(pod)
	l[LabelContainerName] = name
	l[KubeletContainerName] = name
	return l
}

// KubeletAnnotations are the annotations kubelet reads of an instance of c,
// the restartCount-th: its spec's hash (KubeletHash), the restart count, the
// termination message's path and policy, the pod's grace period, and the
// preStop hook and ports as JSON, as kubelet writes them
// (newContainerAnnotations). The hook and ports are written while they fit
// in MaxHookAnnotationBytes: the hook first; then the ports, or when they
// do not fit, the one port the hook names (an httpGet's named port), which
// is all kubelet reads them for.
func KubeletAnnotations(pod *v1.Pod, c *v1.Container, restartCount int32) map[string]string {
	a := map[string]string{
		KubeletContainerHash:            KubeletHash(c),
		KubeletRestartCount:             strconv.Itoa(int(restartCount)),
		KubeletTerminationMessagePath:   c.TerminationMessagePath,
		KubeletTerminationMessagePolicy: string(c.TerminationMessagePolicy),
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		a[KubeletPodTerminationGracePeriod] = strconv.FormatInt(*g, 10)
	}
	left := MaxHookAnnotationBytes
	var preStop *v1.LifecycleHandler
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		preStop = c.Lifecycle.PreStop
		if b := marshal(c.Name, preStop); len(b) <= left {
			a[KubeletPreStopHandler] = string(b)
			left -= len(b)
		} else {
			preStop = nil
		}
	}
	if len(c.Ports) > 0 {
		if b := marshal(c.Name, c.Ports); len(b) <= left {
			a[KubeletContainerPorts] = string(b)
		} else if p := namedPort(preStop, c.Ports); p != nil {
			if b := marshal(c.Name, []v1.ContainerPort{*p}); len(b) <= left {
				a[KubeletContainerPorts] = string(b)
			}
		}
	}
	return a
}

// namedPort is the port of ports that hook h's httpGet names, or nil.
func namedPort(h *v1.LifecycleHandler, ports []v1.ContainerPort) *v1.ContainerPort {
	if h == nil || h.HTTPGet == nil || h.HTTPGet.Port.StrVal == "" {
		return nil
	}
	for i := range ports {
		if ports[i].Name == h.HTTPGet.Port.StrVal {
			return &ports[i]
		}
	}
	return nil
}

func marshal(name string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal container %q: %v", name, err)) // API types always marshal
	}
	return b
}

// KubeletHash is kubelet v1.34's hash of a container
// (pkg/kubelet/container.HashContainer), in hex as its
// io.kubernetes.container.hash annotation holds it: FNV-32a over the spew
// printing (hash.DeepHashObject) of the JSON of the container's name and
// image, the only fields kubelet compares to decide that a running
// container's spec changed.
func KubeletHash(c *v1.Container) string {
	b, err := json.Marshal(map[string]string{"name": c.Name, "image": c.Image})
	if err != nil {
		panic(fmt.Sprintf("marshal container %q: %v", c.Name, err)) // a map of strings always marshals
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(b))
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}

// RunHash is the speclet hash (ContainerHash) an instance with annotations
// ann counts as created from, for the container's spec c: speclet's
// annotation when it has one. An instance kubelet created has only
// kubelet's hash (name and image): it counts as created from c when that
// matches KubeletHash(c), and from a spec other than c when not. "" (no
// hash: the spec is taken as unchanged) for an instance with neither, or
// with no spec to compare.
func RunHash(ann map[string]string, c *v1.Container) string {
	if h, ok := ann[AnnotationContainerHash]; ok || c == nil {
		return h
	}
	h, ok := ann[KubeletContainerHash]
	if !ok {
		return ""
	}
	if h == KubeletHash(c) {
		return ContainerHash(c)
	}
	return KubeletContainerHash + "=" + h
}

// ContainerHash identifies a container's spec: a change of it restarts the
// container (kubelet's io.kubernetes.container.hash, over the whole spec).
func ContainerHash(c *v1.Container) string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("marshal container %q: %v", c.Name, err)) // v1.Container always marshals
	}
	h := fnv.New64a()
	h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}

// PodUIDOf returns the pod UID label of a CRI object (speclet's, else
// kubelet's), or "" when the object is no agent's.
func PodUIDOf(labels map[string]string) types.UID {
	return types.UID(either(labels, LabelPodUID, KubeletPodUID))
}

// Identify is how the PLEG knows the agents' objects: the pod UID label and
// the container name label.
func Identify(labels map[string]string) (types.UID, string) {
	return PodUIDOf(labels), ContainerNameOf(labels)
}

// ContainerNameOf is the container name label of a container (speclet's,
// else kubelet's).
func ContainerNameOf(labels map[string]string) string {
	return either(labels, LabelContainerName, KubeletContainerName)
}

// PodNameOf and PodNamespaceOf are the pod name and namespace labels
// (speclet's, else kubelet's).
func PodNameOf(labels map[string]string) string {
	return either(labels, LabelPodName, KubeletPodName)
}

func PodNamespaceOf(labels map[string]string) string {
	return either(labels, LabelPodNamespace, KubeletPodNamespace)
}

// either is m[own], or m[kubelet] when m has no own key.
func either(m map[string]string, own, kubelet string) string {
	if v, ok := m[own]; ok {
		return v
	}
	return m[kubelet]
}

// RestartCountOf is the restart count an instance was created with
// (speclet's annotation, else kubelet's); 0 when it is missing or not a
// number.
func RestartCountOf(annotations map[string]string) int32 {
	n, err := strconv.ParseInt(either(annotations, AnnotationRestartCount, KubeletRestartCount), 10, 32)
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

// Group groups the agents' sandboxes and containers by pod UID (PodUIDOf);
// objects without a pod UID label are left out.
func Group(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) map[types.UID]*Pod {
	pods := map[types.UID]*Pod{}
	get := func(labels map[string]string) *Pod {
		uid := PodUIDOf(labels)
		if uid == "" {
			return nil
		}
		a := pods[uid]
		if a == nil {
			a = &Pod{UID: uid, Name: PodNameOf(labels), Namespace: PodNamespaceOf(labels), Grace: -1,
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
			name := ContainerNameOf(c.Labels)
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
		// A pod kubelet started has its grace period on its containers.
		for _, cs := range a.Containers {
			for _, c := range cs {
				if a.Grace >= 0 {
					break
				}
				if g, err := strconv.ParseInt(c.Annotations[KubeletPodTerminationGracePeriod], 10, 64); err == nil {
					a.Grace = g
				}
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
// the labels say, and the grace period its sandbox recorded. Its containers
// have no preStop hook, whatever their annotations hold: kubelet v1.34.4
// stops an orphan from its runtime pod alone too (SyncTerminatingRuntimePod:
// ToAPIPod, names and images), and reads KubeletPreStopHandler only to stop
// a container in an unknown state before its container GC removes it.
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
