package worker

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/internal/suite"
)

// TestPublishStatusUnchanged: a status equal to the one last published for
// the same pod object is not published again; a new pod object is.
func TestPublishStatusUnchanged(t *testing.T) {
	h := testHost(t)
	h.NodeName = "node-a"
	calls := 0
	h.PublishedPod = func(*v1.Pod) { calls++ }
	pod := suite.Pod(0)
	w := New(h, pod, nil, "", nil)
	w.st = newPodState(w, pod, nil)
	w.publishStatus()
	first := w.pubStatus
	w.publishStatus()
	if w.pubStatus != first || calls != 1 {
		t.Errorf("same status published again: %d calls, same status %v", calls, w.pubStatus == first)
	}
	updated := *pod
	updated.Labels = map[string]string{"a": "b"}
	w.st.pod = &updated
	w.publishStatus()
	if got := w.Snapshot(); w.pubStatus == first || calls != 2 || got.Labels["a"] != "b" {
		t.Errorf("updated pod not published: %d calls, same status %v", calls, w.pubStatus == first)
	}
	if got := w.Snapshot(); got.Spec.NodeName != h.NodeName || got.Status.Phase != w.pubStatus.Phase || got.UID != pod.UID {
		t.Errorf("published pod: node %q, phase %q, UID %q; want %q, %q, %q", got.Spec.NodeName, got.Status.Phase, got.UID, h.NodeName, w.pubStatus.Phase, pod.UID)
	}
}
