package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"sigs.k8s.io/yaml"

	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/test/kubebuild"
)

// swapPods are the static pods of TestSwapKubeletToSpeclet: a plain one, one
// with resources, ports, env and a probe (fields the UID hashes through
// their internal types), and one of two containers in its own namespace.
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
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]
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
}

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
// restartCount 0, the pods' UIDs kubelet's, nothing created again.
// With -conformance.record it writes what kubelet gave the pods (UIDs,
// container hashes) to engine/staticuid/testdata, which the unit tests of
// the UID and the hash compare with.
func TestSwapKubeletToSpeclet(t *testing.T) {
	kubelet := kubeletForSwap(t)
	testSwap(t, Kubelet, kubelet, Speclet, "", *record)
}

// TestSwapSpecletToKubelet: the same the other way round: kubelet adopts
// what speclet started.
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
	texts := map[string]string{}
	for name, m := range swapPods {
		texts[name] = Expand(m, env.Vars)
		if err := writeAtomic(fa.Manifests, name, texts[name]); err != nil {
			t.Fatal(err)
		}
	}
	before := runningContainers(t, fa, 4)
	uids := map[string]string{}
	for key, c := range before {
		pod := strings.Split(key, "/")[0]
		uids[pod] = string(runtimepods.PodUIDOf(c.Labels))
		t.Logf("%s: %s uid %s container %s hash %s", from, key, uids[pod], c.Id, c.Annotations[runtimepods.KubeletContainerHash])
	}
	if rec {
		recordSwap(t, fa, texts, before)
	}
	ta, err := fa.Swap(to, toBin)
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
	// The runtime holds the old agent's containers and no other.
	ctx := context.Background()
	all, err := ta.RT.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids, want []string
	for _, c := range all {
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
					r.Containers = append(r.Containers, recordedContainer{Name: ctr, Image: spec.Image, Hash: c.Annotations[runtimepods.KubeletContainerHash]})
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
