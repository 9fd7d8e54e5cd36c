# The pod sandbox: the shared namespaces (and the network) of a pod, with
# kubelet's rules (kuberuntime computePodActions: createPodSandbox, and
# podSandboxChanged).
#
# A pod has one current sandbox. When the runtime reports it dead or not
# ready, the pod worker kills the pod's containers and the next sync creates a
# new sandbox with attempt + 1; the containers then restart under the restart
# policy. With restartPolicy Never, once a container of the pod has run, no
# new sandbox is created: the containers stay dead and the pod fails.
#
# Actions run synchronously on the pod worker, so `creating` and `checking`
# are left before the worker handles its next input; their rows are the
# completions run_sandbox and check_sandbox report. A kill meanwhile cancels
# the running action's calls, except those its `uncancellable` names
# (RunPodSandbox), which run to their end first.
#
# Rules that are not transitions, and where the engine enforces them:
#  - The PLEG relists ListPodSandbox beside ListContainers; a current sandbox
#    that is NOTREADY, or missing, becomes input sandbox_died for its pod.
#  - The attempt of a new sandbox is the number of sandboxes the pod had
#    before (sandbox metadata.attempt).
#  - A sandbox is never forgotten: its ID is kept as soon as RunPodSandbox
#    returned, so a failing PodSandboxStatus leads to `unknown` and a
#    check_sandbox at the next sync, never to a second sandbox; every sandbox
#    the pod ever had is stopped and removed with the pod.
#  - With --cgroups-per-qos, the pod's cgroup
#    (kubepods[/burstable|/besteffort]/pod<uid>) is made by the pod machine's
#    ensure_pod_cgroup, before the volumes and the sandbox, as kubelet's
#    SyncPod; RunPodSandbox gets it as CgroupParent, and is not called when
#    the cgroup could not be made (the sync fails first).
#    remove_pod_cgroup removes it once every sandbox of the pod is removed;
#    housekeeping retries a removal that failed and removes the cgroups of
#    pods no source declares and the runtime no longer holds.
#  - The status condition PodReadyToStartContainers is true exactly while
#    this machine is in `ready`.
machine "sandbox" {
  doc     = "The pod sandbox: created when the pod syncs, replaced when it dies, stopped and removed with the pod."
  initial = state.none

  event "create" { doc = "A sync of the pod needs a ready sandbox." }
  event "ready" { doc = "run_sandbox or check_sandbox found the sandbox ready and read its IPs." }
  event "create_failed" { doc = "RunPodSandbox failed (FailedCreatePodSandBox): no sandbox was created." }
  event "status_failed" { doc = "The sandbox exists but PodSandboxStatus failed: its ID is kept." }
  event "died" { doc = "The runtime reports the sandbox not ready or gone (PLEG relist of ListPodSandbox)." }
  event "stop" { doc = "The pod terminated: stop its sandboxes." }
  event "stopped" { doc = "stop_sandbox returned for every sandbox of the pod." }
  event "removed" { doc = "The pod's sandboxes were removed from the runtime (remove_pod)." }

  guard "recreate_forbidden" { doc = "No container would start in a new sandbox (kubelet's computePodActions): restartPolicy Never and a container of the pod has run (started, or its failed start recorded; an instance only created has not, except one adopted after a restart with no ready sandbox, which counts as dead: whether its start was tried is lost), so the pod fails; or the pod is done (pod_done), e.g. OnFailure after every container exited 0." }

  action "remove_pod_cgroup" {
    doc = "Remove the pod's cgroup (--cgroups-per-qos): no process of the pod is left."
  }
  action "run_sandbox" {
    doc = "RunPodSandbox with the next attempt (in the pod cgroup ensure_pod_cgroup made), then PodSandboxStatus for its state and the pod IP (also for hostNetwork pods: the ID may be a sandbox an interrupted attempt left, since dead; one not ready counts as status_failed). Reports ready, create_failed or status_failed."
    cri = ["RunPodSandbox", "PodSandboxStatus"]
    uncancellable = {
      RunPodSandbox = "A RunPodSandbox cancelled at the client may still complete in the runtime, leaving a sandbox the machine believes was never made (containerd keeps its name reserved, and the next attempt fails until run_sandbox adopts it). The call is bounded by the client's per-call timeout; the kill is handled as soon as it returns."
    }
  }
  action "check_sandbox" {
    doc = "PodSandboxStatus of the sandbox whose status is unknown. Reports ready, died or status_failed."
    cri = ["PodSandboxStatus"]
  }
  action "stop_sandbox" {
    doc = "StopPodSandbox for every sandbox of the pod (idempotent). Reports stopped when all calls succeeded."
    cri = ["StopPodSandbox"]
  }

  state "none" {
    doc = "No sandbox yet."
    transition "create" { to = state.creating }
    transition "stop" { to = state.stopping }
  }

  state "creating" {
    doc   = "RunPodSandbox and PodSandboxStatus run."
    entry = [action.run_sandbox]
    transition "ready" { to = state.ready }
    transition "create_failed" {
      to  = state.none
      doc = "The sandbox config, its log directory or RunPodSandbox failed: the sync fails and the pod worker retries after its sync backoff."
    }
    transition "status_failed" { to = state.unknown }
  }

  state "unknown" {
    doc = "The sandbox exists but its status could not be read; the next sync asks again."
    transition "create" { to = state.checking }
    transition "stop" { to = state.stopping }
  }

  state "checking" {
    doc   = "PodSandboxStatus runs for a sandbox whose status was unknown."
    entry = [action.check_sandbox]
    transition "ready" { to = state.ready }
    transition "died" { to = state.dead }
    transition "status_failed" { to = state.unknown }
  }

  state "ready" {
    doc = "The sandbox runs: containers may start in it (PodReadyToStartContainers)."
    transition "create" { doc = "Already ready." }
    transition "died" { to = state.dead }
    transition "stop" { to = state.stopping }
  }

  state "dead" {
    doc = "The sandbox died behind the pod's back; the pod worker kills the pod's containers."
    transition "create" {
      guard = guard.recreate_forbidden
      doc   = "restartPolicy Never after a container ran: no new sandbox; the pod fails."
    }
    transition "create" {
      to  = state.creating
      doc = "A new sandbox with attempt + 1."
    }
    transition "stop" { to = state.stopping }
  }

  state "stopping" {
    doc   = "StopPodSandbox runs for every sandbox of the pod."
    entry = [action.stop_sandbox]
    transition "stopped" { to = state.stopped }
    transition "stop" {
      to  = state.stopping
      doc = "A stop failed: the pod worker retries on its timer."
    }
  }

  state "stopped" {
    doc = "Every sandbox of the pod is stopped; remove_pod removes them."
    transition "removed" {
      to      = state.removed
      actions = [action.remove_pod_cgroup]
    }
    transition "stop" { doc = "Already stopped." }
  }

  state "removed" {
    doc   = "Nothing of the sandboxes is left in the runtime."
    final = true
  }
}
