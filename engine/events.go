package engine

import (
	"fmt"

	"github.com/speclet/speclet/engine/worker"
)

// EventRecorder receives the pod events kubelet records (worker.EventRecorder).
type EventRecorder = worker.EventRecorder

// NodeEventRecorder receives the events kubelet records about the node
// itself (involvedObject the Node, as kubelet's nodeRef: kind Node, name
// and uid the node name): the eviction manager's EvictionThresholdMet,
// the node status's condition transitions (NodeHasSufficientMemory, ...)
// and SystemOOM. It must not block.
type NodeEventRecorder interface {
	NodeEvent(eventType, reason, message string)
}

// nodeEvent records an event about the node.
func (e *Engine) nodeEvent(eventType, reason, format string, args ...any) {
	if r := e.cfg.NodeEvents; r != nil {
		r.NodeEvent(eventType, reason, fmt.Sprintf(format, args...))
	}
}
