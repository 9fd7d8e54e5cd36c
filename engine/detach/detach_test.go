package detach

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/fsm"
)

// callRuntime answers every call a machine's action may make, after a
// gate: at once (release nil), or once released or the call's context
// ended. It records, per method, whether the call's context had ended.
type callRuntime struct {
	cri.Runtime // GetContainerEvents: the PLEG's stream, never an action's call
	release     chan struct{}
	entered     chan string
	mu          sync.Mutex
	ended       map[string]bool
}

func newCallRuntime(gated bool) *callRuntime {
	r := &callRuntime{ended: map[string]bool{}}
	if gated {
		r.release, r.entered = make(chan struct{}), make(chan string, 1)
	}
	return r
}

func (r *callRuntime) call(ctx context.Context, method string) {
	if r.release != nil {
		r.entered <- method
		select {
		case <-r.release:
		case <-ctx.Done():
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended[method] = ctx.Err() != nil
}

func (r *callRuntime) endedFor(method string) (ended, called bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ended, called = r.ended[method]
	return ended, called
}

func (r *callRuntime) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	r.call(ctx, "Version")
	return nil, nil
}
func (r *callRuntime) Status(ctx context.Context, _ bool) (*runtimeapi.StatusResponse, error) {
	r.call(ctx, "Status")
	return nil, nil
}
func (r *callRuntime) RunPodSandbox(ctx context.Context, _ *runtimeapi.PodSandboxConfig, _ string) (string, error) {
	r.call(ctx, "RunPodSandbox")
	return "", nil
}
func (r *callRuntime) StopPodSandbox(ctx context.Context, _ string) error {
	r.call(ctx, "StopPodSandbox")
	return nil
}
func (r *callRuntime) RemovePodSandbox(ctx context.Context, _ string) error {
	r.call(ctx, "RemovePodSandbox")
	return nil
}
func (r *callRuntime) PodSandboxStatus(ctx context.Context, _ string) (*runtimeapi.PodSandboxStatus, error) {
	r.call(ctx, "PodSandboxStatus")
	return nil, nil
}
func (r *callRuntime) ListPodSandbox(ctx context.Context, _ *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.call(ctx, "ListPodSandbox")
	return nil, nil
}
func (r *callRuntime) CreateContainer(ctx context.Context, _ string, _ *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	r.call(ctx, "CreateContainer")
	return "", nil
}
func (r *callRuntime) StartContainer(ctx context.Context, _ string) error {
	r.call(ctx, "StartContainer")
	return nil
}
func (r *callRuntime) StopContainer(ctx context.Context, _ string, _ int64) error {
	r.call(ctx, "StopContainer")
	return nil
}
func (r *callRuntime) RemoveContainer(ctx context.Context, _ string) error {
	r.call(ctx, "RemoveContainer")
	return nil
}
func (r *callRuntime) ContainerStatus(ctx context.Context, _ string) (*runtimeapi.ContainerStatus, error) {
	r.call(ctx, "ContainerStatus")
	return nil, nil
}
func (r *callRuntime) ListContainers(ctx context.Context, _ *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.call(ctx, "ListContainers")
	return nil, nil
}
func (r *callRuntime) ListContainerStats(ctx context.Context, _ *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	r.call(ctx, "ListContainerStats")
	return nil, nil
}
func (r *callRuntime) ExecSync(ctx context.Context, _ string, _ []string, _ time.Duration) (cri.ExecResult, error) {
	r.call(ctx, "ExecSync")
	return cri.ExecResult{}, nil
}
func (r *callRuntime) PullImage(ctx context.Context, _ *runtimeapi.ImageSpec, _ *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	r.call(ctx, "PullImage")
	return "", nil
}
func (r *callRuntime) ImageStatus(ctx context.Context, _ *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	r.call(ctx, "ImageStatus")
	return nil, nil
}
func (r *callRuntime) ListImages(ctx context.Context, _ *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	r.call(ctx, "ListImages")
	return nil, nil
}
func (r *callRuntime) RemoveImage(ctx context.Context, _ *runtimeapi.ImageSpec) error {
	r.call(ctx, "RemoveImage")
	return nil
}
func (r *callRuntime) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	r.call(ctx, "ImageFsInfo")
	return nil, nil
}

