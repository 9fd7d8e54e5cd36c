// Package containers is the container machine's work (spec/container.hcl)
// apart from the image (engine/images): one container's runtime instances
// (the current one, every one still in the runtime and when each was
// created, the restart count, the exits), and the machine's guards,
// durations and actions that create, start, stop, record and remove them,
// with kubelet's lifecycle hooks, waiting reasons, events and container GC
// of one container. The engine owns the machine itself (its fire loop,
// observers and timers) and the container's identity (its name, spec and
// role) and binds both to a Container, which reads them through its Owner.
//
// Contracts:
//   - Only one goroutine at a time calls a Container: the pod's worker, or
//     the goroutine the worker runs this container's delivery on while it
//     waits; a Container keeps no lock and touches nothing of another
//     container but through its Owner.
//   - An action's outcome is the event it raises through Owner.Raise; a
//     failure also shows as the container's waiting reason and message.
//   - Every instance the container had stays known until it is removed
//     (Instances, oldest first); the current one always stays, for its
//     status and log, until the pod is removed.
package containers

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/images"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/podstatus"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/fsm"
)

// kubelet's waiting reasons and exit reasons of a container's lifecycle
// (they appear in container statuses).
const (
	ReasonCreateContainer  = "CreateContainerError"
	ReasonRunContainer     = "RunContainerError"
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	ReasonImagePullBackOff = "ImagePullBackOff"
	// ReasonCreateContainerConfig: the container's config could not be
	// built (runAsNonRoot with a root user, a missing configMap, secret or
	// key of its environment); no runtime call was made.
	ReasonCreateContainerConfig = "CreateContainerConfigError"
	// ReasonContainerStatusUnknown: the exit of an instance that ran is
	// unknown (exit code 137).
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"
	// ReasonPostStartHookError is the waiting reason of a container whose
	// postStart hook failed, kubelet's ErrPostStartHook.
	ReasonPostStartHookError = "PostStartHookError"
)

// Owner is what a Container reads of its container, pod and node, and how
// it reports. Its method names are none of a Container's: a method of the
// owner would otherwise hide the Container's promoted one.
type Owner interface {
	// Name, Spec (nil once the pod no longer has the container) and Hash
	// (runtimepods.ContainerHash of Spec, "" without) are the container's;
	// Init, Sidecar and Ephemeral its role.
	Name() string
	Spec() *v1.Container
	Hash() string
	Init() bool
	Sidecar() bool
	Ephemeral() bool
	// Pod is the container's pod as the worker has it now; Key its
	// namespace/name.
	Pod() *v1.Pod
	Key() string
	// State is the container machine's state.
	State() fsm.ContainerState
	// Runtime runs the actions' CRI calls; Clock is the engine's; Logger
	// is where failures are logged.
	Runtime() cri.Runtime
	Clock() clock.Clock
	Logger() *slog.Logger
	// Event records a Kubernetes event about the container, the message
	// format formatted with args (not when no one records events).
	Event(eventType, reason, format string, args ...any)
	// Raise reports an action's outcome to the container machine.
	Raise(ev fsm.ContainerEvent)
	// ProbeEntered tells the container's probe machine the state the
	// container machine entered; ProbeKilled: the probe machine rests in
	// killed (a failed probe killed the instance, no new attempt since).
	ProbeEntered(ctx context.Context, s fsm.ContainerState)
	ProbeKilled() bool
	// Terminating: the pod machine has seen termination. Initialized:
	// the pod's init containers are done. InitsBeforeDone: every init
	// container before this one is done (a sidecar once it runs).
	Terminating() bool
	Initialized() bool
	InitsBeforeDone() bool
	// RemainingGrace is what is left now of the pod's grace period, in
	// seconds.
	RemainingGrace() int64
	// CrashLoopDelay is the CrashLoopBackOff delay handed out last;
	// CountCrash hands out the next. PullDelay is the delay the image pull
	// backoff is about to hand out.
	CrashLoopDelay() time.Duration
	CountCrash()
	PullDelay() time.Duration
	// CountStart counts a start or its failure (the metrics).
	CountStart(err error)
	// RequestInputs reads what a container's config takes from the
	// running pod; BuildConfig builds the config of the next instance
	// with them (and the image's user for a runAsNonRoot check).
	RequestInputs(ctx context.Context) (func(*podspec.ContainerRequest), error)
	BuildConfig(restartCount int32, inputs func(*podspec.ContainerRequest), user podspec.ImageUser) (*runtimeapi.ContainerConfig, error)
	// SandboxID, SandboxConfig and PodIP are the pod's current sandbox's.
	SandboxID() string
	SandboxConfig() *runtimeapi.PodSandboxConfig
	PodIP() string
	// GCPolicy is the container GC's: the dead instances kept per
	// container (at least 1) and the minimum age of one removed.
	GCPolicy() (maxPerContainer int, minAge time.Duration)
	// Removed tells the PLEG that the engine removed instance id itself.
	Removed(id string)
	// LogLink is the path of the link to instance id's log file where log
	// shippers look (podspec.LogLink); "": no links.
	LogLink(id string) string
	// ReportsUser: the runtime reports a container's user in
	// ContainerStatus (it supports supplementalGroupsPolicy,
	// podspec.RuntimeFeatures), which the start action then reads.
	ReportsUser() bool
}

