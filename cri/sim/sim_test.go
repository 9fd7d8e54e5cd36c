package sim_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a simulated runtime on a fake clock, reached over gRPC.
type fixture struct {
	clk *clocktesting.FakeClock
	srv *sim.Server
	rt  *cri.Client
}

func newFixture(t testing.TB, o sim.Options) *fixture {
	t.Helper()
	dir, err := os.MkdirTemp("", "speclet-simtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	clk := clocktesting.NewFakeClock(t0)
	if o.Clock == nil {
		o.Clock = clk
	}
	o.Images = append(o.Images, "busybox:latest")
	srv, err := sim.Start(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	rt, err := cri.Dial(context.Background(), srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return &fixture{clk: clk, srv: srv, rt: rt}
}

var bg = context.Background()

func podConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: "uid-" + name},
		LogDirectory: "/var/log/pods/ns_" + name,
	}
}

func (f *fixture) pod(t testing.TB, name string) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	cfg := podConfig(name)
	id, err := f.rt.RunPodSandbox(bg, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	return id, cfg
}

func (f *fixture) container(t testing.TB, sb string, sbCfg *runtimeapi.PodSandboxConfig, name string) string {
	t.Helper()
	id, err := f.rt.CreateContainer(bg, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		LogPath:  name + ".log",
	}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *fixture) status(t testing.TB, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	s, err := f.rt.ContainerStatus(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTimesFollowTheClock(t *testing.T) {
	f := newFixture(t, sim.Options{})
	f.srv.Runtime.OnContainer(sim.Match{Name: "job"}, sim.Behavior{Exit: &sim.Exit{After: 10 * time.Second, Code: 2}})
	sb, cfg := f.pod(t, "p")
	id := f.container(t, sb, cfg, "job")
	f.clk.Step(time.Second)
	if err := f.rt.StartContainer(bg, id); err != nil {
		t.Fatal(err)
	}

	// Reads follow the clock at once: no waiting after Step.
	f.clk.Step(9*time.Second + 999*time.Millisecond)
	if s := f.status(t, id); s.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("1 ms before its exit: %s, want RUNNING", s.State)
	}
	f.clk.Step(time.Millisecond)
	s := f.status(t, id)
	if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 2 || s.Reason != "Error" {
		t.Fatalf("at its exit time: %s %d %q, want EXITED 2 Error", s.State, s.ExitCode, s.Reason)
	}
	if got, want := time.Unix(0, s.CreatedAt).UTC(), t0; !got.Equal(want) {
		t.Errorf("CreatedAt %v, want %v", got, want)
	}
	if got, want := time.Unix(0, s.StartedAt).UTC(), t0.Add(time.Second); !got.Equal(want) {
		t.Errorf("StartedAt %v, want %v", got, want)
	}
	if got, want := time.Unix(0, s.FinishedAt).UTC(), t0.Add(11*time.Second); !got.Equal(want) {
		t.Errorf("FinishedAt %v, want %v", got, want)
	}
}

func TestStopWaitsForTheTimeoutOnTheClock(t *testing.T) {
	f := newFixture(t, sim.Options{})
	f.srv.Runtime.OnContainer(sim.Match{Name: "stubborn"}, sim.Behavior{Term: sim.TermIgnored})
	f.srv.Runtime.OnContainer(sim.Match{Name: "polite"}, sim.Behavior{Term: sim.TermHandled, TermExitCode: 0})
	f.srv.Runtime.OnContainer(sim.Match{Name: "plain"}, sim.Behavior{})
	sb, cfg := f.pod(t, "p")
	stubborn := f.container(t, sb, cfg, "stubborn")
	polite := f.container(t, sb, cfg, "polite")
	plain := f.container(t, sb, cfg, "plain")
	for _, id := range []string{stubborn, polite, plain} {
		if err := f.rt.StartContainer(bg, id); err != nil {
			t.Fatal(err)
		}
	}

	for _, c := range []struct {
		id     string
		code   int32
		reason string
	}{{polite, 0, "Completed"}, {plain, 143, "Error"}} {
		if err := f.rt.StopContainer(bg, c.id, 30); err != nil {
			t.Fatal(err)
		}
		s := f.status(t, c.id)
		if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != c.code || s.Reason != c.reason || s.FinishedAt != t0.UnixNano() {
			t.Errorf("%s after stop: %s %d %q finished %d; want EXITED %d %q at once", s.Metadata.Name, s.State, s.ExitCode, s.Reason, s.FinishedAt, c.code, c.reason)
		}
	}

	done := make(chan error, 1)
	go func() { done <- f.rt.StopContainer(bg, stubborn, 30) }()
	for !f.clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	f.clk.Step(29 * time.Second)
	if s := f.status(t, stubborn); s.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("29 s into a 30 s stop: %s, want RUNNING", s.State)
	}
	select {
	case err := <-done:
		t.Fatalf("stop returned before the timeout: %v", err)
	default:
	}
	f.clk.Step(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s := f.status(t, stubborn)
	if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 137 || s.FinishedAt != t0.Add(30*time.Second).UnixNano() {
		t.Errorf("after the timeout: %s %d finished %v; want EXITED 137 at +30s", s.State, s.ExitCode, time.Unix(0, s.FinishedAt).UTC())
	}
}

func TestFailCallFailsNTimesThenWorks(t *testing.T) {
	f := newFixture(t, sim.Options{})
	f.srv.Runtime.FailCall("RunPodSandbox", 2, codes.Unavailable, "runtime restarting")
	cfg := podConfig("p")
	for i := range 2 {
		_, err := f.rt.RunPodSandbox(bg, cfg, "")
		if !cri.IsUnavailable(err) {
			t.Fatalf("call %d: %v, want an Unavailable error", i+1, err)
		}
	}
	if _, err := f.rt.RunPodSandbox(bg, cfg, ""); err != nil {
		t.Fatalf("call 3: %v, want success", err)
	}
	if n := f.srv.Runtime.Calls("RunPodSandbox"); n != 3 {
		t.Errorf("Calls = %d, want 3", n)
	}
	if sbs, _ := f.srv.Runtime.Len(); sbs != 1 {
		t.Errorf("sandboxes = %d, want 1 (failed calls do nothing)", sbs)
	}
}

func TestSlowCallWaitsOnTheClock(t *testing.T) {
	f := newFixture(t, sim.Options{})
	f.srv.Runtime.SlowCall("Version", time.Minute)
	done := make(chan error, 1)
	go func() { _, err := f.rt.Version(bg); done <- err }()
	for !f.clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("slow call returned before the clock moved: %v", err)
	default:
	}
	f.clk.Step(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestNamesAreReservedUntilRemoved(t *testing.T) {
	f := newFixture(t, sim.Options{})
	sb, cfg := f.pod(t, "p")
	if _, err := f.rt.RunPodSandbox(bg, cfg, ""); err == nil {
		t.Fatal("a second sandbox with the same name and attempt was created")
	}
	f.container(t, sb, cfg, "c")
	if _, err := f.rt.CreateContainer(bg, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
	}, cfg); err == nil {
		t.Fatal("a second container with the same name and attempt was created")
	}
	if _, err := f.rt.CreateContainer(bg, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c", Attempt: 1}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
	}, cfg); err != nil {
		t.Fatalf("next attempt: %v", err)
	}
	if err := f.rt.RemovePodSandbox(bg, sb); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rt.RunPodSandbox(bg, cfg, ""); err != nil {
		t.Fatalf("same name after removal: %v", err)
	}
}

