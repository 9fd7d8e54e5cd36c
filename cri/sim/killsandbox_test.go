package sim_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri/sim"
)

// containerIn creates a container of sb in the PID namespace mode pid.
func (f *fixture) containerIn(t testing.TB, sb string, sbCfg *runtimeapi.PodSandboxConfig, name string, pid runtimeapi.NamespaceMode) string {
	t.Helper()
	id, err := f.rt.CreateContainer(bg, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Pid: pid}}},
	}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// subscribe opens a GetContainerEvents stream and returns once the runtime
// has its subscriber.
func (f *fixture) subscribe(t testing.TB) <-chan *runtimeapi.ContainerEventResponse {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	t.Cleanup(cancel)
	ch := make(chan *runtimeapi.ContainerEventResponse, 16)
	go func() { _ = f.rt.GetContainerEvents(ctx, ch) }()
	for f.srv.Runtime.Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	return ch
}

func next(t testing.TB, ch <-chan *runtimeapi.ContainerEventResponse) *runtimeapi.ContainerEventResponse {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
		return nil
	}
}

func noMoreEvents(t testing.TB, ch <-chan *runtimeapi.ContainerEventResponse) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Errorf("unexpected event %s for %s", ev.ContainerEventType, ev.ContainerId)
	case <-time.After(100 * time.Millisecond):
	}
}

func (f *fixture) sandboxState(t testing.TB, sb string) (fromStatus, fromList runtimeapi.PodSandboxState) {
	t.Helper()
	st, err := f.rt.PodSandboxStatus(bg, sb)
	if err != nil {
		t.Fatal(err)
	}
	list, err := f.rt.ListPodSandbox(bg, &runtimeapi.PodSandboxFilter{Id: sb})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListPodSandbox id=%s: %v %v", sb, list, err)
	}
	return st.State, list[0].State
}

// A container in its own PID namespace (kubelet's default) outlives its
// sandbox's pause process, as containerd shows: only the sandbox turns
// NOTREADY, and one CONTAINER_STOPPED event names the sandbox.
func TestKillSandboxLeavesContainersOfTheirOwnPIDNamespaceRunning(t *testing.T) {
	f := newFixture(t, sim.Options{})
	sb, cfg := f.pod(t, "p")
	app := f.containerIn(t, sb, cfg, "app", runtimeapi.NamespaceMode_CONTAINER)
	if err := f.rt.StartContainer(bg, app); err != nil {
		t.Fatal(err)
	}
	events := f.subscribe(t)
	f.clk.Step(time.Second)

	if err := f.srv.Runtime.KillSandbox(sb); err != nil {
		t.Fatal(err)
	}
	if s, l := f.sandboxState(t, sb); s != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || l != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("killed sandbox: status %s, list %s; want NOTREADY in both", s, l)
	}
	ready, err := f.rt.ListPodSandbox(bg, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil || len(ready) != 0 {
		t.Errorf("READY sandboxes after the kill: %v %v; want none", ready, err)
	}
	if s := f.status(t, app); s.State != runtimeapi.ContainerState_CONTAINER_RUNNING || s.FinishedAt != 0 {
		t.Errorf("container in its own PID namespace: %s finishedAt %d; want still RUNNING", s.State, s.FinishedAt)
	}
	ev := next(t, events)
	if ev.ContainerId != sb || ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
		t.Errorf("event %s for %s; want CONTAINER_STOPPED for the sandbox %s", ev.ContainerEventType, ev.ContainerId, sb)
	}
	if ev.PodSandboxStatus.GetId() != sb || ev.PodSandboxStatus.GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("event sandbox status %v; want %s NOTREADY", ev.PodSandboxStatus, sb)
	}
	if len(ev.ContainersStatuses) != 1 || ev.ContainersStatuses[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("event container statuses %v; want app RUNNING", ev.ContainersStatuses)
	}
	if ev.CreatedAt != t0.Add(time.Second).UnixNano() {
		t.Errorf("event at %d; want the clock's %d", ev.CreatedAt, t0.Add(time.Second).UnixNano())
	}
	noMoreEvents(t, events)

	// The dead sandbox takes no new container; stopping it kills what runs
	// in it, and removing it removes everything.
	if _, err := f.rt.CreateContainer(bg, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "late"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}, cfg); err == nil {
		t.Error("CreateContainer in a killed sandbox succeeded")
	}
	if err := f.rt.StopPodSandbox(bg, sb); err != nil {
		t.Fatal(err)
	}
	if s := f.status(t, app); s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 137 {
		t.Errorf("after StopPodSandbox: %s %d; want EXITED 137", s.State, s.ExitCode)
	}
	if err := f.rt.RemovePodSandbox(bg, sb); err != nil {
		t.Fatal(err)
	}
	if sbs, cs := f.srv.Runtime.Len(); sbs != 0 || cs != 0 {
		t.Errorf("after remove: %d sandboxes %d containers; want none", sbs, cs)
	}
}

