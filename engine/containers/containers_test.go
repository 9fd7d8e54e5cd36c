package containers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/podstatus"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/fsm"
)

// fakeOwner is a container, its pod and node as the tests set them up; it
// records what the Container tells it.
type fakeOwner struct {
	spec                                  *v1.Container
	pod                                   *v1.Pod
	init, sidecar, ephemeral              bool
	state                                 fsm.ContainerState
	clock                                 *clocktesting.FakeClock
	probeKilled, terminating, initialized bool
	initsBeforeDone                       bool
	remainingGrace                        int64
	crashDelay                            time.Duration
	sandboxID                             string
	raised                                []fsm.ContainerEvent
	events                                []string
	removed                               []string
	linksDir                              string // podspec.Node.LogLinksDir; "": no links
	reportsUser                           bool   // the runtime reports users (ReportsUser)
}

func newFakeOwner() *fakeOwner {
	grace := int64(1)
	return &fakeOwner{
		spec: &v1.Container{Name: "app", Image: "busybox:latest"},
		pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u"},
			Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace, RestartPolicy: v1.RestartPolicyAlways}},
		state: fsm.ContainerInitialState, clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		initialized: true, initsBeforeDone: true, remainingGrace: grace,
	}
}

// container is a Container bound to o.
func (o *fakeOwner) container() *Container {
	c := &Container{}
	c.Bind(o)
	return c
}

