package containerdtest

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/imagegc"
	"github.com/speclet/speclet/engine/internal/suite"
	"github.com/speclet/speclet/fsm"
)

// loopRootPrefix names the directories of TestContainerdImageGC under /tmp:
// each holds an ext4 image file, mounted on a loop device as the root of
// its containerd.
const loopRootPrefix = "speclet-imagegc-"

// TestContainerdImageGC runs image GC on a real containerd whose root is a
// test-made 160 MiB ext4 filesystem on a loop device. Four images of the
// harness registry (busybox plus 8 MiB of random bytes each) fill it: keep
// (a running pod's), old (a pod's that ran and was removed) and never-a,
// never-b (pulled, never run). The thresholds are set from the measured
// usage so that about 1.5 images must go: the two never-used images are
// removed (least recently used first), old, keep, busybox and the sandbox
// image stay, and usage falls below the high threshold.
func TestContainerdImageGC(t *testing.T) {
	ci := os.Getenv("CI") == "true"
	if os.Geteuid() != 0 {
		if ci {
			t.Fatal("CI=true: image GC on a loop device needs root")
		}
		t.Skip("image GC on a loop device needs root (losetup, mount); run the tests as root")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			if ci {
				t.Fatalf("CI=true: %s not found (Debian packages mount and e2fsprogs, DEB_PKGS): %v", tool, err)
			}
			t.Skipf("%s not found (Debian packages mount and e2fsprogs; `make deps`): %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := harness.EnsurePackages(ctx, io.Discard); err != nil {
		t.Fatalf("harness: %v", err)
	}
	reapLoopRoots(t)
	dir, root := loopRoot(t, 160<<20)

	reg, err := harness.StartRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	if err := reg.PushDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	bb, err := harness.BusyboxImage()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"keep", "old", "never-a", "never-b"}
	for _, n := range names {
		layer, err := random.Layer(8<<20, types.DockerLayer)
		if err != nil {
			t.Fatal(err)
		}
		img, err := mutate.AppendLayers(bb, layer)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Push(ctx, n+":1", img); err != nil {
			t.Fatal(err)
		}
	}
	c, err := harness.StartContainerd(ctx, harness.Options{Dir: dir, Registry: reg, Log: io.Discard})
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("harness: %v", err)
		}
	})
	rt := dialContainerd(ctx, t, c)
	// The test pulls as an operator would (crictl pull): none of it is
	// the engine's.
	ids := map[string]string{}
	sizes := map[string]uint64{}
	for _, n := range names {
		id, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: c.ImageRef(n + ":1")}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		img, err := rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: id})
		if err != nil || img == nil {
			t.Fatalf("image %s after the pull: %v, %v", n, img, err)
		}
		ids[n], sizes[n] = img.Id, img.Size
	}
	info, err := rt.ImageFsInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mount := info.GetImageFilesystems()[0].GetFsId().GetMountpoint()
	if !strings.HasPrefix(mount, root) {
		t.Fatalf("ImageFsInfo names %s, not on the loop filesystem %s", mount, root)
	}
	capacity, avail, err := engine.Statfs(mount)
	if err != nil {
		t.Fatal(err)
	}
	used := capacity - avail
	// High at the usage now (less one percent for what moves: the
	// metadata database, the running containers' layers); Low such that
	// 1.5 never-used images' sizes must be freed.
	high := int(used*100/capacity) - 1
	low := int((used - sizes["never-a"]*3/2) * 100 / capacity)
	t.Logf("image filesystem %s: %d of %d bytes used (%d%%); images of %d bytes; high %d%%, low %d%%",
		mount, used, capacity, used*100/capacity, sizes["never-a"], high, low)
	if low < 1 || high <= low {
		t.Fatalf("thresholds high %d%% low %d%% make no test (used %d of %d)", high, low, used, capacity)
	}

	audit := suite.Runtime(t, c.Endpoint)
	_, e, updates := startEngine(ctx, t, c, engine.Config{Runtime: audit,
		NodePolicy: engine.NodePolicy{ImageGC: imagegc.Policy{High: high, Low: low, MinAge: 15 * time.Second}, ImageGCPeriod: time.Second}})

	pod := func(name, image string) *v1.Pod {
		grace := int64(1)
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: ktypes.UID(name + "-uid"),
				Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
			Spec: v1.PodSpec{HostNetwork: true, TerminationGracePeriodSeconds: &grace,
				Containers: []v1.Container{
					{Name: "main", Image: c.ImageRef(image), ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"/bin/sleep", "3600"}},
					{Name: "base", Image: c.ImageRef(harness.BusyboxRepo), ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"/bin/sleep", "3600"}},
				}},
		}
	}
	keep, old := pod("keep", "keep:1"), pod("old", "old:1")
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{keep, old}, Source: config.SourceFile}
	running := func(name string) bool { return phaseOf(e, name) == v1.PodRunning }
	waitFor(t, ctx, "keep and old running", func() bool { return running("keep") && running("old") }, e)
	// Two image GC passes see old's container: its image was used.
	passes := func() int {
		n := 0
		for _, tr := range e.NodeHistory() {
			if tr.Event == fsm.NodeEventImageGcDue.String() {
				n++
			}
		}
		return n
	}
	seen := passes()
	waitFor(t, ctx, "two image GC passes with old running", func() bool { return passes() >= seen+2 }, e)
	removePods(updates, old)
	waitFor(t, ctx, "old's containers removed", func() bool {
		cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{engine.LabelPodUID: "old-uid"}})
		return err == nil && len(cs) == 0
	}, e)

	// Passes before the images are 15 s old find nothing to remove
	// (collect_failed); then one removes enough (collected).
	waitFor(t, ctx, "image GC collected", func() bool {
		for _, tr := range e.NodeHistory() {
			if tr.Event == fsm.NodeEventCollected.String() {
				return true
			}
		}
		return false
	}, e)
	var removed []string
	for _, r := range audit.Records() {
		if r.Method == "RemoveImage" {
			removed = append(removed, r.ID)
		}
	}
	name := map[string]string{}
	for n, id := range ids {
		name[id] = n
	}
	var removedNames []string
	for _, id := range removed {
		removedNames = append(removedNames, name[id]+"("+id+")")
	}
	t.Logf("removed in order: %v", removedNames)
	slices.Sort(removedNames)
	if len(removed) != 2 || !slices.Contains(removed, ids["never-a"]) || !slices.Contains(removed, ids["never-b"]) {
		t.Errorf("RemoveImage calls %v, want never-a and never-b (never used, least recently used first) and nothing else", removedNames)
	}
	imgs, err := rt.ListImages(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for _, img := range imgs {
		present[img.Id] = true
		for _, tag := range img.RepoTags {
			present[tag] = true
		}
	}
	for _, n := range []string{"keep", "old"} {
		if !present[ids[n]] {
			t.Errorf("image %s was removed", n)
		}
	}
	for _, ref := range []string{c.ImageRef(harness.BusyboxRepo), c.ImageRef(harness.PauseRepo)} {
		if !present[ref] {
			t.Errorf("image %s was removed", ref)
		}
	}
	capacity, avail, err = engine.Statfs(mount)
	if err != nil {
		t.Fatal(err)
	}
	if pct := (capacity - avail) * 100 / capacity; pct >= uint64(high) {
		t.Errorf("usage %d%% after image GC, want below the high threshold %d%%", pct, high)
	} else {
		t.Logf("usage after image GC: %d%%", pct)
	}
	if !running("keep") {
		t.Errorf("keep is not running after image GC:\n%s", formatPods(e.Pods()))
	}
	removePods(updates, keep)
	waitFor(t, ctx, "runtime empty", runtimeEmpty(ctx, rt), e)
}

