package engine

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine/config"
)

// TestContainerdContainerGC crash-loops a container 20 times on a real
// containerd with --maximum-dead-containers-per-container=2 (and a short
// backoff): whenever the runtime is looked at, at most 2 dead instances of
// the container are left, and the container keeps its lastState.
func TestContainerdContainerGC(t *testing.T) {
	c := harness.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rt := dialContainerd(ctx, t, c)
	const maxDead = 2
	e, err := New(Config{Runtime: auditRuntime(t, rt), RootDir: filepath.Join(t.TempDir(), "root"), NodeName: "node",
		CrashLoopBackOffBase: 10 * time.Millisecond, CrashLoopBackOffMax: 20 * time.Millisecond,
		ContainerGC: ContainerGCPolicy{MaxPerContainer: maxDead},
		Log:         coverageLogger(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	updates, stop := runEngine(ctx, e, 2)
	defer stop()

	grace := int64(1)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crash", Namespace: "default", UID: types.UID("crash-uid"),
			Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
		Spec: v1.PodSpec{HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "main", Image: c.ImageRef("busybox:latest"),
				ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"/bin/sh", "-c", "exit 1"}}}},
	}
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{pod}, Source: config.SourceFile}

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
		cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{LabelPodUID: "crash-uid"}})
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
	updates <- config.PodUpdate{Op: config.OpRemove, Pods: []*v1.Pod{pod}, Source: config.SourceFile}
	waitFor(t, ctx, "runtime empty", func() bool {
		sbs, err1 := rt.ListPodSandbox(ctx, nil)
		cs, err2 := rt.ListContainers(ctx, nil)
		return err1 == nil && err2 == nil && len(sbs) == 0 && len(cs) == 0
	}, e)
}
