package conformance

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"sigs.k8s.io/yaml"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/test/kubebuild"
)

// swapPods are the static pods of TestSwapKubeletToSpeclet: a plain one
// (that logs a line), one with resources, ports, env and a probe (fields
// the UID hashes through their internal types), one of two containers in
// its own namespace, and goneManifest, whose manifest is removed while no
// agent runs.
var swapPods = map[string]string{
	"plain.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: swap-plain
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: $IMAGE
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo swap-plain started; trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]
`,
	"rich.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: swap-rich
  labels: {app: rich}
  annotations: {example.com/note: "kept"}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 3
  containers:
  - name: app
    image: $IMAGE
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]
    env: [{name: A, value: "1"}]
    ports: [{containerPort: 18080, name: web}]
    resources:
      requests: {cpu: 10m, memory: 16Mi}
      limits: {memory: 64Mi}
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 2
`,
	"two.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: swap-two
  namespace: swapns
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: a
    image: $IMAGE
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]
  - name: b
    image: $IMAGE
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]
`,
	// The orphan: its preStop hook would write $HOOKDIR/ran (a directory
	// of the test's).
	goneManifest: `apiVersion: v1
kind: Pod
metadata:
  name: swap-gone
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  volumes: [{name: hook, hostPath: {path: $HOOKDIR, type: Directory}}]
  containers:
  - name: main
    image: $IMAGE
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]
    ports: [{containerPort: 18081, name: admin}]
    volumeMounts: [{name: hook, mountPath: /hook}]
    lifecycle:
      preStop:
        exec: {command: ["sh", "-c", "echo bye > /hook/ran"]}
