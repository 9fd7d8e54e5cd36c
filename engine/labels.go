package engine

import (
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
