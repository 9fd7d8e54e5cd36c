package engine

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/podspec"
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

// kubelet's labels, which speclet writes beside its own and reads where
// its own are missing (a pod kubelet started, adopted).
const (
	KubeletLabelPodUID        = runtimepods.KubeletPodUID
	KubeletLabelPodName       = runtimepods.KubeletPodName
	KubeletLabelPodNamespace  = runtimepods.KubeletPodNamespace
	KubeletLabelContainerName = runtimepods.KubeletContainerName
)

// LogLinkOf returns the path in linksDir of the link to container c's log
// file that start_container makes (podspec.LogLink, named from c's labels,
// speclet's or kubelet's); "" for a container that is no agent's. It is what
// the log maintenance (containerlogs.Rotator.LinkOf) keeps the links by.
func LogLinkOf(linksDir string) func(c *runtimeapi.Container) string {
	return func(c *runtimeapi.Container) string {
		l := c.GetLabels()
		uid, name := runtimepods.Identify(l)
		if uid == "" || name == "" {
			return ""
		}
		return podspec.LogLink(linksDir, runtimepods.PodNamespaceOf(l), runtimepods.PodNameOf(l), name, c.GetId())
	}
}
