package containerdtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/userns"
	"github.com/speclet/speclet/engine/volume"
)

// TestContainerdUserNamespace: a hostUsers: false pod with an emptyDir,
// beside a pod on the node's user namespace. On containerd 2.x, whose
// handlers report user namespaces, it runs in a namespace of its own: its
// range recorded in its pod directory, /proc/self/uid_map inside maps 0
// to that range (not the node's 0 0 4294967295), its container runs as
// uid 0 inside and as the range's first ID outside, and root in the pod
// owns and writes its emptyDir (an idmapped mount: the file is the node's
// root's on disk) and owns its configMap's files. On containerd 1.6, whose Status lists no handlers, its
// sandbox is never made: FailedCreatePodSandBox with kubelet's message,
// Pending; the pod beside runs either way.
func TestContainerdUserNamespace(t *testing.T) {
	c, ctx := containerdFor(t, 40*time.Second)
	pod := shPod(c, "userns", v1.RestartPolicyAlways, 1, "exec sleep 3600")
	pod.Spec.HostNetwork = false // the API server refuses hostNetwork with hostUsers: false
	pod.Spec.HostUsers = ptr.To(false)
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "conf"}}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "conf", MountPath: "/conf"}}
	api := objectAPI{configMaps: map[string]*v1.ConfigMap{"default/conf": {Data: map[string]string{"greeting": "hello"}}}}
	beside := shPod(c, "beside", v1.RestartPolicyAlways, 1, "exec sleep 3600")
	root := filepath.Join(t.TempDir(), "root")
	events := &podEvents{}
	rt, e, updates := startPods(ctx, t, c, engine.Config{RootDir: root, Events: events, VolumeAPI: api}, pod, beside)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("events: %v", events.got)
		}
	})
	waitPhase(t, ctx, e, "beside", v1.PodRunning)
	record := filepath.Join(root, "pods", string(pod.UID), "userns")

	if c.Runtime != harness.Containerd2 {
		const msg = "FailedCreatePodSandBox: Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces"
		waitFor(t, ctx, "the FailedCreatePodSandBox event of kubelet", func() bool { return events.has("default/userns", msg) }, e)
		p := podNamed(e, "userns")
		if w := mainStatus(e, "userns").State.Waiting; p.Status.Phase != v1.PodPending || w == nil || w.Reason != "ContainerCreating" {
			t.Errorf("refused pod: phase %s, main %+v; want Pending, waiting ContainerCreating", p.Status.Phase, mainStatus(e, "userns").State)
		}
		sbs, err := rt.ListPodSandbox(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range sbs {
			if sb.GetMetadata().GetUid() == string(pod.UID) {
				t.Errorf("the refused pod has sandbox %s", sb.Id)
			}
		}
		if _, err := os.Stat(record); !os.IsNotExist(err) {
			t.Errorf("the refused pod has a user namespace record: %v", err)
		}
	} else {
		waitPhase(t, ctx, e, "userns", v1.PodRunning)
		host := recordedHostID(t, record)
		id := containerID(e, "userns")
		exec := func(cmd string) string {
			t.Helper()
			r, err := rt.ExecSync(ctx, id, []string{"/bin/sh", "-c", cmd}, 10*time.Second)
			if err != nil || r.ExitCode != 0 {
				t.Fatalf("exec %q: exit %d, %v; stderr %s", cmd, r.ExitCode, err, r.Stderr)
			}
			return strings.TrimSpace(string(r.Stdout))
		}
		if got, want := strings.Fields(exec("cat /proc/self/uid_map")), []string{"0", strconv.Itoa(int(host)), "65536"}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("uid_map inside %q, want %q (the recorded range)", got, want)
		}
		if got := strings.Fields(exec("cat /proc/self/gid_map")); len(got) != 3 || got[1] != strconv.Itoa(int(host)) {
			t.Errorf("gid_map inside %q, want 0 %d 65536", got, host)
		}
		if got := exec("id -u"); got != "0" {
			t.Errorf("uid inside %s, want 0", got)
		}
		if got := exec("stat -c %u:%g /data && touch /data/made && stat -c %u:%g /data/made"); got != "0:0\n0:0" {
			t.Errorf("emptyDir and a file root in the pod made there owned by %q, want 0:0 both", got)
		}
		if got := exec("stat -L -c %u:%g /conf/greeting && cat /conf/greeting"); got != "0:0\nhello" {
			t.Errorf("configMap file inside: %q, want owned by 0:0 with its data", got)
		}
		var st syscall.Stat_t
		made := filepath.Join(volume.HostPath(root, pod, &pod.Spec.Volumes[0]), "made")
		if err := syscall.Stat(made, &st); err != nil || st.Uid != 0 || st.Gid != 0 {
			t.Errorf("on the node %s is owned by %d:%d (%v), want 0:0 (an idmapped mount)", made, st.Uid, st.Gid, err)
		}
		if uid, err := outsideUID(host); err != nil || uid != host {
			t.Errorf("the container's process outside runs as uid %d (%v), want %d", uid, err, host)
		}
		bid := containerID(e, "beside")
		if r, err := rt.ExecSync(ctx, bid, []string{"cat", "/proc/self/uid_map"}, 10*time.Second); err != nil || strings.Join(strings.Fields(string(r.Stdout)), " ") != "0 0 4294967295" {
			t.Errorf("uid_map of the pod beside %q (%v), want the node's 0 0 4294967295", r.Stdout, err)
		}
	}

	removePods(updates, pod, beside)
	waitFor(t, ctx, "runtime empty", runtimeEmpty(ctx, rt), e)
	waitFor(t, ctx, "the pod's directory removed with its record", gone(filepath.Dir(record)), e)
}

