package worker

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/metrics"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/pods"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/sandbox"
	"github.com/speclet/speclet/engine/volume"
)

// Host is what the pod workers read of the node they run on: the engine's
// settings and shared services. The engine builds it once and every
// worker, and the machines' owners under it, hold a pointer to it; only
// RuntimeName changes afterwards, before any worker reads it. A worker
// reads nothing else of the engine, and asks the engine what it owns (the
// static names, the runtime's gate, the run context) through Engine.
type Host struct {
	NodeName string
	NodeIP   string
	RootDir  string
	// Node is the node as the pod-spec translation reads it.
	Node podspec.Node
	// SyncFrequency is the pod machine's resync period.
	SyncFrequency time.Duration
	// GCMaxPerContainer and GCMinAge are the container GC's per-container
	// policy (engine.ContainerGCPolicy).
	GCMaxPerContainer int
	GCMinAge          time.Duration

	// UserNamespace is the user namespace option of pod's sandbox and
	// containers on runtime handler handler (engine/userns); an error is
	// the sandbox's FailedCreatePodSandBox, a container's
	// CreateContainerConfigError. nil: none sent.
	UserNamespace func(pod *v1.Pod, handler string) (*runtimeapi.UserNamespace, error)

	Events       EventRecorder                 // nil: no events
	PodCgroups   PodCgroups                    // nil: no pod cgroups
	PublishedPod func(p *v1.Pod)               // told of every published pod; nil: none
	Services     func() ([]*v1.Service, error) // nil: no service variables
	VolumeAPI    volume.API                    // nil: no API server
	// Devices are what the device plugins give a container at its
	// creation (nil: no device manager); an error is the container's
	// CreateContainerConfigError.
	Devices func(ctx context.Context, pod *v1.Pod, c *v1.Container) (*podspec.DeviceRun, error)
	// Features is what the runtime last said it supports (its Status);
	// nil, or a nil result: nothing.
	Features func() *podspec.RuntimeFeatures

	Runtime cri.Runtime
	Clock   clock.WithTicker
	Log     *slog.Logger
	Metrics *metrics.Metrics
	Sinks   observe.Sinks   // the common observers' (engine/observe)
	Volumes *volume.Manager // sets up and tears down pod volumes
	PLEG    *pleg.PLEG

	CrashBackoff *Backoff
	PullBackoff  *Backoff

	// RuntimeName prefixes container IDs in statuses ("containerd://<id>"),
	// from the runtime's Version; "cri" when it does not say.
	RuntimeName string

	Engine Engine
}

// features is what the runtime last said it supports; nil: nothing.
func (h *Host) features() *podspec.RuntimeFeatures {
	if h.Features == nil {
		return nil
	}
	return h.Features()
}

// runtimeHandler is what the pod's runtime handler supports, as the
// runtime last reported it.
func (s *podState) runtimeHandler() podspec.RuntimeHandler {
	return s.h.features().Handler(s.w.runtimeHandler)
}

// exec is the executor of the pod's machines' actions, each owner's Exec
// (fsm.<Machine>Impl): it runs an action's operations, from the first the
// action returned, on the runtime, on the action's context.
func (h *Host) exec(ctx context.Context, first op.Op) error { return op.Exec(ctx, h.Runtime, first) }

func (s *podState) Exec(ctx context.Context, first op.Op) error      { return s.h.exec(ctx, first) }
func (sb *sandboxState) Exec(ctx context.Context, first op.Op) error { return sb.p.h.exec(ctx, first) }
func (c *ctrState) Exec(ctx context.Context, first op.Op) error      { return c.p.h.exec(ctx, first) }
func (ps *probeState) Exec(ctx context.Context, first op.Op) error   { return ps.c.p.h.exec(ctx, first) }

// Engine is what a pod worker asks of the engine that runs it.
type Engine interface {
	// NameTaken: another UID holds the static full name or waits for it
	// ahead of uid; ReleaseName gives it up.
	NameTaken(full string, uid types.UID) bool
	ReleaseName(full string, uid types.UID)
	// WaitRuntime blocks while the runtime is marked down.
	WaitRuntime(ctx context.Context) error
	// Context is the context of the engine's Run: probe workers end with it.
	Context() context.Context
	// FirstProbeDelay is a first probe's jitter: the engine's while it
	// started less than period ago, else 0.
	FirstProbeDelay(period time.Duration) time.Duration
}

// EventRecorder receives the pod events kubelet records, with kubelet's
// reasons (Pulling, Pulled, Failed, BackOff, Created, Started, Killing,
// Unhealthy, FailedPostStartHook, FailedPreStopHook, FailedCreatePodSandBox,
// SandboxChanged, ErrImageNeverPull, InspectFailed, ProbeWarning, and an
// admission refusal's reason: OutOfcpu, NodePorts, ...). fieldPath names the
// container (spec.containers{name}, spec.initContainers{name}) or is "" for
// the pod. It must not block: the API recorder queues and rate-limits.
type EventRecorder interface {
	Event(pod *v1.Pod, fieldPath, eventType, reason, message string)
}

// PodCgroups is the node's pod cgroups as a worker uses them: the pod
// machine's (pods.Cgroup), the sandbox machine's (sandbox.Cgroups) and the
// CgroupParent of a pod's sandbox.
type PodCgroups interface {
	pods.Cgroup
	sandbox.Cgroups
	// Parent is the pod's cgroup, the CgroupParent of its sandbox.
	Parent(pod *v1.Pod) string
}