// Container is one container's runtime instances and the guards,
// durations and actions of its machine but the image's (fsm.ContainerGuards,
// fsm.ContainerActions, fsm.ContainerDurations in part). The zero value has
// no instance; Bind gives it its owner.
type Container struct {
	o Owner

	id           string         // the current (newest) runtime instance; "" before the first create
	ids          []string       // every instance still in the runtime, oldest first
	created      []instanceTime // when instances of ids were created (container GC's minimum age), one entry per id at most
	imageRef     string
	runHash      string // spec hash the current instance was created from
	logFile      string // the current instance's log file, when this run created it
	restartCount int32
	// probeKill: a failed probe killed the current instance with its own
	// grace period, probeGrace seconds until probeDeadline; false: the
	// pod's grace period applies. (Beside restartCount: one word for both.)
	probeKill   bool
	startedAt   time.Time
	current     *podstatus.Termination // the exit of the current instance
	last        *podstatus.Termination // the exit of the instance before
	exitStatus  *runtimeapi.ContainerStatus
	user        *runtimeapi.ContainerUser // the current instance's, as the runtime reported it after its start; nil: not reported
	preStopDone string                    // the instance whose preStop hook ran

	waitingReason, waitingMessage string

	probeGrace    int64
	probeDeadline time.Time
}

var _ fsm.ContainerDurations = (*Container)(nil)

// Bind gives c its owner.
func (c *Container) Bind(o Owner) { c.o = o }

// ID is the current (newest) instance, "" before the first create.
func (c *Container) ID() string { return c.id }

// Instances returns the ids of every instance still in the runtime,
// oldest first.
func (c *Container) Instances() []string { return slices.Clone(c.ids) }

// InstanceCount is how many instances are still in the runtime.
func (c *Container) InstanceCount() int { return len(c.ids) }

// DropInstances forgets every instance: the pod's sandboxes, and the
// instances with them, were removed. (Their creation times stay until the
// container is dropped with its pod.)
func (c *Container) DropInstances() { c.ids = nil }

// ImageRef is the image the container's instances run (its ID);
// SetImageRef records it.
func (c *Container) ImageRef() string       { return c.imageRef }
func (c *Container) SetImageRef(ref string) { c.imageRef = ref }

// RestartCount is the current instance's restart count; StartedAt when it
// started (zero before).
func (c *Container) RestartCount() int32  { return c.restartCount }
func (c *Container) StartedAt() time.Time { return c.startedAt }

// User is the current instance's user as the runtime reported it after
// its start (status.containerStatuses[].user); nil when it did not.
func (c *Container) User() *runtimeapi.ContainerUser { return c.user }

