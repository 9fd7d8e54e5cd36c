# The node's own reclaim of resources, one machine per node (kubelet
# pkg/kubelet/images/image_gc_manager.go).
#
# The engine's node loop (engine/nodegc.go) fires image_gc_due every image GC
# period (kubelet: 5 min, Config.ImageGCPeriod) and runs the actions on its
# own goroutine, one step after the other, like a pod worker. No input of
# routes.hcl reaches this machine and `speclet spec verify` (which explores
# one pod) leaves it in `idle`: nothing of a pod waits for it, and what it
# removes is never in use by a pod.
#
# Rules that are not transitions, and where the engine enforces them
# (engine/nodegc.go, engine/imagegc):
#  - Usage is kubelet's: the image filesystem is the mountpoint CRI
#    ImageFsInfo names; usage = 1 - available/capacity of that filesystem
#    (statfs), compared with --image-gc-high-threshold (85%).
#  - The images to remove are planned by engine/imagegc: least recently used
#    first (then first seen), until the bytes freed (each image's size as the
#    runtime reports it) bring usage down to --image-gc-low-threshold (80%).
#    Never an image a container of the runtime uses (running or exited, as
#    kubelet), a pinned image, the runtime's sandbox image, or one first seen
#    less than --minimum-image-ttl-duration (2 min) ago.
#  - A failed RemoveImage does not stop the plan: the others are still
#    removed; the pass then reports collect_failed (kubelet's ImageGCFailed
#    event), as it does when the removable images cannot free enough
#    (FreeDiskSpaceFailed).
machine "node" {
  doc     = "The node's image garbage collection: measure the image filesystem, remove unused images past the high threshold."
  initial = state.idle

  event "image_gc_due" { doc = "The image GC period came round." }
  event "below_high" { doc = "The image filesystem's usage is below --image-gc-high-threshold: nothing to remove." }
  event "above_high" { doc = "The image filesystem's usage is at or above --image-gc-high-threshold." }
  event "measure_failed" { doc = "ImageFsInfo or the statfs of its mountpoint failed; the next period tries again." }
  event "collected" { doc = "The planned images were removed and usage is down to the low threshold (by their sizes)." }
  event "collect_failed" { doc = "A RemoveImage failed, or the removable images could not free enough." }

  action "measure_image_fs" {
    doc = "Read the image filesystem (ImageFsInfo, statfs of its mountpoint) and record the images present and those in use (ListImages, ListContainers); reports below_high, above_high or measure_failed."
    cri = ["ImageFsInfo", "ListImages", "ListContainers", "Status"]
  }
  action "remove_unused_images" {
    doc = "Remove the images of the plan, least recently used first (RemoveImage); reports collected or collect_failed."
    cri = ["RemoveImage"]
  }

  state "idle" {
    doc = "Between two passes."
    transition "image_gc_due" { to = state.measuring }
  }

  state "measuring" {
    doc   = "The image filesystem is measured."
    entry = [action.measure_image_fs]
    transition "below_high" { to = state.idle }
    transition "above_high" { to = state.collecting }
    transition "measure_failed" { to = state.idle }
  }

  state "collecting" {
    doc   = "Unused images are removed."
    entry = [action.remove_unused_images]
    transition "collected" { to = state.idle }
    transition "collect_failed" { to = state.idle }
  }
}
