package containerdtest

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
)

// TestContainerdSpecChangeRestarts: a running container whose image is
// changed in its pod's spec is killed and started again with the new image,
// under every restart policy, even when it ends the stop with exit code 0
// (it traps SIGTERM), which OnFailure and Never would not restart: kubelet
// restarts a container whose spec changed whatever the restart policy
// (e2e_node Containers Lifecycle, "the regular container has its image
// updated"). The other container of the pod is left alone.
func TestContainerdSpecChangeRestarts(t *testing.T) {
	c, ctx := containerdFor(t, 3*time.Minute)
	script := `trap 'exit 0' TERM; while true; do sleep 1; done`
	var pods []*v1.Pod
	for _, p := range []struct {
		name   string
		policy v1.RestartPolicy
	}{{"always", v1.RestartPolicyAlways}, {"onfailure", v1.RestartPolicyOnFailure}, {"never", v1.RestartPolicyNever}} {
		pod := shPod(c, p.name, p.policy, 5, script)
		pod.Annotations[config.AnnotationSource] = config.SourceAPI
		pod.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
		other := pod.Spec.Containers[0]
		other.Name = "other"
		pod.Spec.Containers = append(pod.Spec.Containers, other)
		pods = append(pods, pod)
	}
	_, e, updates := startEngine(ctx, t, c, engine.Config{})
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: pods, Source: config.SourceAPI}
	ids := map[string]string{}
	for _, p := range pods {
		waitFor(t, ctx, p.Name+" running", func() bool { return mainStatus(e, p.Name).State.Running != nil }, e)
		ids[p.Name] = statusOf(e, p.Name, "other").ContainerID
	}
	bb, err := harness.BusyboxImage()
	if err != nil {
		t.Fatal(err)
	}
	newImage, err := c.Registry.Push(ctx, "busybox:new", bb)
	if err != nil {
		t.Fatal(err)
	}
	var changed []*v1.Pod
	for _, p := range pods {
		p = p.DeepCopy()
		p.Spec.Containers[0].Image = newImage
		changed = append(changed, p)
	}
	updates <- config.PodUpdate{Op: config.OpUpdate, Pods: changed, Source: config.SourceAPI}
	for _, p := range pods {
		waitFor(t, ctx, p.Name+" restarted with the new image", func() bool {
			s := mainStatus(e, p.Name)
			return s.State.Running != nil && s.Image == newImage && s.RestartCount > 0
		}, e)
		if o := statusOf(e, p.Name, "other"); o.ContainerID != ids[p.Name] || o.RestartCount != 0 || o.State.Running == nil {
			t.Errorf("%s: the unchanged container was touched: %+v", p.Name, o)
		}
	}
}

// statusOf is the status of container name of the pod named pod (zero when
// e publishes none).
func statusOf(e *engine.Engine, pod, name string) v1.ContainerStatus {
	if p := podNamed(e, pod); p != nil {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == name {
				return cs
			}
		}
	}
	return v1.ContainerStatus{}
}
