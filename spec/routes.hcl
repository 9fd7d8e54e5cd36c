# Channel inputs and the machine events they are delivered as.
#
# Each input names at most one event per machine. `pod = pod.EVENT` goes to
# the worker of the pod the input is about; `container = container.EVENT` goes
# to the container the input names (runtime events and probe results name one
# container, and `probe = probe.EVENT` goes to that container's probe
# machine; the engine drops the container part when the container is not
# known). Inputs for a pod UID are delivered in arrival order by its worker.
#
# Rules that are not routes, and where the engine enforces them:
#  - PLEG: the engine relists the runtime every 1 s and turns differences into
#    container_started / container_died / container_removed /
#    container_changed and sandbox_died; a runtime with GetContainerEvents
#    feeds the container events directly with a slow relist as a safety net. "PLEG is not healthy" after 3 min
#    without a successful relist is node health, reported by the engine.
#  - Housekeeping (every 2 s) kills orphans and purges finished UIDs; it is
#    no input of any machine. A pod is resynced by its own timers (synced's
#    resync, sync_backoff's retry), as kubelet's work queue does, not by
#    housekeeping (at 10,000 pods that would be 5,000 syncs a second).
#  - No checkpoint: after a restart the engine rebuilds each worker from CRI
#    labels and annotations (NewPodMachineAt / NewContainerMachineAt with the
#    state the runtime shows), sends config_restore for pods a source still
#    lists and config_remove (kill) for pods no source knows.
#  - Inputs for a machine in a state with no row for that event are rejected
#    and logged at debug level (a late event); the other routes still apply.
#  - A stale runtime cache never kills a new pod: runtime events carry the pod
#    UID and container ID; the engine must drop events for IDs the worker does
#    not own.
#  - One hung runtime call never blocks the node: the engine runs a pod's
#    actions on that pod's worker only and gives runtime calls deadlines; a
#    kill cancels the running action of its pod (all its calls but those it
#    declares uncancellable, each bounded by the client's per-call timeout).

input "config_add" {
  doc = "A source (file, http, apiserver) lists a new pod (kubelet ADD)."
  pod = pod.update
}
input "config_update" {
  doc = "A pod spec changed (kubelet UPDATE). Only the newest pending update counts."
  pod = pod.update
}
input "config_remove" {
  doc = "A source stopped listing the pod (kubelet REMOVE): terminate with the pod's grace period."
  pod = pod.kill
}
input "config_delete" {
  doc = "The pod was deleted gracefully (kubelet DELETE, deletionTimestamp set): terminate with deletionGracePeriodSeconds."
  pod = pod.kill
}
input "evicted" {
  doc = "The eviction manager (the node machine's evict_pod) evicts the pod: terminate with the eviction grace period; the pod ends Failed with reason Evicted."
  pod = pod.kill
}
input "config_reconcile" {
  doc = "Status-only change (kubelet RECONCILE): sync to rewrite the status."
  pod = pod.sync
}
input "config_restore" {
  doc = "A pod found in the runtime after a restart and still listed by a source (kubelet RESTORE)."
  pod = pod.update
}

input "container_started" {
  doc       = "PLEG: ContainerStarted."
  pod       = pod.sync
  container = container.started
}
input "container_died" {
  doc       = "PLEG: ContainerDied."
  pod       = pod.sync
  container = container.died
}
input "container_removed" {
  doc       = "PLEG: ContainerRemoved."
  container = container.removed
}
input "sandbox_died" {
  doc     = "PLEG: the pod's current sandbox is not ready or gone."
  pod     = pod.sync
  sandbox = sandbox.died
}
input "container_changed" {
  doc       = "PLEG: ContainerChanged (the runtime reports the instance in state UNKNOWN)."
  pod       = pod.sync
  container = container.state_unknown
}

input "sync_tick" {
  doc = "The sync ticker found the pod due for a resync."
  pod = pod.sync
}

input "liveness_failed" {
  doc   = "A liveness probe reached its failure threshold: the probe machine kills the container; the restart policy decides."
  probe = probe.liveness_failed
}
input "startup_succeeded" {
  doc   = "The startup probe reached its success threshold: liveness and readiness probes start."
  probe = probe.startup_ok
}
input "startup_failed" {
  doc   = "A startup probe reached its failure threshold: like a liveness failure."
  probe = probe.startup_failed
}
input "readiness_succeeded" {
  doc   = "A readiness probe reached its success threshold: the container is ready (the worker republishes the status)."
  probe = probe.ready
}
input "readiness_failed" {
  doc   = "A readiness probe reached its failure threshold: the container is not ready."
  probe = probe.unready
}
