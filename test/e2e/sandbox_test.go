package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine"
)

// TestSandboxDeath kills the pause process of two running pods behind
// speclet's back (as the OOM killer or a stray kill -9 would) and checks
// kubelet's answer to a dead sandbox, as kubelet v1.34 shows it on this
// setup: the restartPolicy Always pod gets a new sandbox (attempt 1) and
// its container restarts (restartCount 1); the restartPolicy Never pod,
// whose container has run, gets no new sandbox and goes Failed. Removing the
// manifests then leaves nothing of either pod in the runtime.
func TestSandboxDeath(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "sbdeath")
	const always, never = "sbdeath-always", "sbdeath-never"
	d.writeManifest(t, always, podSpec{name: always, restartPolicy: "Always", grace: 1,
		containers: []ctr{{name: "main", command: handlesTERM}}}.yaml(c))
	// PID 1 ignores SIGTERM: the stop ends in SIGKILL (137), a failure
	// whatever the engine's grace period, so the pod cannot pass as
	// Succeeded.
	d.writeManifest(t, never, podSpec{name: never, restartPolicy: "Never", grace: 1,
		containers: []ctr{{name: "main", command: ignoresTERM}}}.yaml(c))
	pa := d.waitPod(t, always, 2*time.Minute, "Running", isRunning)
	pn := d.waitPod(t, never, 2*time.Minute, "Running", isRunning)
	oldAlwaysCtr := containerStatus(pa, "main").ContainerID

	oldSandbox := map[string]string{} // pod -> its attempt-0 sandbox id
	for _, p := range []*v1.Pod{pa, pn} {
		name := strings.TrimSuffix(p.Name, "-"+nodeName)
		sbs := podSandboxes(t, p.UID)
		if len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY || sbs[0].Metadata.Attempt != 0 {
			t.Fatalf("pod %s before the kill: sandboxes %s; want one READY sandbox with attempt 0", name, describeSandboxes(sbs))
		}
		oldSandbox[name] = sbs[0].Id
		// The pause process's pid comes from containerd's own record
		// (verbose PodSandboxStatus), checked against the sandbox's cgroup
		// and the pause command before the kill; see harness.KillSandbox.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		pid, err := c.KillSandbox(ctx, sbs[0].Id)
		cancel()
		if err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		t.Logf("pod %s: killed pause process %d of sandbox %.12s; it is gone and containerd reports the sandbox NOTREADY", name, pid, sbs[0].Id)
		// What the runtime shows of the pod right after its sandbox died,
		// before the agent reacts (a fact about containerd, logged for the
		// simulated runtime's KillSandbox to follow).
		ctrs, _ := runtimeObjects(t, name)
		t.Logf("pod %s right after its pause process was killed: sandboxes %s; containers %s",
			name, describeSandboxes(podSandboxes(t, p.UID)), describeContainers(ctrs))
	}

	// Bounded wait for both outcomes; a new sandbox of the Never pod at any
	// moment is an error.
	var (
		lastA, lastN       *v1.Pod
		sbsA, sbsN         []*runtimeapi.PodSandbox
		alwaysOK, neverOK  bool
		neverGotNewSandbox string
	)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && !(alwaysOK && neverOK) {
		lastA, lastN = d.pod(t, always), d.pod(t, never)
		sbsA, sbsN = podSandboxes(t, pa.UID), podSandboxes(t, pn.UID)
		if s := newerThanFirst(sbsN); s != nil && neverGotNewSandbox == "" {
			neverGotNewSandbox = describeSandboxes(sbsN)
		}
		alwaysOK = recreatedAndRestarted(lastA, sbsA, oldAlwaysCtr) == ""
		neverOK = lastN != nil && lastN.Status.Phase == v1.PodFailed
		time.Sleep(200 * time.Millisecond)
	}
	// Once Failed, the Never pod stays without a new sandbox: a few more
	// relists must not bring one.
	for end := time.Now().Add(3 * time.Second); neverOK && time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		sbsN = podSandboxes(t, pn.UID)
		if s := newerThanFirst(sbsN); s != nil && neverGotNewSandbox == "" {
			neverGotNewSandbox = describeSandboxes(sbsN)
		}
	}
	if why := recreatedAndRestarted(lastA, sbsA, oldAlwaysCtr); why != "" {
		t.Errorf("restartPolicy Always pod: within 60s of its pause process being killed, %s\nsandboxes: %s\npod:\n%s",
			why, describeSandboxes(sbsA), describePod(lastA))
	}
	if lastN == nil || lastN.Status.Phase != v1.PodFailed {
		t.Errorf("restartPolicy Never pod: not Failed within 60s of its pause process being killed\nsandboxes: %s\npod:\n%s",
			describeSandboxes(sbsN), describePod(lastN))
	} else if cs := containerStatus(lastN, "main"); cs == nil || cs.State.Terminated == nil || cs.RestartCount != 0 {
		t.Errorf("restartPolicy Never pod Failed, but want its container terminated with 0 restarts:\n%s", describePod(lastN))
	}
	if neverGotNewSandbox != "" {
		t.Errorf("restartPolicy Never pod got a new sandbox after its containers had run: %s", neverGotNewSandbox)
	}
	for _, s := range sbsN {
		if s.Id == oldSandbox[never] && s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Errorf("restartPolicy Never pod: its killed sandbox %s reads READY", s.Id)
		}
	}

	// Removing the manifests leaves nothing of either pod in the runtime:
	// the dead sandboxes included.
	d.removeManifest(t, always)
	d.removeManifest(t, never)
	d.waitGone(t, always, 2*time.Minute)
	d.waitGone(t, never, 2*time.Minute)
	for _, uid := range []types.UID{pa.UID, pn.UID} {
		if sbs := podSandboxes(t, uid); len(sbs) != 0 {
			t.Errorf("pod uid %s: runtime still holds sandboxes %s after removal", uid, describeSandboxes(sbs))
		}
	}
}

