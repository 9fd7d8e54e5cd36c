package containerdtest

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
)

// TestContainerdInvalidImageName: a container whose image reference does
// not parse waits with kubelet's reason InvalidImageName and message, with
// its warning events InspectFailed and Failed "Error: InvalidImageName",
// through later syncs; the runtime is never asked to pull it. (Before, the
// pull was tried: ErrImagePull, then ImagePullBackOff.)
func TestContainerdInvalidImageName(t *testing.T) {
	c := harness.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	events := &podEvents{}
	_, e, updates := startEngine(ctx, t, c, engine.Config{Events: events})
	grace := int64(1)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default", UID: k8stypes.UID("bad-uid"),
			Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
		Spec: v1.PodSpec{HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "main", Image: "busybox:@@bad", ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"/bin/sh", "-c", "sleep 3600"}}}},
	}
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{pod}, Source: config.SourceFile}
	const msg = `Failed to apply default image tag "busybox:@@bad": couldn't parse image name "busybox:@@bad": invalid reference format`
	waiting := func() *v1.ContainerStateWaiting {
		for _, p := range e.Pods() {
			if p.Name == "bad" && len(p.Status.ContainerStatuses) == 1 {
				return p.Status.ContainerStatuses[0].State.Waiting
			}
		}
		return nil
	}
	waitFor(t, ctx, "InvalidImageName", func() bool {
		w := waiting()
		return w != nil && w.Reason == engine.ReasonInvalidImageName
	}, e)
	if w := waiting(); w.Message != msg {
		t.Errorf("message %q, want %q", w.Message, msg)
	}
	for _, ev := range []string{"InspectFailed: " + msg, "Failed: Error: InvalidImageName"} {
		if !events.has("default/bad", ev) {
			t.Errorf("events %q, want %q", events.of("default/bad"), ev)
		}
	}
	time.Sleep(3 * time.Second) // later syncs
	if w := waiting(); w == nil || w.Reason != engine.ReasonInvalidImageName {
		t.Errorf("after 3 s: waiting %v, want InvalidImageName", w)
	}
	updates <- config.PodUpdate{Op: config.OpRemove, Pods: []*v1.Pod{pod}, Source: config.SourceFile}
	waitFor(t, ctx, "pod removed", func() bool { return len(e.Pods()) == 0 }, e)
}
