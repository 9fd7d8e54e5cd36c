package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/podspec"
)

// TestPostCoalesces: only the newest pending config update counts, and a
// pending kill is never replaced by a later add or update.
func TestPostCoalesces(t *testing.T) {
	pod := func(image string, grace int64) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"},
			Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{{Name: "c", Image: image}}}}
	}
	type post struct {
		op    config.Op
		image string
	}
	for _, tc := range []struct {
		name      string
		posts     []post
		wantOp    config.Op
		wantImage string
	}{
		{"newest update wins", []post{{config.OpAdd, "a"}, {config.OpUpdate, "b"}, {config.OpUpdate, "c"}}, config.OpUpdate, "c"},
		{"kill is kept over a later add", []post{{config.OpAdd, "a"}, {config.OpRemove, "a"}, {config.OpAdd, "b"}}, config.OpRemove, "a"},
		{"a later kill replaces an update", []post{{config.OpUpdate, "a"}, {config.OpDelete, "b"}}, config.OpDelete, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{clock: clocktesting.NewFakeClock(time.Now())}
			w := newPodWorker(e, pod("x", 30), nil)
			for _, p := range tc.posts {
				w.post(input{kind: inputConfig, op: p.op, pod: pod(p.image, 30)})
			}
			w.post(input{kind: inputSync})
			ins, _, cancel := w.take(context.Background())
			defer cancel()
			if len(ins) != 2 {
				t.Fatalf("took %d inputs, want the coalesced config input and the sync", len(ins))
			}
			if got := ins[0]; got.kind != inputConfig || got.op != tc.wantOp || got.pod.Spec.Containers[0].Image != tc.wantImage {
				t.Errorf("config input = %v %s, want %v %s", got.op, got.pod.Spec.Containers[0].Image, tc.wantOp, tc.wantImage)
			}
			if ins[1].kind != inputSync {
				t.Errorf("second input kind = %v, want the sync", ins[1].kind)
			}
		})
	}
}

// TestKillCancelsRunningActions: the first kill, and a kill with a shorter
// grace period, cancel the actions in progress; a repeated kill does not.
func TestKillCancelsRunningActions(t *testing.T) {
	e := &Engine{clock: clocktesting.NewFakeClock(time.Now())}
	mk := func(g int64) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Spec: v1.PodSpec{TerminationGracePeriodSeconds: &g}}
	}
	w := newPodWorker(e, mk(30), nil)
	steps := []struct {
		grace      int64
		wantCancel bool
	}{{30, true}, {30, false}, {5, true}, {10, false}}
	for i, s := range steps {
		_, ctx, cancel := w.take(context.Background())
		w.post(input{kind: inputConfig, op: config.OpRemove, pod: mk(s.grace)})
		if got := ctx.Err() != nil; got != s.wantCancel {
			t.Errorf("kill %d (grace %d s): cancelled = %t, want %t", i, s.grace, got, s.wantCancel)
		}
		cancel()
	}
}

// TestRelistDiff: the PLEG relist reports a container's start, death and
// removal once each, from the simulated runtime's ListContainers.
func TestRelistDiff(t *testing.T) { synctest.Test(t, testRelistDiff) }

