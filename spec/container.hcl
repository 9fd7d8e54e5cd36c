# One container of a pod (kubelet kuberuntime: SyncPod's computePodActions and
# startContainer, killContainer).
#
# Each start runs: image check / PullImage -> CreateContainer -> StartContainer
# -> postStart hook. The pod worker decides which container may start now
# (init containers one at a time, sidecars = restartable init containers, then
# regular containers) and fires `start` for it; this machine decides how.
#
# Rules that are not transitions, and where the engine enforces them:
#  - CrashLoopBackOff starts at 10 s, doubles on each restart, caps at 300 s
#    and resets after 10 min without a failure; image pull backoff the same.
#    The engine keeps the backoff per container and answers the crashloop and
#    image_pull_backoff durations with the current value.
#  - The grace period of stop_container is the effective grace period of the
#    pod worker (only shortens); on grace_expired the engine re-issues
#    StopContainer with timeout 0, so a hung stop cannot block the worker.
#  - Restart counts, exit codes, reasons (ErrImageNeverPull, ImagePullBackOff,
#    CrashLoopBackOff, CreateContainerError) for the status are derived from
#    the state and the last exit the engine recorded, never patched by hand.
machine "container" {
  doc     = "One container of a pod, from image pull to removal."
  initial = state.waiting

  event "start" { doc = "The pod worker wants this container running now." }
  event "pull_ok" { doc = "PullImage returned the image." }
  event "pull_failed" { doc = "PullImage failed (missing image, registry error)." }
  event "created" { doc = "CreateContainer returned a container ID." }
  event "create_failed" { doc = "CreateContainer failed (CreateContainerError)." }
  event "started" { doc = "StartContainer and the postStart hook succeeded, or the runtime reported ContainerStarted." }
  event "start_failed" { doc = "StartContainer or the postStart hook failed (RunContainerError)." }
  event "died" { doc = "The runtime reported ContainerDied; the engine recorded the exit code." }
  event "backoff_done" { doc = "A backoff timer expired." }
  event "kill" { doc = "Stop this container: the pod is terminating, or the spec changed so that it must be restarted." }
  event "liveness_failed" { doc = "The liveness or startup probe failed its threshold: kill, then restart under the restart policy." }
  event "stopped" { doc = "StopContainer returned." }
  event "grace_expired" { doc = "The grace period ran out while stopping." }
  event "removed" { doc = "The container is gone from the runtime (RemoveContainer, or the runtime reported ContainerRemoved)." }

  guard "pod_terminating" { doc = "The pod worker has seen termination: never start a container again." }
  guard "image_present" { doc = "ImageStatus found the image (the engine asks before firing start)." }
  guard "pull_policy_always" { doc = "imagePullPolicy is Always." }
  guard "pull_policy_never" { doc = "imagePullPolicy is Never (the image is missing: ErrImageNeverPull)." }
  guard "restart_allowed" { doc = "restartPolicy Always, or OnFailure with a non-zero exit code (sidecars always restart)." }
  guard "spec_changed" { doc = "The instance was created from an older spec of this container (its hash differs): kubelet restarts it at once, whatever the restart policy." }

  action "pull_image" {
    doc = "Pull the image with the pod's credentials; reports pull_ok or pull_failed."
    cri = ["PullImage", "ImageStatus"]
  }
  action "create_container" {
    doc = "Create the container in the pod sandbox; reports created or create_failed."
    cri = ["CreateContainer"]
  }
  action "start_container" {
    doc = "Start the container, then run the postStart hook; reports started or start_failed."
    cri = ["StartContainer", "ExecSync"]
  }
  action "stop_container" {
    doc = "Run the preStop hook, then StopContainer with the grace period; reports stopped."
    cri = ["ExecSync", "StopContainer"]
  }
  action "record_exit" {
    doc = "Read the exit code, reason and finish time of the dead container for the status and restart_allowed."
    cri = ["ContainerStatus"]
  }
  action "remove_container" {
    doc = "Remove a dead container instance that will not be reported any more (garbage collection of older attempts)."
    cri = ["RemoveContainer"]
  }

  duration "crashloop" {
    doc     = "CrashLoopBackOff: 10 s doubling to 300 s, reset after 10 min without failure."
    default = "10s"
    max     = "5m"
  }
  duration "image_pull_backoff" {
    doc     = "ImagePullBackOff and ErrImageNeverPull retry: 10 s doubling to 300 s."
    default = "10s"
    max     = "5m"
  }
  duration "grace_period" {
    doc     = "The effective termination grace period of the pod (only shortens)."
    default = "30s"
  }

  state "waiting" {
    doc = "Not started yet, or waiting for the next attempt after a backoff."
    transition "start" {
      guard = guard.pod_terminating
      to    = state.terminated
      doc   = "Once the pod terminates, a container never starts again."
    }
    transition "start" {
      guard = guard.pull_policy_always
      to    = state.pulling
    }
    transition "start" {
      guard = guard.image_present
      to    = state.creating
    }
    transition "start" {
      guard = guard.pull_policy_never
      to    = state.pull_backoff
      doc   = "ErrImageNeverPull: the image is missing and may not be pulled."
    }
    transition "start" { to = state.pulling }
    transition "kill" { to = state.terminated }
  }

  state "pulling" {
    doc   = "PullImage runs."
    entry = [action.pull_image]
    transition "pull_ok" {
      guard = guard.pod_terminating
      to    = state.terminated
      doc   = "Termination arrived while pulling: never create it."
    }
    transition "pull_ok" { to = state.creating }
    transition "pull_failed" { to = state.pull_backoff }
    transition "kill" { to = state.terminated }
  }

  state "pull_backoff" {
    doc = "ImagePullBackOff (or ErrImageNeverPull): wait, then let the next sync try again."
    timeout "backoff_done" { after = duration.image_pull_backoff }
    transition "backoff_done" { to = state.waiting }
    transition "kill" { to = state.terminated }
  }

  state "creating" {
    doc   = "CreateContainer runs."
    entry = [action.create_container]
    transition "created" {
      guard = guard.pod_terminating
      to    = state.stopping
      doc   = "Termination arrived while creating: never start it."
    }
    transition "created" { to = state.starting }
    transition "create_failed" { to = state.crashloop_backoff }
    transition "kill" {
      to  = state.stopping
      doc = "The create may have succeeded already: stop whatever exists (NotFound counts as stopped)."
    }
  }

  state "starting" {
    doc   = "StartContainer and the postStart hook run."
    entry = [action.start_container]
    transition "started" { to = state.running }
    transition "start_failed" { to = state.exited }
    transition "died" { to = state.exited }
    transition "kill" { to = state.stopping }
    transition "removed" {
      to  = state.exited
      doc = "Removed behind speclet's back: recorded as an unknown exit (137)."
    }
  }

  state "running" {
    doc = "The container runs."
    transition "died" { to = state.exited }
    transition "liveness_failed" { to = state.stopping }
    transition "kill" { to = state.stopping }
    transition "started" { doc = "A late ContainerStarted runtime event." }
    transition "removed" {
      to  = state.exited
      doc = "Removed behind speclet's back (crictl rm -f): recorded as an unknown exit (137); the restart policy decides."
    }
  }

  state "stopping" {
    doc   = "preStop and StopContainer run with the grace period."
    entry = [action.stop_container]
    timeout "grace_expired" { after = duration.grace_period }
    transition "grace_expired" {
      actions = [action.stop_container]
      doc     = "Force: the engine re-issues StopContainer with timeout 0."
    }
    transition "stopped" { to = state.exited }
    transition "died" { to = state.exited }
    transition "kill" {
      actions = [action.stop_container]
      doc     = "A shorter grace period: the engine re-issues the stop when the grace period shrank."
    }
    transition "started" { doc = "A late ContainerStarted runtime event." }
    transition "removed" { to = state.exited }
  }

  state "exited" {
    doc   = "The container died or was stopped: record the exit, then decide on a restart."
    entry = [action.record_exit]
    choice {
      when "pod_terminating" { to = state.terminated }
      when "spec_changed" { to = state.waiting }
      when "restart_allowed" { to = state.crashloop_backoff }
      otherwise { to = state.terminated }
    }
  }

  state "crashloop_backoff" {
    doc = "CrashLoopBackOff: wait before the next attempt."
    timeout "backoff_done" { after = duration.crashloop }
    transition "backoff_done" {
      to      = state.waiting
      actions = [action.remove_container]
      doc     = "The next sync starts a new attempt; the dead instance before the last one is removed."
    }
    transition "kill" { to = state.terminated }
  }

  state "terminated" {
    doc = "Dead and never restarted (the restart policy forbids it or the pod terminates); still present in the runtime."
    transition "removed" { to = state.removed }
    transition "kill" {}
    transition "died" {}
    transition "stopped" {}
    transition "start" { doc = "A terminated container never starts again; the pod worker may still ask." }
  }

  state "removed" {
    doc   = "Gone from the runtime."
    final = true
  }
}