func (o *fakeOwner) Name() string                  { return o.spec.Name }
func (o *fakeOwner) Spec() *v1.Container           { return o.spec }
func (o *fakeOwner) Hash() string                  { return runtimepods.ContainerHash(o.spec) }
func (o *fakeOwner) Init() bool                    { return o.init }
func (o *fakeOwner) Sidecar() bool                 { return o.sidecar }
func (o *fakeOwner) Ephemeral() bool               { return o.ephemeral }
func (o *fakeOwner) Pod() *v1.Pod                  { return o.pod }
func (o *fakeOwner) Key() string                   { return o.pod.Namespace + "/" + o.pod.Name }
func (o *fakeOwner) State() fsm.ContainerState     { return o.state }
func (o *fakeOwner) Runtime() cri.Runtime          { return nil }
func (o *fakeOwner) Clock() clock.Clock            { return o.clock }
func (o *fakeOwner) Logger() *slog.Logger          { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (o *fakeOwner) Raise(ev fsm.ContainerEvent)   { o.raised = append(o.raised, ev) }
func (o *fakeOwner) ProbeKilled() bool             { return o.probeKilled }
func (o *fakeOwner) Terminating() bool             { return o.terminating }
func (o *fakeOwner) Initialized() bool             { return o.initialized }
func (o *fakeOwner) InitsBeforeDone() bool         { return o.initsBeforeDone }
func (o *fakeOwner) RemainingGrace() int64         { return o.remainingGrace }
func (o *fakeOwner) CrashLoopDelay() time.Duration { return o.crashDelay }
func (o *fakeOwner) CountCrash()                   {}
func (o *fakeOwner) PullDelay() time.Duration      { return 0 }
func (o *fakeOwner) CountStart(error)              {}
func (o *fakeOwner) SandboxID() string             { return o.sandboxID }
func (o *fakeOwner) PodIP() string                 { return "" }
func (o *fakeOwner) Removed(id string)             { o.removed = append(o.removed, id) }
func (o *fakeOwner) LogLink(id string) string {
	return podspec.LogLink(o.linksDir, o.pod.Namespace, o.pod.Name, o.spec.Name, id)
}
func (o *fakeOwner) ReportsUser() bool { return o.reportsUser }
func (o *fakeOwner) GCPolicy() (int, time.Duration) {
	return 1, 0
}
func (o *fakeOwner) SandboxConfig() *runtimeapi.PodSandboxConfig      { return nil }
func (o *fakeOwner) ProbeEntered(context.Context, fsm.ContainerState) {}
func (o *fakeOwner) Event(eventType, reason, format string, args ...any) {
	o.events = append(o.events, eventType+" "+reason+": "+fmt.Sprintf(format, args...))
}
func (o *fakeOwner) RequestInputs(context.Context) (func(*podspec.ContainerRequest), error) {
	return nil, nil
}
func (o *fakeOwner) BuildConfig(int32, func(*podspec.ContainerRequest), podspec.ImageUser) (*runtimeapi.ContainerConfig, error) {
	return nil, nil
}

// TestGraceOfAStop: a stop takes what is left of the pod's grace period,
// also right after Bind; after a kill for a failed probe with a grace
// period of its own, what is left of that (at least 1 s) until the
// machine leaves stopping, or the pod terminates.
func TestGraceOfAStop(t *testing.T) {
	o := newFakeOwner()
	o.remainingGrace = 30
	c := o.container()
	if got := c.GracePeriod(); got != 32*time.Second {
		t.Errorf("grace_period right after Bind %v, want the pod's 30 s + 2 s", got)
	}
	c.KilledByProbe(5)
	o.clock.Step(3 * time.Second)
	if got := c.stopGrace(); got != 2 {
		t.Errorf("3 s after a probe kill with 5 s of grace: %d s, want 2", got)
	}
	o.clock.Step(10 * time.Second)
	if got := c.stopGrace(); got != 1 {
		t.Errorf("past the probe's grace: %d s, want 1", got)
	}
	o.terminating = true
	if got := c.stopGrace(); got != 30 {
		t.Errorf("the pod terminates: %d s, want the pod's 30", got)
	}
	o.terminating = false
	c.Entered(t.Context(), fsm.ContainerStateExited)
	if got := c.stopGrace(); got != 30 {
		t.Errorf("after the stop: %d s, want the pod's 30 again", got)
	}
	c.KilledByProbe(-1)
	if got := c.stopGrace(); got != 30 {
		t.Errorf("a probe without its own grace: %d s, want the pod's 30", got)
	}
}

// TestRestartAllowed reads the restart policy by role and exit.
func TestRestartAllowed(t *testing.T) {
	for _, tc := range []struct {
		policy                   v1.RestartPolicy
		init, sidecar, ephemeral bool
		exit                     int32 // -1: no exit known
		want                     bool
	}{
		{policy: v1.RestartPolicyAlways, exit: 0, want: true},
		{policy: v1.RestartPolicyOnFailure, exit: 0, want: false},
		{policy: v1.RestartPolicyOnFailure, exit: 1, want: true},
		{policy: v1.RestartPolicyNever, exit: 1, want: false},
		{policy: v1.RestartPolicyNever, init: true, exit: 1, want: false},
		{policy: v1.RestartPolicyAlways, init: true, exit: 0, want: false},
		{policy: v1.RestartPolicyAlways, init: true, exit: 1, want: true},
		{policy: v1.RestartPolicyNever, init: true, sidecar: true, exit: 0, want: true},
		{policy: v1.RestartPolicyAlways, ephemeral: true, exit: 1, want: false},
		{policy: v1.RestartPolicyOnFailure, exit: -1, want: true},
	} {
		o := newFakeOwner()
		o.pod.Spec.RestartPolicy, o.init, o.sidecar, o.ephemeral = tc.policy, tc.init, tc.sidecar, tc.ephemeral
		c := o.container()
		if tc.exit >= 0 {
			c.current = &podstatus.Termination{ExitCode: tc.exit}
		}
		if got := c.RestartAllowed(); got != tc.want {
			t.Errorf("%s init %v sidecar %v ephemeral %v exit %d: restart_allowed %v, want %v",
				tc.policy, tc.init, tc.sidecar, tc.ephemeral, tc.exit, got, tc.want)
		}
	}
}

// TestStartBlocked: an ephemeral container starts at once, a regular one
// once the pod is initialized, an init container once those before it are
// done; one the pod no longer has never starts.
func TestStartBlocked(t *testing.T) {
	o := newFakeOwner()
	c := o.container()
	o.initialized = false
	if !c.StartBlocked() {
		t.Error("a regular container starts before the pod is initialized")
	}
	o.ephemeral = true
	if c.StartBlocked() {
		t.Error("an ephemeral container waits for the pod's initialization")
	}
	o.ephemeral, o.init, o.initsBeforeDone = false, true, false
	if !c.StartBlocked() {
		t.Error("an init container starts before those before it are done")
	}
	o.initsBeforeDone = true
	if c.StartBlocked() {
		t.Error("an init container waits although those before it are done")
	}
	o.spec = nil
	if !c.StartBlocked() || !c.PodTerminating() {
		t.Error("a container the pod no longer has may start")
	}
}

// TestAdopt: after a restart the newest instance is the current one, with
// its restart count, spec hash and image; a running one resumes in running,
// one only created in waiting (it is created again as a restart); every
// instance is kept, oldest first, with its creation time for container GC.
func TestAdopt(t *testing.T) {
	at := func(m int) int64 { return time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC).UnixNano() }
	inst := func(id string, state runtimeapi.ContainerState, restarts string, m int) *runtimeapi.Container {
		return &runtimeapi.Container{Id: id, State: state, ImageRef: "sha256:" + id, CreatedAt: at(m),
			Annotations: map[string]string{runtimepods.AnnotationRestartCount: restarts, runtimepods.AnnotationContainerHash: "h-" + id}}
	}
	o := newFakeOwner()
	c := o.container()
	st := c.Adopt([]*runtimeapi.Container{inst("b", runtimeapi.ContainerState_CONTAINER_RUNNING, "1", 5), inst("a", runtimeapi.ContainerState_CONTAINER_EXITED, "0", 1)}, false)
	if st != fsm.ContainerStateRunning || c.ID() != "b" || c.RestartCount() != 1 || c.ImageRef() != "sha256:b" || c.runHash != "h-b" ||
		!c.StartedAt().Equal(time.Unix(0, at(5))) || !slices.Equal(c.Instances(), []string{"a", "b"}) {
		t.Errorf("adopted a running instance: %s, id %q, restarts %d, image %q, hash %q, started %v, instances %q",
			st, c.ID(), c.RestartCount(), c.ImageRef(), c.runHash, c.StartedAt(), c.Instances())
	}
	if born, ok := c.createdAt("a"); !ok || !born.Equal(time.Unix(0, at(1))) {
		t.Errorf("instance a created at %v (%v), want its CreatedAt", born, ok)
	}
	c = o.container()
	if st := c.Adopt([]*runtimeapi.Container{inst("c", runtimeapi.ContainerState_CONTAINER_CREATED, "2", 9)}, false); st != fsm.ContainerStateWaiting || !c.StartedAt().IsZero() || c.Ran() {
		t.Errorf("adopted a created instance: %s, started %v, ran %v; want waiting, not started, not run", st, c.StartedAt(), c.Ran())
	}
	c = o.container()
	if st := c.Adopt([]*runtimeapi.Container{inst("d", runtimeapi.ContainerState_CONTAINER_CREATED, "0", 9)}, true); st != fsm.ContainerStateRunning || !c.StartedAt().IsZero() || c.ID() != "d" {
		t.Errorf("adopted a created instance taken as dead: %s, started %v, id %q; want running (to die), not started, id d", st, c.StartedAt(), c.ID())
	}
}
