package engine

import (
	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/runtimepods"
)

// The labels and annotations speclet puts on every CRI object it creates
// (engine/runtimepods): objects without LabelPodUID are not speclet's.
const (
	LabelPodUID        = runtimepods.LabelPodUID
	LabelPodName       = runtimepods.LabelPodName
	LabelPodNamespace  = runtimepods.LabelPodNamespace
	LabelContainerName = runtimepods.LabelContainerName

	AnnotationContainerHash = runtimepods.AnnotationContainerHash
	AnnotationRestartCount  = runtimepods.AnnotationRestartCount
	AnnotationGracePeriod   = runtimepods.AnnotationGracePeriod
	AnnotationInitContainer = runtimepods.AnnotationInitContainer
	AnnotationConfigSource  = runtimepods.AnnotationConfigSource
)

// adoptedPod is what the runtime still holds of a pod speclet started
// before it restarted (engine/runtimepods groups it from the labels).
type adoptedPod = runtimepods.Pod

// fullName is kubelet's pod full name, the key of static pod exclusivity.
func fullName(pod *v1.Pod) string {
	return pod.Name + "_" + pod.Namespace
}
