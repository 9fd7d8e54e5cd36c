package engine

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
)

// detachedRuntime lets the CRI calls that create or start something run to
// their end when a kill cancels the pod's running actions: a
// RunPodSandbox, CreateContainer or StartContainer cancelled at the client
// may still complete in the runtime (containerd starts the task and then
// drops the cancelled request), leaving a running container the machines
// believe never started, which later blocks RemovePodSandbox ("cannot
// delete running task"). These calls are short and bounded by the
// client's per-call timeout; the kill is handled as soon as they return.
// They still end when the engine stops (run). Everything else (pulls, stops
// with a long grace period) stays cancellable. CreateContainer also adopts
// the container an earlier, unanswered attempt of the same create made
// (cri.ReservedFor); RunSandbox does the same for sandboxes, once the runtime
// describes the sandbox as ready (sandbox.go adoptReserved).
type detachedRuntime struct {
	cri.Runtime
	run func() context.Context // the engine's run context, nil before Run
}

func (r detachedRuntime) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	run := context.Background()
	if r.run != nil {
		if c := r.run(); c != nil {
			run = c
		}
	}
	stop := context.AfterFunc(run, cancel)
	return dctx, func() { stop(); cancel() }
}

func (r detachedRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	ctx, cancel := r.detach(ctx)
	defer cancel()
	return r.Runtime.RunPodSandbox(ctx, config, handler)
}

func (r detachedRuntime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := r.detach(ctx)
	defer cancel()
	id, err := r.Runtime.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
	if err != nil {
		if prev := cri.ReservedFor(err); prev != "" {
			return prev, nil
		}
	}
	return id, err
}

func (r detachedRuntime) StartContainer(ctx context.Context, containerID string) error {
	ctx, cancel := r.detach(ctx)
	defer cancel()
	return r.Runtime.StartContainer(ctx, containerID)
}
