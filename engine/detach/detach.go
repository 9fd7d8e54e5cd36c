// Package detach is the runtime the machines' actions call through: the CRI
// calls an action's spec declares `uncancellable` run to their end when a
// kill cancels the action, and a create adopts what an earlier unanswered
// attempt of it made.
package detach

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/fsm"
)

// Runtime lets the CRI calls an action's spec declares
// `uncancellable` (fsm.Uncancellable, from the tag the generated dispatch
// puts on the action's context) run to their end when a kill cancels the
// pod's running actions. Today these are RunPodSandbox, CreateContainer and
// StartContainer: a create or start cancelled at the client may still
// complete in the runtime (containerd starts the task and then drops the
// cancelled request), leaving a running container the machines believe
// never started, which later blocks RemovePodSandbox ("cannot delete
// running task"); the reasons are in the spec. These calls are short and
// bounded by the client's per-call timeout; the kill is handled as soon as
// they return. They still end when the engine stops (run). Every other call
// (pulls, stops with a long grace period, the postStart hook's ExecSync)
// stays cancellable.
//
// Every method an action may call goes through detach, so a declaration
// in the spec is all it takes to spare a call (TestKillCancelsAsTheSpecSays
// checks each action's cri list against its declarations).
// GetContainerEvents is the PLEG's stream, never an action's call.
//
// CreateContainer also adopts the container an earlier, unanswered attempt
// of the same create made (cri.ReservedFor); RunSandbox does the same for
// sandboxes, once the runtime describes the sandbox as ready (the engine's
// engine/sandbox adoptReserved).
type Runtime struct {
	cri.Runtime
	// Run returns the engine's run context (nil before the engine runs):
	// a detached call still ends with it.
	Run func() context.Context
}

// detach returns ctx for a call of method: ctx itself, or, when the action
// ctx runs under declares method uncancellable, a context that keeps ctx's
// values but ends only with the engine's run context. done releases it.
func (r Runtime) detach(ctx context.Context, method string) (context.Context, context.CancelFunc) {
	if !fsm.Uncancellable(ctx, method) {
		return ctx, func() {}
	}
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	run := context.Background()
	if r.Run != nil {
		if c := r.Run(); c != nil {
			run = c
		}
	}
	stop := context.AfterFunc(run, cancel)
	return dctx, func() { stop(); cancel() }
}

// call runs f, the call of method, on detach's context for it.
func call[T any](r Runtime, ctx context.Context, method string, f func(context.Context) (T, error)) (T, error) {
	ctx, done := r.detach(ctx, method)
	defer done()
	return f(ctx)
}

// do is call for a method that returns only an error.
func do(r Runtime, ctx context.Context, method string, f func(context.Context) error) error {
	ctx, done := r.detach(ctx, method)
	defer done()
	return f(ctx)
}

func (r Runtime) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	return call(r, ctx, "Version", r.Runtime.Version)
}

func (r Runtime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	return call(r, ctx, "Status", func(ctx context.Context) (*runtimeapi.StatusResponse, error) { return r.Runtime.Status(ctx, verbose) })
}

func (r Runtime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	return call(r, ctx, "RunPodSandbox", func(ctx context.Context) (string, error) { return r.Runtime.RunPodSandbox(ctx, config, handler) })
}

func (r Runtime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	return do(r, ctx, "StopPodSandbox", func(ctx context.Context) error { return r.Runtime.StopPodSandbox(ctx, podSandboxID) })
}

func (r Runtime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	return do(r, ctx, "RemovePodSandbox", func(ctx context.Context) error { return r.Runtime.RemovePodSandbox(ctx, podSandboxID) })
}

func (r Runtime) PodSandboxStatus(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStatus, error) {
	return call(r, ctx, "PodSandboxStatus", func(ctx context.Context) (*runtimeapi.PodSandboxStatus, error) {
		return r.Runtime.PodSandboxStatus(ctx, podSandboxID)
	})
}

func (r Runtime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return call(r, ctx, "ListPodSandbox", func(ctx context.Context) ([]*runtimeapi.PodSandbox, error) {
		return r.Runtime.ListPodSandbox(ctx, filter)
	})
}

func (r Runtime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, done := r.detach(ctx, "CreateContainer")
	defer done()
	id, err := r.Runtime.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
	if err != nil {
		if prev := cri.ReservedFor(err); prev != "" {
			return prev, nil
		}
	}
	return id, err
}

func (r Runtime) StartContainer(ctx context.Context, containerID string) error {
	return do(r, ctx, "StartContainer", func(ctx context.Context) error { return r.Runtime.StartContainer(ctx, containerID) })
}

func (r Runtime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	return do(r, ctx, "StopContainer", func(ctx context.Context) error { return r.Runtime.StopContainer(ctx, containerID, timeout) })
}

func (r Runtime) RemoveContainer(ctx context.Context, containerID string) error {
	return do(r, ctx, "RemoveContainer", func(ctx context.Context) error { return r.Runtime.RemoveContainer(ctx, containerID) })
}

func (r Runtime) ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error) {
	return call(r, ctx, "ContainerStatus", func(ctx context.Context) (*runtimeapi.ContainerStatus, error) {
		return r.Runtime.ContainerStatus(ctx, containerID)
	})
}

func (r Runtime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return call(r, ctx, "ListContainers", func(ctx context.Context) ([]*runtimeapi.Container, error) {
		return r.Runtime.ListContainers(ctx, filter)
	})
}

func (r Runtime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return call(r, ctx, "ListContainerStats", func(ctx context.Context) ([]*runtimeapi.ContainerStats, error) {
		return r.Runtime.ListContainerStats(ctx, filter)
	})
}

func (r Runtime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (cri.ExecResult, error) {
	return call(r, ctx, "ExecSync", func(ctx context.Context) (cri.ExecResult, error) {
		return r.Runtime.ExecSync(ctx, containerID, cmd, timeout)
	})
}

func (r Runtime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	return call(r, ctx, "PullImage", func(ctx context.Context) (string, error) { return r.Runtime.PullImage(ctx, image, auth, sandboxConfig) })
}

func (r Runtime) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	return call(r, ctx, "ImageStatus", func(ctx context.Context) (*runtimeapi.Image, error) { return r.Runtime.ImageStatus(ctx, image) })
}

func (r Runtime) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return call(r, ctx, "ListImages", func(ctx context.Context) ([]*runtimeapi.Image, error) { return r.Runtime.ListImages(ctx, filter) })
}

func (r Runtime) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	return do(r, ctx, "RemoveImage", func(ctx context.Context) error { return r.Runtime.RemoveImage(ctx, image) })
}

func (r Runtime) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return call(r, ctx, "ImageFsInfo", r.Runtime.ImageFsInfo)
}
