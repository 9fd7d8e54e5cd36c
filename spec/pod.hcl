# The pod worker: one machine per pod UID (kubelet pod_workers.go).
#
# Phases only move forward: pending -> (waiting_to_start) -> syncing / synced /
# sync_backoff -> terminating -> terminated -> finished. No transition leads
# from terminating, terminated or finished back to a syncing state, so once a
# worker has seen termination it never starts a container again (the container
# machines also refuse to start under guard pod_terminating).
#
# Rules that are not transitions, and where the engine enforces them:
#  - One serialized worker per pod UID: the engine runs one goroutine per UID
#    and fires this machine only from it.
#  - Only the newest pending update counts: the engine keeps one pending pod
#    spec per UID, replaced by every update; `update` while a sync runs is an
#    internal transition and the next sync reads the newest spec.
#  - Effective grace period = min(current, deletionGracePeriodSeconds, kill
#    override); it only shortens, with a floor of 1 s for a plain kill and 0
#    only when forced: computed by the engine when it fires `kill`; a repeated
#    kill in terminating re-runs kill_containers, which the engine skips unless
#    the grace period got shorter.
#  - A terminated UID never restarts until purged: finished is final; the
#    engine keeps finished UIDs and drops config updates for them until
#    housekeeping purges a UID that no source lists any more.
#  - Static pods: at most one started pod per full name (name_namespace);
#    successors wait FIFO. The engine keeps the FIFO per full name, answers
#    guard name_taken, and fires name_free at the head of the queue when the
#    previous holder reaches finished (action release_name). A successor
#    killed while waiting must leave the FIFO at once: name_free is refused
#    outside waiting_to_start, so handing the name to a dead successor would
#    block the ones behind it forever.
#  - Requeue jitter: the engine supplies jittered values for resync and
#    sync_backoff through the Durations interface.
#  - Status is derived from machine states, never patched: phase Pending until
#    a container machine reaches running; Running while syncing; Succeeded or
#    Failed from the exits recorded once sync_ok fired under pod_done, and
#    since no transition leaves terminating/terminated/finished for a syncing
#    state, a terminal phase never goes back (no Running -> Pending, no
#    Failed -> Succeeded). The engine computes it in report_status.
machine "pod" {
  doc     = "Pod worker: one per pod UID; syncs the pod while it should run, then terminates and cleans it up."
  initial = state.pending

  event "update" { doc = "A new pod spec to run (config ADD, UPDATE, RESTORE)." }
  event "sync" { doc = "Sync now: the sync tick or requeue timer fired, a runtime event or probe changed the pod, or config RECONCILE." }
  event "sync_ok" { doc = "The SyncPod started by sync_pod succeeded." }
  event "sync_failed" { doc = "The SyncPod started by sync_pod failed (requeue with backoff)." }
  event "kill" { doc = "Termination requested (config REMOVE or DELETE, eviction, pod became terminal, orphan after restart), with a grace period the engine computed." }
  event "name_free" { doc = "A static pod waiting for its full name reached the head of the FIFO and the name is free." }
  event "termination_done" { doc = "kill_containers returned." }
  event "cleanup_done" { doc = "stop_sandbox and remove_pod returned without error." }

  guard "name_taken" { doc = "A static pod whose full name (name_namespace) is held by another started pod, or earlier successors wait for it (FIFO)." }
  guard "pod_done" { doc = "Every container finished and none may restart under the restart policy: the phase is Succeeded or Failed and stays so." }
  guard "update_pending" { doc = "An update or a sync request arrived while the sync ran: sync again with the newest spec." }
  guard "all_containers_stopped" { doc = "No container of the pod is running (every container machine is exited, terminated or removed)." }

  action "sync_pod" {
    doc = "SyncPod: kill what must die, ensure the sandbox, then drive the container machines: init containers one at a time (sidecars are restartable init containers), then regular containers. Reports sync_ok or sync_failed."
    cri   = ["PodSandboxStatus", "ListContainers"]
    calls = [action.run_sandbox]
  }
  action "run_sandbox" {
    doc = "Create the pod sandbox when none is ready and read back its IPs. Run by sync_pod (see its calls) after the kills and before any container starts."
    cri = ["RunPodSandbox", "PodSandboxStatus"]
  }
  action "kill_containers" {
    doc = "preStop hooks, then StopContainer with the effective grace period for every container, sidecars last. Reports termination_done."
    cri = ["ExecSync", "StopContainer"]
  }
  action "stop_sandbox" {
    doc = "Stop the pod sandbox (network and shared namespaces). Idempotent."
    cri = ["StopPodSandbox"]
  }
  action "remove_pod" {
    doc = "Remove the containers and the sandbox of the pod from the runtime. Idempotent; reports cleanup_done."
    cri = ["RemoveContainer", "RemovePodSandbox"]
  }
  action "release_name" {
    doc = "Give up the static pod full name so that the next successor in the FIFO may start."
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

  state "pending" {
    doc = "The worker exists; nothing of the pod has started."
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
    doc   = "A SyncPod runs."
    entry = [action.sync_pod]
    transition "sync_ok" {
      guard   = guard.pod_done
      to      = state.terminating
      actions = [action.report_status]
      doc     = "All containers finished under the restart policy: Succeeded or Failed, then terminate."
    }
    transition "sync_ok" {
      guard   = guard.update_pending
      to      = state.syncing
      actions = [action.report_status]
    }
    transition "sync_ok" {
      to      = state.synced
      actions = [action.report_status]
    }
    transition "sync_failed" {
      to      = state.sync_backoff
      actions = [action.report_status]
    }
    transition "update" { doc = "Recorded by the engine; sync_ok then re-syncs under update_pending." }
    transition "sync" { doc = "A sync already runs; the engine records the request for update_pending." }
    transition "kill" {
      to  = state.terminating
      doc = "The engine cancels the running SyncPod; its late result is ignored in terminating."
    }
  }

  state "synced" {
    doc = "The last sync succeeded; wait for the resync timer, an update or a runtime event."
    timeout "sync" { after = duration.resync }
    transition "sync" { to = state.syncing }
    transition "update" { to = state.syncing }
    transition "kill" { to = state.terminating }
  }

  state "sync_backoff" {
    doc = "The last sync failed; retry after sync_backoff, or at once on an update or a runtime event."
    timeout "sync" { after = duration.sync_backoff }
    transition "sync" { to = state.syncing }
    transition "update" { to = state.syncing }
    transition "kill" { to = state.terminating }
  }

  state "terminating" {
    doc   = "Stop every container with the effective grace period; never start one again."
    entry = [action.kill_containers]
    timeout "sync" { after = duration.sync_backoff }
    transition "termination_done" {
      guard = guard.all_containers_stopped
      to    = state.terminated
    }
    transition "termination_done" { doc = "Some container still runs: retry when the timer fires." }
    transition "sync" {
      guard = guard.all_containers_stopped
      to    = state.terminated
    }
    transition "sync" {
      to  = state.terminating
      doc = "Retry the kill (re-arms the timer)."
    }
    transition "kill" {
      actions = [action.kill_containers]
      doc     = "A shorter grace period: the engine re-issues the stops when the grace period shrank."
    }
    transition "update" { doc = "Updates during termination only matter for the grace period." }
    transition "sync_ok" { doc = "Late result of a cancelled sync." }
    transition "sync_failed" { doc = "Late result of a cancelled sync." }
  }

  state "terminated" {
    doc   = "All containers stopped: stop the sandbox and remove the pod from the runtime."
    entry = [action.stop_sandbox, action.remove_pod, action.report_status]
    timeout "sync" { after = duration.sync_backoff }
    transition "cleanup_done" { to = state.finished }
    transition "sync" {
      to  = state.terminated
      doc = "Cleanup failed: retry (both calls are idempotent)."
    }
    transition "kill" {}
    transition "update" {}
    transition "sync_ok" {}
    transition "sync_failed" {}
    transition "termination_done" {}
  }

  state "finished" {
    doc   = "Nothing of the pod is left in the runtime. The UID never restarts until purged."
    entry = [action.release_name]
    final = true
  }
}
