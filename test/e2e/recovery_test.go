package e2e

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The tests of this file disturb the shared daemon or containerd, so they are
// sequential: Go runs them before the parallel tests start.

// TestRestartAdoptsRunningPods stops speclet with SIGTERM and then with
// kill -9; each time the pod keeps running, and the next speclet adopts it:
// same container, no restart, no duplicate container or sandbox.
func TestRestartAdoptsRunningPods(t *testing.T) {
	c, d := env(t)
	d.dumpOnFailure(t, "adopt")
	d.writeManifest(t, "adopt", podSpec{name: "adopt", grace: 1, containers: []ctr{{name: "main", command: handlesTERM}}}.yaml(c))
	p := d.waitPod(t, "adopt", 2*time.Minute, "Running", isRunning)
	id := containerStatus(p, "main").ContainerID
	_, sbs := runtimeObjects(t, "adopt")
	if len(sbs) != 1 {
		t.Fatalf("%d sandboxes before the restart, want 1", len(sbs))
	}
	sandbox := sbs[0].Id

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if err := d.signal(sig); err != nil {
			t.Fatal(err)
		}
		ctrs, _ := runtimeObjects(t, "adopt")
		if len(ctrs) != 1 || ctrs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("after %s of speclet the pod's container is not running: %v", sig, ctrs)
		}
		if err := d.start(); err != nil {
			t.Fatal(err)
		}
		p = d.waitPod(t, "adopt", 2*time.Minute, "Running after the restart", isRunning)
		cs := containerStatus(p, "main")
		if cs.ContainerID != id || cs.RestartCount != 0 {
			t.Errorf("after %s and a restart: container %s restarts %d; want the adopted %s with 0 restarts", sig, cs.ContainerID, cs.RestartCount, id)
		}
		// Give the new daemon a few syncs to do something wrong.
		time.Sleep(5 * time.Second)
		ctrs, sbs = runtimeObjects(t, "adopt")
		if len(ctrs) != 1 || ctrs[0].Id != runtimeID(id) || ctrs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING ||
			len(sbs) != 1 || sbs[0].Id != sandbox {
			t.Errorf("after %s and a restart the runtime holds %d containers and %d sandboxes; want the one running container %s in sandbox %s",
				sig, len(ctrs), len(sbs), id, sandbox)
		}
	}
}

// TestContainerdRestartIsSurvived restarts containerd under a running
// speclet: the pod keeps its container, speclet stays healthy and still
// starts new pods.
func TestContainerdRestartIsSurvived(t *testing.T) {
	c, d := env(t)
	d.dumpOnFailure(t, "survive")
	d.writeManifest(t, "survive", podSpec{name: "survive", grace: 1, containers: []ctr{{name: "main", command: handlesTERM}}}.yaml(c))
	p := d.waitPod(t, "survive", 2*time.Minute, "Running", isRunning)
	id := containerStatus(p, "main").ContainerID

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Restart(ctx); err != nil {
		t.Fatalf("restart containerd: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(d.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("speclet not healthy within a minute of the containerd restart")
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.writeManifest(t, "after", podSpec{name: "after", grace: 1, containers: []ctr{{name: "main", command: handlesTERM}}}.yaml(c))
	d.waitPod(t, "after", 2*time.Minute, "Running (started after the containerd restart)", isRunning)
	p = d.waitPod(t, "survive", time.Minute, "Running", isRunning)
	if cs := containerStatus(p, "main"); cs.ContainerID != id || cs.RestartCount != 0 {
		t.Errorf("after the containerd restart: container %s restarts %d; want %s with 0 restarts:\n%s", cs.ContainerID, cs.RestartCount, id, describePod(p))
	}
	if d.cmd == nil || d.cmd.ProcessState != nil {
		t.Error("speclet exited during the containerd restart")
	}
}

// TestCompletedPodSurvivesRestart: a restartPolicy Never pod that completed
// keeps its exited container and its stopped sandbox while its manifest
// declares it, as kubelet keeps them; after kill -9 of speclet the new
// daemon reads the outcome from them and does not run the pod again; the
// manifest's removal takes them away.
func TestCompletedPodSurvivesRestart(t *testing.T) {
	c, d := env(t)
	d.dumpOnFailure(t, "done")
	d.writeManifest(t, "done", podSpec{name: "done", restartPolicy: "Never", grace: 1,
		containers: []ctr{{name: "main", command: "exit 0"}}}.yaml(c))
	succeeded := func(p *v1.Pod) bool { return p != nil && p.Status.Phase == v1.PodSucceeded }
	p := d.waitPod(t, "done", 2*time.Minute, "Succeeded", succeeded)
	id := containerStatus(p, "main").ContainerID
	kept := func(when string) {
		t.Helper()
		ctrs, sbs := runtimeObjects(t, "done")
		if len(ctrs) != 1 || ctrs[0].Id != runtimeID(id) || ctrs[0].State != runtimeapi.ContainerState_CONTAINER_EXITED ||
			len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			t.Fatalf("%s: the runtime holds containers %s and sandboxes %s; want the exited container %s and one stopped sandbox",
				when, describeContainers(ctrs), describeSandboxes(sbs), id)
		}
	}
	// The sandbox is stopped right after the phase turns Succeeded.
	deadline := time.Now().Add(time.Minute)
	for {
		_, sbs := runtimeObjects(t, "done")
		if len(sbs) == 1 && sbs[0].State == runtimeapi.PodSandboxState_SANDBOX_NOTREADY || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	kept("completed")

	if err := d.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	p = d.waitPod(t, "done", 2*time.Minute, "Succeeded after the restart", succeeded)
	if cs := containerStatus(p, "main"); cs.ContainerID != id || cs.RestartCount != 0 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
		t.Errorf("after the restart: %s; want the completed container %s, exit 0, 0 restarts", describePod(p), id)
	}
	// Give the new daemon a few syncs to run it again by mistake.
	time.Sleep(5 * time.Second)
	kept("after kill -9 and a restart")

	d.removeManifest(t, "done")
	deadline = time.Now().Add(time.Minute)
	for {
		ctrs, sbs := runtimeObjects(t, "done")
		if len(ctrs)+len(sbs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the manifest's removal the runtime still holds containers %s and sandboxes %s",
				describeContainers(ctrs), describeSandboxes(sbs))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