// Current is the exit of the current instance (nil while none is known),
// Last the exit of the instance before.
func (c *Container) Current() *podstatus.Termination { return c.current }
func (c *Container) Last() *podstatus.Termination    { return c.last }

// Waiting is the container's waiting reason and message; SetWaiting
// shows a failure as them.
func (c *Container) Waiting() (reason, message string) { return c.waitingReason, c.waitingMessage }
func (c *Container) SetWaiting(reason, message string) {
	c.waitingReason, c.waitingMessage = reason, message
}

// KilledByProbe records that a failed probe kills the current instance
// with grace seconds of its own (negative: the pod's grace period).
func (c *Container) KilledByProbe(grace int64) {
	c.probeKill, c.probeGrace = grace >= 0, grace
	if grace >= 0 {
		c.probeDeadline = c.o.Clock().Now().Add(time.Duration(grace) * time.Second)
	}
}

// Adopt takes over the container's instances from a previous run, newest
// first: the newest becomes the current one. It reports the state the
// machine resumes in: waiting when the newest was only created (it is
// created again as a restart), unless createdDead, where such an instance
// resumes running with no start time, to go through died as a dead one
// does; otherwise running.
func (c *Container) Adopt(cs []*runtimeapi.Container, createdDead bool) fsm.ContainerState {
	for i := len(cs) - 1; i >= 0; i-- {
		c.ids = append(c.ids, cs[i].Id)
		c.setCreated(cs[i].Id, time.Unix(0, cs[i].CreatedAt))
	}
	newest := cs[0]
	c.id = newest.Id
	c.restartCount = runtimepods.RestartCountOf(newest.Annotations)
	c.runHash = runtimepods.RunHash(newest.Annotations, c.o.Spec())
	c.imageRef = newest.ImageRef
	if newest.State == runtimeapi.ContainerState_CONTAINER_CREATED {
		if createdDead {
			return fsm.ContainerStateRunning
		}
		return fsm.ContainerStateWaiting
	}
	c.startedAt = time.Unix(0, newest.CreatedAt)
	return fsm.ContainerStateRunning
}

// Entered keeps the waiting reason in step with the state s the machine
// entered; the probe machine learns that the container runs or stopped
// running. A probe's own grace period lasts only while stopping.
func (c *Container) Entered(ctx context.Context, s fsm.ContainerState) {
	if s != fsm.ContainerStateStopping {
		c.probeKill = false
	}
	c.o.ProbeEntered(ctx, s)
	switch s {
	case fsm.ContainerStateCheckingImage, fsm.ContainerStatePulling, fsm.ContainerStateCreating, fsm.ContainerStateStarting, fsm.ContainerStateRunning:
		c.waitingReason, c.waitingMessage = "", ""
	case fsm.ContainerStateCrashloopBackoff:
		// The first restart waits 0 s and shows no back-off. A failed
		// create or postStart hook shows its own reason for the attempt
		// (kubelet: the sync where the start failed), CrashLoopBackOff
		// from the next sync (show_backoff); kubelet keeps
		// CreateContainerConfigError (no instance exited, so its sync
		// shows no CrashLoopBackOff). An exit shows CrashLoopBackOff at once.
		if c.Crashloop() > 0 && !c.showsAttempt() && c.waitingReason != ReasonCreateContainerConfig {
			c.setCrashLoopBackOff()
		}
	}
}

// showsAttempt: the waiting reason is a failed attempt's error that the
// backoff's reason replaces at the next sync (show_backoff).
func (c *Container) showsAttempt() bool {
	switch c.o.State() {
	case fsm.ContainerStatePullBackoff:
		return c.waitingReason == images.ReasonErrImagePull
	case fsm.ContainerStateCrashloopBackoff:
		return c.waitingReason == ReasonCreateContainer || c.waitingReason == ReasonPostStartHookError
	}
	return false
}