// Containers in the sandbox's PID namespace die with its init, the pause
// process: EXITED 137 "Error" at the kill's time, each with its
// CONTAINER_STOPPED event after the sandbox's. A created container has no
// process and stays CREATED.
func TestKillSandboxKillsContainersOfThePodPIDNamespace(t *testing.T) {
	f := newFixture(t, sim.Options{})
	sb, cfg := f.pod(t, "p")
	a := f.containerIn(t, sb, cfg, "a", runtimeapi.NamespaceMode_POD)
	b := f.containerIn(t, sb, cfg, "b", runtimeapi.NamespaceMode_POD)
	own := f.containerIn(t, sb, cfg, "own", runtimeapi.NamespaceMode_CONTAINER)
	idle := f.containerIn(t, sb, cfg, "idle", runtimeapi.NamespaceMode_POD)
	for _, id := range []string{a, b, own} {
		if err := f.rt.StartContainer(bg, id); err != nil {
			t.Fatal(err)
		}
	}
	events := f.subscribe(t)
	f.clk.Step(3 * time.Second)
	killedAt := t0.Add(3 * time.Second).UnixNano()

	if err := f.srv.Runtime.KillSandbox(sb); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a, b} {
		s := f.status(t, id)
		if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 137 || s.Reason != "Error" || s.FinishedAt != killedAt {
			t.Errorf("container %s in the pod PID namespace: %s %d %q finishedAt %d; want EXITED 137 Error at %d",
				s.Metadata.Name, s.State, s.ExitCode, s.Reason, s.FinishedAt, killedAt)
		}
	}
	if s := f.status(t, own); s.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("container in its own PID namespace: %s; want RUNNING", s.State)
	}
	if s := f.status(t, idle); s.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Errorf("created container: %s; want CREATED", s.State)
	}
	if s, l := f.sandboxState(t, sb); s != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || l != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("killed sandbox: status %s, list %s; want NOTREADY in both", s, l)
	}
	exited, err := f.rt.ListContainers(bg, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}})
	if err != nil || len(exited) != 2 {
		t.Errorf("ListContainers EXITED: %d, %v; want a and b", len(exited), err)
	}

	want := []string{sb, a, b}
	for i, id := range want {
		ev := next(t, events)
		if ev.ContainerId != id || ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
			t.Errorf("event %d: %s for %s; want CONTAINER_STOPPED for %s", i, ev.ContainerEventType, ev.ContainerId, id)
		}
		if ev.PodSandboxStatus.GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			t.Errorf("event %d: sandbox %s; want NOTREADY", i, ev.PodSandboxStatus.GetState())
		}
	}
	noMoreEvents(t, events)
}

func TestKillSandboxRefusesUnknownAndDeadSandboxes(t *testing.T) {
	f := newFixture(t, sim.Options{})
	if err := f.srv.Runtime.KillSandbox("nosuch"); status.Code(err) != codes.NotFound {
		t.Errorf("KillSandbox of an unknown id: %v; want NotFound", err)
	}
	sb, _ := f.pod(t, "p")
	if err := f.srv.Runtime.KillSandbox(sb[:12]); err != nil {
		t.Fatalf("KillSandbox by id prefix: %v", err)
	}
	if err := f.srv.Runtime.KillSandbox(sb); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("KillSandbox of a NOTREADY sandbox: %v; want FailedPrecondition", err)
	}
	// The dead sandbox keeps its name: the agent's next attempt needs a new one.
	if _, err := f.rt.RunPodSandbox(bg, podConfig("p"), ""); err == nil {
		t.Error("RunPodSandbox with the killed sandbox's name and attempt succeeded")
	}
	next := podConfig("p")
	next.Metadata.Attempt = 1
	if _, err := f.rt.RunPodSandbox(bg, next, ""); err != nil {
		t.Errorf("RunPodSandbox attempt 1 beside the killed sandbox: %v", err)
	}
}
