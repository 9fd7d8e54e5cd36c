package apistatus

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Events records the engine's pod events (engine.EventRecorder) as Event
// objects, through client-go's event broadcaster: events are queued (Event
// never blocks), similar ones are aggregated and counted, and each pod's
// events are rate-limited by its spam filter (a burst of 25, then one every
// 5 minutes), as kubelet's are. Source: component "speclet", host the node.
//
// Events about the node (NodeEvent) name it as kubelet's nodeRef does: kind
// Node, name and uid the node name, no namespace (the Event object itself
// lands in namespace default).
type Events struct {
	rec         record.EventRecorder
	broadcaster record.EventBroadcaster
	nodeRef     *v1.ObjectReference
}

// NewEvents starts the broadcaster; it stops when ctx ends.
func NewEvents(ctx context.Context, cs kubernetes.Interface, nodeName string) *Events {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	go func() { <-ctx.Done(); b.Shutdown() }()
	return &Events{
		rec:         b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "speclet", Host: nodeName}),
		broadcaster: b,
		nodeRef:     NodeRef(nodeName),
	}
}

// NodeRef is kubelet's reference to its node in events.
func NodeRef(nodeName string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName), Namespace: ""}
}

// NodeEvent records one event about the node.
func (e *Events) NodeEvent(eventType, reason, message string) {
	e.rec.Event(e.nodeRef, eventType, reason, message)
}

// Event records one event about pod (fieldPath: its container, or "").
func (e *Events) Event(pod *v1.Pod, fieldPath, eventType, reason, message string) {
	ref := &v1.ObjectReference{
		APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, FieldPath: fieldPath,
	}
	e.rec.Event(ref, eventType, reason, message)
}
