package cri_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/cri/sim"
)

// The contract of the calls the node's reclaim makes (engine/reclaim,
// engine/evict.go): RemoveImage (image GC), ImageFsInfo (where images live, how
// much they use), ListContainerStats (eviction ranking). Appended to
// contractCases by init so that TestContract runs them on both runtimes.
func init() {
	contractCases = append(contractCases,
		contractCase{"remove_image", contractRemoveImage},
		contractCase{"image_fs_info", contractImageFsInfo},
		contractCase{"list_container_stats", contractListContainerStats},
	)
}

// layerBytes is the size of the random layer of a test's own image.
const layerBytes = 1 << 20

// ownImage returns a reference no other case uses, pullable from the
// runtime: on containerd busybox plus a random layer of layerBytes pushed
// to the harness registry; on the sim any reference pulls, as an image of
// sim.DefaultImageSize.
func (e *env) ownImage(t *testing.T) string {
	t.Helper()
	name := "contract-" + uid() + ":1"
	if e.cd == nil {
		return name
	}
	bb, err := harness.BusyboxImage()
	if err != nil {
		t.Fatal(err)
	}
	layer, err := random.Layer(layerBytes, types.DockerLayer)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(bb, layer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cd.Registry.Push(ctx(t), name, img); err != nil {
		t.Fatalf("push %s: %v", name, err)
	}
	return e.cd.ImageRef(name)
}

func (e *env) listed(t *testing.T, id string) bool {
	t.Helper()
	imgs, err := e.rt.ListImages(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(imgs, func(img *runtimeapi.Image) bool { return img.Id == id })
}

// contractRemoveImage: RemoveImage by id (what image GC sends) removes the
// image from ImageStatus (by reference and by id) and ListImages; removing
// it again, or removing an image never present, succeeds (the CRI's
// idempotent removal); other images stay; an image a running container
// uses is removed all the same (the runtime does not protect it).
func contractRemoveImage(t *testing.T, e *env) {
	ref := e.ownImage(t)
	id, err := e.rt.PullImage(ctx(t), &runtimeapi.ImageSpec{Image: ref}, nil, nil)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	if !e.listed(t, id) {
		t.Fatalf("pulled image %s (%s) is not listed", ref, id)
	}
	if err := e.rt.RemoveImage(ctx(t), &runtimeapi.ImageSpec{Image: id}); err != nil {
		t.Fatalf("RemoveImage %s: %v", id, err)
	}
	for _, name := range []string{ref, id} {
		if img, err := e.rt.ImageStatus(ctx(t), &runtimeapi.ImageSpec{Image: name}); err != nil || img != nil {
			t.Errorf("ImageStatus %s after RemoveImage = %v, %v; want nil, nil", name, img, err)
		}
	}
	if e.listed(t, id) {
		t.Errorf("removed image %s is still listed", id)
	}
	if err := e.rt.RemoveImage(ctx(t), &runtimeapi.ImageSpec{Image: id}); err != nil {
		t.Errorf("removing a removed image: %v; want success (removal is idempotent)", err)
	}
	if err := e.rt.RemoveImage(ctx(t), &runtimeapi.ImageSpec{Image: e.missing}); err != nil {
		t.Errorf("removing an image never present: %v; want success", err)
	}
	if img, err := e.rt.ImageStatus(ctx(t), &runtimeapi.ImageSpec{Image: e.image}); err != nil || img == nil {
		t.Errorf("ImageStatus %s after removing another image = %v, %v; want it present", e.image, img, err)
	}

	// The runtime does not keep an image a container uses: RemoveImage
	// succeeds and the container runs on. Image GC must never plan such
	// an image itself (engine/reclaim: in use by any container).
	used := e.ownImage(t)
	usedID, err := e.rt.PullImage(ctx(t), &runtimeapi.ImageSpec{Image: used}, nil, nil)
	if err != nil {
		t.Fatalf("pull %s: %v", used, err)
	}
	p := e.runPod(t, "image-user", nil, nil)
	saved := e.image
	e.image = used
	cid := e.create(t, p, "user", handler, nil, nil)
	e.image = saved
	e.start(t, cid)
	if err := e.rt.RemoveImage(ctx(t), &runtimeapi.ImageSpec{Image: usedID}); err != nil {
		t.Errorf("RemoveImage of an image a running container uses: %v; want success", err)
	}
	if img, err := e.rt.ImageStatus(ctx(t), &runtimeapi.ImageSpec{Image: usedID}); err != nil || img != nil {
		t.Errorf("ImageStatus of the removed image a container uses = %v, %v; want nil, nil", img, err)
	}
	if st := e.status(t, cid); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("container after its image was removed: %s; want RUNNING", st.State)
	}
}

// contractImageFsInfo: one image filesystem, named by an absolute
// mountpoint (image GC and the imagefs eviction signals statfs it; on
// containerd it is a directory under the instance's root), with used bytes
// and inodes and a timestamp; once an image with a layer of 1 MiB is
// pulled, the used bytes count at least that much. They are no measure of
// one image: containerd sums every snapshot (containers' too), refreshed
// every 10 s, so they are 0 on a fresh instance and lag removals; the sim
// sums the sizes of its images. Hence the engine takes usage from statfs.
func contractImageFsInfo(t *testing.T, e *env) {
	info := func() *runtimeapi.FilesystemUsage {
		t.Helper()
		r, err := e.rt.ImageFsInfo(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		fss := r.GetImageFilesystems()
		if len(fss) != 1 {
			t.Fatalf("ImageFsInfo: %d image filesystems, want 1: %v", len(fss), fss)
		}
		return fss[0]
	}
	fs := info()
	mp := fs.GetFsId().GetMountpoint()
	if !filepath.IsAbs(mp) {
		t.Errorf("image filesystem mountpoint %q, want an absolute path", mp)
	}
	if fs.UsedBytes == nil || fs.InodesUsed == nil || fs.Timestamp <= 0 {
		t.Errorf("image filesystem %+v: want used bytes, inodes used and a timestamp", fs)
	}
	if e.cd != nil {
		if st, err := os.Stat(mp); err != nil || !st.IsDir() || !strings.HasPrefix(mp, e.cd.Dir) {
			t.Errorf("image filesystem mountpoint %s: %v; want a directory under the instance's root %s", mp, err, e.cd.Dir)
		}
	}
	before := fs.GetUsedBytes().GetValue()
	ref := e.ownImage(t)
	if _, err := e.rt.PullImage(ctx(t), &runtimeapi.ImageSpec{Image: ref}, nil, nil); err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	want := uint64(min(layerBytes, sim.DefaultImageSize))
	deadline := time.Now().Add(45 * time.Second)
	for {
		fs := info()
		if fs.GetUsedBytes().GetValue() >= want {
			t.Logf("used bytes %d -> %d after pulling %s", before, fs.GetUsedBytes().GetValue(), ref)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("used bytes %d (%d before pulling %s); want at least %d within 45s", fs.GetUsedBytes().GetValue(), before, ref, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// contractListContainerStats: a running container has stats with its id,
// metadata and labels, a memory working set and a writable layer usage
// (eviction ranks pods by them); a container that is not running has an
// entry with no usage; the filter selects by id, sandbox and labels. The
// sim reports the usage it was scripted with.
func contractListContainerStats(t *testing.T, e *env) {
	p := e.runPod(t, "stats", nil, nil)
	run := e.create(t, p, "run", handler, map[string]string{"role": "main"}, nil)
	e.start(t, run)
	if e.sim != nil {
		e.sim.Runtime.SetUsage("stats", "run", sim.Usage{MemoryWorkingSet: 1 << 20, WritableLayer: 4096})
	}
	mine := map[string]string{"contract": e.label}
	all, err := e.rt.ListContainerStats(ctx(t), &runtimeapi.ContainerStatsFilter{LabelSelector: mine})
	if err != nil {
		t.Fatal(err)
	}
	var st *runtimeapi.ContainerStats
	for _, s := range all {
		if s.GetAttributes().GetId() == run {
			st = s
		}
	}
	if st == nil {
		t.Fatalf("ListContainerStats: no stats for the running container among %d", len(all))
	}
	a := st.GetAttributes()
	if a.GetMetadata().GetName() != "run" || a.GetLabels()["contract"] != e.label || a.GetLabels()["role"] != "main" {
		t.Errorf("attributes %v: want name run and the container's labels", a)
	}
	if ws := st.GetMemory().GetWorkingSetBytes(); ws == nil || ws.Value == 0 {
		t.Errorf("memory %v: want a working set above 0 for a running shell", st.GetMemory())
	}
	if st.GetWritableLayer().GetUsedBytes() == nil {
		t.Errorf("writable layer %v: want its used bytes", st.GetWritableLayer())
	}

	// A container that is not running (exited, or created and never
	// started) has stats without memory: it adds nothing to a pod's memory
	// in eviction's ranking. Its writable layer is still on disk, so its
	// used bytes may be above 0: containerd reports the size its snapshot
	// syncer last measured (8 KiB for a shell that only ran `exit 0`, once
	// the syncer has passed after the container was created).
	exited := e.create(t, p, "exited", exits(0), nil, nil)
	e.start(t, exited)
	e.waitExited(t, exited)
	created := e.create(t, p, "created", handler, nil, nil)
	for _, id := range []string{exited, created} {
		got, err := e.rt.ListContainerStats(ctx(t), &runtimeapi.ContainerStatsFilter{Id: id})
		if err != nil || len(got) != 1 {
			t.Errorf("stats of a container that is not running: %v, %v; want one entry", got, err)
			continue
		}
		s := got[0]
		if s.GetAttributes().GetId() != id || s.GetMemory() != nil || s.GetWritableLayer().GetUsedBytes() == nil {
			t.Errorf("stats of a container that is not running: %v; want its id, no memory, its writable layer's used bytes", s)
		}
	}

	for _, tc := range []struct {
		name string
		f    *runtimeapi.ContainerStatsFilter
		want []string
	}{
		{"by id", &runtimeapi.ContainerStatsFilter{Id: run}, []string{run}},
		{"by unknown id", &runtimeapi.ContainerStatsFilter{Id: strings.Repeat("0", 64)}, []string{}},
		{"by sandbox", &runtimeapi.ContainerStatsFilter{PodSandboxId: p.id}, sorted(run, exited, created)},
		{"by label", &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{"contract": e.label, "role": "main"}}, []string{run}},
		{"by unmatched label", &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{"contract": e.label, "role": "none"}}, []string{}},
	} {
		got, err := e.rt.ListContainerStats(ctx(t), tc.f)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var gotIDs []string
		for _, s := range got {
			gotIDs = append(gotIDs, s.GetAttributes().GetId())
		}
		slices.Sort(gotIDs)
		if !slices.Equal(gotIDs, tc.want) && !(len(gotIDs) == 0 && len(tc.want) == 0) {
			t.Errorf("%s: stats of %v, want %v", tc.name, gotIDs, tc.want)
		}
	}
}
