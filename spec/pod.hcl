# The pod worker: one machine per pod UID (kubelet pod_workers.go).
#
# Phases only move forward: pending -> (waiting_to_start) -> syncing / synced /
# sync_backoff -> (completing -> completed) -> terminating -> terminated ->
# finished. A pod that completes on its own (pod_done) stops its remaining
# containers and its sandbox and stays completed, its dead containers kept,
# until a kill removes it. No transition leads from completing, completed,
# terminating, terminated or finished back to a syncing state, and only
# sync_pod (the entry action of syncing) asks a container to start, so once a
# worker has seen termination it never starts a container again.
#
# Actions run synchronously on the pod's worker goroutine: an action's
# completion (sync_ok, termination_done, cleanup_done) is fired before the
# worker takes its next input. So `syncing` is left within the input that
# entered it: an update, a sync request or a kill that arrives meanwhile
# waits in the worker's queue, and a kill also cancels the running action's
# context so that it is handled next: every CRI call of the action ends
# early, except those the action declares `uncancellable` (the sandbox's
# RunPodSandbox, the container's CreateContainer and StartContainer), which
# run to their end first. Timers are armed on entering a state and fire as
# inputs between actions, never during one.
#
# Rules that are not transitions, and where the engine enforces them:
#  - One serialized worker per pod UID: the engine runs one goroutine per UID
#    and fires this pod's machines only from it.
#  - Only the newest pending update counts: the worker's queue keeps one
#    pending config input, replaced by every update; a pending kill is never
#    replaced by a later update.
#  - Effective grace period = min(current, deletionGracePeriodSeconds, kill
#    override), the spec's terminationGracePeriodSeconds only when the pod
#    has no deletionGracePeriodSeconds (a delete may ask for more than the
#    spec); it only shortens, with a floor of 1 s for a plain kill and 0
#    only when forced: computed by the engine before it fires `kill`; a
#    repeated kill in terminating re-runs kill_containers, and a container
#    that is stopping re-issues its stop only when its grace got shorter.
#  - A terminated UID never restarts until purged: finished is final; the
#    engine keeps finished UIDs and drops config updates for them until
#    housekeeping purges a UID that no source lists any more, or one whose
#    source removed it and declared it again (kubelet's restartRequested):
#    that declaration gets a new worker after the purge. A pod whose
#    object is marked for deletion (deletionTimestamp) counts as unlisted:
#    updates of that object reach its worker only and never declare the UID
#    again (kubelet's pod workers never restart a terminated UID).
#  - Static pods: at most one started pod per full name (name_namespace);
#    successors wait FIFO. The sync loop (one goroutine) queues each static
#    pod UID under its full name in arrival order when the UID is first
#    declared; guard name_taken reads that queue; action release_name removes
#    the UID and sends name_free to the next UID still waiting. A successor
#    killed while waiting leaves the queue at once (release_name runs in
#    finished), so it never blocks the ones behind it. A terminated pod
#    frees its name once its containers and its sandbox stopped
#    (release_name in terminated; it frees nothing while a sandbox of the
#    pod may still run, and the terminated timer retries), not once the
#    runtime removed it.
#  - Requeue jitter: the engine supplies jittered values for resync and
#    sync_backoff through the Durations interface.
#  - Admission: the sync loop decides once, when a UID is first declared,
#    whether the pod fits the node beside the admitted pods not yet
#    terminated: node pressure (the eviction manager's admission), requests
#    against allocatable, node affinity and nodeSelector, nodeName, host
#    ports, runtime class (kubelet's canAdmitPod); guard admission_refused
#    reads that decision.
#  - activeDeadlineSeconds: the active_deadline timer of synced and
#    sync_backoff is what is left of it since the pod's start time; the
#    engine arms none for a pod without one. exceed_deadline records the
#    decision, which the status reads (Failed, DeadlineExceeded).
#  - Status is derived from machine states, never patched: phase Pending until
#    a container machine reaches running; Running while syncing; Succeeded or
#    Failed once pod_done held; since no transition leaves terminating,
#    terminated or finished for a syncing state, a terminal phase never goes
#    back (no Running -> Pending, no Failed -> Succeeded). report_status
#    computes it.
machine "pod" {
  doc     = "Pod worker: one per pod UID; syncs the pod while it should run, then terminates and cleans it up."
  initial = state.pending

  event "update" { doc = "A new pod spec to run (config ADD, UPDATE, RESTORE)." }
  event "sync" { doc = "Sync now: the sync tick or requeue timer fired, a runtime event or probe changed the pod, or config RECONCILE." }
  event "sync_ok" { doc = "sync_pod ran to its end with a ready sandbox: every container was asked to start." }
  event "sync_failed" { doc = "sync_pod failed: a volume did not mount, no sandbox is ready, or the sync was cancelled. Requeue with backoff, unless the pod is done." }
  event "kill" { doc = "Termination requested (config REMOVE or DELETE, eviction, pod became terminal, orphan after restart), with a grace period the engine computed." }
  event "name_free" { doc = "A static pod waiting for its full name reached the head of the FIFO and the name is free." }
  event "termination_done" { doc = "kill_containers returned." }
  event "cleanup_done" { doc = "stop_sandbox and remove_pod returned without error." }
  event "deadline_exceeded" { doc = "The pod has been active for spec.activeDeadlineSeconds since its start time (its active_deadline timer fired)." }

  guard "admission_refused" { doc = "The pod was refused admission when it was first declared: its requests do not fit the node's allocatable beside the active pods (OutOfcpu, OutOfmemory, OutOf<resource>), its node affinity or nodeSelector does not match the node (NodeAffinity), its nodeName is another node (NodeName), a host port is taken (NodePorts), its runtime class is unknown (RuntimeClassNotFound), the node is under a pressure that refuses it (Evicted) or the decision failed (UnexpectedAdmissionError); it fails without starting." }
  guard "name_taken" { doc = "A static pod whose full name (name_namespace) another UID holds or waits for ahead of this one (FIFO)." }
  guard "pod_done" { doc = "No container will run again: every regular container machine is terminated or removed, or an init container is terminated after a failure (it never restarts and the pod cannot initialize). Sidecars do not count: they are stopped while the pod terminates." }
  guard "all_containers_stopped" { doc = "No container of the pod runs: every container machine is in waiting, pull_backoff, crashloop_backoff, terminated or removed." }

  action "mount_volumes" {
    doc = "Set up every volume of the pod on the node (emptyDir directory or tmpfs, hostPath type checks, configMap, secret, downwardAPI and projected files written atomically, service account tokens refreshed at 80% of their lifetime). A volume that never mounted fails the sync (FailedMount, naming the volume and the cause): the pod stays ContainerCreating and sync_backoff retries it. A refresh that fails for a volume already mounted is logged and the sync goes on."
  }
  action "unmount_volumes" {
    doc = "Unmount the pod's tmpfs volumes (emptyDir medium Memory, secret, projected) and forget its tokens; the pod's directories go when its worker is purged."
  }
  action "ensure_pod_cgroup" {
    doc = "With --cgroups-per-qos and no ready sandbox, create or update the pod's cgroup under its QoS class (kubepods[/burstable|/besteffort]/pod<uid>), as kubelet's SyncPod ensures it before it mounts the volumes: the cgroup exists from the pod's first sync on, not only once its volumes are mounted. A failure is a Warning event FailedToCreatePodContainer and the sync's error."
  }
  action "sync_pod" {
    calls = [action.ensure_pod_cgroup, action.mount_volumes]
    doc   = "SyncPod: deliver update to every container (a running one whose spec changed stops; see container spec_changed), kill the containers of a dead sandbox, run ensure_pod_cgroup, then mount_volumes (a pod cgroup that cannot be made or a volume that never mounted reports sync_failed before any runtime call), deliver create to the sandbox, then, when it is ready, start to every container (each container's guards decide whether it may start now). Reports sync_failed when a volume did not mount, the sandbox is not ready or the sync was cancelled, else sync_ok: a container whose start failed is its own machine's to retry (start_failed, then its back-off), not the pod's."
  }
  action "kill_containers" {
    doc = "Deliver kill to every container with the effective grace period: regular containers in parallel, then init containers and sidecars. Reports termination_done."
  }
  action "stop_sandbox" {
    doc = "Deliver stop to the sandbox machine."
  }
  action "remove_pod" {
    doc = "Run unmount_volumes (the containers are stopped), then remove every sandbox of the pod from the runtime, their containers with them (idempotent), and deliver removed to the container and sandbox machines. Reports cleanup_done when every call succeeded; a failure delivers nothing, so the retry finds the sandbox still stopped."
    cri   = ["RemovePodSandbox"]
    calls = [action.unmount_volumes]
  }
  action "release_name" {
    doc = "Leave the static pod full name's queue; the next UID waiting for it gets name_free. It fails, freeing nothing, while a sandbox of the pod may still run (its stop failed)."
  }
  action "exceed_deadline" {
    doc = "Record that the pod ran past spec.activeDeadlineSeconds: from now on it is Failed with reason DeadlineExceeded and kubelet's message, and a DeadlineExceeded event says so (kubelet's active deadline handler)."
  }
  action "report_status" {
    doc = "Recompute the pod status from the machine states and hand it to the status writer."
  }

  duration "resync" {
    doc     = "Requeue after a successful sync (jittered by the engine)."
    default = "1m"
  }
  duration "sync_backoff" {
    doc     = "Requeue after a failed sync or a failed termination step (jittered by the engine)."
    default = "10s"
  }
  duration "active_deadline" {
    doc     = "What is left of spec.activeDeadlineSeconds since the pod's start time, read at every entry (so an update that shortens or lengthens it takes effect at once); the engine arms no timer for a pod without one (or not started yet)."
    default = "1h"
  }

  shared "between_syncs" {
    doc = "Between two syncs (synced, sync_backoff): sync again after requeue, at once on an update; terminate on a kill; complete once the active deadline ran out."
    timeout "sync" { after = param.requeue }
    timeout "deadline_exceeded" { after = duration.active_deadline }
    transition "sync" { to = state.syncing }
    transition "update" { to = state.syncing }
    transition "kill" { to = state.terminating }
    transition "deadline_exceeded" {
      to      = state.completing
      actions = [action.exceed_deadline, action.report_status]
      doc     = param.deadline_doc
    }
  }

  shared "stop_containers" {
    doc   = "Stop the containers that still run (terminating, completing), retrying after sync_backoff; go to param.stopped once none runs."
    entry = [action.kill_containers]
    timeout "sync" { after = duration.sync_backoff }
    transition "termination_done" {
      guard = guard.all_containers_stopped
      to    = param.stopped
    }
    transition "termination_done" { doc = "A stop failed and a container still runs: retry when the timer fires." }
    transition "sync" {
      guard = guard.all_containers_stopped
      to    = param.stopped
      doc   = "The runtime reported the last container dead."
    }
  }

  state "pending" {
    doc = "The worker exists; nothing of the pod has started."
    transition "update" {
      guard   = guard.admission_refused
      to      = state.terminated
      doc     = "Refused admission (kubelet's canAdmitPod): Failed with the refusal's reason (OutOfcpu, NodePorts, ...); nothing runs, only clean up."
    }
    transition "update" {
      guard = guard.name_taken
      to    = state.waiting_to_start
    }
    transition "update" { to = state.syncing }
    transition "kill" {
      doc = "Killed before it ever started: nothing runs, only clean up."
      to  = state.terminated
    }
  }

  state "waiting_to_start" {
    doc = "A static pod whose full name is still taken; it waits FIFO for name_free."
    transition "name_free" { to = state.syncing }
    transition "update" { doc = "Only the newest pending update counts; the engine keeps it." }
    transition "kill" { to = state.terminated }
  }

  state "syncing" {
    doc   = "sync_pod runs."
    entry = [action.sync_pod]
    transition "sync_ok" {
      guard   = guard.pod_done
      to      = state.completing
      actions = [action.report_status]
      doc     = "No container will run again: Succeeded or Failed. Stop what still runs (sidecars), keep the rest."
    }
    transition "sync_ok" {
      to      = state.synced
      actions = [action.report_status]
    }
    transition "sync_failed" {
      guard   = guard.pod_done
      to      = state.completing
      actions = [action.report_status]
      doc     = "No ready sandbox, but no container will run again either (a completed pod whose sandbox died or was stopped): nothing needs a sandbox, so the pod completes instead of retrying."
    }
    transition "sync_failed" {
      to      = state.sync_backoff
      actions = [action.report_status]
    }
  }

  state "synced" {
    doc = "The last sync succeeded; wait for the resync timer, an update or a runtime event."
    use "between_syncs" {
      requeue      = duration.resync
      deadline_doc = "activeDeadlineSeconds ran out: Failed, DeadlineExceeded; stop every container with the grace period and keep them, as for a pod that completed."
    }
  }

  state "sync_backoff" {
    doc = "The last sync failed; retry after sync_backoff, or at once on an update or a runtime event."
    use "between_syncs" {
      requeue      = duration.sync_backoff
      deadline_doc = "activeDeadlineSeconds ran out while a sync failed (a container cannot start): Failed, DeadlineExceeded, as from synced."
    }
  }

  state "terminating" {
    doc   = "Stop every container with the effective grace period; never start one again."
    use "stop_containers" { stopped = state.terminated }
    transition "sync" {
      to  = state.terminating
      doc = "Retry the kill (re-arms the timer)."
    }
    transition "kill" {
      actions = [action.kill_containers]
      doc     = "A shorter grace period: containers still stopping re-issue their stop."
    }
    transition "update" { doc = "Updates during termination only matter for the grace period." }
  }

  state "completing" {
    doc   = "The pod completed (Succeeded or Failed) while its sources still declare it: stop the containers that still run (sidecars) with the grace period; never start one again."
    use "stop_containers" { stopped = state.completed }
    transition "sync" {
      to  = state.completing
      doc = "Retry the stop (re-arms the timer)."
    }
    transition "kill" {
      to  = state.terminating
      doc = "Removed while its last containers stop: terminate with the (maybe shorter) grace period."
    }
    transition "update" { doc = "A completed pod never runs again; its UID is final." }
  }

  state "completed" {
    doc   = "Succeeded or Failed, and still declared: the sandbox is stopped, the dead containers and the sandbox stay in the runtime (their logs; what a restarted speclet reads the outcome from) until the pod is removed, as kubelet keeps them."
    entry = [action.stop_sandbox, action.report_status]
    timeout "sync" { after = duration.resync }
    transition "kill" { to = state.terminated }
    transition "sync" {
      to  = state.completed
      doc = "The resync timer, a runtime event or a sync request: re-issue the sandbox stop if it failed (the sandbox machine ignores it once stopped, without a CRI call), so a failed StopPodSandbox is retried within a resync period and a waiting completed pod costs one event per period."
    }
    transition "update" { doc = "A completed pod never runs again; its UID is final." }
  }

  state "terminated" {
    doc   = "All containers stopped: stop the sandbox, free the static pod's full name once the sandbox stopped (kubelet frees it when the pod's termination, sandbox stop included, ends, before its container GC removes what is left, so a successor never runs beside it nor waits on a removal the runtime refuses), and remove the pod from the runtime."
    entry = [action.stop_sandbox, action.release_name, action.remove_pod, action.report_status]
    timeout "sync" { after = duration.sync_backoff }
    transition "cleanup_done" { to = state.finished }
    transition "sync" {
      to  = state.terminated
      doc = "Cleanup failed: retry (every call is idempotent)."
    }
  }

  state "finished" {
    doc   = "Nothing of the pod is left in the runtime. The UID never restarts until purged. release_name again: a successor killed while it waited for the name never passed through terminated (releasing twice is a no-op)."
    entry = [action.release_name]
    final = true
  }
}
