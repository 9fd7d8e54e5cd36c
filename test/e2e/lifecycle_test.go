package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri/harness"
)

func TestPodRuns(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "runs")
	d.writeManifest(t, "runs", podSpec{name: "runs", grace: 1, containers: []ctr{{name: "main", command: handlesTERM}}}.yaml(c))
	p := d.waitPod(t, "runs", 2*time.Minute, "Running", isRunning)
	cs := containerStatus(p, "main")
	if !cs.Ready || cs.Started == nil || !*cs.Started || cs.RestartCount != 0 || cs.ImageID == "" || cs.Image == "" {
		t.Errorf("container status of a running pod:\n%s", describePod(p))
	}
	// kubelet names container IDs <runtime name>://<id>, the name from the CRI Version call.
	if !strings.HasPrefix(cs.ContainerID, "containerd://") {
		t.Errorf("containerID %q, want containerd://<id> as kubelet shows it", cs.ContainerID)
	}
	p = d.waitPod(t, "runs", time.Minute, "Ready", func(p *v1.Pod) bool { return p != nil && condition(p, v1.PodReady) == v1.ConditionTrue })
	for _, typ := range []v1.PodConditionType{v1.PodInitialized, v1.ContainersReady} {
		if got := condition(p, typ); got != v1.ConditionTrue {
			t.Errorf("condition %s = %q, want True:\n%s", typ, got, describePod(p))
		}
	}
	if p.Namespace != "default" || p.Spec.NodeName != nodeName || p.Annotations["kubernetes.io/config.source"] != "file" {
		t.Errorf("pod metadata: namespace %q node %q annotations %v", p.Namespace, p.Spec.NodeName, p.Annotations)
	}
	// /metrics counts the CRI calls that started it.
	resp, err := http.Get(d.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`speclet_runtime_operations_duration_seconds_count{operation_type="RunPodSandbox"}`,
		`speclet_runtime_operations_duration_seconds_count{operation_type="StartContainer"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET /metrics lacks %s", want)
		}
	}
	ctrs, sbs := runtimeObjects(t, "runs")
	if len(ctrs) != 1 || len(sbs) != 1 || ctrs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING ||
		ctrs[0].Id != runtimeID(cs.ContainerID) {
		t.Errorf("runtime holds %d containers, %d sandboxes; want the one running container %s", len(ctrs), len(sbs), cs.ContainerID)
	}
}

// TestRestartPolicies checks kubelet's phases, reasons and restart counts for
// every restart policy and exit code.
func TestRestartPolicies(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	for _, tc := range []struct {
		policy   string
		code     int
		phase    v1.PodPhase
		restarts bool   // the container is restarted
		reason   string // termination reason of the (last) run
	}{
		{"Never", 0, v1.PodSucceeded, false, "Completed"},
		{"Never", 3, v1.PodFailed, false, "Error"},
		{"OnFailure", 0, v1.PodSucceeded, false, "Completed"},
		{"OnFailure", 3, v1.PodRunning, true, "Error"},
		{"Always", 0, v1.PodRunning, true, "Completed"},
		{"Always", 3, v1.PodRunning, true, "Error"},
	} {
		name := fmt.Sprintf("rp-%s-%d", strings.ToLower(tc.policy), tc.code)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d.dumpOnFailure(t, name)
			d.writeManifest(t, name, podSpec{name: name, restartPolicy: tc.policy, grace: 1,
				containers: []ctr{{name: "main", command: fmt.Sprintf("sleep 1; exit %d", tc.code)}}}.yaml(c))
			if !tc.restarts {
				p := d.waitPod(t, name, 2*time.Minute, string(tc.phase), func(p *v1.Pod) bool { return p != nil && p.Status.Phase == tc.phase })
				cs := containerStatus(p, "main")
				if cs == nil || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != int32(tc.code) ||
					cs.State.Terminated.Reason != tc.reason || cs.RestartCount != 0 || cs.Ready {
					t.Errorf("want main terminated(%s, exit %d), 0 restarts, not ready:\n%s", tc.reason, tc.code, describePod(p))
				}
				// The phase is final: it stays, the container is not started again.
				time.Sleep(3 * time.Second)
				if p := d.pod(t, name); p == nil || p.Status.Phase != tc.phase || containerStatus(p, "main").RestartCount != 0 {
					t.Errorf("3s later the pod changed:\n%s", describePod(p))
				}
				return
			}
			p := d.waitPod(t, name, 2*time.Minute, "restarted twice", func(p *v1.Pod) bool {
				cs := containerStatus(p, "main")
				return cs != nil && cs.RestartCount >= 2
			})
			if p.Status.Phase != tc.phase {
				t.Errorf("phase %s, want %s while the container restarts:\n%s", p.Status.Phase, tc.phase, describePod(p))
			}
			cs := containerStatus(p, "main")
			if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != int32(tc.code) || last.Reason != tc.reason {
				t.Errorf("lastState want terminated(%s, exit %d):\n%s", tc.reason, tc.code, describePod(p))
			}
		})
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "crashloop")
	d.writeManifest(t, "crashloop", podSpec{name: "crashloop", grace: 1, containers: []ctr{{name: "main", command: "exit 1"}}}.yaml(c))
	// The daemon runs with --crashloop-backoff-base=1s: 1 s, 2 s, 4 s, ...
	p := d.waitPod(t, "crashloop", 2*time.Minute, "in CrashLoopBackOff after 2 restarts", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.RestartCount >= 2 && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
	})
	cs := containerStatus(p, "main")
	if !strings.Contains(cs.State.Waiting.Message, "back-off") || cs.Ready || p.Status.Phase != v1.PodRunning ||
		cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("want waiting CrashLoopBackOff with a back-off message, lastState exit 1, phase Running:\n%s", describePod(p))
	}
	if condition(p, v1.PodReady) == v1.ConditionTrue {
		t.Errorf("a crash-looping pod is Ready:\n%s", describePod(p))
	}
}

func TestImagePullBackOffRecovers(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "pull")
	// A repository new to the registry on every run of the test.
	repo := fmt.Sprintf("e2e-late-%d:v1", time.Now().UnixNano())
	image := c.ImageRef(repo)
	d.writeManifest(t, "pull", podSpec{name: "pull", grace: 1, image: image, containers: []ctr{{name: "main", command: handlesTERM}}}.yaml(c))
	seen := map[string]bool{}
	d.waitPod(t, "pull", 2*time.Minute, "in ImagePullBackOff", func(p *v1.Pod) bool {
		if cs := containerStatus(p, "main"); cs != nil && cs.State.Waiting != nil {
			seen[cs.State.Waiting.Reason] = true
			if p.Status.Phase != v1.PodPending {
				t.Errorf("phase %s while the image is missing, want Pending", p.Status.Phase)
			}
		}
		return seen["ImagePullBackOff"]
	})
	// Each failed pull shows ErrImagePull until the next sync finds the
	// container in back-off (1 s, 2 s, 4 s, ... with the daemon's flags).
	if p, ok := d.pollPod("pull", time.Minute, func(p *v1.Pod) bool {
		if cs := containerStatus(p, "main"); cs != nil && cs.State.Waiting != nil {
			seen[cs.State.Waiting.Reason] = true
		}
		return seen["ErrImagePull"]
	}); !ok {
		t.Errorf("a failed pull never showed ErrImagePull on /pods within a minute (reasons seen: %v); last:\n%s", seen, describePod(p))
	}
	img, err := harness.BusyboxImage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Registry.Push(context.Background(), repo, img); err != nil {
		t.Fatal(err)
	}
	p := d.waitPod(t, "pull", 2*time.Minute, "Running once the image is pushed", isRunning)
	if cs := containerStatus(p, "main"); !strings.Contains(cs.Image, "e2e-late") || cs.ImageID == "" {
		t.Errorf("image %q imageID %q, want the pushed image", cs.Image, cs.ImageID)
	}
}

func TestInitContainersRunInOrder(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "init")
	d.writeManifest(t, "init", podSpec{name: "init", grace: 1,
		init:       []ctr{{name: "first", command: "sleep 1"}, {name: "second", command: "sleep 1"}},
		containers: []ctr{{name: "main", command: handlesTERM}}}.yaml(c))
	p := d.waitPod(t, "init", 2*time.Minute, "Running", isRunning)
	first, second := containerStatus(p, "first"), containerStatus(p, "second")
	for _, cs := range []*v1.ContainerStatus{first, second} {
		if cs == nil || cs.State.Terminated == nil || cs.State.Terminated.Reason != "Completed" || cs.State.Terminated.ExitCode != 0 {
			t.Fatalf("init containers want terminated(Completed, exit 0):\n%s", describePod(p))
		}
	}
	if second.State.Terminated.StartedAt.Before(&first.State.Terminated.FinishedAt) {
		t.Errorf("init container second started %s, before first finished %s", second.State.Terminated.StartedAt, first.State.Terminated.FinishedAt)
	}
	main := containerStatus(p, "main")
	if main.State.Running.StartedAt.Before(&second.State.Terminated.FinishedAt) {
		t.Errorf("main started %s, before the last init container finished %s", main.State.Running.StartedAt, second.State.Terminated.FinishedAt)
	}
	if condition(p, v1.PodInitialized) != v1.ConditionTrue {
		t.Errorf("Initialized is not True:\n%s", describePod(p))
	}
}

func TestFailingInitContainerFailsPod(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "initfail")
	d.writeManifest(t, "initfail", podSpec{name: "initfail", restartPolicy: "Never", grace: 1,
		init:       []ctr{{name: "setup", command: "exit 3"}, {name: "never", command: "true"}},
		containers: []ctr{{name: "main", command: handlesTERM}}}.yaml(c))
	p := d.waitPod(t, "initfail", 2*time.Minute, "Failed", func(p *v1.Pod) bool { return p != nil && p.Status.Phase == v1.PodFailed })
	setup := containerStatus(p, "setup")
	if setup == nil || setup.State.Terminated == nil || setup.State.Terminated.ExitCode != 3 || setup.State.Terminated.Reason != "Error" {
		t.Errorf("init container setup want terminated(Error, exit 3):\n%s", describePod(p))
	}
	if cs := containerStatus(p, "never"); cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil) {
		t.Errorf("the init container after the failed one ran:\n%s", describePod(p))
	}
	if cs := containerStatus(p, "main"); cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil) {
		t.Errorf("the main container ran after a failed init container:\n%s", describePod(p))
	}
	ctrs, _ := runtimeObjects(t, "initfail")
	for _, ct := range ctrs {
		if ct.Metadata.Name != "setup" {
			t.Errorf("runtime holds container %s; only setup should have been created", ct.Metadata.Name)
		}
	}
}

func TestSidecar(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "sidecar")
	d.writeManifest(t, "sidecar", podSpec{name: "sidecar", restartPolicy: "Never", grace: 2,
		init:       []ctr{{name: "proxy", command: handlesTERM, sidecar: true}},
		containers: []ctr{{name: "main", command: "sleep 4"}}}.yaml(c))
	p := d.waitPod(t, "sidecar", 2*time.Minute, "Running with its sidecar", func(p *v1.Pod) bool {
		cs := containerStatus(p, "proxy")
		return isRunning(p) && cs != nil && cs.State.Running != nil
	})
	proxy := containerStatus(p, "proxy")
	if proxy.Started == nil || !*proxy.Started {
		t.Errorf("sidecar not started:\n%s", describePod(p))
	}
	if main := containerStatus(p, "main"); main.State.Running.StartedAt.Before(&proxy.State.Running.StartedAt) {
		t.Errorf("main started before its sidecar:\n%s", describePod(p))
	}
	// The main container completes: the pod succeeds (the phase follows the
	// regular containers, as in kubelet) and its sidecar is then stopped.
	d.waitPod(t, "sidecar", 2*time.Minute, "Succeeded", func(p *v1.Pod) bool { return p != nil && p.Status.Phase == v1.PodSucceeded })
	p = d.waitPod(t, "sidecar", time.Minute, "Succeeded with its sidecar stopped", func(p *v1.Pod) bool {
		proxy := containerStatus(p, "proxy")
		return p != nil && p.Status.Phase == v1.PodSucceeded && proxy != nil && proxy.State.Terminated != nil
	})
	ctrs, _ := runtimeObjects(t, "sidecar")
	for _, ct := range ctrs {
		if ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s still runs in the runtime after the pod succeeded", ct.Metadata.Name)
		}
	}
}

// TestRemoveManifestStopsWithGracePeriod removes two manifests at once: the
// container that handles SIGTERM stops at once, the one that ignores it is
// killed when its grace period ends; then nothing of either is left.
func TestRemoveManifestStopsWithGracePeriod(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "term")
	const grace = 8 * time.Second
	d.writeManifest(t, "term-handler", podSpec{name: "term-handler", grace: 8, containers: []ctr{{name: "main", command: handlesTERM}}}.yaml(c))
	d.writeManifest(t, "term-ignorer", podSpec{name: "term-ignorer", grace: 8, containers: []ctr{{name: "main", command: ignoresTERM}}}.yaml(c))
	d.waitPod(t, "term-handler", 2*time.Minute, "Running", isRunning)
	d.waitPod(t, "term-ignorer", 2*time.Minute, "Running", isRunning)

	t0 := time.Now()
	d.removeManifest(t, "term-handler")
	d.removeManifest(t, "term-ignorer")
	// When did each container stop running in the runtime?
	stopped := map[string]time.Duration{}
	for len(stopped) < 2 && time.Since(t0) < 2*time.Minute {
		for _, name := range []string{"term-handler", "term-ignorer"} {
			if _, ok := stopped[name]; ok {
				continue
			}
			ctrs, _ := runtimeObjects(t, name)
			running := false
			for _, ct := range ctrs {
				running = running || ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING
			}
			if !running {
				stopped[name] = time.Since(t0)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("container stopped after removal: handler %s, ignorer %s (grace %s)", stopped["term-handler"], stopped["term-ignorer"], grace)
	if h, ok := stopped["term-handler"]; !ok || h >= grace {
		t.Errorf("the SIGTERM-handling container stopped after %s; want before its %s grace period ends", h, grace)
	}
	if ig, ok := stopped["term-ignorer"]; !ok || ig < grace-time.Second {
		t.Errorf("the SIGTERM-ignoring container stopped after %s; want it killed only when its %s grace period ends", ig, grace)
	}
	d.waitGone(t, "term-handler", 2*time.Minute)
	d.waitGone(t, "term-ignorer", 2*time.Minute)
}

func TestEditManifestReplacesPod(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "edit")
	d.writeManifest(t, "edit", podSpec{name: "edit", grace: 1, containers: []ctr{{name: "main", command: handlesTERM}}}.yaml(c))
	old := d.waitPod(t, "edit", 2*time.Minute, "Running", isRunning)
	oldID := containerStatus(old, "main").ContainerID

	d.writeManifest(t, "edit", podSpec{name: "edit", grace: 1, containers: []ctr{{name: "main", command: "echo v2; " + handlesTERM}}}.yaml(c))
	p := d.waitPod(t, "edit", 2*time.Minute, "replaced by a Running pod with a new UID", func(p *v1.Pod) bool {
		return isRunning(p) && p.UID != old.UID
	})
	if id := containerStatus(p, "main").ContainerID; id == oldID {
		t.Errorf("the new pod runs the old container %s", id)
	}
	for _, q := range d.pods(t) {
		if q.UID == old.UID {
			t.Errorf("the old pod %s is still in /pods", old.UID)
		}
	}
	// Eventually the runtime holds only the new pod's container and sandbox.
	deadline := time.Now().Add(time.Minute)
	for {
		ctrs, sbs := runtimeObjects(t, "edit")
		if len(ctrs) == 1 && len(sbs) == 1 && ctrs[0].Id == runtimeID(containerStatus(p, "main").ContainerID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runtime holds %d containers and %d sandboxes of pod edit; want only the new one's", len(ctrs), len(sbs))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
