package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/runtimepods"
)

// TestRelistDiff: the PLEG relist reports a container's start, death and
// removal once each, from the simulated runtime's ListContainers.
func TestRelistDiff(t *testing.T) { synctest.Test(t, testRelistDiff) }

func testRelistDiff(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	p := pleg.New(h.rt, h.clk, runtimepods.Identify)
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
	relist := func() []pleg.Type {
		t.Helper()
		evs, err := p.Relist(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []pleg.Type
		for _, ev := range evs {
			if ev.ContainerID != id || ev.UID != pod.UID || ev.Name != "app" {
				t.Errorf("event %+v is not about container %s of pod %s", ev, id, pod.UID)
			}
			out = append(out, ev.Type)
		}
		return out
	}
	check := func(step string, got []pleg.Type, want ...pleg.Type) {
		t.Helper()
		if len(got) != len(want) || (len(want) == 1 && got[0] != want[0]) {
			t.Errorf("%s: events %v, want %v", step, got, want)
		}
	}
	check("created", relist())
	if err := h.rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	check("started", relist(), pleg.ContainerStarted)
	check("no change", relist())
	if err := h.rt.StopContainer(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	check("stopped", relist(), pleg.ContainerDied)
	if err := h.rt.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	check("removed", relist(), pleg.ContainerRemoved)
	check("gone", relist())
	if err := p.Healthy(); err != nil {
		t.Errorf("healthy after relists: %v", err)
	}
	h.clk.Step(pleg.UnhealthyAfter + time.Second)
	if err := p.Healthy(); err == nil {
		t.Errorf("healthy 3 minutes after the last relist, want PLEG is not healthy")
	}
}

// TestPublishStatusUnchanged: a status equal to the one last published for
// the same pod object is not published again; a new pod object is.
func TestPublishStatusUnchanged(t *testing.T) {
	e, err := New(Config{Runtime: nopRuntime{}, NodeName: "node-a", RootDir: t.TempDir(), Clock: clocktesting.NewFakeClock(time.Now()),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	e.cfg.PublishedPod = func(*v1.Pod) { calls++ }
	pod := benchPod(0)
	w := newPodWorker(&e.host, pod, nil)
	w.st = newPodState(w, pod, nil)
	w.publishStatus()
	first := w.pubStatus
	w.publishStatus()
	if w.pubStatus != first || calls != 1 {
		t.Errorf("same status published again: %d calls, same status %v", calls, w.pubStatus == first)
	}
	updated := *pod
	updated.Labels = map[string]string{"a": "b"}
	w.st.pod = &updated
	w.publishStatus()
	if got := w.snapshot(); w.pubStatus == first || calls != 2 || got.Labels["a"] != "b" {
		t.Errorf("updated pod not published: %d calls, same status %v", calls, w.pubStatus == first)
	}
	if got := w.snapshot(); got.Spec.NodeName != e.cfg.NodeName || got.Status.Phase != w.pubStatus.Phase || got.UID != pod.UID {
		t.Errorf("published pod: node %q, phase %q, UID %q; want %q, %q, %q", got.Spec.NodeName, got.Status.Phase, got.UID, e.cfg.NodeName, w.pubStatus.Phase, pod.UID)
	}
}
