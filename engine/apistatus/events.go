package apistatus

import (
	"context"

	v1 "k8s.io/api/core/v1"
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
type Events struct {
	rec         record.EventRecorder
	broadcaster record.EventBroadcaster
}

// NewEvents starts the broadcaster; it stops when ctx ends.
func NewEvents(ctx context.Context, cs kubernetes.Interface, nodeName string) *Events {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	go func() { <-ctx.Done(); b.Shutdown() }()
	return &Events{rec: b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "speclet", Host: nodeName}), broadcaster: b}
}

// Event records one event about pod (fieldPath: its container, or "").
func (e *Events) Event(pod *v1.Pod, fieldPath, eventType, reason, message string) {
	ref := &v1.ObjectReference{
		APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, FieldPath: fieldPath,
	}
	e.rec.Event(ref, eventType, reason, message)
}
