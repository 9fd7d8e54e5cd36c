package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/cri"
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
	id := createContainer(t, h.rt, pod)
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

// createContainer runs a sandbox for pod in rt and creates its first
// container there, with speclet's labels (engine/runtimepods) and nothing
// else; it returns the container's ID.
func createContainer(tb testing.TB, rt cri.Runtime, pod *v1.Pod) string {
	tb.Helper()
	ctx := context.Background()
	sc, err := podspec.Sandbox(podspec.Node{RootDir: tb.TempDir()}, podspec.SandboxRequest{Pod: pod, Labels: runtimepods.PodLabels(pod)})
	if err != nil {
		tb.Fatal(err)
	}
	sc.LogDirectory = ""
	sb, err := rt.RunPodSandbox(ctx, sc, "")
	if err != nil {
		tb.Fatal(err)
	}
	c := &pod.Spec.Containers[0]
	cc, err := podspec.Container(podspec.Node{}, podspec.ContainerRequest{Pod: pod, Container: c, Labels: runtimepods.ContainerLabels(pod, c.Name)})
	if err != nil {
		tb.Fatal(err)
	}
	id, err := rt.CreateContainer(ctx, sb, cc, sc)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}