// recordedHostID is the first host ID of the pod's record (kubelet's
// format), after checking it maps container ID 0, 65536 IDs, for UIDs and
// GIDs alike.
func recordedHostID(t *testing.T, path string) uint32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("user namespace record: %v", err)
	}
	var rec struct {
		UIDMappings []struct{ HostID, ContainerID, Length uint32 } `json:"uidMappings"`
		GIDMappings []struct{ HostID, ContainerID, Length uint32 } `json:"gidMappings"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.UIDMappings) != 1 || len(rec.GIDMappings) != 1 || rec.UIDMappings[0] != rec.GIDMappings[0] ||
		rec.UIDMappings[0].ContainerID != 0 || rec.UIDMappings[0].Length != 65536 || rec.UIDMappings[0].HostID < 65536 {
		t.Fatalf("record %s: want one mapping from 0 of 65536 IDs at 65536 or above, the same for GIDs", b)
	}
	return rec.UIDMappings[0].HostID
}

// outsideUID is the real UID on the node of the process running
// `sleep 3600` in the user namespace that maps 0 to host.
func outsideUID(host uint32) (uint32, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	want := fmt.Sprintf("0 %d 65536", host)
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		m, err1 := os.ReadFile(filepath.Join("/proc", p.Name(), "uid_map"))
		cmd, err2 := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err1 != nil || err2 != nil || strings.Join(strings.Fields(string(m)), " ") != want || string(cmd) != "sleep\x003600\x00" {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", p.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				uid, err := strconv.ParseUint(f[1], 10, 32)
				return uint32(uid), err
			}
		}
	}
	return 0, fmt.Errorf("no process runs sleep 3600 in a user namespace mapping %s", want)
}

// TestContainerdUserNamespaceRestart (containerd 2.x): on a node whose
// range holds two pods (the kubelet user's subordinate IDs), a
// hostUsers: false pod keeps its container and its range across a restart
// of speclet (the record read back), so a pod declared after the restart
// gets the other range and a third is refused with an error naming it;
// once the first pod is removed its range serves the third.
func TestContainerdUserNamespaceRestart(t *testing.T) {
	c, ctx := containerdFor(t, 2*time.Minute)
	if c.Runtime != harness.Containerd2 {
		t.Skip("containerd 1.6 has no user namespaces (TestContainerdUserNamespace checks the refusal)")
	}
	dir := t.TempDir()
	ids := userns.Config{Passwd: filepath.Join(dir, "passwd"), SubUID: filepath.Join(dir, "subuid"), SubGID: filepath.Join(dir, "subgid")}
	for path, s := range map[string]string{ids.Passwd: "kubelet:x:999:999::/:/bin/false\n", ids.SubUID: "kubelet:65536:131072\n", ids.SubGID: "kubelet:65536:131072\n"} {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(name string) *v1.Pod {
		p := shPod(c, name, v1.RestartPolicyAlways, 1, "exec sleep 3600")
		p.Spec.HostNetwork, p.Spec.HostUsers = false, ptr.To(false)
		return p
	}
	first, second, third := mk("first"), mk("second"), mk("third")
	root := filepath.Join(dir, "root")
	recordOf := func(p *v1.Pod) string { return filepath.Join(root, "pods", string(p.UID), "userns") }
	cfg := engine.Config{RootDir: root, UserNamespaces: ids}
	rt := dialContainerd(ctx, t, c)

	e1 := newEngine(t, c, cfg)
	updates, stop := runEngine(ctx, e1, 4)
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{first}, Source: config.SourceFile}
	waitPhase(t, ctx, e1, "first", v1.PodRunning)
	host := recordedHostID(t, recordOf(first))
	id := containerID(e1, "first")
	stop()

	events := &podEvents{}
	cfg.Events = events
	e2 := newEngine(t, c, cfg)
	updates, stop = runEngine(ctx, e2, 4)
	t.Cleanup(stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("events: %v", events.got)
		}
	})
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{first, second}, Source: config.SourceFile}
	waitPhase(t, ctx, e2, "second", v1.PodRunning)
	if got := containerID(e2, "first"); got != id {
		t.Errorf("after the restart first's container is %s, want %s kept", got, id)
	}
	if got := recordedHostID(t, recordOf(first)); got != host {
		t.Errorf("after the restart first's range is %d, want %d", got, host)
	}
	if got := recordedHostID(t, recordOf(second)); got == host {
		t.Errorf("second got first's range %d", host)
	}
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{third}, Source: config.SourceFile}
	const refused = "FailedCreatePodSandBox: Failed to create pod sandbox: create user namespace of pod default/third: could not find an empty slot to allocate a user namespace (all 2 ranges of 65536 IDs from 65536 are in use)"
	waitFor(t, ctx, "third refused: no range left", func() bool { return events.has("default/third", refused) }, e2)

	updates <- config.PodUpdate{Op: config.OpRemove, Pods: []*v1.Pod{first}, Source: config.SourceFile}
	waitPhase(t, ctx, e2, "third", v1.PodRunning)
	if got := recordedHostID(t, recordOf(third)); got != host {
		t.Errorf("third got range %d, want first's freed %d", got, host)
	}
	removePods(updates, second, third)
	waitFor(t, ctx, "runtime empty", runtimeEmpty(ctx, rt), e2)
}
