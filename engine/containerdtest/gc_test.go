package containerdtest

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
)

// TestContainerdContainerGC crash-loops a container 20 times on a real
// containerd with --maximum-dead-containers-per-container=2 (and a short
// backoff): whenever the runtime is looked at, at most 2 dead instances of
// the container are left, and the container keeps its lastState.
func TestContainerdContainerGC(t *testing.T) {
	c, ctx := containerdFor(t, 4*time.Minute)
	const maxDead = 2
	pod := shPod(c, "crash", v1.RestartPolicyAlways, 1, "exit 1")
	rt, e, updates := startPods(ctx, t, c, engine.Config{
		CrashLoopBackOffBase: 10 * time.Millisecond, CrashLoopBackOffMax: 20 * time.Millisecond,
		ContainerGC: engine.ContainerGCPolicy{MaxPerContainer: maxDead}}, pod)

	// The dead instances other than the newest one never exceed the limit;
	// while the engine reports CrashLoopBackOff for the newest instance
	// (container GC ran when the backoff began), all dead ones do not.
	mostDead, inBackoff := 0, 0
	waitFor(t, ctx, "20 restarts within the dead-instance limit", func() bool {
		var st *v1.ContainerStatus
		for _, p := range e.Pods() {
			if cs := p.Status.ContainerStatuses; len(cs) == 1 {
				st = &cs[0]
			}
		}
		cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{engine.LabelPodUID: "crash-uid"}})
		if err != nil {
			t.Fatal(err)
		}
		var newest *runtimeapi.Container
		dead := 0
		for _, c := range cs {
			if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
				dead++
			}
			if newest == nil || c.CreatedAt > newest.CreatedAt {
				newest = c
			}
		}
		older := dead
		if newest != nil && newest.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			older--
		}
		if older > maxDead {
			t.Fatalf("%d dead instances besides the newest, want at most %d", older, maxDead)
		}
		if st == nil {
			return false
		}
		if w := st.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" && newest != nil && st.ContainerID == "containerd://"+newest.Id {
			inBackoff++
			mostDead = max(mostDead, dead)
			if dead > maxDead {
				t.Fatalf("in CrashLoopBackOff: %d dead instances, want at most %d", dead, maxDead)
			}
		}
		if st.RestartCount < 20 {
			return false
		}
		if lt := st.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 1 {
			t.Fatalf("restart %d: lastState %+v, want terminated with exit code 1", st.RestartCount, st.LastTerminationState)
		}
		return true
	}, e)
	t.Logf("%d observations in CrashLoopBackOff, at most %d dead instances then", inBackoff, mostDead)
	if mostDead < maxDead {
		t.Errorf("at most %d dead instances seen: the limit of %d was never reached, so it was not tested", mostDead, maxDead)
	}
	removePods(updates, pod)
	waitFor(t, ctx, "runtime empty", runtimeEmpty(ctx, rt), e)
}

// TestContainerdNodeContainerGC crash-loops the containers of three pods 20
// times each on a real containerd (OnFailure; the 21st run succeeds) with
// --maximum-dead-containers-per-container=10 and --maximum-dead-containers=6:
// the per-container limit alone lets more than 6 dead instances pile up on
// the node, and once the pods completed the node machine's container GC
// leaves 6, 6/3 = 2 per container, the newest two, so every container keeps
// its lastState (exit code 1) beside its final state (Completed).
func TestContainerdNodeContainerGC(t *testing.T) {
	c, ctx := containerdFor(t, 6*time.Minute)
	const maxDead, perContainer, pods, restarts = 6, 10, 3, 20
	limit := maxDead
	rt, e, updates := startEngine(ctx, t, c, engine.Config{
		CrashLoopBackOffBase: 10 * time.Millisecond, CrashLoopBackOffMax: 20 * time.Millisecond,
		ContainerGC:       engine.ContainerGCPolicy{MaxPerContainer: perContainer, MaxContainers: &limit},
		ContainerGCPeriod: 3 * time.Second})

	var all []*v1.Pod
	for i := range pods {
		// The container counts its runs in a file of a hostPath volume
		// and fails the first 20.
		p := shPod(c, fmt.Sprintf("crash-%d", i), v1.RestartPolicyOnFailure, 1, fmt.Sprintf(
			`n=$(cat /count/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /count/n; [ $n -gt %d ] && exit 0; exit 1`, restarts))
		p.Spec.Volumes = []v1.Volume{{Name: "count", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: t.TempDir()}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "count", MountPath: "/count"}}
		all = append(all, p)
	}
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: all, Source: config.SourceFile}

	// dead counts the test's dead instances in the runtime, per pod.
	dead := func() (total int, per map[string]int) {
		cs, err := rt.ListContainers(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		per = map[string]int{}
		for _, c := range cs {
			if c.State == runtimeapi.ContainerState_CONTAINER_EXITED && c.Labels[engine.LabelPodUID] != "" {
				total++
				per[c.Labels[engine.LabelPodUID]]++
			}
		}
		return total, per
	}
	mostDead := 0
	var done time.Time
	// Two passes after the last completion: the first may have listed the
	// containers before it.
	waitFor(t, ctx, "every pod Succeeded after 20 restarts, then two container GC passes", func() bool {
		n, _ := dead()
		mostDead = max(mostDead, n)
		if done.IsZero() {
			succeeded := 0
			for _, p := range e.Pods() {
				if p.Status.Phase == v1.PodSucceeded {
					succeeded++
				}
			}
			if succeeded == pods {
				done = time.Now()
			}
			return false
		}
		passes := 0
		for _, tr := range e.NodeHistory() {
			if tr.Event == "containers_collected" && tr.Time.After(done) {
				passes++
			}
		}
		return passes >= 2
	}, e)
	total, per := dead()
	t.Logf("at most %d dead instances seen while the pods crash-looped; %d after the pass (%v)", mostDead, total, per)
	if mostDead <= maxDead {
		t.Errorf("at most %d dead instances seen: the node-wide limit of %d was never needed, so it was not tested", mostDead, maxDead)
	}
	if total > maxDead {
		t.Errorf("%d dead containers on the node after container GC, want at most %d (--maximum-dead-containers)", total, maxDead)
	}
	for _, p := range all {
		if per[string(p.UID)] != maxDead/pods {
			t.Errorf("pod %s: %d dead instances, want %d (the limit shared among the 3 containers)", p.Name, per[string(p.UID)], maxDead/pods)
		}
	}
	for _, p := range e.Pods() {
		cs := p.Status.ContainerStatuses
		if len(cs) != 1 {
			t.Fatalf("pod %s: %d container statuses", p.Name, len(cs))
		}
		st := cs[0]
		if tm := st.State.Terminated; tm == nil || tm.ExitCode != 0 || tm.Reason != "Completed" || st.RestartCount != restarts {
			t.Errorf("pod %s: state %+v restarts %d, want terminated Completed after %d restarts", p.Name, st.State, st.RestartCount, restarts)
		}
		if lt := st.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 1 {
			t.Errorf("pod %s: lastState %+v, want terminated with exit code 1 (its instance is one of the 2 kept)", p.Name, st.LastTerminationState)
		}
	}
	removePods(updates, all...)
	waitFor(t, ctx, "runtime empty", runtimeEmpty(ctx, rt), e)
}
