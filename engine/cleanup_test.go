package engine

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/volume"
)

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// A removed pod's directories (emptyDir volumes, logs) are removed once
// nothing of it is left in the runtime; declaring it again (same UID)
// starts it with a fresh emptyDir. Directories of UIDs nobody knows (left
// from a run that ended abruptly) are swept; those of a running pod stay.
func TestPodDirectoriesCleanup(t *testing.T) { synctest.Test(t, testPodDirectoriesCleanup) }

func testPodDirectoriesCleanup(t *testing.T) {
	h := newHarness(t)
	h.start(Config{})
	root := h.cfg.RootDir
	grace := int64(1)
	pod := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
			Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
				Volumes: []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
				Containers: []v1.Container{{Name: "main", Image: "busybox:latest", ImagePullPolicy: v1.PullIfNotPresent,
					VolumeMounts: []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}}}}}
	}
	data, keep := pod("data"), pod("keep")
	h.send(config.PodUpdate{Op: config.OpAdd, Source: config.SourceFile, Pods: []*v1.Pod{data, keep}})
	vol := volume.HostPath(root, data, &data.Spec.Volumes[0])
	logs := podspec.LogDir(filepath.Join(root, "logs"), data) // Config.PodLogsDir's default
	keepVol := volume.HostPath(root, keep, &keep.Spec.Volumes[0])
	if !exists(vol) || !exists(keepVol) {
		t.Fatalf("emptyDirs %s, %s not created", vol, keepVol)
	}
	if err := os.MkdirAll(logs, 0o755); err != nil { // the runtime writes logs here
		t.Fatal(err)
	}
	// the link a start made (Config.ContainerLogLinksDir's default)
	link := podspec.LogLink(filepath.Join(root, "containers"), data.Namespace, data.Name, "main", "c0ffee00")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(logs, "main", "0.log"), link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "old"), []byte("from the first run"), 0o644); err != nil {
		t.Fatal(err)
	}
	ghostVol := filepath.Join(root, "pods", "ghost", "volumes", "x")
	ghostLogs := filepath.Join(root, "logs", "default_ghost_ghost")
	for _, d := range []string{ghostVol, ghostLogs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	h.send(config.PodUpdate{Op: config.OpRemove, Source: config.SourceFile, Pods: []*v1.Pod{data}})
	if !h.waitFor(time.Second, func() bool { return !exists(filepath.Join(root, "pods", "uid-data")) && !exists(logs) }) {
		t.Fatalf("removed pod: %s or %s still there", filepath.Join(root, "pods", "uid-data"), logs)
	}
	if exists(link) {
		t.Errorf("removed pod: its log link %s still there", link)
	}
	if !h.waitFor(time.Second, func() bool { return !exists(filepath.Join(root, "pods", "ghost")) && !exists(ghostLogs) }) {
		t.Fatalf("directories of an unknown pod were not swept")
	}
	if !exists(keepVol) {
		t.Fatalf("the running pod's emptyDir %s was removed", keepVol)
	}

	h.send(config.PodUpdate{Op: config.OpAdd, Source: config.SourceFile, Pods: []*v1.Pod{pod("data")}})
	h.step(2*time.Second, time.Second)
	if !exists(vol) {
		t.Fatalf("restored pod: emptyDir %s not created", vol)
	}
	if exists(filepath.Join(vol, "old")) {
		t.Fatalf("restored pod sees the data of its previous run in %s", vol)
	}
}

// fakeCgroups is the node's pod cgroups (PodCgroups): the UIDs whose cgroup
// exists, and how many times they were listed.
type fakeCgroups struct {
	mu    sync.Mutex
	uids  map[types.UID]bool
	lists int
}

func (f *fakeCgroups) Parent(pod *v1.Pod) string { return "/kubepods/pod" + string(pod.UID) }
func (f *fakeCgroups) Ensure(pod *v1.Pod) error  { f.add(pod.UID); return nil }

func (f *fakeCgroups) Remove(uid types.UID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.uids, uid)
	return nil
}

func (f *fakeCgroups) Pods(skip func(types.UID) bool) ([]types.UID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	var out []types.UID
	for uid := range f.uids {
		if !skip(uid) {
			out = append(out, uid)
		}
	}
	return out, nil
}

func (f *fakeCgroups) add(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uids[uid] = true
}

func (f *fakeCgroups) has(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.uids[uid]
}

func (f *fakeCgroups) listed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

// Housekeeping removes the pod cgroups of UIDs that nothing knows (a
// removal that failed, a pod removed while speclet was down) and keeps a
// running pod's. It lists them every podCgroupSweepPeriod, not at every
// 2 s pass: a listing reads the QoS directories of every hierarchy.
func TestPodCgroupSweep(t *testing.T) { synctest.Test(t, testPodCgroupSweep) }

func testPodCgroupSweep(t *testing.T) {
	cg := &fakeCgroups{uids: map[types.UID]bool{"ghost": true}}
	h := newHarness(t)
	h.start(Config{PodCgroups: cg})
	if !h.waitFor(time.Second, func() bool { return !cg.has("ghost") }) {
		t.Fatal("the cgroup of a pod nothing knows was not removed")
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web",
		Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox:latest", ImagePullPolicy: v1.PullIfNotPresent}}}}
	h.send(config.PodUpdate{Op: config.OpAdd, Source: config.SourceFile, Pods: []*v1.Pod{pod}})
	if !cg.has(pod.UID) {
		t.Fatal("the running pod has no cgroup")
	}

	cg.add("ghost-2")
	if !h.waitFor(time.Second, func() bool { return !cg.has("ghost-2") }) {
		t.Fatal("the cgroup of a pod nothing knows was not removed")
	}
	before := cg.listed()
	h.step(time.Minute, time.Second)
	if n := cg.listed() - before; n < 2 || n > 4 {
		t.Errorf("pod cgroups listed %d times in a minute of housekeeping, want 3 (every %s)", n, podCgroupSweepPeriod)
	}
	if !cg.has(pod.UID) {
		t.Error("the running pod's cgroup was removed")
	}
}
