package containerdtest

import (
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
)

// TestContainerdEphemeral adds an ephemeral container to a running API pod
// on a real containerd, as `kubectl debug --target` does through the
// pods/ephemeralcontainers subresource: the update starts it; it runs in
// the target container's process namespace (its ps lists the target's
// process), answers an exec, writes its output to its log, and is reported
// in ephemeralContainerStatuses while the pod stays Running and Ready. The
// pod's removal stops and removes it with the pod.
func TestContainerdEphemeral(t *testing.T) {
	c, ctx := containerdFor(t, 3*time.Minute)
	rt, e, updates := startEngine(ctx, t, c, engine.Config{})

	busybox := c.ImageRef("busybox:latest")
	pod := shPod(c, "debugme", v1.RestartPolicyAlways, 2, "")
	pod.Annotations[config.AnnotationSource] = config.SourceAPI
	pod.Spec.Containers[0].Command = []string{"sleep", "3600"}
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{pod}, Source: config.SourceAPI}
	waitFor(t, ctx, "debugme Running", func() bool {
		p := podByUID(e, "debugme-uid")
		return p != nil && p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
	}, e)

	debug := pod.DeepCopy()
	debug.Spec.EphemeralContainers = []v1.EphemeralContainer{{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: busybox, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"sh", "-c", "echo polo; ps -o args; exec sleep 3601"}},
		TargetContainerName: "main",
	}}
	updates <- config.PodUpdate{Op: config.OpUpdate, Pods: []*v1.Pod{debug}, Source: config.SourceAPI}
	var id string
	waitFor(t, ctx, "the ephemeral container running, the pod Running and Ready", func() bool {
		p := podByUID(e, "debugme-uid")
		if p == nil || p.Status.Phase != v1.PodRunning || len(p.Status.EphemeralContainerStatuses) != 1 {
			return false
		}
		es := p.Status.EphemeralContainerStatuses[0]
		if es.Name != "debugger" || es.State.Running == nil || es.Ready {
			return false
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodReady && cond.Status != v1.ConditionTrue {
				return false
			}
		}
		_, id, _ = strings.Cut(es.ContainerID, "://")
		return id != ""
	}, e)

	r, err := rt.ExecSync(ctx, id, []string{"/bin/echo", "marco"}, 10*time.Second)
	if err != nil || r.ExitCode != 0 || string(r.Stdout) != "marco\n" {
		t.Fatalf("exec /bin/echo marco in the ephemeral container: %q (exit %d), %v", r.Stdout, r.ExitCode, err)
	}
	st, err := rt.ContainerStatus(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var log string
	waitFor(t, ctx, "the ephemeral container's log", func() bool {
		b, _ := os.ReadFile(st.LogPath)
		log = string(b)
		return strings.Contains(log, "sleep 3600\n")
	}, e)
	if !strings.Contains(log, " polo\n") {
		t.Errorf("log of the ephemeral container has no polo:\n%s", log)
	}

	updates <- config.PodUpdate{Op: config.OpRemove, Pods: []*v1.Pod{debug}, Source: config.SourceAPI}
	waitFor(t, ctx, "runtime empty", runtimeEmpty(ctx, rt), e)
}

// podByUID is the engine's newest published copy of pod uid, nil if none.
func podByUID(e *engine.Engine, uid types.UID) *v1.Pod {
	for _, p := range e.Pods() {
		if p.UID == uid {
			return p
		}
	}
	return nil
}
