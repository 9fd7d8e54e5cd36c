// Package pods is the pod machine's work (spec/pod.hcl) apart from what
// reads the engine's registries and the pod's containers (admission_refused,
// name_taken, pod_done, all_containers_stopped stay the engine's): the
// pod's start time and active deadline, its grace period, which only
// shortens, its volumes, and the actions that sync, kill, stop and remove
// the pod by delivering events to its sandbox and container machines. The
// engine owns the machines (their fire loops, observers, timers and
// deliveries) and binds a Pod to the pod's worker state, its Owner.
//
// Contracts:
//   - Only the pod's worker goroutine calls a Pod; a Pod keeps no lock.
//     RemainingGrace is read by the pod's containers while a delivery runs
//     on their goroutines; nothing writes the grace period then (Kill runs
//     on the worker, before a delivery).
//   - An action's outcome is the event it raises through Owner.Raise.
//   - The deliveries run the sandbox's and the containers' own actions
//     inside the pod's (op.Deliver): ordering among containers is the
//     Owner's.
package pods

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/fsm"
)

// ReasonFailedMount is kubelet's reason of a volume of the pod that could
// not be set up.
const ReasonFailedMount = "FailedMount"

// Owner is what a Pod reads of its pod, node and other machines, and how
// it reports and delivers. Its method names are none of a Pod's: a method
// of the owner would otherwise hide the Pod's promoted one.
type Owner interface {
	// Spec is the pod as the worker has it now; Key its namespace/name.
	Spec() *v1.Pod
	Key() string
	// Logger is where the pod's actions log; Clock the engine's; Runtime
	// what op.Exec runs the actions' operations against.
	Logger() *slog.Logger
	Clock() clock.Clock
	Runtime() cri.Runtime
	// Event records a Kubernetes event about the pod, the message format
	// formatted with args (not when no one records events).
	Event(eventType, reason, format string, args ...any)
	// Raise reports an action's outcome to the pod machine.
	Raise(ev fsm.PodEvent)
	// WorkerDuration counts what an action of kind took (the metrics).
	WorkerDuration(kind string, d time.Duration)
	// SyncFrequency is how often a synced pod syncs again (before jitter).
	SyncFrequency() time.Duration
	// Volumes sets up and tears down the pod's volumes; RootDir is where
	// they live (a volume set up by the agent's previous run).
	Volumes() Volumes
	// PodCgroup makes the pod's cgroup; nil without pod cgroups
	// (--cgroups-per-qos=false).
	PodCgroup() Cgroup
	RootDir() string
	// AddProbes starts the ticks of the containers' probes (kubelet's
	// AddPod); Publish recomputes and publishes the pod's status;
	// FreeName gives the static pod's full name to the next UID waiting.
	AddProbes()
	Publish()
	FreeName()

	// The pod's sandbox machine: its state, the error of the action the
	// last delivery ran, the config kept for the sync that made it, and
	// the removal of every sandbox the pod had (then goes on when all
	// are removed).
	SandboxState() fsm.SandboxState
	SandboxErr() error
	DropSandboxConfig()
	RemoveSandboxes(then func() op.Op) op.Op
	// Deliveries to the sandbox machine and to the container machines,
	// in the pod's order: FireSandbox one event to the sandbox;
	// UpdateContainers update to each in turn; StartContainers start to
	// the ephemeral, then the init, then the regular containers, each
	// one's start done before the next begins; FireContainers ev to the
	// ephemeral and regular containers in parallel, then to the init
	// containers; RemovedAll removed to every container (their instances
	// forgotten) and to the sandbox.
	FireSandbox(ctx context.Context, ev fsm.SandboxEvent)
	UpdateContainers(ctx context.Context)
	StartContainers(ctx context.Context)
	FireContainers(ctx context.Context, ev fsm.ContainerEvent)
	RemovedAll(ctx context.Context)
}

// Cgroup creates or updates a pod's cgroup under its QoS class
// (engine/cgroups).
type Cgroup interface {
	Ensure(pod *v1.Pod) error
}

// ReasonFailedToCreatePodContainer is kubelet's reason of a pod cgroup that
// could not be made.
const ReasonFailedToCreatePodContainer = "FailedToCreatePodContainer"

// Volumes sets up and tears down a pod's volumes (engine/volume).
type Volumes interface {
	Setup(ctx context.Context, pod *v1.Pod) error
	TearDown(uid types.UID) error
}

