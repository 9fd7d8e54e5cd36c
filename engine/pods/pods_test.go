package pods

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/volume"
	"github.com/speclet/speclet/fsm"
)

// fakeOwner is a pod, its node and its other machines as the tests set
// them up; it records what the Pod tells it and delivers.
type fakeOwner struct {
	pod       *v1.Pod
	clock     *clocktesting.FakeClock
	sandbox   fsm.SandboxState
	setup     error    // what Volumes().Setup returns
	cgroups   bool     // the node has pod cgroups (PodCgroup)
	ensure    error    // what PodCgroup().Ensure returns
	host      []string // the cgroup ensures and volume setups, in order
	raised    []fsm.PodEvent
	events    []string
	delivered []string
	freed     int
}

func newFakeOwner() *fakeOwner {
	grace := int64(30)
	return &fakeOwner{
		pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u"},
			Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace}},
		clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), sandbox: fsm.SandboxInitialState,
	}
}

func (o *fakeOwner) pods() *Pod {
	p := &Pod{}
	p.Bind(o)
	return p
}

func (o *fakeOwner) Spec() *v1.Pod                           { return o.pod }
func (o *fakeOwner) Key() string                             { return o.pod.Namespace + "/" + o.pod.Name }
func (o *fakeOwner) Logger() *slog.Logger                    { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (o *fakeOwner) Clock() clock.Clock                      { return o.clock }
func (o *fakeOwner) Runtime() cri.Runtime                    { return nil }
func (o *fakeOwner) Raise(ev fsm.PodEvent)                   { o.raised = append(o.raised, ev) }
func (o *fakeOwner) WorkerDuration(string, time.Duration)    {}
func (o *fakeOwner) SyncFrequency() time.Duration            { return time.Minute }
func (o *fakeOwner) Volumes() Volumes                        { return o }
func (o *fakeOwner) RootDir() string                         { return "/nonexistent" }
func (o *fakeOwner) AddProbes()                              {}
func (o *fakeOwner) Publish()                                {}
func (o *fakeOwner) FreeName()                               { o.freed++ }
func (o *fakeOwner) SandboxState() fsm.SandboxState          { return o.sandbox }
func (o *fakeOwner) SandboxErr() error                       { return nil }
func (o *fakeOwner) DropSandboxConfig()                      {}
func (o *fakeOwner) RemoveSandboxes(then func() op.Op) op.Op { return then() }
func (o *fakeOwner) FireSandbox(_ context.Context, ev fsm.SandboxEvent) {
	o.delivered = append(o.delivered, "sandbox "+ev.String())
}
func (o *fakeOwner) UpdateContainers(context.Context) { o.delivered = append(o.delivered, "update") }
func (o *fakeOwner) StartContainers(context.Context)  { o.delivered = append(o.delivered, "start") }
func (o *fakeOwner) FireContainers(_ context.Context, ev fsm.ContainerEvent) {
	o.delivered = append(o.delivered, "containers "+ev.String())
}
func (o *fakeOwner) RemovedAll(context.Context) { o.delivered = append(o.delivered, "removed") }
func (o *fakeOwner) Event(eventType, reason, format string, args ...any) {
	o.events = append(o.events, eventType+" "+reason+": "+fmt.Sprintf(format, args...))
}
func (o *fakeOwner) Setup(context.Context, *v1.Pod) error {
	o.host = append(o.host, "mount")
	return o.setup
}
func (o *fakeOwner) PodCgroup() Cgroup {
	if !o.cgroups {
		return nil
	}
	return o
}
func (o *fakeOwner) Ensure(pod *v1.Pod) error {
	o.host = append(o.host, "cgroup "+string(pod.UID))
	return o.ensure
}
func (o *fakeOwner) TearDown(types.UID) error { return nil }

// TestGracePeriod: before any kill a stop gets the pod's own grace period;
// a kill only shortens it, never below 1 s unless forced with 0; what is
// left counts down on the clock.
func TestGracePeriod(t *testing.T) {
	o := newFakeOwner()
	p := o.pods()
	now := func() int64 { return p.RemainingGrace(o.clock.Now()) }
	if got := now(); got != 30 {
		t.Fatalf("before any kill: %d s, want the pod's 30", got)
	}
	if !p.Kill(20, false) || now() != 20 {
		t.Fatalf("a kill with 20 s: %d s left", now())
	}
	if p.Kill(25, false) || now() != 20 {
		t.Errorf("a longer kill changed the grace period: %d s left, want 20", now())
	}
	o.clock.Step(15 * time.Second)
	if got := now(); got != 5 {
		t.Errorf("15 s later: %d s left, want 5", got)
	}
	o.clock.Step(time.Minute)
	if got := now(); got != 1 {
		t.Errorf("past the deadline: %d s left, want at least 1", got)
	}
	if !p.Kill(0, true) || now() != 0 {
		t.Errorf("a forced kill with 0 s: %d s left, want 0", now())
	}
	q := newFakeOwner().pods()
	if q.Kill(0, false); q.RemainingGrace(q.o.Clock().Now()) != 1 {
		t.Errorf("an unforced kill with 0 s: %d s, want 1", q.RemainingGrace(q.o.Clock().Now()))
	}
}

// TestGrace reads a kill's grace period from the pod: the deletion's when
// set, shorter or longer than the spec's, else the spec's, else kubelet's
// 30 s default; 0 asked for explicitly is forced.
func TestGrace(t *testing.T) {
	ten, zero, long := int64(10), int64(0), int64(120)
	for _, tc := range []struct {
		tgps, dgps *int64
		want       int64
		forced     bool
	}{
		{nil, nil, 30, false},
		{&ten, nil, 10, false},
		{nil, &ten, 10, false},
		{&ten, &zero, 0, true},
		{nil, &long, 120, false},
		{&ten, &long, 120, false},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{TerminationGracePeriodSeconds: tc.tgps}}
		pod.DeletionGracePeriodSeconds = tc.dgps
		if got, forced := Grace(pod), ForcedKill(pod); got != tc.want || forced != tc.forced {
			t.Errorf("spec %v deletion %v: %d s forced %v, want %d forced %v", tc.tgps, tc.dgps, got, forced, tc.want, tc.forced)
		}
	}
}

