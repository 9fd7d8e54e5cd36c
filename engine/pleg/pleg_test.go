package pleg

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/cri"
)

// identify is the tests' labels: "uid" and "name".
func identify(labels map[string]string) (types.UID, string) {
	return types.UID(labels["uid"]), labels["name"]
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
	labels := map[string]string{"uid": "u", "name": "app"}
	old := &runtimeapi.Container{Id: "old", Labels: labels, State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	g := &listGate{list: []*runtimeapi.Container{old}, entered: make(chan struct{}), release: make(chan struct{})}
	p := New(g, clocktesting.NewFakeClock(time.Now()), identify)
	p.seen["old"] = containerRecord{uid: "u", name: "app", state: runtimeapi.ContainerState_CONTAINER_RUNNING}

	type result struct {
		evs []Event
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
	if ev, ok := p.Observe(st("new", runtimeapi.ContainerState_CONTAINER_RUNNING)); !ok || ev.Type != ContainerStarted {
		t.Fatalf("stream start of new: %v %v, want ContainerStarted", ev, ok)
	}
	if ev, ok := p.Observe(st("old", runtimeapi.ContainerState_CONTAINER_EXITED)); !ok || ev.Type != ContainerDied {
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

// lister is a runtime whose lists are what the test sets.
type lister struct {
	cri.Runtime
	containers []*runtimeapi.Container
	sandboxes  []*runtimeapi.PodSandbox
}

func (l *lister) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return l.containers, nil
}

func (l *lister) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return l.sandboxes, nil
}

// TestSeedIsNotNews: what recovery found in the runtime is no event at the
// first relist; a change after it is; objects without a pod UID are never
// considered; Known keeps a container the engine forgot until a relist
// confirms it gone, UIDs does not.
func TestSeedIsNotNews(t *testing.T) {
	labels := map[string]string{"uid": "u", "name": "app"}
	running := &runtimeapi.Container{Id: "c1", Labels: labels, State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	foreign := &runtimeapi.Container{Id: "x", Labels: map[string]string{"other": "1"}, State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	sb := &runtimeapi.PodSandbox{Id: "s1", Labels: labels, State: runtimeapi.PodSandboxState_SANDBOX_READY}
	rt := &lister{containers: []*runtimeapi.Container{running, foreign}, sandboxes: []*runtimeapi.PodSandbox{sb}}
	p := New(rt, clocktesting.NewFakeClock(time.Now()), identify)
	p.Seed(rt.sandboxes, rt.containers)
	if evs, err := p.Relist(context.Background()); err != nil || len(evs) != 0 {
		t.Fatalf("first relist after Seed: %+v, %v; want no events", evs, err)
	}
	rt.containers = []*runtimeapi.Container{{Id: "c1", Labels: labels, State: runtimeapi.ContainerState_CONTAINER_EXITED}, foreign}
	evs, err := p.Relist(context.Background())
	if err != nil || len(evs) != 1 || evs[0].Type != ContainerDied || evs[0].UID != "u" || evs[0].Name != "app" {
		t.Fatalf("relist after the death: %+v, %v; want one ContainerDied of u/app", evs, err)
	}
	p.Forget("c1")
	p.ForgetSandbox("s1")
	rt.sandboxes = nil
	if got := p.UIDs(); !got["u"] || len(got) != 1 {
		t.Errorf("UIDs with the sandbox still recorded = %v, want only u", got)
	}
	if got := p.Known(); !got["u"] {
		t.Errorf("Known = %v, want u (the forgotten container is not confirmed gone)", got)
	}
	rt.containers = []*runtimeapi.Container{foreign}
	if evs, err := p.Relist(context.Background()); err != nil || len(evs) != 0 {
		t.Fatalf("relist after the engine removed what it forgot: %+v, %v; want no events", evs, err)
	}
	if got := p.Known(); len(got) != 0 {
		t.Errorf("Known after the relist confirmed everything gone = %v, want none", got)
	}
}
