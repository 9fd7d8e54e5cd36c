package containerdtest

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
)

// TestContainerdActiveDeadline: a running pod whose activeDeadlineSeconds
// is shortened (the e2e spec "should allow activeDeadlineSeconds to be
// updated") becomes Failed with reason DeadlineExceeded and kubelet's
// message once it has been active that long, with a DeadlineExceeded
// event, and its container is stopped. (Before, the field was ignored and
// the pod kept running.)
func TestContainerdActiveDeadline(t *testing.T) {
	c, ctx := containerdFor(t, 90*time.Second)
	deadline := int64(3600)
	pod := shPod(c, "dl", v1.RestartPolicyAlways, 1, "sleep 3600")
	pod.Spec.ActiveDeadlineSeconds = &deadline
	events := &podEvents{}
	_, e, updates := startPods(ctx, t, c, engine.Config{Events: events}, pod)
	waitFor(t, ctx, "dl Running", func() bool {
		p := podNamed(e, "dl")
		return p != nil && p.Status.Phase == v1.PodRunning && p.Status.StartTime != nil
	}, e)
	started := podNamed(e, "dl").Status.StartTime.Time
	short := pod.DeepCopy()
	five := int64(5)
	short.Spec.ActiveDeadlineSeconds = &five
	updates <- config.PodUpdate{Op: config.OpUpdate, Pods: []*v1.Pod{short}, Source: config.SourceFile}
	waitPhase(t, ctx, e, "dl", v1.PodFailed)
	failedAt := time.Now()
	p := podNamed(e, "dl")
	if p.Status.Reason != engine.ReasonDeadlineExceeded || p.Status.Message != engine.MessageDeadlineExceeded {
		t.Errorf("reason %q message %q, want %q %q", p.Status.Reason, p.Status.Message, engine.ReasonDeadlineExceeded, engine.MessageDeadlineExceeded)
	}
	if d := failedAt.Sub(started); d < 5*time.Second || d > 8*time.Second {
		t.Errorf("failed %s after the start time, want about 5 s", d)
	}
	if !events.has("default/dl", "DeadlineExceeded: "+engine.MessageDeadlineExceeded) {
		t.Errorf("events %v, want DeadlineExceeded", events.got)
	}
	waitFor(t, ctx, "dl's container stopped", func() bool {
		return mainStatus(e, "dl").State.Terminated != nil
	}, e)
	removePods(updates, short)
	waitFor(t, ctx, "pod removed", func() bool { return len(e.Pods()) == 0 }, e)
}