func TestSandboxStopKillsAndRemoveRemovesContainers(t *testing.T) {
	f := newFixture(t, sim.Options{})
	sb, cfg := f.pod(t, "p")
	a := f.container(t, sb, cfg, "a")
	b := f.container(t, sb, cfg, "b")
	if err := f.rt.StartContainer(bg, a); err != nil {
		t.Fatal(err)
	}
	if err := f.rt.StopPodSandbox(bg, sb); err != nil {
		t.Fatal(err)
	}
	if s := f.status(t, a); s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 137 {
		t.Errorf("running container after sandbox stop: %s %d, want EXITED 137", s.State, s.ExitCode)
	}
	if s := f.status(t, b); s.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Errorf("created container after sandbox stop: %s, want CREATED", s.State)
	}
	if err := f.rt.StartContainer(bg, b); err == nil {
		t.Error("a container started in a stopped sandbox")
	}
	if err := f.rt.RemovePodSandbox(bg, sb); err != nil {
		t.Fatal(err)
	}
	if sbs, cs := f.srv.Runtime.Len(); sbs != 0 || cs != 0 {
		t.Errorf("after remove: %d sandboxes %d containers, want none", sbs, cs)
	}
}

func TestImages(t *testing.T) {
	f := newFixture(t, sim.Options{})
	sb, cfg := f.pod(t, "p")
	_, err := f.rt.CreateContainer(bg, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"},
	}, cfg)
	if !cri.IsNotFound(err) {
		t.Fatalf("create from an image not pulled: %v, want NotFound", err)
	}
	if img, err := f.rt.ImageStatus(bg, &runtimeapi.ImageSpec{Image: "nginx:1.27"}); err != nil || img != nil {
		t.Fatalf("status before pull = %v %v, want nil nil", img, err)
	}
	ref, err := f.rt.PullImage(bg, &runtimeapi.ImageSpec{Image: "nginx:1.27"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	img, err := f.rt.ImageStatus(bg, &runtimeapi.ImageSpec{Image: "nginx:1.27"})
	if err != nil || img == nil || img.Id != ref {
		t.Fatalf("status after pull = %v %v, want id %s", img, err, ref)
	}
	f.container(t, sb, cfg, "c") // "busybox" resolves to busybox:latest, present from the start

	f.srv.Runtime.MissingImage("ghost")
	_, err = f.rt.PullImage(bg, &runtimeapi.ImageSpec{Image: "ghost:latest"}, nil, nil)
	if !cri.IsImageNotFound(err) {
		t.Fatalf("pull of a missing image: %v, want ClassImageNotFound", err)
	}
	list, err := f.rt.ListImages(bg, nil)
	if err != nil || len(list) != 2 {
		t.Errorf("images = %v %v, want busybox and nginx", list, err)
	}
}

func TestStartError(t *testing.T) {
	f := newFixture(t, sim.Options{})
	f.srv.Runtime.OnContainer(sim.Match{Name: "broken"}, sim.Behavior{StartError: `exec: "nosuch": executable file not found in $PATH`})
	sb, cfg := f.pod(t, "p")
	id := f.container(t, sb, cfg, "broken")
	if err := f.rt.StartContainer(bg, id); err == nil {
		t.Fatal("start of a broken container succeeded")
	}
	s := f.status(t, id)
	if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 128 || s.Reason != "StartError" || s.Message == "" {
		t.Errorf("after a failed start: %s %d %q %q; want EXITED 128 StartError with a message", s.State, s.ExitCode, s.Reason, s.Message)
	}
}

func TestLaggingEventSubscriberIsCutOff(t *testing.T) {
	f := newFixture(t, sim.Options{EventBuffer: 2})
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse) // never read: the subscriber lags
	errc := make(chan error, 1)
	go func() { errc <- f.rt.GetContainerEvents(ctx, ch) }()
	for f.srv.Runtime.Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	sb, cfg := f.pod(t, "p")
	// The client blocks handing the first event to ch; once gRPC's flow
	// control window is full the server cannot send, and its buffer of 2
	// overflows. Draining ch then lets the end of the stream through.
	for i := range 300 {
		f.container(t, sb, cfg, fmt.Sprint("c", i))
	}
	var err error
	for done := false; !done; {
		select {
		case <-ch:
		case err = <-errc:
			done = true
		case <-time.After(10 * time.Second):
			t.Fatal("the stream of a lagging subscriber was not ended")
		}
	}
	var ce *cri.Error
	if !errors.As(err, &ce) || ce.Op != "GetContainerEvents" {
		t.Fatalf("stream ended with %v, want a GetContainerEvents error", err)
	}
}

