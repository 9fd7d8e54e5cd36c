package containerdtest

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/internal/suite"
)

// startNever is a runtime whose StartContainer never reaches containerd: it
// waits until its context ends, so the container stays CREATED, as when
// speclet is killed between CreateContainer and StartContainer.
type startNever struct {
	cri.Full
	once    sync.Once
	entered chan struct{} // closed at the first StartContainer
}

func (r *startNever) StartContainer(ctx context.Context, id string) error {
	r.once.Do(func() { close(r.entered) })
	<-ctx.Done()
	return ctx.Err()
}

// TestContainerdRecoverCreated: an engine stops (as a kill -9 would) after
// CreateContainer and before StartContainer of a restartPolicy Never pod;
// containerd holds the container CREATED. A new engine on the same runtime
// and root dir makes of it what kubelet makes of a created container: it
// starts a new instance (whatever the restart policy) with restartCount 1,
// and the status has no ContainerStatusUnknown exit 137, no lastState and
// no start time of the created instance, which never runs.
func TestContainerdRecoverCreated(t *testing.T) {
	c, ctx := containerdFor(t, 3*time.Minute)
	rt := dialContainerd(ctx, t, c)
	root := filepath.Join(t.TempDir(), "root")
	// The engines' runtime; startNever's StartContainer never reaches it,
	// so the audit does not record it.
	art := suite.Runtime(t, c.Endpoint)
	engineOn := func(r cri.Full) *engine.Engine { return newEngine(t, c, engine.Config{Runtime: r, RootDir: root}) }
	pod := shPod(c, "created", v1.RestartPolicyNever, 2, "sleep 3600")
	add := config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{pod}, Source: config.SourceFile}

	sn := &startNever{Full: art, entered: make(chan struct{})}
	e1 := engineOn(sn)
	updates, stop := runEngine(ctx, e1, 4)
	updates <- add
	select {
	case <-sn.entered:
	case <-ctx.Done():
		t.Fatalf("no StartContainer; pods:\n%s", formatPods(e1.Pods()))
	}
	stop()
	cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{engine.LabelPodUID: string(pod.UID)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("after the first engine stopped: containers %v, want one CREATED", cs)
	}
	createdID := cs[0].Id

	e2 := engineOn(art)
	updates, stop = runEngine(ctx, e2, 4)
	defer stop()
	updates <- add
	var st v1.ContainerStatus
	waitFor(t, ctx, "created's container running or terminated", func() bool {
		for _, p := range e2.Pods() {
			if p.Name == "created" && len(p.Status.ContainerStatuses) == 1 {
				st = p.Status.ContainerStatuses[0]
				return st.State.Running != nil || st.State.Terminated != nil
			}
		}
		return false
	}, e2)
	if st.State.Running == nil {
		t.Fatalf("container not restarted: %s; pods:\n%s", formatContainer(st), formatPods(e2.Pods()))
	}
	if st.RestartCount != 1 {
		t.Errorf("restartCount = %d, want 1 (kubelet: the created instance's count plus one)", st.RestartCount)
	}
	if st.LastTerminationState.Terminated != nil {
		t.Errorf("lastState.terminated = %+v, want none: the created instance never ran", st.LastTerminationState.Terminated)
	}
	if st.ContainerID == "containerd://"+createdID {
		t.Errorf("containerID is the created instance %s, want a new one", createdID)
	}
	created, err := rt.ContainerStatus(ctx, createdID)
	if err != nil {
		t.Fatal(err)
	}
	if created.State != runtimeapi.ContainerState_CONTAINER_CREATED || created.StartedAt != 0 {
		t.Errorf("created instance: state %v startedAt %d, want CREATED, never started", created.State, created.StartedAt)
	}
	if at := st.State.Running.StartedAt.Time; !at.After(time.Unix(0, created.CreatedAt)) {
		t.Errorf("running startedAt %v is not after the created instance's creation %v", at, time.Unix(0, created.CreatedAt))
	}

	removePods(updates, pod)
	waitFor(t, ctx, "runtime empty", runtimeEmpty(ctx, rt), e2)
}