// TestActiveDeadline counts spec.activeDeadlineSeconds from the pod's start
// (the first sync sets it); none without a deadline or a start.
func TestActiveDeadline(t *testing.T) {
	o := newFakeOwner()
	p := o.pods()
	if d := p.ActiveDeadline(); d >= 0 {
		t.Errorf("no deadline: %v, want no timer", d)
	}
	ads := int64(60)
	o.pod.Spec.ActiveDeadlineSeconds = &ads
	if d := p.ActiveDeadline(); d >= 0 {
		t.Errorf("not started: %v, want no timer", d)
	}
	p.SyncPod() // the first sync sets the start time
	o.clock.Step(45 * time.Second)
	if d := p.ActiveDeadline(); d != 15*time.Second {
		t.Errorf("45 s after the start: %v, want 15s", d)
	}
	o.clock.Step(time.Minute)
	if d := p.ActiveDeadline(); d != 0 {
		t.Errorf("past the deadline: %v, want 0", d)
	}
	_ = op.Exec(t.Context(), nil, p.ExceedDeadline())
	if !p.DeadlineExceeded() || len(o.events) != 1 {
		t.Errorf("exceed_deadline: exceeded %v, events %q", p.DeadlineExceeded(), o.events)
	}
}

// TestMountVolumes: a volume that never mounted holds the sync back with
// FailedMount; once it mounted, a failing refresh is an event only.
func TestMountVolumes(t *testing.T) {
	o := newFakeOwner()
	o.pod.Spec.Volumes = []v1.Volume{{Name: "cfg"}}
	p := o.pods()
	o.setup = errors.Join(&volume.MountError{Volume: "cfg", Err: errors.New(`configmap "c" not found`)})
	if err := op.Exec(t.Context(), nil, p.MountVolumes()); err == nil {
		t.Fatal("a volume that never mounted did not fail the mount")
	}
	o.setup = nil
	if err := op.Exec(t.Context(), nil, p.MountVolumes()); err != nil {
		t.Fatalf("mounted: %v", err)
	}
	o.setup = errors.Join(&volume.MountError{Volume: "cfg", Err: errors.New("refresh failed")})
	if err := op.Exec(t.Context(), nil, p.MountVolumes()); err != nil {
		t.Errorf("a failing refresh of a mounted volume failed the mount: %v", err)
	}
	if len(o.events) != 2 {
		t.Errorf("events %q, want a FailedMount for each failure", o.events)
	}
}

// TestReleaseName: the static pod's name stays taken while a sandbox of the
// pod may still run.
func TestReleaseName(t *testing.T) {
	o := newFakeOwner()
	p := o.pods()
	for _, st := range []fsm.SandboxState{fsm.SandboxStateReady, fsm.SandboxStateStopping, fsm.SandboxStateUnknown} {
		o.sandbox = st
		if err := op.Exec(t.Context(), nil, p.ReleaseName()); err == nil || o.freed != 0 {
			t.Errorf("sandbox %s: the name was freed", st)
		}
	}
	o.sandbox = fsm.SandboxStateStopped
	if err := op.Exec(t.Context(), nil, p.ReleaseName()); err != nil || o.freed != 1 {
		t.Errorf("sandbox stopped: %v, freed %d", err, o.freed)
	}
}

