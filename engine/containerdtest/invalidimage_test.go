package containerdtest

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine"
)

// TestContainerdInvalidImageName: a container whose image reference does
// not parse waits with kubelet's reason InvalidImageName and message, with
// its warning events InspectFailed and Failed "Error: InvalidImageName",
// through later syncs; the runtime is never asked to pull it. (Before, the
// pull was tried: ErrImagePull, then ImagePullBackOff.)
func TestContainerdInvalidImageName(t *testing.T) {
	c, ctx := containerdFor(t, 2*time.Minute)
	pod := shPod(c, "bad", v1.RestartPolicyAlways, 1, "sleep 3600")
	pod.Spec.Containers[0].Image = "busybox:@@bad"
	events := &podEvents{}
	_, e, updates := startPods(ctx, t, c, engine.Config{Events: events}, pod)
	const msg = `Failed to apply default image tag "busybox:@@bad": couldn't parse image name "busybox:@@bad": invalid reference format`
	waiting := func() *v1.ContainerStateWaiting { return mainStatus(e, "bad").State.Waiting }
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
	removePods(updates, pod)
	waitFor(t, ctx, "pod removed", func() bool { return len(e.Pods()) == 0 }, e)
}