`,
}

// goneManifest is the manifest of swapPods removed between the agents: its
// pod is an orphan to the new agent, which stops and removes it without
// running its preStop hook, as kubelet v1.34.4 stops an orphan (from the
// runtime pod alone: SyncTerminatingRuntimePod, ToAPIPod). The old agent
// wrote the hook and ports as kubelet's annotations all the same.
const goneManifest = "gone.yaml"

// kubeletForSwap is the kubelet binary: -conformance.kubelet, else the one
// buildkubelet cached; the test is skipped without one.
func kubeletForSwap(t *testing.T) string {
	if *kubeletBin != "" {
		return *kubeletBin
	}
	dir, err := kubebuild.Dir("kubelet", "v1.34.4")
	if err != nil {
		t.Skip(err)
	}
	bin := filepath.Join(dir, "kubelet")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no kubelet (%v): go run ./test/conformance/cmd/buildkubelet", err)
	}
	return bin
}

// runningContainers waits until the runtime runs want containers of the
// agents' pods and returns them by "<pod>/<container>".
func runningContainers(t *testing.T, a *Agent, want int) map[string]*runtimeapi.Container {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		cs, err := a.RT.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*runtimeapi.Container{}
		for _, c := range cs {
			if runtimepods.PodUIDOf(c.Labels) != "" {
				out[runtimepods.PodNameOf(c.Labels)+"/"+runtimepods.ContainerNameOf(c.Labels)] = c
			}
		}
		if len(out) == want {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d running containers after 3m, want %d; %s log:\n%s", len(out), want, a.Kind, a.LogTail(40))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestSwapKubeletToSpeclet: kubelet v1.34.4 runs static pods and is killed
// (SIGKILL); speclet, started on the same containerd with the same
// manifests, adopts every running container: the same container IDs,
// restartCount 0, the pods' UIDs kubelet's, nothing created again; its
// kubelet API (10250) serves an adopted container's log and runs a command
// in it; the pod whose manifest went while no agent ran is stopped as
// kubelet stops it.
// With -conformance.record it writes what kubelet gave the pods (UIDs,
// container hashes) to engine/staticuid/testdata, which the unit tests of
// the UID and the hash compare with.
func TestSwapKubeletToSpeclet(t *testing.T) {
	kubelet := kubeletForSwap(t)
	testSwap(t, Kubelet, kubelet, Speclet, "", *record)
}

// TestSwapSpecletToKubelet: the same the other way round: kubelet adopts
// what speclet started (whose containers carry kubelet's annotations, the
// preStop hook's and the ports' JSON among them), and stops the orphan.
func TestSwapSpecletToKubelet(t *testing.T) {
	kubelet := kubeletForSwap(t)
	testSwap(t, Speclet, "", Kubelet, kubelet, false)
}

// recordedPod is what kubelet gave one static pod (testdata of
// engine/staticuid).
type recordedPod struct {
	Path       string              `json:"path"`
	Node       string              `json:"node"`
	Manifest   string              `json:"manifest"`
	UID        string              `json:"uid"`
	Containers []recordedContainer `json:"containers"`
}

type recordedContainer struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	Hash  string `json:"hash"`
	// Annotations are kubelet's io.kubernetes.* annotations of the
	// container.
	Annotations map[string]string `json:"annotations"`
}

func testSwap(t *testing.T, from AgentKind, fromBin string, to AgentKind, toBin string, rec bool) {
	reg, env := setup(t)
	speclet := buildSpeclet(t)
	if fromBin == "" {
		fromBin = speclet
	}
	if toBin == "" {
		toBin = speclet
	}
	fa := startAgent(t, from, fromBin, reg)
	hookDir := t.TempDir()
	texts := map[string]string{}
	for name, m := range swapPods {
		texts[name] = Expand(strings.ReplaceAll(m, "$HOOKDIR", hookDir), env.Vars)
		if err := writeAtomic(fa.Manifests, name, texts[name]); err != nil {
			t.Fatal(err)
		}
	}
	before := runningContainers(t, fa, 5)
	uids := map[string]string{}
	for key, c := range before {
		pod := strings.Split(key, "/")[0]
		uids[pod] = string(runtimepods.PodUIDOf(c.Labels))
		t.Logf("%s: %s uid %s container %s hash %s", from, key, uids[pod], c.Id, c.Annotations[runtimepods.KubeletContainerHash])
	}
	if rec {
		recordSwap(t, fa, texts, before)
	}
	gone := before["swap-gone-"+NodeName+"/main"]
	if gone == nil {
		t.Fatalf("no running swap-gone container: %v", before)
	}
	delete(before, "swap-gone-"+NodeName+"/main")
	for _, k := range []string{runtimepods.KubeletPreStopHandler, runtimepods.KubeletContainerPorts} {
		if gone.Annotations[k] == "" {
			t.Errorf("%s's swap-gone container has no %s annotation: %v", from, k, gone.Annotations)
		}
	}
	if err := fa.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(fa.Manifests, goneManifest)); err != nil {
		t.Fatal(err)
	}
	var extra []string
	apiPort := 0
	if to == Speclet {
		var err error
		if apiPort, err = freePort(); err != nil {
			t.Fatal(err)
		}
		extra = []string{"--port", fmt.Sprint(apiPort), "--anonymous-auth"}
	}
	ta, err := fa.Swap(to, toBin, extra...)
	if ta != nil {
		t.Cleanup(func() {
			if err := ta.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	// The new agent's status shows every container running with the old
	// agent's instance.
	deadline := time.Now().Add(2 * time.Minute)
	var pods []v1.Pod
	for {
		pods, err = ta.Pods()
		if err == nil && allRunning(pods, 4) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's pods not all running after 2m: %s; log:\n%s", to, describe(pods), ta.LogTail(60))
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range pods {
		if want := uids[p.Name]; string(p.UID) != want {
			t.Errorf("pod %s: %s's UID %s, %s's %s", p.Name, to, p.UID, from, want)
		}
		for _, cs := range p.Status.ContainerStatuses {
			key := p.Name + "/" + cs.Name
			c := before[key]
			if c == nil {
				t.Errorf("%s: not a container %s ran", key, from)
				continue
			}
			if want := "containerd://" + c.Id; cs.ContainerID != want {
				t.Errorf("%s: container %s, %s's was %s", key, cs.ContainerID, from, want)
			}
			if cs.RestartCount != 0 {
				t.Errorf("%s: restartCount %d, want 0", key, cs.RestartCount)
			}
		}
	}
	// The orphan is stopped, without its preStop hook.
	ctx := context.Background()
	deadline = time.Now().Add(2 * time.Minute)
	for {
		st, err := ta.RT.ContainerStatus(ctx, gone.Id)
		if cri.IsNotFound(err) || err == nil && st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan swap-gone: container %v (err %v) after 2m; want it stopped; %s log:\n%s", st.GetState(), err, to, ta.LogTail(60))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if b, err := os.ReadFile(filepath.Join(hookDir, "ran")); !os.IsNotExist(err) {
		t.Errorf("orphan swap-gone: its preStop hook ran (%q, err %v); kubelet v1.34.4 stops an orphan without it", b, err)
	}
	if to == Speclet {
		checkAPI(t, apiPort)
	}
	// The runtime holds the old agent's containers and no other (but the
	// orphan's, stopped, until it is removed).
	all, err := ta.RT.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids, want []string
	for _, c := range all {
		if c.Id == gone.Id {
			continue
		}
		ids = append(ids, c.Id+" "+c.State.String())
	}
	for _, c := range before {
		want = append(want, c.Id+" CONTAINER_RUNNING")
	}
	sort.Strings(ids)
	sort.Strings(want)
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Errorf("runtime containers after the swap:\n%s\nwant %s's, running:\n%s\n%s log:\n%s", strings.Join(ids, "\n"), from, strings.Join(want, "\n"), to, ta.LogTail(60))
	}
}

// checkAPI reads the log of an adopted container (swap-plain's main, which
// kubelet created: only kubelet's labels find it) through speclet's kubelet
// API on 127.0.0.1:port, and runs a command in it (/run: the lookup exec
// and attach share).
func checkAPI(t *testing.T, port int) {
	t.Helper()
	cl := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	pod := "default/swap-plain-" + NodeName + "/main"
	for _, r := range []struct{ method, path, want string }{
		{"GET", "/containerLogs/" + pod, "swap-plain started\n"},
		{"POST", "/run/" + pod + "?cmd=echo+adopted", "adopted\n"},
	} {
		req, err := http.NewRequest(r.method, base+r.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(b) != r.want {
			t.Errorf("speclet's kubelet API %s %s: %d %q (err %v), want 200 %q", r.method, r.path, resp.StatusCode, b, err, r.want)
		}
	}
}

// recordSwap writes what kubelet gave the pods to engine/staticuid/testdata.
func recordSwap(t *testing.T, a *Agent, texts map[string]string, running map[string]*runtimeapi.Container) {
	var out []recordedPod
	names := make([]string, 0, len(texts))
	for name := range texts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := recordedPod{Path: filepath.Join(a.Manifests, name), Node: NodeName, Manifest: texts[name]}
		keys := make([]string, 0, len(running))
		for key := range running {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		for _, key := range keys {
			c := running[key]
			var m v1.Pod
			if err := yaml.Unmarshal([]byte(texts[name]), &m); err != nil {
				t.Fatal(err)
			}
			if runtimepods.PodNameOf(c.Labels) != m.Name+"-"+NodeName {
				continue
			}
			r.UID = string(runtimepods.PodUIDOf(c.Labels))
			ctr := runtimepods.ContainerNameOf(c.Labels)
			for _, spec := range m.Spec.Containers {
				if spec.Name == ctr {
					ann := map[string]string{}
					for k, v := range c.Annotations {
						if strings.HasPrefix(k, "io.kubernetes.") {
							ann[k] = v
						}
					}
					r.Containers = append(r.Containers, recordedContainer{Name: ctr, Image: spec.Image, Hash: c.Annotations[runtimepods.KubeletContainerHash], Annotations: ann})
				}
			}
		}
		out = append(out, r)
	}
	if err := writeJSON("../../engine/staticuid/testdata/kubelet-v1.34.4.json", out); err != nil {
		t.Fatal(err)
	}
}

func allRunning(pods []v1.Pod, want int) bool {
	n := 0
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil && cs.ContainerID != "" {
				n++
			}
		}
	}
	return n == want
}

func describe(pods []v1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "%s %s %s;", p.Name, p.UID, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " %s id=%s r%d running=%v", cs.Name, cs.ContainerID, cs.RestartCount, cs.State.Running != nil)
		}
	}
	return b.String()
}
