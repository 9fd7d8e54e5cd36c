package containerdtest

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/fsm"
)

// debugAgrees returns why d's machine states disagree with its history (a
// machine whose newest transition ends elsewhere than its state), or "".
func debugAgrees(d engine.PodDebug) string {
	last := map[string]string{}
	for _, t := range d.History {
		last[t.Machine+"/"+t.Instance] = t.To
	}
	for _, m := range d.Machines {
		if to, ok := last[m.Machine+"/"+m.Instance]; ok && to != m.State {
			return fmt.Sprintf("%s/%s is %s, its newest transition went to %s", m.Machine, m.Instance, m.State, to)
		}
	}
	return ""
}

// TestContainerdDebugWhileStopping: a pod whose container traps SIGTERM is
// removed with a 20 s grace period on a real containerd. While StopContainer
// waits out the grace period, /debug/pods/{name} (Engine.PodHistory) shows
// the pod terminating and the container stopping, and every machine's
// state is where its newest transition in the same answer went.
func TestContainerdDebugWhileStopping(t *testing.T) {
	c, ctx := containerdFor(t, 3*time.Minute)
	pod := shPod(c, "slow", "", 20, `trap "" TERM; while true; do sleep 0.2; done`)
	rt, e, updates := startPods(ctx, t, c, engine.Config{}, pod)
	waitPhase(t, ctx, e, "slow", v1.PodRunning)

	removed := time.Now()
	removePods(updates, pod)
	state := func(d engine.PodDebug, machine, instance string) string {
		for _, m := range d.Machines {
			if m.Machine == machine && m.Instance == instance {
				return m.State
			}
		}
		return ""
	}
	// Poll through the first 5 s of the grace period: every answer agrees
	// with itself; at the end the stop shows.
	var d engine.PodDebug
	for time.Since(removed) < 5*time.Second {
		var ok bool
		d, ok = e.PodHistory("slow")
		if !ok {
			t.Fatal("/debug/pods/slow: no pod")
		}
		if why := debugAgrees(d); why != "" {
			t.Fatalf("states and history disagree: %s\n%+v", why, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if state(d, fsm.PodMachineName, "") != "terminating" || state(d, fsm.ContainerMachineName, "main") != "stopping" {
		t.Fatalf("5 s into a 20 s grace period: machines %+v, want pod terminating and container/main stopping", d.Machines)
	}
	waitFor(t, ctx, "runtime empty", runtimeEmpty(ctx, rt), e)
}
