package engine

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Labels and annotations speclet puts on every CRI object it creates. They are
// the only state speclet keeps about its pods: after a restart (even kill -9)
// the engine rebuilds its workers from them, like kubelet does from its
// io.kubernetes.* labels. Objects without LabelPodUID are not speclet's and are
// never touched.
const (
	LabelPodUID        = "speclet.io/pod-uid"
	LabelPodName       = "speclet.io/pod-name"
	LabelPodNamespace  = "speclet.io/pod-namespace"
	LabelContainerName = "speclet.io/container-name"

	AnnotationContainerHash  = "speclet.io/container-hash"
	AnnotationRestartCount   = "speclet.io/restart-count"
	AnnotationGracePeriod    = "speclet.io/termination-grace-period"
	AnnotationInitContainer  = "speclet.io/init-container"
	AnnotationConfigSource   = "speclet.io/config-source"
	annotationKubeConfigSrc  = "kubernetes.io/config.source"
	annotationKubeConfigHash = "kubernetes.io/config.hash"
)

func podLabels(pod *v1.Pod) map[string]string {
	return map[string]string{
		LabelPodUID:       string(pod.UID),
		LabelPodName:      pod.Name,
		LabelPodNamespace: pod.Namespace,
	}
}

func containerLabels(pod *v1.Pod, name string) map[string]string {
	l := podLabels(pod)
	l[LabelContainerName] = name
	return l
}

// containerHash identifies a container's spec: a change of it restarts the
// container (kubelet's io.kubernetes.container.hash).
func containerHash(c *v1.Container) string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("marshal container %q: %v", c.Name, err)) // v1.Container always marshals
	}
	h := fnv.New64a()
	h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}

// podUIDOf returns the pod UID label of a CRI object, or "" when the object is
// not speclet's.
func podUIDOf(labels map[string]string) types.UID {
	return types.UID(labels[LabelPodUID])
}

// identify is how the PLEG knows speclet's objects: the pod UID label and
// the container name label.
func identify(labels map[string]string) (types.UID, string) {
	return podUIDOf(labels), labels[LabelContainerName]
}

func restartCountOf(annotations map[string]string) int32 {
	n, err := strconv.ParseInt(annotations[AnnotationRestartCount], 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

// fullName is kubelet's pod full name, the key of static pod exclusivity.
func fullName(pod *v1.Pod) string {
	return pod.Name + "_" + pod.Namespace
}
