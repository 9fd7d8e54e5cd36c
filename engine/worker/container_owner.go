package worker

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/containers"
	"github.com/speclet/speclet/engine/images"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/fsm"
)

// What the embedded containers.Container and images.Puller read of the
// container, its pod and the node, and how they report (containers.Owner,
// images.Container). None of these names is one of the Container's or the
// Puller's own methods, which a method here would hide.

var _ containers.Owner = (*ctrState)(nil)
var _ images.Container = (*ctrState)(nil)

func (c *ctrState) Name() string                  { return c.name }
func (c *ctrState) Spec() *v1.Container           { return c.spec }
func (c *ctrState) Hash() string                  { return c.hash }
func (c *ctrState) Init() bool                    { return c.init }
func (c *ctrState) Sidecar() bool                 { return c.sidecar }
func (c *ctrState) Ephemeral() bool               { return c.ephemeral }
func (c *ctrState) Pod() *v1.Pod                  { return c.p.pod }
func (c *ctrState) Key() string                   { return c.p.key() }
func (c *ctrState) State() fsm.ContainerState     { return c.machine.State() }
func (c *ctrState) Runtime() cri.Runtime          { return c.p.h.Runtime }
func (c *ctrState) Clock() clock.Clock            { return c.p.h.Clock }
func (c *ctrState) Raise(ev fsm.ContainerEvent)   { c.raise(ev) }
func (c *ctrState) ProbeKilled() bool             { return c.probe.killed() }
func (c *ctrState) Terminating() bool             { return c.p.terminating() }
func (c *ctrState) Initialized() bool             { return c.p.initialized() }
func (c *ctrState) RemainingGrace() int64         { return c.p.RemainingGrace(c.p.h.Clock.Now()) }
func (c *ctrState) CrashLoopDelay() time.Duration { return c.p.h.CrashBackoff.Current(c.backoffKey()) }
func (c *ctrState) CountCrash()                   { c.p.h.CrashBackoff.Next(c.backoffKey()) }
func (c *ctrState) PullDelay() time.Duration      { return c.p.h.PullBackoff.Peek(c.backoffKey()) }
func (c *ctrState) CountStart(err error)          { c.p.h.Metrics.ContainerStarted(err) }
func (c *ctrState) SandboxID() string             { return c.p.sandbox.ID() }
func (c *ctrState) PodIP() string                 { return c.p.sandbox.PodIP() }
func (c *ctrState) Removed(id string)             { c.p.h.PLEG.Forget(id) }
func (c *ctrState) LogLink(id string) string {
	return podspec.LogLink(c.p.h.Node.LogLinksDir, c.p.pod.Namespace, c.p.pod.Name, c.name, id)
}

func (c *ctrState) SandboxConfig() *runtimeapi.PodSandboxConfig { return c.p.sandbox.Config() }

// Event records an event about the container.
func (c *ctrState) Event(eventType, reason, format string, args ...any) {
	c.event(eventType, reason, format, args...)
}

// ProbeEntered tells the probe machine the state the container machine
// entered.
func (c *ctrState) ProbeEntered(ctx context.Context, s fsm.ContainerState) {
	c.probe.containerEntered(ctx, s)
}

// InitsBeforeDone: every init container before this one completed, or
// runs when it is a sidecar (initDone).
func (c *ctrState) InitsBeforeDone() bool {
	for _, before := range c.p.inits {
		if before == c {
			return true
		}
		if !before.initDone() {
			return false
		}
	}
	return true
}

// RequestInputs reads what the container's config takes from the running
// pod (requestInputs).
func (c *ctrState) RequestInputs(ctx context.Context) (func(*podspec.ContainerRequest), error) {
	return c.p.requestInputs(ctx)
}

// ReportsUser: the runtime reports a container's user (it supports
// supplementalGroupsPolicy).
func (c *ctrState) ReportsUser() bool { return c.p.h.features().SupportsSupplementalGroupsPolicy() }

// GCPolicy is the container GC's per-container policy (Host).
func (c *ctrState) GCPolicy() (int, time.Duration) { return c.p.h.GCMaxPerContainer, c.p.h.GCMinAge }
