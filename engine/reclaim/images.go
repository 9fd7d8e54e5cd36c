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
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/fsm"
)

// Image GC (kubelet's imageGCManager) every ImageGCPeriod, and eviction's
// node-level reclaim of a disk signal, through measure_image_fs and
// remove_unused_images.

// MeasureImageFs reads the image filesystem and the images, records which
// are in use, and plans the removals (engine/imagegc).
func (n *Node) MeasureImageFs() op.Op {
	n.plan, n.need = nil, 0
	reclaim := n.reclaimAll
	n.reclaimAll, n.periodic = false, !reclaim
	return n.measure(func(in imageFs, err error) op.Op {
		if err != nil {
			n.report(fsm.NodeEventMeasureFailed)
			n.gcDone(err)
			return op.Done(err)
		}
		n.planRemovals(reclaim, in)
		if n.need == 0 {
			n.gcDone(nil)
			n.report(fsm.NodeEventBelowHigh)
		} else {
			n.report(fsm.NodeEventAboveHigh)
		}
		return op.Done(nil)
	})
}

// imageFs is what image GC reads before it plans: the image filesystem's
// mount point and usage, the images, the containers, and the runtime's
// sandbox image ("" when it does not say).
type imageFs struct {
	mount               string
	capacity, available uint64
	images              []*runtimeapi.Image
	containers          []*runtimeapi.Container
	sandboxImage        string
}

// measure reads the image filesystem (ImageFsInfo, then FsStat of its
// mount point), the images, the containers and the runtime's status, and
// hands them to done.
func (n *Node) measure(done func(imageFs, error) op.Op) op.Op {
	var in imageFs
	fail := func(format string, args ...any) op.Op { return done(in, fmt.Errorf(format, args...)) }
	return op.ImageFsInfo(func(info *runtimeapi.ImageFsInfoResponse, err error) op.Op {
		if err != nil {
			return fail("image GC: %w", err)
		}
		fss := info.GetImageFilesystems()
		if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
			return fail("image GC: the runtime's ImageFsInfo names no image filesystem")
		}
		in.mount = fss[0].GetFsId().GetMountpoint()
		return op.Host("FsStat", in.mount, func(context.Context) ([2]uint64, error) {
			capacity, avail, err := n.cfg.FsStat(in.mount)
			return [2]uint64{capacity, avail}, err
		}, func(usage [2]uint64, err error) op.Op {
			if err != nil {
				return fail("image GC: image filesystem %s: %w", in.mount, err)
			}
			in.capacity, in.available = usage[0], usage[1]
			return op.ListImages(func(images []*runtimeapi.Image, err error) op.Op {
				if err != nil {
					return fail("image GC: %w", err)
				}
				in.images = images
				return op.ListContainers(nil, func(ctrs []*runtimeapi.Container, err error) op.Op {
					if err != nil {
						return fail("image GC: %w", err)
					}
					in.containers = ctrs
					return op.Status(true, func(st *runtimeapi.StatusResponse, err error) op.Op {
						if err == nil {
							in.sandboxImage = sandboxImage(st)
						}
						return done(in, nil)
					})
				})
			})
		})
	})
}

// planRemovals records the images of in and which are in use, and plans
// what to remove: every unused image for node-level reclaim, else image
// GC's plan for the filesystem's usage.
func (n *Node) planRemovals(reclaim bool, in imageFs) {
	// An image is in use when a container of the runtime, running or not,
	// names it by id or reference (kubelet: every container of every pod),
	// or it is the runtime's sandbox image.
	named := map[string]bool{}
	for _, c := range in.containers {
		named[c.GetImageRef()] = true
		named[c.GetImage().GetImage()] = true
	}
	inUse := map[string]bool{}
	n.sizes, n.refs = map[string]uint64{}, map[string]string{}
	for _, img := range in.images {
		n.sizes[img.Id] = img.Size
		n.refs[img.Id] = img.Id
		if len(img.RepoTags) > 0 {
			n.refs[img.Id] = img.RepoTags[0]
		}
		used := named[img.Id]
		for _, r := range append(append([]string(nil), img.RepoTags...), img.RepoDigests...) {
			used = used || named[r] || (in.sandboxImage != "" && r == in.sandboxImage)
		}
		if used {
			inUse[img.Id] = true
		}
	}
	now := n.cfg.Clock.Now()
	n.gc.Observe(now, in.images, inUse)
	used := in.capacity - min(in.available, in.capacity)
	if reclaim {
		// Node-level reclaim for the eviction manager: every unused image.
		n.plan, n.need = n.gc.Unused(now)
		if n.need > 0 {
			n.cfg.Log.Info("Eviction manager: node-level reclaim removes every unused image", "images", len(n.plan), "bytes", n.need)
		}
		return
	}
	n.plan, n.need = n.gc.Plan(now, imagegc.Usage{Used: used, Capacity: in.capacity})
	if n.need > 0 {
		n.cfg.Log.Info("Image garbage collection: disk usage above the high threshold", "mountpoint", in.mount,
			"usage-percent", used*100/max(in.capacity, 1), "high-threshold", n.cfg.ImageGC.High, "bytes-to-free", n.need,
			"low-threshold", n.cfg.ImageGC.Low)
	}
}

// sandboxImage is the runtime's sandbox (pause) image as its verbose
// status st tells it (containerd: info.config.sandboxImage); "" when it
// does not say. containerd 1.6 does not mark it pinned, so it is kept by
// name.
func sandboxImage(st *runtimeapi.StatusResponse) string {
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
func (n *Node) RemoveUnusedImages() op.Op {
	plan := n.plan
	n.plan = nil
	return n.removeImages(plan, 0, nil)
}

// removeImages removes the images of plan, after freed bytes and the
// failures errs of those before, until freed covers the need.
func (n *Node) removeImages(plan []string, freed uint64, errs []error) op.Op {
	if len(plan) > 0 && freed < n.need {
		id := plan[0]
		n.cfg.Log.Info("Removing image to free bytes", "imageID", id, "image", n.refs[id], "size", n.sizes[id])
		return op.RemoveImage(&runtimeapi.ImageSpec{Image: id}, func(err error) op.Op {
			if err != nil {
				return n.removeImages(plan[1:], freed, append(errs, fmt.Errorf("remove image %s: %w", n.refs[id], err)))
			}
			return n.removeImages(plan[1:], freed+n.sizes[id], errs)
		})
	}
	if freed < n.need {
		errs = append(errs, fmt.Errorf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", n.need, freed))
	}
	if len(errs) > 0 {
		err := errors.Join(errs...)
		n.gcDone(err)
		n.report(fsm.NodeEventCollectFailed)
		return op.Done(err)
	}
	n.gcDone(nil)
	n.cfg.Log.Info("Image garbage collection freed enough", "bytes-freed", freed)
	n.report(fsm.NodeEventCollected)
	return op.Done(nil)
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