// invoke calls method of rt with ctx and zero values for its other
// arguments.
func invoke(t testing.TB, rt cri.Runtime, method string, ctx context.Context) {
	fn := reflect.ValueOf(rt).MethodByName(method)
	if !fn.IsValid() {
		t.Fatalf("cri.Runtime has no method %s", method)
	}
	args := []reflect.Value{reflect.ValueOf(ctx)}
	for i := 1; i < fn.Type().NumIn(); i++ {
		args = append(args, reflect.Zero(fn.Type().In(i)))
	}
	fn.Call(args)
}

// A kill cancels the pod's running actions, but a call the action's spec
// declares uncancellable (the creates and the start, which containerd would
// complete anyway) runs to its end; stopping the engine still ends it. A
// slow pull, a stop with a long grace period and the postStart hook are
// cancelled.
func TestKillDuringCall(t *testing.T) {
	for _, tc := range []struct {
		name       string
		action     func(context.Context) context.Context // the action's tag
		method     string
		stopEngine bool
		want       bool // the call's context ended
	}{
		{"run_sandbox RunPodSandbox finishes", fsm.SandboxActionRunSandbox.Tag, "RunPodSandbox", false, false},
		{"create_container CreateContainer finishes", fsm.ContainerActionCreateContainer.Tag, "CreateContainer", false, false},
		{"start_container StartContainer finishes", fsm.ContainerActionStartContainer.Tag, "StartContainer", false, false},
		{"start_container StartContainer ends when the engine stops", fsm.ContainerActionStartContainer.Tag, "StartContainer", true, true},
		{"start_container postStart ExecSync is cancelled", fsm.ContainerActionStartContainer.Tag, "ExecSync", false, true},
		{"pull_image PullImage is cancelled", fsm.ContainerActionPullImage.Tag, "PullImage", false, true},
		{"stop_container StopContainer is cancelled", fsm.ContainerActionStopContainer.Tag, "StopContainer", false, true},
		{"create_container ImageStatus is cancelled", fsm.ContainerActionCreateContainer.Tag, "ImageStatus", false, true},
		{"StartContainer outside any action is cancelled", func(ctx context.Context) context.Context { return ctx }, "StartContainer", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := newCallRuntime(true)
			run, stopRun := context.WithCancel(context.Background())
			defer stopRun()
			rt := Runtime{Runtime: inner, Run: func() context.Context { return run }}
			action, kill := context.WithCancel(run)
			done := make(chan struct{})
			go func() {
				defer close(done)
				invoke(t, rt, tc.method, tc.action(action))
			}()
			<-inner.entered
			kill()
			if tc.stopEngine {
				stopRun()
			} else if !tc.want {
				// Give a wrongly cancelled call the time to notice; the
				// release below ends a correct one.
				time.Sleep(50 * time.Millisecond)
				close(inner.release)
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				close(inner.release)
				<-done
			}
			if got, _ := inner.endedFor(tc.method); got != tc.want {
				t.Errorf("%s's context ended = %v, want %v", tc.method, got, tc.want)
			}
		})
	}
}

