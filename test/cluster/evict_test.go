package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
)

// testEvictionUnderMemoryPressure: a node whose pods may use 500Mi (node
// allocatable enforced on its own kubepods cgroup, made under
// --cgroup-root so that other nodes of the machine keep theirs, with
// --system-reserved taking the rest of the machine) runs a Guaranteed pod
// and a BestEffort pod that holds 440 MB. The pods' working set leaves less
// than memory.available's 100Mi under the cgroup's limit: kubelet's
// allocatableMemory.available signal. The BestEffort pod is evicted (API
// status Failed, reason Evicted, the message naming memory; the Evicted
// event on it), the node records EvictionThresholdMet and
// NodeHasInsufficientMemory and shows MemoryPressure; once the memory is
// free and the pressure transition period (15 s here) has passed,
// MemoryPressure is False again and the Guaranteed pod still runs, never
// restarted.
func testEvictionUnderMemoryPressure(t *testing.T, e *env) {
	ctx := context.Background()
	const node = "node-evict"
	na := e.waitNode(t, "node-a", 60*time.Second, v1.ConditionTrue)
	capacity := na.Status.Capacity.Memory().Value() // the same machine
	reserved := capacity - 500<<20
	cgroupRoot := fmt.Sprintf("/speclet-evict-%d", os.Getpid())
	// Cleanups run last-registered first: the cgroups go after the
	// runtime (registered below) removed every container.
	t.Cleanup(func() { removeCgroupTree(t, cgroupRoot) })
	cd, err := harness.StartContainerd(ctx, harness.Options{Registry: e.reg, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cd.Stop(); err != nil {
			t.Errorf("stop containerd: %v", err)
		}
	})
	// After the node's teardown (NodeForTest's, registered below).
	t.Cleanup(func() { e.admin.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })
	e.c.NodeForTest(ctx, t, cluster.NodeOptions{Name: node, Bin: e.bin, Containerd: cd, Dir: t.TempDir(), Args: []string{
		"--cgroup-root", cgroupRoot,
		"--system-reserved", fmt.Sprintf("memory=%d", reserved),
		"--eviction-hard", "memory.available<100Mi",
		"--eviction-pressure-transition-period", "15s",
	}})
	nd := e.waitNode(t, node, 60*time.Second, v1.ConditionTrue)
	if got, want := nd.Status.Allocatable.Memory().Value(), int64(400<<20); got != want {
		t.Fatalf("allocatable memory %d, want 400Mi (500Mi for pods less the 100Mi threshold)", got)
	}

	steady := e.pod("steady", node, v1.RestartPolicyAlways, "while true; do sleep 1; done")
	steady.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	q := v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("32Mi")}
	steady.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: q, Limits: q}
	e.create(t, steady)
	e.waitPod(t, "steady", 90*time.Second, "Running", running)
	// dd reads 440 MB from /dev/zero into one buffer and blocks writing
	// it into a pipe nobody reads: it holds the memory until killed.
	hog := e.pod("hog", node, v1.RestartPolicyAlways, "dd if=/dev/zero bs=440M count=1 | sleep 3600")
	hog.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	e.create(t, hog)

	p := e.waitPod(t, "hog", 120*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "Evicted" || !strings.HasPrefix(p.Status.Message, "The node was low on resource: memory. Threshold quantity: 100Mi, available: ") {
		t.Errorf("hog: reason %q message %q; want Evicted, \"The node was low on resource: memory. Threshold quantity: 100Mi, available: ...\"", p.Status.Reason, p.Status.Message)
	}
	t.Logf("hog: %s: %s", p.Status.Reason, p.Status.Message)
	// MemoryPressure holds for the transition period: looked at first.
	waitMemoryPressure(t, e, node, v1.ConditionTrue)
	waitEvent(t, e, "involvedObject.name=hog,reason=Evicted", func(ev v1.Event) bool {
		return ev.Type == v1.EventTypeWarning && ev.Message == p.Status.Message && ev.Source.Host == node
	})
	waitEvent(t, e, "involvedObject.kind=Node,involvedObject.name="+node+",reason=EvictionThresholdMet", func(ev v1.Event) bool {
		return ev.Type == v1.EventTypeWarning && ev.Message == "Attempting to reclaim memory" && string(ev.InvolvedObject.UID) == node
	})
	waitEvent(t, e, "involvedObject.kind=Node,involvedObject.name="+node+",reason=NodeHasInsufficientMemory", func(ev v1.Event) bool {
		return ev.Message == "Node "+node+" status is now: NodeHasInsufficientMemory"
	})
	// The memory is back once hog is gone; after the transition period
	// MemoryPressure clears, and no other pod was evicted meanwhile.
	waitMemoryPressure(t, e, node, v1.ConditionFalse)
	s := e.waitPod(t, "steady", 10*time.Second, "Running", running)
	if rc := s.Status.ContainerStatuses[0].RestartCount; rc != 0 || s.Status.Reason != "" {
		t.Errorf("steady (Guaranteed): restarts %d, reason %q; want 0 and none", rc, s.Status.Reason)
	}
	l, err := e.admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=Evicted"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range l.Items {
		if ev.Source.Host == node && ev.InvolvedObject.Name != "hog" {
			t.Errorf("Evicted event about %s %s: only hog may be evicted", ev.InvolvedObject.Kind, ev.InvolvedObject.Name)
		}
	}
	for _, name := range []string{"hog", "steady"} {
		if err := e.admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitGone(t, "steady", 60*time.Second)
	e.waitGone(t, "hog", 60*time.Second)
}

// waitEvent polls the events of namespace default matching selector until
// one satisfies ok.
func waitEvent(t *testing.T, e *env, selector string, ok func(v1.Event) bool) {
	t.Helper()
	var seen []string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		l, err := e.admin.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: selector})
		if err == nil {
			seen = seen[:0]
			for _, ev := range l.Items {
				if ok(ev) {
					return
				}
				seen = append(seen, fmt.Sprintf("%s %s %s/%s uid=%s: %s", ev.Type, ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.InvolvedObject.UID, ev.Message))
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("no event %s as expected within 60s; seen: %q", selector, seen)
}

func waitMemoryPressure(t *testing.T, e *env, node string, want v1.ConditionStatus) {
	t.Helper()
	var last []v1.NodeCondition
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		n, err := e.admin.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err == nil {
			last = n.Status.Conditions
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeMemoryPressure && c.Status == want {
					return
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("node %s: MemoryPressure not %s within 90s; conditions %+v", node, want, last)
}

// removeCgroupTree removes cgroup rel and everything under it in every
// mounted hierarchy, deepest first.
func removeCgroupTree(t *testing.T, rel string) {
	roots := []string{"/sys/fs/cgroup"}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil { // v1
		ents, _ := os.ReadDir("/sys/fs/cgroup")
		roots = roots[:0]
		for _, e := range ents {
			if fi, err := os.Lstat(filepath.Join("/sys/fs/cgroup", e.Name())); err == nil && fi.IsDir() {
				roots = append(roots, filepath.Join("/sys/fs/cgroup", e.Name()))
			}
		}
	}
	for _, r := range roots {
		top := filepath.Join(r, rel)
		var dirs []string
		filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for try := 0; try < 50; try++ {
				if err = os.Remove(dirs[i]); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil && !os.IsNotExist(err) {
				t.Errorf("remove cgroup %s: %v", dirs[i], err)
			}
		}
	}
}