// TestDeliveries: sync delivers update, the volumes, create to the sandbox
// and, once it is ready, start to the containers; a dead sandbox's
// containers hear of it first. Removal delivers removed after the volumes
// and sandboxes are gone.
func TestDeliveries(t *testing.T) {
	o := newFakeOwner()
	o.sandbox = fsm.SandboxStateDead
	p := o.pods()
	if err := op.Exec(t.Context(), nil, p.SyncPod()); err != nil {
		t.Fatal(err)
	}
	want := []string{"update", "containers sandbox_died", "sandbox create"}
	if !slices.Equal(o.delivered, want) || !slices.Equal(o.raised, []fsm.PodEvent{fsm.PodEventSyncFailed}) {
		t.Errorf("sync with a dead sandbox: delivered %q, raised %v; want %q and sync_failed", o.delivered, o.raised, want)
	}
	o.delivered, o.raised, o.sandbox = nil, nil, fsm.SandboxStateReady
	_ = op.Exec(t.Context(), nil, p.SyncPod())
	if want := []string{"update", "sandbox create", "start"}; !slices.Equal(o.delivered, want) || !slices.Equal(o.raised, []fsm.PodEvent{fsm.PodEventSyncOk}) {
		t.Errorf("sync with a ready sandbox: delivered %q, raised %v", o.delivered, o.raised)
	}
	o.delivered, o.raised = nil, nil
	if err := op.Exec(t.Context(), nil, p.RemovePod()); err == nil || len(o.delivered) != 0 {
		t.Errorf("remove before the sandbox stopped: %v, delivered %q", err, o.delivered)
	}
	o.sandbox = fsm.SandboxStateStopped
	if err := op.Exec(t.Context(), nil, p.RemovePod()); err != nil || !slices.Equal(o.delivered, []string{"removed"}) ||
		!slices.Equal(o.raised, []fsm.PodEvent{fsm.PodEventCleanupDone}) {
		t.Errorf("remove: %v, delivered %q, raised %v", err, o.delivered, o.raised)
	}
}

// TestEnsurePodCgroup: a sync without a ready sandbox makes the pod's
// cgroup first, before its volumes (kubelet's SyncPod), so that it exists
// while the volumes mount; with a ready sandbox it is left alone. A cgroup
// that cannot be made fails the sync with kubelet's event before any volume
// or runtime call.
func TestEnsurePodCgroup(t *testing.T) {
	o := newFakeOwner()
	o.cgroups = true
	p := o.pods()
	_ = op.Exec(t.Context(), nil, p.SyncPod())
	if want := []string{"cgroup u", "mount"}; !slices.Equal(o.host, want) {
		t.Errorf("first sync: %q, want %q", o.host, want)
	}
	o.host, o.sandbox = nil, fsm.SandboxStateReady
	_ = op.Exec(t.Context(), nil, p.SyncPod())
	if want := []string{"mount"}; !slices.Equal(o.host, want) {
		t.Errorf("sync with a ready sandbox: %q, want %q", o.host, want)
	}
	o.host, o.delivered, o.raised, o.sandbox = nil, nil, nil, fsm.SandboxStateDead
	o.ensure = errors.New("mkdir /sys/fs/cgroup/memory/kubepods/podu: permission denied")
	err := op.Exec(t.Context(), nil, p.SyncPod())
	if want := []string{"cgroup u"}; !slices.Equal(o.host, want) || !slices.Equal(o.raised, []fsm.PodEvent{fsm.PodEventSyncFailed}) ||
		slices.Contains(o.delivered, "sandbox create") || err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("cgroup failure: host %q, delivered %q, raised %v, err %v; want the cgroup only, sync_failed and its error", o.host, o.delivered, o.raised, err)
	}
	if want := "Warning FailedToCreatePodContainer: unable to ensure pod container exists: mkdir /sys/fs/cgroup/memory/kubepods/podu: permission denied"; !slices.Contains(o.events, want) {
		t.Errorf("events %q, want %q", o.events, want)
	}
	o.host, o.cgroups, o.sandbox = nil, false, fsm.SandboxStateDead
	_ = op.Exec(t.Context(), nil, p.SyncPod())
	if want := []string{"mount"}; !slices.Equal(o.host, want) {
		t.Errorf("without pod cgroups: %q, want %q", o.host, want)
	}
}