// Pod is one pod's start time, deadline, grace period and volumes, and the
// pod machine's actions and durations (fsm.PodActions, fsm.PodDurations).
// The zero value has not started and not been killed; Bind gives it its
// owner.
type Pod struct {
	o Owner

	startTime time.Time
	syncs     int // sync_pod runs so far (the first is operation "create")
	// deadlineExceeded: the pod ran past spec.activeDeadlineSeconds
	// (exceed_deadline): Failed, DeadlineExceeded.
	deadlineExceeded bool
	// killed: a kill asked for a grace period; grace is its effective
	// length (seconds), graceDeadline when it ends, forced whether 0 was
	// asked for explicitly.
	killed        bool
	forced        bool
	grace         int64
	graceDeadline time.Time

	// mounted holds the volumes mount_volumes set up at least once; a
	// later refresh failing for one of them does not hold the pod back.
	mounted map[string]bool
}

var _ fsm.PodDurations = (*Pod)(nil)

// Bind gives p its owner.
func (p *Pod) Bind(o Owner) { p.o = o }

// StartTime is when the pod started (its first sync, or its sandbox's
// creation for a pod adopted after a restart); zero before.
func (p *Pod) StartTime() time.Time { return p.startTime }

// SetStartTime sets the start time of a pod adopted from the runtime.
func (p *Pod) SetStartTime(t time.Time) { p.startTime = t }

// DeadlineExceeded: the pod ran past spec.activeDeadlineSeconds.
func (p *Pod) DeadlineExceeded() bool { return p.deadlineExceeded }

// --- durations ---

// Resync is the synced pod's next sync: SyncFrequency plus jitter.
func (p *Pod) Resync() time.Duration { return wait.Jitter(p.o.SyncFrequency(), requeueJitter) }

// ActiveDeadline is what is left of spec.activeDeadlineSeconds since the
// pod's start time (0 once it ran out); -1, no timer, for a pod without a
// deadline or not started.
func (p *Pod) ActiveDeadline() time.Duration {
	ads := p.o.Spec().Spec.ActiveDeadlineSeconds
	if ads == nil || p.startTime.IsZero() {
		return -1
	}
	return max(0, p.startTime.Add(time.Duration(*ads)*time.Second).Sub(p.o.Clock().Now()))
}

// SyncBackoff is the wait before a failed sync is retried, with jitter.
func (p *Pod) SyncBackoff() time.Duration {
	return wait.Jitter(fsm.PodDurationDefaults[fsm.PodDurationSyncBackoff], requeueJitter)
}

// requeueJitter is the share of a requeue delay kubelet adds at random
// (wait.Jitter(d, 0.1)).
const requeueJitter = 0.1

// --- the grace period ---

// Kill records a termination request with grace period g seconds (forced:
// 0 allowed); the effective grace period only shortens. It returns whether
// the grace period changed.
func (p *Pod) Kill(g int64, forced bool) bool {
	if !forced && g < 1 {
		g = 1
	}
	now := p.o.Clock().Now()
	if !p.killed || g < p.RemainingGrace(now) {
		p.killed = true
		p.grace = g
		p.forced = forced && g == 0
		p.graceDeadline = now.Add(time.Duration(g) * time.Second)
		return true
	}
	return false
}

// RemainingGrace is what is left of the effective grace period at now, at
// least 1 s unless the kill was forced; before any kill, the pod's own
// grace period.
func (p *Pod) RemainingGrace(now time.Time) int64 {
	if !p.killed {
		return max(Grace(p.o.Spec()), 1)
	}
	left := int64(p.graceDeadline.Sub(now).Round(time.Second) / time.Second)
	if p.forced {
		return max(left, 0)
	}
	return max(left, 1)
}

// Grace is the grace period a kill of pod asks for:
// deletionGracePeriodSeconds when set, longer or shorter than the spec's
// (kubelet's calculateEffectiveGracePeriod: the API server's value is the
// truth; a delete may ask for 120 s of a pod whose spec says 30), else
// terminationGracePeriodSeconds (default 30 s, the container machine's
// grace_period duration). Kill keeps the shortest one asked for.
func Grace(pod *v1.Pod) int64 {
	if d := pod.DeletionGracePeriodSeconds; d != nil {
		return *d
	}
	g := int64(fsm.ContainerDurationDefaults[fsm.ContainerDurationGracePeriod] / time.Second)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	return g
}

// ForcedKill reports a kill that asked for 0 seconds explicitly.
func ForcedKill(pod *v1.Pod) bool {
	return pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
}
