package podspec

import (
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// Node is what the translation reads about the node it runs on.
type Node struct {
	// RootDir is --root-dir: pod volumes, logs and per-container files
	// live under it.
	RootDir string
	// MemoryCapacity is the node's memory in bytes (a container's
	// oom_score_adj depends on it); 0: unknown.
	MemoryCapacity int64
	// Static reports whether a pod is a static pod (its QoS score differs).
	Static func(*v1.Pod) bool
}

// LogDir is the sandbox LogDirectory under root:
// <root>/logs/<namespace>_<name>_<uid>.
func LogDir(root string, pod *v1.Pod) string {
	return filepath.Join(root, "logs", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

func (n Node) static(pod *v1.Pod) bool {
	return n.Static != nil && n.Static(pod)
}
