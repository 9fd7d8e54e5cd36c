package containerdtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/cgroups"
	"github.com/speclet/speclet/engine/resources"
)

// TestContainerdQoS runs pods of the three QoS classes and one that
// allocates past its memory limit on a real containerd with pod cgroups
// (--cgroups-per-qos, the machine's cgroupfs): each pod's cgroup sits under
// its QoS parent, the container's cgroup files hold its limits, its process
// has the oom_score_adj of its class (as far as the runtime lets it, see
// below), the allocating container is OOMKilled with exit code 137 and
// restarts under Always, a pod requesting more memory than allocatable is
// refused (Failed, OutOfmemory) while the others run, and the pod cgroups
// are gone after the pods.
func TestContainerdQoS(t *testing.T) {
	c, ctx := containerdFor(t, 4*time.Minute)
	capacity, err := cgroups.MachineCapacity("")
	if err != nil {
		t.Fatal(err)
	}
	cg, err := cgroups.New(cgroups.Options{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := resources.Allocatable(capacity, resources.MustList("memory=256Mi"), nil, nil)
	if err := cg.Setup(alloc, true); err != nil {
		t.Fatal(err)
	}
	if got := readInt(t, filepath.Join(cg.Dir("memory", "/kubepods"), memFile(cg))); got != alloc.Memory().Value() {
		t.Errorf("kubepods memory limit = %d, want allocatable %d", got, alloc.Memory().Value())
	}
	memCap := capacity.Memory().Value()
	mk := func(name, script string, req, lim v1.ResourceList) *v1.Pod {
		p := shPod(c, name, v1.RestartPolicyAlways, 1, script)
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: req, Limits: lim}
		return p
	}
	l := resources.MustList
	guaranteed := mk("guaranteed", "sleep 3600", l("cpu=200m,memory=64Mi"), l("cpu=200m,memory=64Mi"))
	burstable := mk("burstable", "sleep 3600", l("cpu=100m,memory=32Mi"), l("memory=128Mi"))
	besteffort := mk("besteffort", "sleep 3600", nil, nil)
	// Doubling a shell variable passes 16 MiB within a few steps.
	oom := mk("oom", "x=0123456789abcdef; while :; do x=$x$x; done", l("memory=16Mi"), l("memory=16Mi"))
	// Bad input: more memory than the node's allocatable is refused
	// admission; the other pods run.
	huge := mk("huge", "sleep 3600", l("memory=100Ti"), nil)
	pods := []*v1.Pod{guaranteed, burstable, besteffort, oom, huge}
	rt, e, updates := startPods(ctx, t, c, engine.Config{
		PodCgroups: cg, MemoryCapacity: memCap, Allocatable: alloc, CrashLoopBackOffBase: time.Second}, pods...)

	waitFor(t, ctx, "three pods Running, oom restarted after OOMKilled (137), huge Failed with OutOfmemory", func() bool {
		n := 0
		for _, p := range e.Pods() {
			if p.Name == "huge" && p.Status.Phase == v1.PodFailed && p.Status.Reason == "OutOfmemory" {
				n++
			}
			cs := p.Status.ContainerStatuses
			if len(cs) != 1 {
				continue
			}
			if p.Name == "oom" {
				lt := cs[0].LastTerminationState.Terminated
				if cs[0].RestartCount >= 1 && lt != nil && lt.Reason == "OOMKilled" && lt.ExitCode == 137 {
					n++
				}
			} else if cs[0].State.Running != nil {
				n++
			}
		}
		return n == 5
	}, e)

	// The runtime is asked for kubelet's oom_score_adj; containerd with
	// restrict_oom_score_adj (which this machine needs) raises a value
	// below its own oom_score_adj to its own. So Guaranteed lands on
	// max(-997, containerd's), the others exactly.
	own := readInt(t, "/proc/"+strconv.Itoa(c.PID())+"/oom_score_adj")
	burstAdj := 1000 - 1000*(32<<20)/memCap
	t.Logf("containerd oom_score_adj %d; cgroup v2 %v; memory capacity %d", own, cg.V2(), memCap)
	for _, tc := range []struct {
		pod    *v1.Pod
		parent string
		limit  int64 // memory limit of the container, 0 = none
		quota  int64 // cpu.cfs_quota_us, -1 = none
		adj    int64
	}{
		{guaranteed, "/kubepods", 64 << 20, 20000, max(-997, own)},
		{burstable, "/kubepods/burstable", 128 << 20, -1, min(max(burstAdj, 3), 999)},
		{besteffort, "/kubepods/besteffort", 0, -1, 1000},
	} {
		name := tc.pod.Name
		podCg := tc.parent + "/pod" + string(tc.pod.UID)
		if got := cg.Parent(tc.pod); got != podCg {
			t.Errorf("%s: cgroup parent %q, want %q", name, got, podCg)
		}
		id := containerID(e, name)
		memDir := filepath.Join(cg.Dir("memory", podCg), id)
		if _, err := os.Stat(memDir); err != nil {
			t.Errorf("%s: container cgroup not under its pod cgroup %s: %v", name, podCg, err)
			continue
		}
		limit := readInt(t, filepath.Join(memDir, memFile(cg)))
		if tc.limit > 0 && limit != tc.limit || tc.limit == 0 && limit < 1<<40 {
			t.Errorf("%s: memory limit %d, want %d (0 = unlimited)", name, limit, tc.limit)
		}
		if !cg.V2() {
			if q := readInt(t, filepath.Join(cg.Dir("cpu", podCg), id, "cpu.cfs_quota_us")); q != tc.quota {
				t.Errorf("%s: cpu.cfs_quota_us %d, want %d", name, q, tc.quota)
			}
		}
		procs := strings.Fields(readFile(t, filepath.Join(memDir, "cgroup.procs")))
		if len(procs) == 0 {
			t.Errorf("%s: no process in the container cgroup", name)
			continue
		}
		adj := readInt(t, "/proc/"+procs[0]+"/oom_score_adj")
		t.Logf("%s: cgroup %s, memory limit %d, oom_score_adj %d", name, podCg, limit, adj)
		if adj != tc.adj {
			t.Errorf("%s: oom_score_adj %d, want %d (containerd's own: %d)", name, adj, tc.adj, own)
		}
	}

	// A hybrid host's unified cgroup2 mount: runc makes each container's
	// cgroup there too, the pod's directory included, and the pod's
	// removal must take it away with the v1 ones.
	unified := ""
	if !cg.V2() {
		if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil {
			unified = "/sys/fs/cgroup/unified"
			for _, p := range pods {
				_, err := os.Stat(filepath.Join(unified, cg.Parent(p)))
				t.Logf("%s: pod cgroup in the unified mount while it runs: %v", p.Name, err == nil)
			}
		}
	}
	removePods(updates, pods...)
	waitFor(t, ctx, "runtime empty and the pod cgroups removed", func() bool {
		for _, p := range pods {
			if _, err := os.Stat(filepath.Join(unified, cg.Parent(p))); unified != "" && !os.IsNotExist(err) {
				return false
			}
		}
		for _, p := range pods {
			for _, ctrl := range []string{"memory", "cpu", "pids"} {
				if _, err := os.Stat(cg.Dir(ctrl, cg.Parent(p))); !os.IsNotExist(err) {
					return false
				}
			}
		}
		return runtimeEmpty(ctx, rt)()
	}, e)
}

func memFile(cg *cgroups.Manager) string {
	if cg.V2() {
		return "memory.max"
	}
	return "memory.limit_in_bytes"
}

// containerID is the runtime's ID of container main of the pod named pod,
// "" while e publishes none.
func containerID(e *engine.Engine, pod string) string {
	_, id, _ := strings.Cut(mainStatus(e, pod).ContainerID, "://")
	return id
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	s := readFile(t, path)
	if s == "max" {
		return 1 << 62
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}