func testRelistDiff(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	p := newPLEG(h.rt, h.clk)
	pod := benchPod(1)
	sc, _ := sandboxConfig(podspec.Node{RootDir: t.TempDir()}, pod, 0, "")
	sb, err := h.rt.RunPodSandbox(ctx, sc, "")
	if err != nil {
		t.Fatal(err)
	}
	cc, _ := containerConfig(podspec.Node{}, pod, &pod.Spec.Containers[0], 0, "", false, podspec.ImageUser{})
	id, err := h.rt.CreateContainer(ctx, sb, cc, sc)
	if err != nil {
		t.Fatal(err)
	}
	relist := func() []plegType {
		t.Helper()
		evs, err := p.Relist(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []plegType
		for _, ev := range evs {
			if ev.ContainerID != id || ev.UID != pod.UID || ev.Name != "app" {
				t.Errorf("event %+v is not about container %s of pod %s", ev, id, pod.UID)
			}
			out = append(out, ev.Type)
		}
		return out
	}
	check := func(step string, got []plegType, want ...plegType) {
		t.Helper()
		if len(got) != len(want) || (len(want) == 1 && got[0] != want[0]) {
			t.Errorf("%s: events %v, want %v", step, got, want)
		}
	}
	check("created", relist())
	if err := h.rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	check("started", relist(), containerStarted)
	check("no change", relist())
	if err := h.rt.StopContainer(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	check("stopped", relist(), containerDied)
	if err := h.rt.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	check("removed", relist(), containerRemoved)
	check("gone", relist())
	if err := p.Healthy(); err != nil {
		t.Errorf("healthy after relists: %v", err)
	}
	h.clk.Step(relistUnhealthyAfter + time.Second)
	if err := p.Healthy(); err == nil {
		t.Errorf("healthy 3 minutes after the last relist, want PLEG is not healthy")
	}
}

// listGate is a runtime whose ListContainers returns a fixed list only when
// released, so a test can feed the event stream while a relist is in flight.
type listGate struct {
	cri.Runtime
	list    []*runtimeapi.Container
	entered chan struct{}
	release chan struct{}
}

func (g *listGate) ListContainers(ctx context.Context, _ *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.list, nil
}

func (g *listGate) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return nil, nil
}

// TestRelistDoesNotUndoTheStream: a container the event stream reports
// while a relist's ListContainers is in flight is neither reported removed
// (the list predates it) nor reset to the list's older state.
func TestRelistDoesNotUndoTheStream(t *testing.T) {
	labels := map[string]string{LabelPodUID: "u", LabelContainerName: "app"}
	old := &runtimeapi.Container{Id: "old", Labels: labels, State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	g := &listGate{list: []*runtimeapi.Container{old}, entered: make(chan struct{}), release: make(chan struct{})}
	p := newPLEG(g, clocktesting.NewFakeClock(time.Now()))
	p.seen["old"] = containerRecord{uid: "u", name: "app", state: runtimeapi.ContainerState_CONTAINER_RUNNING}

	type result struct {
		evs []plegEvent
		err error
	}
	done := make(chan result)
	go func() {
		evs, err := p.Relist(context.Background())
		done <- result{evs, err}
	}()
	<-g.entered
	// While the list is in flight: a new container starts, the old one dies.
	st := func(id string, s runtimeapi.ContainerState) *runtimeapi.ContainerEventResponse {
		return &runtimeapi.ContainerEventResponse{ContainerId: id,
			ContainerEventType: map[runtimeapi.ContainerState]runtimeapi.ContainerEventType{
				runtimeapi.ContainerState_CONTAINER_RUNNING: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
				runtimeapi.ContainerState_CONTAINER_EXITED:  runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
			}[s],
			ContainersStatuses: []*runtimeapi.ContainerStatus{{Id: id, State: s, Labels: labels}}}
	}
	if ev, ok := p.Observe(st("new", runtimeapi.ContainerState_CONTAINER_RUNNING)); !ok || ev.Type != containerStarted {
		t.Fatalf("stream start of new: %v %v, want ContainerStarted", ev, ok)
	}
	if ev, ok := p.Observe(st("old", runtimeapi.ContainerState_CONTAINER_EXITED)); !ok || ev.Type != containerDied {
		t.Fatalf("stream death of old: %v %v, want ContainerDied", ev, ok)
	}
	close(g.release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.evs) != 0 {
		t.Errorf("the stale relist reported %+v, want nothing", r.evs)
	}
	if rec := p.seen["new"]; rec.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("new container state = %v, want RUNNING (from the stream)", rec.state)
	}
	if rec := p.seen["old"]; rec.state != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("old container state = %v, want EXITED (from the stream, not the stale list)", rec.state)
	}
}
