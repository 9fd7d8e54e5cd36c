package containerdtest

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/eviction"
	"github.com/speclet/speclet/engine/resources"
)

// TestContainerdEvictionMemory runs the eviction manager on a real
// containerd with a test-made memory pressure: the node is taken to have
// 300Mi of memory, of which the pods' containers use what containerd's
// ListContainerStats reports (their working sets), and memory.available<100Mi
// is the hard threshold. A BestEffort pod that writes 250 MiB into a memory-backed
// emptyDir brings available below the threshold: it is evicted (Failed,
// Evicted, the message naming memory), the Guaranteed pod beside it keeps
// running, and with the memory freed the pressure ends.
func TestContainerdEvictionMemory(t *testing.T) {
	c, ctx := containerdFor(t, 4*time.Minute)
	rt := dialContainerd(ctx, t, c)
	hard, err := resources.ParseThresholds("eviction-hard", "memory.available<100Mi")
	if err != nil {
		t.Fatal(err)
	}
	const capacity = 300 << 20
	mgr := eviction.NewManager(eviction.Config{Hard: hard, Transition: time.Second})
	signals := func(ctx context.Context, _ string) (eviction.Observations, error) {
		stats, err := rt.ListContainerStats(ctx, nil)
		if err != nil {
			return nil, err
		}
		var used int64
		for _, s := range stats {
			used += int64(s.GetMemory().GetWorkingSetBytes().GetValue())
		}
		return eviction.Observations{"memory.available": {Available: max(capacity-used, 0), Capacity: capacity}}, nil
	}
	_, e, updates := startEngine(ctx, t, c, engine.Config{NodePolicy: engine.NodePolicy{Eviction: mgr, EvictionPeriod: time.Second, Signals: signals}})

	pod := func(name string, res v1.ResourceList, script string) *v1.Pod {
		p := shPod(c, name, v1.RestartPolicyAlways, 1, script)
		p.Annotations[config.AnnotationSource] = config.SourceAPI
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: res, Limits: res}
		return p
	}
	guaranteed := pod("guaranteed", v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		"sleep 3600")
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{guaranteed}, Source: config.SourceAPI}
	waitPhase(t, ctx, e, "guaranteed", v1.PodRunning)
	// The BestEffort pod writes 250 MiB into a memory-backed emptyDir (its
	// tmpfs pages count in its working set); dd takes a moment even on a
	// machine busy with other tests, where filling a shell variable byte by
	// byte could take minutes.
	hog := pod("besteffort", nil, "dd if=/dev/zero of=/mem/fill bs=1M count=250 2>/dev/null; sleep 3600")
	hog.Spec.Volumes = []v1.Volume{{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}}
	hog.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "mem", MountPath: "/mem"}}
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{hog}, Source: config.SourceAPI}
	waitPhase(t, ctx, e, "besteffort", v1.PodFailed)
	p := podNamed(e, "besteffort")
	if p.Status.Reason != engine.ReasonEvicted || !strings.HasPrefix(p.Status.Message, "The node was low on resource: memory. Threshold quantity: 100Mi, available: ") {
		t.Errorf("besteffort: reason %q message %q, want Evicted and kubelet's message naming memory", p.Status.Reason, p.Status.Message)
	}
	t.Logf("besteffort: %s: %s", p.Status.Reason, p.Status.Message)
	// With its memory freed the pressure ends (the transition period is
	// 1 s); the Guaranteed pod was never touched.
	waitFor(t, ctx, "MemoryPressure over", func() bool {
		return !e.Pressure()[v1.NodeMemoryPressure]
	}, e)
	if g := podNamed(e, "guaranteed"); g == nil || g.Status.Phase != v1.PodRunning || g.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("guaranteed after the eviction: %+v", g)
	}
	updates <- config.PodUpdate{Op: config.OpRemove, Pods: []*v1.Pod{guaranteed, hog}, Source: config.SourceAPI}
	waitFor(t, ctx, "runtime empty", runtimeEmpty(ctx, rt), e)
}