// BackoffShown is the duration backoff_shown: 1 s (the next sync tick)
// while the reason is a failed attempt's the backoff replaces, except for
// the first restart (0 s, no back-off shown); negative (no timer) otherwise.
func (c *Container) BackoffShown() time.Duration {
	if !c.showsAttempt() || c.o.State() == fsm.ContainerStateCrashloopBackoff && c.Crashloop() <= 0 {
		return -1
	}
	return time.Second
}

// ShowBackoff (show_backoff): the next sync after the failed attempt shows
// the backoff, ImagePullBackOff (with its events) or CrashLoopBackOff, as
// kubelet's does.
func (c *Container) ShowBackoff() op.Op {
	switch {
	case !c.showsAttempt():
	case c.o.State() == fsm.ContainerStatePullBackoff:
		c.showPullBackoff()
	default:
		c.setCrashLoopBackOff()
	}
	return op.Done(nil)
}

// showPullBackoff shows ImagePullBackOff as kubelet's sync that finds the
// pull backing off does (v1.34 images.pullImage, startContainer): the
// message "Back-off pulling image ...: " with the previous pull's error,
// the event BackOff and the warning event Failed "Error: ImagePullBackOff".
func (c *Container) showPullBackoff() {
	msg := fmt.Sprintf("Back-off pulling image %q", c.o.Spec().Image)
	c.o.Event(v1.EventTypeNormal, "BackOff", "%s", msg)
	// The failed pull's reason and message are still shown (showsAttempt):
	// they are kubelet's prevPullErrMsg.
	msg += ": " + c.waitingReason + ": " + c.waitingMessage
	c.waitingReason, c.waitingMessage = ReasonImagePullBackOff, msg
	c.failedEvent()
}

// setCrashLoopBackOff sets the waiting reason of a container in backoff.
func (c *Container) setCrashLoopBackOff() {
	c.waitingReason = ReasonCrashLoopBackOff
	c.waitingMessage = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
		c.o.CrashLoopDelay(), c.o.Name(), c.o.Pod().Name, c.o.Pod().Namespace, c.o.Pod().UID)
}

// failedEvent is kubelet's startContainer warning Failed "Error: REASON"
// for a start that ended before CreateContainer with the waiting reason
// set (here ImagePullBackOff, shown by show_backoff; engine/images records
// its own).
func (c *Container) failedEvent() {
	c.o.Event(v1.EventTypeWarning, "Failed", "Error: %s", c.waitingReason)
}

func (c *Container) restartPolicy() v1.RestartPolicy {
	if c.o.Sidecar() {
		return v1.RestartPolicyAlways
	}
	if p := c.o.Pod().Spec.RestartPolicy; p != "" {
		return p
	}
	return v1.RestartPolicyAlways
}

// Forget drops an older instance that is gone from the runtime.
func (c *Container) Forget(id string) {
	c.ids = slices.DeleteFunc(c.ids, func(x string) bool { return x == id })
	c.forgetCreated(id)
}

// Ran: an instance of the container started, or its exit was recorded (a
// failed start counts: the spec decided on it); an instance that was only
// created (adopted CREATED, or between create and start) has not run.
func (c *Container) Ran() bool {
	return c.id != "" && (!c.startedAt.IsZero() || c.current != nil || c.last != nil)
}

// instanceTime is when one runtime instance of a container was created.
type instanceTime struct {
	id string
	at time.Time
}

// setCreated records that instance id was created at at. A container keeps
// a few instances (ContainerGC.MaxPerContainer): a slice, not a map.
func (c *Container) setCreated(id string, at time.Time) {
	for i := range c.created {
		if c.created[i].id == id {
			c.created[i].at = at
			return
		}
	}
	c.created = append(c.created, instanceTime{id: id, at: at})
}

// createdAt is when instance id was created, if recorded.
func (c *Container) createdAt(id string) (time.Time, bool) {
	for i := range c.created {
		if c.created[i].id == id {
			return c.created[i].at, true
		}
	}
	return time.Time{}, false
}

// forgetCreated drops the creation time of instance id.
func (c *Container) forgetCreated(id string) {
	c.created = slices.DeleteFunc(c.created, func(t instanceTime) bool { return t.id == id })
}
