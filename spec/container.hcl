# One container of a pod (kubelet kuberuntime: SyncPod's computePodActions and
# startContainer, killContainer).
#
# Each start runs: ImageStatus (checking_image, unless the pull policy is
# Always) and PullImage when needed -> CreateContainer -> StartContainer ->
# postStart hook. The pull policy is decided on this graph, as kubelet's
# EnsureImageExists decides it (v1.34): Always pulls without looking;
# IfNotPresent and Never look first, use a present image ("already present
# on machine"), and on a missing one IfNotPresent pulls while Never fails
# with ErrImageNeverPull. The pod worker's sync_pod delivers `start` to every
# container; guard start_blocked decides whether this container's turn has
# come (init containers one at a time, sidecars started and kept running, then
# regular containers), so the start order is on this graph.
#
# Actions run synchronously on the pod worker (regular containers of one pod
# in parallel): `checking_image`, `pulling`, `creating` and `starting` are left before the
# worker handles its next input, and their rows are the completions their
# entry actions report. A kill meanwhile cancels the running action, which
# then reports its failure; the kill is handled next. The calls an action
# declares `uncancellable` (CreateContainer, StartContainer) are not
# cancelled: they run to their end, bounded by the client's per-call
# timeout, and the kill is handled once they returned. `stopping` stays
# observable when a stop fails: its grace timer, a shorter grace and the
# runtime's death report then finish it.
#
# Rules that are not transitions, and where the engine enforces them:
#  - CrashLoopBackOff: the first restart is immediate; the delay then starts
#    at the crashloop duration, doubles on each restart, caps at its max and
#    resets after 10 min without a failure; image pull backoff starts at the
#    image_pull_backoff duration and doubles the same way. The durations are
#    read from the backoff of the container (pure); the actions count_restart
#    and count_pull_failure advance it. Only a failed pull advances the pull
#    backoff (kubelet's backOff.Next): ErrImageNeverPull and ImageInspectError
#    wait in pull_backoff for the delay the next failed pull would get (10 s
#    while no pull failed), as kubelet's pod worker retries a failed sync
#    after 10 s. Flags override the spec's values.
#    After a kill for a failed liveness or startup probe (the probe machine
#    rests in `killed` until the next attempt begins) the crashloop duration
#    is 0 when the container lived the current delay since its previous exit
#    (kubelet's doBackOff measures from the newest exited instance); the
#    choice of `restarting` does not advance the backoff after a probe kill of
#    the first instance (guard first_probe_kill: that doBackOff finds no
#    exited instance).
#  - The grace period of stop_container is the effective grace period of the
#    pod worker (only shortens), or the failed probe's own; on grace_expired
#    force_stop_container re-issues StopContainer with timeout 0, so a hung
#    stop cannot block the worker.
#  - Restart counts, exit codes and reasons (InvalidImageName, ImageInspectError, ErrImagePull, ErrImageNeverPull,
#    ImagePullBackOff, CrashLoopBackOff, CreateContainerError,
#    PostStartHookError) for the status are derived from the state and the
#    exit record_exit recorded, never patched by hand.
#  - A runtime event names the container instance it is about; the engine
#    drops events for instances other than the current one.
machine "container" {
  doc     = "One container of a pod, from image pull to removal."
  initial = state.waiting

  event "start" { doc = "sync_pod asks the container to run now." }
  event "update" { doc = "sync_pod delivers the newest pod spec." }
  event "image_present" { doc = "check_image found the image on the node (ImageStatus): it is used as it is, kubelet's Pulled event \"already present on machine\"." }
  event "image_missing" { doc = "check_image did not find the image on the node (ImageStatus returned none)." }
  event "image_check_failed" { doc = "ImageStatus failed (kubelet's ImageInspectError): neither pulled nor used." }
  event "pull_ok" { doc = "pull_image pulled the image." }
  event "pull_failed" { doc = "PullImage failed (ErrImagePull)." }
  event "created" { doc = "CreateContainer returned a container ID." }
  event "create_failed" { doc = "The container's config could not be built (CreateContainerConfigError) or CreateContainer failed (CreateContainerError)." }
  event "state_unknown" { doc = "The runtime reports the instance in state UNKNOWN (PLEG ContainerChanged)." }
  event "started" { doc = "StartContainer and the postStart hook succeeded, or the runtime reported ContainerStarted." }
  event "start_failed" { doc = "StartContainer failed (RunContainerError)." }
  event "post_start_failed" { doc = "The postStart hook failed (FailedPostStartHook): the container is killed." }
  event "died" { doc = "The runtime reported ContainerDied." }
  event "exit_recorded" { doc = "record_exit recorded the exit code, reason and finish time of the dead instance." }
  event "backoff_done" { doc = "A backoff timer expired." }
  event "backoff_shown" { doc = "The next sync after a failed attempt came round (1 s): the status shows the backoff instead of the attempt's error." }
  event "kill" { doc = "Stop this container: the pod is terminating." }
  event "sandbox_died" { doc = "The pod's sandbox died: a running container is stopped and restarts in the next sandbox under the restart policy." }
  event "liveness_failed" { doc = "The liveness or startup probe failed its threshold: kill, then restart under the restart policy." }
  event "stopped" { doc = "StopContainer returned." }
  event "grace_expired" { doc = "The grace period ran out while stopping." }
  event "removed" { doc = "The container is gone from the runtime (RemoveContainer, or the runtime reported ContainerRemoved)." }

  guard "pod_terminating" { doc = "The pod machine is terminating, terminated or finished, or the pod spec no longer has this container: never start it again." }
  guard "start_blocked" { doc = "Not this container's turn: an earlier init container has not completed (a sidecar counts once it runs), or it is a regular container and some init container has not (the pod is not Initialized). An ephemeral container is never blocked." }
  guard "restart_allowed" { doc = "restartPolicy Always, or OnFailure with a non-zero exit code; a sidecar always restarts; an init container only after a failure and never under Never; an ephemeral container never restarts." }
  guard "image_invalid" { doc = "The image reference does not parse (kubelet's InvalidImageName): no pull is tried." }
  guard "pull_always" { doc = "The container's imagePullPolicy is Always: pull at every start without looking for the image first." }
  guard "pull_never" { doc = "The container's imagePullPolicy is Never: an image missing from the node is never pulled (ErrImageNeverPull)." }
  guard "first_probe_kill" { doc = "The probe machine of the container is in killed (a failed liveness or startup probe killed this instance) and the instance is the container's first (no earlier exit): kubelet's doBackOff, reading the status of the sync that killed it, in which it still runs, finds no exited instance and does not advance the CrashLoopBackOff." }
  guard "spec_changed" { doc = "The instance was created from an older spec of this container (its hash differs): kubelet restarts it, whatever the restart policy. Never for an ephemeral container." }

  action "check_image" {
    doc = "ImageStatus of the container's image; records a present image's ID as the container's image and its Pulled event \"Container image ... already present on machine\". Reports image_present, image_missing, or image_check_failed (ImageInspectError, its warning events InspectFailed and Failed \"Error: ImageInspectError\")."
    cri = ["ImageStatus"]
  }
  action "pull_image" {
    doc = "PullImage with the pod's pull credentials (Pulling, then ImageStatus for the size and Pulled \"Successfully pulled ... Image size: N bytes.\", or Failed \"Failed to pull image\" and Failed \"Error: ErrImagePull\"); records the image ID, or the runtime's error as kubelet's CRI client gives it as the message of ErrImagePull and as the previous pull error ImagePullBackOff shows. Reports pull_ok or pull_failed (ErrImagePull)."
    cri = ["PullImage", "ImageStatus"]
  }
  action "refuse_never_pull" {
    doc = "Report ErrImageNeverPull with kubelet's message and warning events (ErrImageNeverPull, Failed \"Error: ErrImageNeverPull\"): the image is missing and the pull policy is Never; no runtime call."
  }
  action "refuse_image" {
    doc = "Report InvalidImageName with kubelet's message, and its warning events InspectFailed and Failed \"Error: InvalidImageName\" once per reference; no runtime call."
  }
  action "count_pull_failure" {
    doc = "Advance the image pull backoff of the container: a pull failed (kubelet advances it for failed pulls only)."
  }
  action "create_container" {
    doc = "Create the container in the pod sandbox, after ImageStatus for the image's user when it must run as non-root and names none; reports created or create_failed."
    cri = ["ImageStatus", "CreateContainer"]
    uncancellable = {
      CreateContainer = "A CreateContainer cancelled at the client may still complete in the runtime, leaving a container the machine believes was never created whose name containerd keeps reserved (a retry adopts it: cri.ReservedFor)."
    }
  }
  action "start_container" {
    doc = "Start the container, then (where the runtime reports users: it supports supplementalGroupsPolicy) ContainerStatus for the user it runs as, which the status shows, then run the postStart hook; reports started, start_failed or post_start_failed."
    cri = ["StartContainer", "ContainerStatus", "ExecSync"]
    uncancellable = {
      StartContainer = "A StartContainer cancelled at the client may still start the task in the runtime (containerd starts it, then drops the cancelled request), leaving a running container the machine believes never started, which later blocks RemovePodSandbox (cannot delete running task). The postStart hook's ExecSync stays cancellable."
    }
  }
  action "stop_container" {
    doc = "Run the preStop hook (once per instance), then StopContainer with the remaining grace period (0 once the grace timer expired); reports stopped."
    cri = ["ExecSync", "StopContainer"]
  }
  action "force_stop_container" {
    doc = "StopContainer with timeout 0, without the preStop hook (it ran): the grace period ran out; reports stopped."
    cri = ["StopContainer"]
  }
  action "record_exit" {
    doc = "Read the exit code, reason and finish time of the dead instance (ContainerStatus when the runtime event did not carry them); reports exit_recorded."
    cri = ["ContainerStatus"]
  }
  action "count_restart" {
    doc = "Advance the CrashLoopBackOff of the container."
  }
  action "show_backoff" {
    doc = "The waiting reason becomes the backoff's, as kubelet's next sync after the failed attempt shows it: ImagePullBackOff after ErrImagePull (message \"Back-off pulling image ...: ErrImagePull: \" and the pull's error; events BackOff \"Back-off pulling image\" and Failed \"Error: ImagePullBackOff\"), CrashLoopBackOff after CreateContainerError or PostStartHookError; the pod's status is published after it. No runtime call."
  }
  action "remove_container" {
    doc = "Container GC of this container: remove the oldest dead instances beyond --maximum-dead-containers-per-container (default 1) that are older than --minimum-container-ttl-duration; the newest stays for its logs and status (lastState) until the pod is removed."
    cri = ["RemoveContainer"]
  }

  duration "crashloop" {
    doc     = "CrashLoopBackOff: the first restart is immediate, then 10 s doubling to 300 s, reset after 10 min without failure."
    default = "10s"
    max     = "5m"
  }
  duration "image_pull_backoff" {
    doc     = "The wait in pull_backoff: 10 s doubling to 300 s over failed pulls (ImagePullBackOff); after ErrImageNeverPull or ImageInspectError the delay the next failed pull would get, not advanced."
    default = "10s"
    max     = "5m"
  }
  duration "backoff_shown" {
    doc     = "1 s (the next sync tick) when the backoff was entered with a reason the backoff replaces (ErrImagePull in pull_backoff; CreateContainerError or PostStartHookError in crashloop_backoff, except the first restart, which waits 0 s and shows no back-off); negative, no timer, otherwise (ErrImageNeverPull, ImageInspectError, an exit, CreateContainerConfigError, which kubelet keeps)."
    default = "1s"
  }
  duration "grace_period" {
    doc     = "The effective termination grace period of the pod (only shortens), plus 2 s for the runtime to report the kill."
    default = "30s"
  }

  state "waiting" {
    doc = "Not started yet, or waiting for the next attempt after a backoff."
    transition "start" {
      guard = guard.start_blocked
      doc   = "Not its turn yet: it waits for the init containers before it."
    }
    transition "start" {
      guard   = guard.image_invalid
      actions = [action.refuse_image]
      doc     = "InvalidImageName: the reference does not parse, so nothing is pulled or created; every sync finds it so again until the spec changes (no backoff, as under kubelet)."
    }
    transition "start" {
      guard = guard.pull_always
      to    = state.pulling
      doc   = "imagePullPolicy Always: pull without looking."
    }
    transition "start" {
      to  = state.checking_image
      doc = "imagePullPolicy IfNotPresent or Never: look for the image first."
    }
    transition "kill" { to = state.terminated }
  }

  state "checking_image" {
    doc   = "ImageStatus runs: is the image on the node?"
    entry = [action.check_image]
    transition "image_present" { to = state.creating }
    transition "image_missing" {
      guard   = guard.pull_never
      to      = state.pull_backoff
      actions = [action.refuse_never_pull]
      doc     = "ErrImageNeverPull: never pulled; the next sync looks again."
    }
    transition "image_missing" { to = state.pulling }
    transition "image_check_failed" {
      to  = state.pull_backoff
      doc = "ImageInspectError: the next sync looks again."
    }
  }

  state "pulling" {
    doc   = "PullImage runs."
    entry = [action.pull_image]
    transition "pull_ok" { to = state.creating }
    transition "pull_failed" {
      to      = state.pull_backoff
      actions = [action.count_pull_failure]
    }
  }

  shared "showing_backoff" {
    doc = "A backoff after a failed attempt: the attempt's error shows until the next sync, then the backoff's reason (internal: the backoff timer keeps running)."
    timeout "backoff_shown" { after = duration.backoff_shown }
    transition "backoff_shown" { actions = [action.show_backoff] }
  }

  state "pull_backoff" {
    doc   = "ErrImagePull, then ImagePullBackOff (or ErrImageNeverPull, ImageInspectError): wait, then let the next sync try again."
    timeout "backoff_done" { after = duration.image_pull_backoff }
    use "showing_backoff" {}
    transition "backoff_done" { to = state.waiting }
    transition "start" { doc = "A sync during the backoff: the next attempt waits for it." }
    transition "kill" { to = state.terminated }
  }

  state "creating" {
    doc   = "CreateContainer runs."
    entry = [action.create_container]
    transition "created" { to = state.starting }
    transition "create_failed" {
      to      = state.crashloop_backoff
      actions = [action.count_restart]
    }
  }

  state "starting" {
    doc   = "StartContainer and the postStart hook run."
    entry = [action.start_container]
    transition "started" { to = state.running }
    transition "start_failed" {
      to  = state.stopping
      doc = "RunContainerError. The instance may run anyway (a lost reply, a client timeout): stop it before the restart policy decides, so that nothing runs unseen."
    }
    transition "post_start_failed" {
      to  = state.stopping
      doc = "FailedPostStartHook: kill it with the grace period; the restart policy decides (PostStartHookError)."
    }
  }

  state "running" {
    doc = "The container runs."
    transition "died" { to = state.exited }
    transition "liveness_failed" { to = state.stopping }
    transition "kill" { to = state.stopping }
    transition "sandbox_died" {
      to  = state.stopping
      doc = "Its sandbox died: stop it; the restart policy decides whether it starts again in a new sandbox."
    }
    transition "update" {
      guard = guard.spec_changed
      to    = state.stopping
      doc   = "Its spec changed: kill it with the grace period; it restarts whatever the restart policy."
    }
    transition "update" { doc = "Unchanged spec." }
    transition "start" { doc = "Already running." }
    transition "started" { doc = "A late ContainerStarted runtime event." }
    transition "removed" {
      to  = state.exited
      doc = "Removed behind speclet's back (crictl rm -f): recorded as an unknown exit (137); the restart policy decides."
    }
  }

  state "stopping" {
    doc   = "preStop and StopContainer run with the grace period; it stays here only when the stop failed."
    entry = [action.stop_container]
    timeout "grace_expired" { after = duration.grace_period }
    transition "grace_expired" {
      actions = [action.force_stop_container]
      doc     = "The grace period ran out and the instance is still not stopped: force it."
    }
    transition "stopped" { to = state.exited }
    transition "died" { to = state.exited }
    transition "kill" {
      actions = [action.stop_container]
      doc     = "Killed again (the pod terminates, maybe with a shorter grace period): the stop is re-issued."
    }
    transition "removed" {
      guard = guard.pod_terminating
      to    = state.removed
      doc   = "remove_pod removed the pod's sandboxes, this instance with them, while its stop was failing (a late report took the terminated container back to stopping in a completed pod): nothing is left to stop, and the machine ends with the pod."
    }
  }

  state "exited" {
    doc   = "The instance died or was stopped: record its exit."
    entry = [action.record_exit]
    transition "exit_recorded" { to = state.deciding }
  }

  state "deciding" {
    doc = "Restart or not, from the recorded exit."
    choice {
      when "pod_terminating" { to = state.terminated }
      when "spec_changed" { to = state.waiting }
      when "restart_allowed" { to = state.restarting }
      otherwise { to = state.terminated }
    }
  }

  state "restarting" {
    doc = "The restart policy restarts it: advance the CrashLoopBackOff, unless kubelet would not."
    choice {
      when "first_probe_kill" {
        to  = state.crashloop_backoff
        doc = "A failed probe killed the first instance: the backoff stays where it is (the first restart is immediate in any case)."
      }
      otherwise {
        to      = state.crashloop_backoff
        actions = [action.count_restart]
      }
    }
  }

  state "crashloop_backoff" {
    doc   = "CrashLoopBackOff: container GC removes the dead instances beyond the limit, then wait before the next attempt (the first restart waits 0 s)."
    entry = [action.remove_container]
    timeout "backoff_done" { after = duration.crashloop }
    use "showing_backoff" {}
    transition "backoff_done" {
      to  = state.waiting
      doc = "The next sync starts a new attempt."
    }
    transition "start" { doc = "A sync during the backoff: the restart waits for it." }
    transition "kill" { to = state.terminated }
  }

  state "terminated" {
    doc   = "Dead and never restarted (the restart policy forbids it or the pod terminates); still present in the runtime. Container GC runs at this death as at every other (kubelet: on each ContainerDied), so only the newest dead instance stays and the status has no lastState."
    entry = [action.remove_container]
    transition "removed" { to = state.removed }
    transition "kill" {}
    transition "died" { doc = "A late ContainerDied runtime event." }
    transition "start" { doc = "A terminated container never starts again; sync_pod still asks every container." }
    transition "started" {
      to  = state.stopping
      doc = "The runtime reports the instance running after all: a StartContainer that timed out at the client ran later, after its stop. Stop it; the restart policy decides again, so nothing runs unseen."
    }
    transition "state_unknown" {
      to  = state.stopping
      doc = "The runtime lost track of the instance (state UNKNOWN), which may still run: stop it, as kubelet kills containers in an unknown state."
    }
  }

  state "removed" {
    doc   = "Gone from the runtime."
    final = true
  }
}