// loopRoot makes a directory /tmp/speclet-imagegc-XXXX with an ext4
// filesystem of size bytes (no reserved blocks, no journal) on a loop
// device, mounted at DIR/root, where the harness's containerd keeps its
// root. The cleanups unmount it and detach the loop device, also when the
// test fails.
func loopRoot(t *testing.T, size int64) (dir, root string) {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", loopRootPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	img := filepath.Join(dir, "fs.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", img)
	dev := run("losetup", "--find", "--show", img)
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	root = filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o711); err != nil {
		t.Fatal(err)
	}
	run("mount", "-t", "ext4", dev, root)
	t.Cleanup(func() {
		// The harness's Stop unmounts what is under its directory, this
		// filesystem included (EINVAL: no longer mounted).
		if err := syscall.Unmount(root, 0); err != nil && err != syscall.EINVAL {
			t.Errorf("unmount %s: %v", root, err)
			_ = syscall.Unmount(root, syscall.MNT_DETACH)
		}
	})
	t.Logf("containerd root %s: ext4 of %d bytes on %s", root, size, dev)
	return dir, root
}

// reapLoopRoots unmounts and detaches what a killed run of
// TestContainerdImageGC left (its owner.pid names a dead process).
func reapLoopRoots(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("/tmp", loopRootPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || pid <= 0 || syscall.Kill(pid, 0) == nil {
			continue
		}
		_ = syscall.Unmount(filepath.Join(d, "root"), syscall.MNT_DETACH)
		if out, err := exec.Command("losetup", "-j", filepath.Join(d, "fs.img")).Output(); err == nil {
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if dev, _, ok := strings.Cut(l, ":"); ok {
					_ = exec.Command("losetup", "-d", dev).Run()
				}
			}
		}
		if err := os.RemoveAll(d); err != nil {
			t.Logf("remove stale %s: %v", d, err)
			continue
		}
		t.Logf("removed stale %s", d)
	}
}