// TestKillCancelsAsTheSpecSays: for every action of every machine and every
// method of its cri list, a call made under the action's tag after a kill
// keeps a live context exactly when the spec declares the method
// uncancellable for that action.
func TestKillCancelsAsTheSpecSays(t *testing.T) {
	type machine struct {
		name string
		cri  [][]string
		unc  []map[string]string
		tag  func(context.Context, int) context.Context
	}
	machines := []machine{
		{fsm.PodMachineName, fsm.PodActionCRI[:], fsm.PodActionUncancellable[:], func(ctx context.Context, i int) context.Context { return fsm.PodAction(i).Tag(ctx) }},
		{fsm.SandboxMachineName, fsm.SandboxActionCRI[:], fsm.SandboxActionUncancellable[:], func(ctx context.Context, i int) context.Context { return fsm.SandboxAction(i).Tag(ctx) }},
		{fsm.ContainerMachineName, fsm.ContainerActionCRI[:], fsm.ContainerActionUncancellable[:], func(ctx context.Context, i int) context.Context { return fsm.ContainerAction(i).Tag(ctx) }},
		{fsm.ProbeMachineName, fsm.ProbeActionCRI[:], fsm.ProbeActionUncancellable[:], func(ctx context.Context, i int) context.Context { return fsm.ProbeAction(i).Tag(ctx) }},
		{fsm.NodeMachineName, fsm.NodeActionCRI[:], fsm.NodeActionUncancellable[:], func(ctx context.Context, i int) context.Context { return fsm.NodeAction(i).Tag(ctx) }},
	}
	killed, kill := context.WithCancel(context.Background())
	kill()
	detached := 0
	for _, m := range machines {
		for i, methods := range m.cri {
			for _, method := range methods {
				inner := newCallRuntime(false)
				invoke(t, Runtime{Runtime: inner}, method, m.tag(killed, i))
				ended, called := inner.endedFor(method)
				_, spared := m.unc[i][method]
				if !called || ended == spared {
					t.Errorf("%s action %d: %s after a kill: called %v, context ended %v; the spec says uncancellable %v", m.name, i, method, called, ended, spared)
				}
				if spared {
					detached++
				}
			}
		}
	}
	if detached != 3 {
		t.Errorf("%d calls spared by a kill, want the spec's 3 (RunPodSandbox, CreateContainer, StartContainer)", detached)
	}
}

// failingCreates answers every create with containerd's "name is reserved"
// error, as after an earlier attempt whose reply was lost.
type failingCreates struct {
	cri.Runtime
}

const reservedID = "7887782cd3ca21c0db1967e1f7b8f3173e0bf6739cca91fedcfe6c7ad5df352c"

func (failingCreates) RunPodSandbox(context.Context, *runtimeapi.PodSandboxConfig, string) (string, error) {
	return "", status.Error(codes.Unknown, `failed to reserve sandbox name "p_default_u_0": name "p_default_u_0" is reserved for "`+reservedID+`"`)
}

func (failingCreates) CreateContainer(context.Context, string, *runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig) (string, error) {
	return "", errors.New(`cri unix:///x.sock: CreateContainer "main": failed to reserve container name \"main_p_default_u_0\": name \"main_p_default_u_0\" is reserved for \"` + reservedID + `\"`)
}

// A CreateContainer that finds its name reserved by an earlier unanswered
// attempt of itself adopts that container instead of failing on every retry
// (containerd keeps the name until the object is removed). RunPodSandbox
// passes the answer on: the sandbox machine's run_sandbox adopts a reserved
// sandbox only once the runtime describes it as ready
// (testdata/sandbox_reply_lost.txt).
func TestCreateAdoptsReservedName(t *testing.T) {
	rt := Runtime{Runtime: failingCreates{}}
	if _, err := rt.RunPodSandbox(context.Background(), &runtimeapi.PodSandboxConfig{}, ""); cri.ReservedFor(err) != reservedID {
		t.Errorf("RunPodSandbox: %v; want the reserved sandbox %s in the error", err, reservedID)
	}
	if id, err := rt.CreateContainer(context.Background(), "sb", &runtimeapi.ContainerConfig{}, nil); err != nil || id != reservedID {
		t.Errorf("CreateContainer = %q, %v; want the reserved container %s", id, err, reservedID)
	}
	if cri.ReservedFor(errors.New("something else")) != "" {
		t.Error("an unrelated error was taken for a reserved name")
	}
}