func TestRuntimeComesBackAfterRestart(t *testing.T) {
	f := newFixture(t, sim.Options{})
	sb, _ := f.pod(t, "p")
	f.srv.Stop()
	if _, err := f.rt.PodSandboxStatus(bg, sb); !cri.IsUnavailable(err) {
		t.Fatalf("while down: %v, want ClassUnavailable", err)
	}
	srv, err := f.srv.Runtime.Serve(f.srv.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	// The client reconnects by itself (backoff capped at 3 s).
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	for {
		st, err := f.rt.PodSandboxStatus(ctx, sb)
		if err == nil {
			if st.State != runtimeapi.PodSandboxState_SANDBOX_READY {
				t.Errorf("after restart: %s, want the sandbox kept READY", st.State)
			}
			return
		}
		if !cri.IsUnavailable(err) {
			t.Fatalf("after restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStartRejectsALongSocketPath(t *testing.T) {
	dir := "/tmp/" + strings.Repeat("d", 110)
	_, err := sim.Start(dir, sim.Options{})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "more than the 107") {
		t.Fatalf("Start in a directory too long for a socket: %v; want an error naming the path and the limit", err)
	}
	_ = os.RemoveAll(dir)
}

// A scripted exit produces its CONTAINER_STOPPED event when the clock
// reaches it, without any call; Settle waits for it to be queued.
func TestScriptedExitEmitsItsEventOnTheClock(t *testing.T) {
	f := newFixture(t, sim.Options{})
	f.srv.Runtime.OnContainer(sim.Match{Name: "job"}, sim.Behavior{Exit: &sim.Exit{After: 5 * time.Second, Code: 0}})
	sb, cfg := f.pod(t, "p")
	id := f.container(t, sb, cfg, "job")
	if err := f.rt.StartContainer(bg, id); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, 16)
	go func() { _ = f.rt.GetContainerEvents(ctx, ch) }()
	for f.srv.Runtime.Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	f.clk.Step(5 * time.Second)
	f.srv.Runtime.Settle()
	select {
	case ev := <-ch:
		if ev.ContainerId != id || ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
			t.Fatalf("event %s for %s, want CONTAINER_STOPPED for %s", ev.ContainerEventType, ev.ContainerId, id)
		}
		if len(ev.ContainersStatuses) != 1 || ev.ContainersStatuses[0].FinishedAt != t0.Add(5*time.Second).UnixNano() {
			t.Errorf("event statuses %v, want the container finished at +5s", ev.ContainersStatuses)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event for a scripted exit")
	}
}
