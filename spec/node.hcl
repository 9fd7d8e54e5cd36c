# The node's own reclaim of resources, one machine per node (kubelet
# pkg/kubelet/images/image_gc_manager.go and pkg/kubelet/eviction).
#
# The periods are the timers of idle: image_gc_due after next_image_gc,
# eviction_due after next_eviction and container_gc_due after
# next_container_gc, each the time until the next instant of its pass's
# schedule. The schedules are the engine's data (engine/reclaim):
# each pass comes round every period (image GC: kubelet's 5 min,
# Config.ImageGCPeriod; eviction: kubelet's 10 s, Config.EvictionPeriod,
# only with an eviction manager, engine/reclaim/evict.go; container GC: kubelet's
# 1 min, Config.ContainerGCPeriod, only with --maximum-dead-containers), the
# first one period after the engine's node loop started; when its timer
# fires, the schedule moves on by whole periods past now. A pass that is off
# has a negative duration: its timer is never armed. Every pass leaves idle
# and its completions bring the machine back, which arms the timers again:
# a period that came round while another pass ran is due at once (0), and
# passes due at the same instant run one after the other in the order of
# the timeouts below; several periods missed during one pass give one pass.
# The node loop (engine/reclaim/machine.go) waits on the engine's clock for the
# earliest armed timer, fires it and runs the actions on its own
# goroutine, one step after the other, like a pod worker. No input of
# routes.hcl reaches this machine; `speclet spec verify` explores it beside
# the pod, its periods as the timers of idle and its completions as the
# effects of system.hcl: nothing of a pod waits for it, and what it removes
# is never in use by a pod.
#
# Rules that are not transitions, and where the engine enforces them
# (engine/reclaim, engine/imagegc):
#  - Usage is kubelet's: the image filesystem is the mountpoint CRI
#    ImageFsInfo names; usage = 1 - available/capacity of that filesystem
#    (statfs), compared with --image-gc-high-threshold (85%).
#  - The images to remove are planned by engine/imagegc: least recently used
#    first (then first seen), until the bytes freed (each image's size as the
#    runtime reports it) bring usage down to --image-gc-low-threshold (80%).
#    Never an image a container of the runtime uses (running or exited, as
#    kubelet), a pinned image, the runtime's sandbox image, or one first seen
#    less than --minimum-image-ttl-duration (2 min) ago.
#  - Node-level reclaim (observing -reclaim-> measuring): for a met disk
#    threshold, measure_image_fs plans every unused image old enough
#    (kubelet's DeleteUnusedImages), whatever the GC thresholds; the next
#    eviction pass measures again and, if the threshold is still met, evicts.
#  - Eviction grace: 1 s for a hard threshold (kubelet's
#    immediateEvictionGracePeriodSeconds); for a soft one
#    --eviction-max-pod-grace-period (negative: the pod's), never more than
#    the pod's own.
#  - A failed RemoveImage does not stop the plan: the others are still
#    removed; the pass then reports collect_failed (kubelet's ImageGCFailed
#    event), as it does when the removable images cannot free enough
#    (FreeDiskSpaceFailed).
#  - Container GC across pods (kubelet's containerGC.evictContainers), every
#    container GC period (kubelet: 1 min) when --maximum-dead-containers is
#    set (not -1), planned by engine/containergc over what ListContainers
#    reports: the dead instances (exited or never started) created at least
#    --minimum-container-ttl-duration ago, per container of a pod (an evict
#    unit); first at most --maximum-dead-containers-per-container per unit,
#    then, while the node has more than --maximum-dead-containers, at most
#    max/units per unit (at least 1), then the oldest first across units.
#    Never removed: a running instance, the newest instance of a unit (it
#    may be starting), and the newest dead one (the container's lastState
#    and `kubectl logs --previous`). The pod workers learn of the removals
#    from the PLEG (ContainerRemoved of an instance that is not the current
#    one). The per-container limit is also kept at every death by the
#    container machine's remove_container.
machine "node" {
  doc     = "The node's reclaim: image garbage collection, container garbage collection across pods, and the eviction manager (node-level reclaim first, then one pod evicted per pass)."
  initial = state.idle

  event "image_gc_due" { doc = "The timer of idle: the image GC period came round (kubelet: 5 min)." }
  event "below_high" { doc = "The image filesystem's usage is below --image-gc-high-threshold: nothing to remove." }
  event "above_high" { doc = "The image filesystem's usage is at or above --image-gc-high-threshold." }
  event "measure_failed" { doc = "ImageFsInfo or the statfs of its mountpoint failed; the next period tries again." }
  event "collected" { doc = "The planned images were removed and usage is down to the low threshold (by their sizes)." }
  event "collect_failed" { doc = "A RemoveImage failed, or the removable images could not free enough." }

  event "container_gc_due" { doc = "The timer of idle: the container GC period came round (kubelet: 1 min); only with a node-wide limit (--maximum-dead-containers)." }
  event "containers_collected" { doc = "The dead instances beyond the limits were removed (or none was)." }
  event "container_gc_failed" { doc = "ListContainers or a RemoveContainer failed; the next period tries again." }

  event "eviction_due" { doc = "The timer of idle: the eviction manager's monitoring period came round (kubelet: 10 s); only with an eviction manager." }
  event "no_pressure" { doc = "No eviction threshold is met (hard, or soft past its grace period)." }
  event "reclaim" { doc = "A disk threshold (nodefs, imagefs) is met and node-level reclaim was not tried since it was last met: unused images go first." }
  event "pressure" { doc = "A threshold is met and node-level reclaim cannot relieve it (memory, PIDs) or did not." }
  event "observe_failed" { doc = "The signals could not be measured; the next period tries again." }

  guard "evicted_pod_terminating" { doc = "The pod evict_pod evicted last has a worker whose pod machine is neither terminated nor finished." }

  action "measure_image_fs" {
    doc = "Read the image filesystem (ImageFsInfo, statfs of its mountpoint) and record the images present and those in use (ListImages, ListContainers); reports below_high, above_high or measure_failed."
    cri = ["ImageFsInfo", "ListImages", "ListContainers", "Status"]
  }
  action "remove_unused_images" {
    doc = "Remove the images of the plan, least recently used first (RemoveImage); reports collected or collect_failed."
    cri = ["RemoveImage"]
  }

  action "remove_dead_containers" {
    doc = "List the containers (ListContainers), plan the dead instances to remove across pods (per-container limit, then the node-wide limit, oldest first) and remove them (RemoveContainer); reports containers_collected or container_gc_failed."
    cri = ["ListContainers", "RemoveContainer"]
  }

  action "observe_signals" {
    doc = "Measure the signals (memory, the root dir's and the image filesystem's space and inodes, PIDs), update the pressure conditions and decide; reports no_pressure, reclaim, pressure or observe_failed."
    cri = ["ImageFsInfo"]
  }
  action "evict_pod" {
    doc = "Evict the first pod of kubelet's ranking for the signal (usage above requests, then priority, then usage; ListContainerStats): its pod machine gets kill (input evicted) with the eviction grace period, and its status becomes Failed, reason Evicted, with the signal's message. One pod per pass; static and mirror pods are never evicted."
    cri = ["ListContainerStats"]
  }

  duration "next_image_gc" {
    doc     = "Until the next image GC pass of the schedule (never below 0): every image GC period, the first one period after the node loop's start."
    default = "5m"
  }
  duration "next_eviction" {
    doc     = "Until the next eviction pass of the schedule (never below 0): every eviction period, the first one period after the node loop's start; negative (no timer) without an eviction manager."
    default = "10s"
  }
  duration "next_container_gc" {
    doc     = "Until the next container GC pass of the schedule (never below 0): every container GC period, the first one period after the node loop's start; negative (no timer) without a node-wide limit (--maximum-dead-containers)."
    default = "1m"
  }

  state "idle" {
    doc = "Between two passes: the timers of the periods run."
    timeout "image_gc_due" { after = duration.next_image_gc }
    timeout "eviction_due" { after = duration.next_eviction }
    timeout "container_gc_due" { after = duration.next_container_gc }
    transition "image_gc_due" { to = state.measuring }
    transition "eviction_due" { to = state.observing }
    transition "container_gc_due" { to = state.removing_containers }
  }

  state "removing_containers" {
    doc   = "Dead container instances beyond the per-container and node-wide limits are removed."
    entry = [action.remove_dead_containers]
    transition "containers_collected" { to = state.idle }
    transition "container_gc_failed" { to = state.idle }
  }

  state "observing" {
    doc   = "The eviction signals are measured."
    entry = [action.observe_signals]
    transition "no_pressure" { to = state.idle }
    transition "reclaim" { to = state.measuring }
    transition "pressure" {
      guard = guard.evicted_pod_terminating
      to    = state.idle
      doc   = "The pod evicted last still terminates: its memory or disk is not free yet, so no other pod goes (kubelet's waitForPodsCleanup)."
    }
    transition "pressure" {
      to      = state.idle
      actions = [action.evict_pod]
    }
    transition "observe_failed" { to = state.idle }
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
