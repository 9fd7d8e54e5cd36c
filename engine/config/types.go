package config

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Op is what a PodUpdate asks of the engine. The values mirror kubelet's
// kubetypes.PodOperation.
type Op int

const (
	// OpAdd carries pods the engine has not seen from this source. The first
	// update of every source is an OpAdd, possibly with no pods: it tells the
	// engine that the source has delivered its first snapshot.
	OpAdd Op = iota
	// OpUpdate carries pods whose spec, labels or annotations changed.
	OpUpdate
	// OpRemove carries pods that left their source; the engine kills them
	// (with their grace period) and forgets them.
	OpRemove
	// OpDelete carries pods marked for graceful deletion (a deletion
	// timestamp set); static sources never send it.
	OpDelete
	// OpReconcile carries pods whose status alone changed in the source.
	OpReconcile
	// OpRestore carries pods restored from a checkpoint; static sources never
	// send it.
	OpRestore
)

var opNames = [...]string{"ADD", "UPDATE", "REMOVE", "DELETE", "RECONCILE", "RESTORE"}

func (o Op) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Source names, as carried in PodUpdate.Source and in the
// kubernetes.io/config.source annotation.
const (
	SourceFile = "file"
	SourceHTTP = "http"
	SourceAPI  = "api"
)

// Annotations every pod from a source carries, as kubelet's static pods do.
const (
	// AnnotationSource names the source of the pod ("file", "http", "api").
	AnnotationSource = "kubernetes.io/config.source"
	// AnnotationHash is the pod's UID, a hash of its manifest for static pods.
	AnnotationHash = "kubernetes.io/config.hash"
	// AnnotationSeen is the RFC 3339 time the merger first saw the pod.
	AnnotationSeen = "kubernetes.io/config.seen"
)

// PodUpdate is one batch of pods from one source with one operation, like
// kubelet's kubetypes.PodUpdate. Pods are copies owned by the receiver.
type PodUpdate struct {
	Op     Op
	Pods   []*v1.Pod
	Source string
}

// IsStatic reports whether pod comes from a source other than the API server
// (a manifest directory or URL).
func IsStatic(pod *v1.Pod) bool {
	src, ok := pod.Annotations[AnnotationSource]
	return ok && src != SourceAPI
}