// recreatedAndRestarted returns "" when the restartPolicy Always pod has
// recovered from its sandbox's death as kubelet does, else what is missing:
// a READY sandbox with attempt 1, no other sandbox READY, and the container
// running again, a new one, with restartCount 1.
func recreatedAndRestarted(p *v1.Pod, sbs []*runtimeapi.PodSandbox, oldContainerID string) string {
	var fresh *runtimeapi.PodSandbox
	for _, s := range sbs {
		if s.Metadata.Attempt == 1 && s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			fresh = s
		}
	}
	if fresh == nil {
		return "no READY sandbox with attempt 1 (the engine did not recreate the dead sandbox)"
	}
	for _, s := range sbs {
		if s != fresh && s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			return fmt.Sprintf("sandbox %s (attempt %d) is READY beside the new one", s.Id, s.Metadata.Attempt)
		}
	}
	cs := containerStatus(p, "main")
	switch {
	case cs == nil:
		return "the pod or its container is absent from /pods"
	case cs.State.Running == nil:
		return "the container is not running again"
	case cs.ContainerID == oldContainerID:
		return "the container shown is still the one of the dead sandbox"
	case cs.RestartCount != 1:
		return fmt.Sprintf("restartCount is %d, want 1", cs.RestartCount)
	}
	return ""
}

// newerThanFirst returns a sandbox with attempt > 0, or nil.
func newerThanFirst(sbs []*runtimeapi.PodSandbox) *runtimeapi.PodSandbox {
	for _, s := range sbs {
		if s.Metadata.Attempt > 0 {
			return s
		}
	}
	return nil
}

// podSandboxes lists the sandboxes of the pod with uid, by the pod UID label
// speclet puts on them, oldest attempt first.
func podSandboxes(t testing.TB, uid types.UID) []*runtimeapi.PodSandbox {
	t.Helper()
	sbs, err := shared.rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{engine.LabelPodUID: string(uid)}})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	sort.Slice(sbs, func(i, j int) bool { return sbs[i].Metadata.Attempt < sbs[j].Metadata.Attempt })
	return sbs
}

func describeSandboxes(sbs []*runtimeapi.PodSandbox) string {
	if len(sbs) == 0 {
		return "none"
	}
	var parts []string
	for _, s := range sbs {
		parts = append(parts, fmt.Sprintf("%.12s attempt=%d %s", s.Id, s.Metadata.Attempt, strings.TrimPrefix(s.State.String(), "SANDBOX_")))
	}
	return strings.Join(parts, ", ")
}

func describeContainers(cs []*runtimeapi.Container) string {
	if len(cs) == 0 {
		return "none"
	}
	var parts []string
	for _, c := range cs {
		st, err := shared.rt.ContainerStatus(context.Background(), c.Id)
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s %.12s %s (status: %v)", c.Metadata.Name, c.Id, c.State, err))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.12s attempt=%d %s exit=%d reason=%q", c.Metadata.Name, c.Id, c.Metadata.Attempt,
			strings.TrimPrefix(st.State.String(), "CONTAINER_"), st.ExitCode, st.Reason))
	}
	return strings.Join(parts, ", ")
}
