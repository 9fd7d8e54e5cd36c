package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/imagegc"
	"github.com/speclet/speclet/fsm"
)

// Image GC (kubelet's imageGCManager) every ImageGCPeriod, and eviction's
// node-level reclaim of a disk signal, through measure_image_fs and
// remove_unused_images.

// MeasureImageFs reads the image filesystem and the images, records which
// are in use, and plans the removals (engine/imagegc).
func (n *Node) MeasureImageFs(ctx context.Context) error {
	err := n.measure(ctx)
	if err != nil {
		n.report(fsm.NodeEventMeasureFailed)
		n.gcDone(err)
		return err
	}
	if n.need == 0 {
		n.gcDone(nil)
		n.report(fsm.NodeEventBelowHigh)
	} else {
		n.report(fsm.NodeEventAboveHigh)
	}
	return nil
}

func (n *Node) measure(ctx context.Context) error {
	n.plan, n.need = nil, 0
	reclaim := n.reclaimAll
	n.reclaimAll, n.periodic = false, !reclaim
	info, err := n.cfg.Runtime.ImageFsInfo(ctx)
	if err != nil {
		return fmt.Errorf("image GC: %w", err)
	}
	fss := info.GetImageFilesystems()
	if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
		return errors.New("image GC: the runtime's ImageFsInfo names no image filesystem")
	}
	mount := fss[0].GetFsId().GetMountpoint()
	capacity, avail, err := n.cfg.FsStat(mount)
	if err != nil {
		return fmt.Errorf("image GC: image filesystem %s: %w", mount, err)
	}
	images, err := n.cfg.Runtime.ListImages(ctx, nil)
	if err != nil {
		return fmt.Errorf("image GC: %w", err)
	}
	ctrs, err := n.cfg.Runtime.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("image GC: %w", err)
	}
	sandboxImage := n.sandboxImage(ctx)
	// An image is in use when a container of the runtime, running or not,
	// names it by id or reference (kubelet: every container of every pod),
	// or it is the runtime's sandbox image.
	named := map[string]bool{}
	for _, c := range ctrs {
		named[c.GetImageRef()] = true
		named[c.GetImage().GetImage()] = true
	}
	inUse := map[string]bool{}
	n.sizes, n.refs = map[string]uint64{}, map[string]string{}
	for _, img := range images {
		n.sizes[img.Id] = img.Size
		n.refs[img.Id] = img.Id
		if len(img.RepoTags) > 0 {
			n.refs[img.Id] = img.RepoTags[0]
		}
		used := named[img.Id]
		for _, r := range append(append([]string(nil), img.RepoTags...), img.RepoDigests...) {
			used = used || named[r] || (sandboxImage != "" && r == sandboxImage)
		}
		if used {
			inUse[img.Id] = true
		}
	}
	now := n.cfg.Clock.Now()
	n.gc.Observe(now, images, inUse)
	used := capacity - min(avail, capacity)
	if reclaim {
		// Node-level reclaim for the eviction manager: every unused image.
		n.plan, n.need = n.gc.Unused(now)
		if n.need > 0 {
			n.cfg.Log.Info("Eviction manager: node-level reclaim removes every unused image", "images", len(n.plan), "bytes", n.need)
		}
		return nil
	}
	n.plan, n.need = n.gc.Plan(now, imagegc.Usage{Used: used, Capacity: capacity})
	if n.need > 0 {
		n.cfg.Log.Info("Image garbage collection: disk usage above the high threshold", "mountpoint", mount,
			"usage-percent", used*100/max(capacity, 1), "high-threshold", n.cfg.ImageGC.High, "bytes-to-free", n.need,
			"low-threshold", n.cfg.ImageGC.Low)
	}
	return nil
}

// sandboxImage is the runtime's sandbox (pause) image as its verbose
// status tells it (containerd: info.config.sandboxImage); "" when it does
// not say. containerd 1.6 does not mark it pinned, so it is kept by name.
func (n *Node) sandboxImage(ctx context.Context) string {
	st, err := n.cfg.Runtime.Status(ctx, true)
	if err != nil {
		return ""
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if json.Unmarshal([]byte(st.GetInfo()["config"]), &cfg) != nil {
		return ""
	}
	return cfg.SandboxImage
}

// gcDone notes how a periodic image GC pass ended: as kubelet, a failure
// right after a failed pass is recorded on the node as a Warning
// ImageGCFailed with the error.
func (n *Node) gcDone(err error) {
	if !n.periodic {
		return
	}
	if err != nil && n.gcFailed {
		n.nodeEvent(v1.EventTypeWarning, "ImageGCFailed", err.Error())
	}
	n.gcFailed = err != nil
}

// RemoveUnusedImages removes the planned images in order until their sizes
// add up to what must be freed.
func (n *Node) RemoveUnusedImages(ctx context.Context) error {
	var freed uint64
	var errs []error
	for _, id := range n.plan {
		if freed >= n.need {
			break
		}
		n.cfg.Log.Info("Removing image to free bytes", "imageID", id, "image", n.refs[id], "size", n.sizes[id])
		if err := n.cfg.Runtime.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: id}); err != nil {
			errs = append(errs, fmt.Errorf("remove image %s: %w", n.refs[id], err))
			continue
		}
		freed += n.sizes[id]
	}
	if freed < n.need {
		errs = append(errs, fmt.Errorf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", n.need, freed))
	}
	n.plan = nil
	if len(errs) > 0 {
		err := errors.Join(errs...)
		n.gcDone(err)
		n.report(fsm.NodeEventCollectFailed)
		return err
	}
	n.gcDone(nil)
	n.cfg.Log.Info("Image garbage collection freed enough", "bytes-freed", freed)
	n.report(fsm.NodeEventCollected)
	return nil
}

// Statfs is FsStat on a real node: the filesystem's size and what an
// unprivileged user may still write (f_bavail, as cadvisor reports it).
func Statfs(path string) (capacity, available uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}
