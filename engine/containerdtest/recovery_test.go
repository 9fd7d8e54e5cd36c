package containerdtest

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/internal/suite"
)

// recovery is what a recovery test needs: a containerd, a client of its
// own, the engines' (audited) runtime, one root dir the engines share and a
// restartPolicy Never pod, declared by add.
type recovery struct {
	t   *testing.T
	c   *harness.Containerd
	ctx context.Context
	rt  cri.Full
	art cri.Full
	pod *v1.Pod
	add config.PodUpdate
	dir string
}

func newRecovery(t *testing.T, name string) *recovery {
	c, ctx := containerdFor(t, 3*time.Minute)
	pod := shPod(c, name, v1.RestartPolicyNever, 2, "sleep 3600")
	return &recovery{
		t: t, c: c, ctx: ctx,
		rt:  dialContainerd(ctx, t, c),
		art: suite.Runtime(t, c.Endpoint),
		pod: pod,
		add: config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{pod}, Source: config.SourceFile},
		dir: filepath.Join(t.TempDir(), "root"),
	}
}

// run runs an engine on runtime rt (the audited one, or one that wraps it)
// and declares the pod to it; stop stops it as a kill -9 would.
func (r *recovery) run(rt cri.Full) (e *engine.Engine, updates chan config.PodUpdate, stop func()) {
	e = newEngine(r.t, r.c, engine.Config{Runtime: rt, RootDir: r.dir})
	updates, stop = runEngine(r.ctx, e, 4)
	updates <- r.add
	return e, updates, stop
}

// byPod selects the pod's sandboxes and containers.
func (r *recovery) byPod() map[string]string {
	return map[string]string{engine.LabelPodUID: string(r.pod.UID)}
}

// created is the pod's one container, which must be CREATED, never started.
func (r *recovery) created(when string) *runtimeapi.Container {
	r.t.Helper()
	cs, err := r.rt.ListContainers(r.ctx, &runtimeapi.ContainerFilter{LabelSelector: r.byPod()})
	if err != nil {
		r.t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].State != runtimeapi.ContainerState_CONTAINER_CREATED {
		r.t.Fatalf("%s: containers %v, want one CREATED", when, cs)
	}
	return cs[0]
}

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
	r := newRecovery(t, "created")
	ctx, rt := r.ctx, r.rt
	// startNever's StartContainer never reaches the audited runtime, so the
	// audit does not record it.
	sn := &startNever{Full: r.art, entered: make(chan struct{})}
	e1, _, stop := r.run(sn)
	select {
	case <-sn.entered:
	case <-ctx.Done():
		t.Fatalf("no StartContainer; pods:\n%s", formatPods(e1.Pods()))
	}
	stop()
	createdID := r.created("after the first engine stopped").Id

	e2, updates, stop := r.run(r.art)
	defer stop()
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

	removePods(updates, r.pod)
	waitFor(t, ctx, "runtime empty", runtimeEmpty(ctx, rt), e2)
}

// startFails is a runtime whose StartContainer fails before it reaches
// containerd, as a broken connection does: the container stays CREATED.
type startFails struct{ cri.Full }

func (startFails) StartContainer(context.Context, string) error {
	return status.Error(codes.Unavailable, "connection lost before the runtime got the call")
}

// TestContainerdRecoverFailedStart: the one StartContainer of a
// restartPolicy Never pod fails before it reaches containerd; the pod fails
// (ContainerCannotRun) and its sandbox is stopped, while containerd holds
// the container CREATED. A new engine on the same runtime and root dir (as
// after a kill -9) cannot tell that the start was tried: as kubelet's
// computePodActions for a Never pod with container statuses, it runs no new
// sandbox and no container, and the pod stays Failed, its container
// terminated with an unknown exit (ContainerStatusUnknown, 137).
func TestContainerdRecoverFailedStart(t *testing.T) {
	r := newRecovery(t, "failedstart")
	ctx, rt, pod, byPod := r.ctx, r.rt, r.pod, r.byPod()

	// failed waits until the pod is Failed with its container terminated,
	// or runs (which fails the test at once).
	failed := func(e *engine.Engine, st *v1.ContainerStatus) func() bool {
		return func() bool {
			for _, p := range e.Pods() {
				if p.Name != pod.Name || len(p.Status.ContainerStatuses) != 1 {
					continue
				}
				*st = p.Status.ContainerStatuses[0]
				if p.Status.Phase == v1.PodRunning {
					t.Fatalf("the pod runs: %s; pods:\n%s", formatContainer(*st), formatPods(e.Pods()))
				}
				return p.Status.Phase == v1.PodFailed && st.State.Terminated != nil
			}
			return false
		}
	}
	e1, _, stop := r.run(startFails{r.art})
	var st v1.ContainerStatus
	waitFor(t, ctx, "failedstart Failed", failed(e1, &st), e1)
	if term := st.State.Terminated; term.Reason != "ContainerCannotRun" || term.ExitCode != 128 {
		t.Errorf("first engine: terminated %+v, want ContainerCannotRun 128", term)
	}
	stopped := func() bool {
		sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: byPod})
		return err == nil && len(sbs) == 1 && sbs[0].State == runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	waitFor(t, ctx, "failedstart's sandbox stopped", stopped, e1)
	stop()
	created := r.created("after the first engine stopped")

	e2, updates, stop := r.run(r.art)
	defer stop()
	waitFor(t, ctx, "failedstart Failed after the restart", failed(e2, &st), e2)
	term := st.State.Terminated
	if term.Reason != "ContainerStatusUnknown" || term.ExitCode != 137 || term.Message == "" {
		t.Errorf("after the restart: terminated %+v, want ContainerStatusUnknown 137 with a message", term)
	}
	if st.RestartCount != 0 || st.ContainerID != "containerd://"+created.Id {
		t.Errorf("after the restart: restartCount %d, containerID %s; want 0 and the created instance %s", st.RestartCount, st.ContainerID, created.Id)
	}
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: byPod})
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("after the restart: sandboxes %v, want the one stopped; no new sandbox for a Never pod", sbs)
	}
	now, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: byPod})
	if err != nil {
		t.Fatal(err)
	}
	if len(now) != 1 || now[0].Id != created.Id || now[0].State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Errorf("after the restart: containers %v, want the one CREATED, never started", now)
	}

	removePods(updates, r.pod)
	waitFor(t, ctx, "runtime empty", runtimeEmpty(ctx, rt), e2)
}
