# The probes of one container (kubelet pkg/kubelet/prober: worker.go and
# prober_manager.go), one machine per container.
#
# The engine fires container_running when the container machine enters
# `running` and container_stopped when it leaves it; every probe worker of
# the container belongs to the running instance and stops with it, so the
# results start over after a restart. Readiness starts false; the startup
# probe gates liveness and readiness: their workers start only once startup
# succeeded, so a liveness or readiness result while `starting_up` has no row.
# A container without a startup probe is started at once (start_startup
# reports startup_ok); one without a readiness probe is ready once started
# (start_probes reports ready).
#
# Rules that are not transitions, and where the engine enforces them
# (engine/probe.go):
#  - Parameters with kubelet's defaults: initialDelaySeconds 0 (counted from
#    the container's start), periodSeconds 10, timeoutSeconds 1,
#    successThreshold 1, failureThreshold 3. A worker reports a result only
#    when its thresholded result changes (kubelet's resultRun counting), so
#    every row below is one such change.
#  - The first probe of a worker that starts within one period of the
#    engine's start waits a random part of the period (kubelet's jitter after
#    a restart of the agent); later workers probe at once.
#  - Handlers: exec (ExecSync with the probe's timeout; a non-zero exit code
#    fails), httpGet (200-399 succeeds; the host defaults to the pod IP, the
#    node IP for hostNetwork pods), tcpSocket (a connection succeeds), grpc
#    (grpc.health.v1 Check answers SERVING).
#  - kill_container uses the probe's terminationGracePeriodSeconds when set,
#    else the pod's.
#  - Status: started = this machine is in `unready`, `ready` or `killing`;
#    ready = it is in `ready` (and the pod is not terminating).
#  - The engine fires container_starting when the container machine enters
#    checking_image, pulling, creating, starting or running while this machine is in
#    `killed`, before container_running.
machine "probe" {
  doc     = "The liveness, readiness and startup probes of one container, while it runs."
  initial = state.off

  event "container_running" { doc = "The container machine entered running." }
  event "container_stopped" { doc = "The container machine left running (died, killed, stopped)." }
  event "container_starting" { doc = "The container machine entered checking_image, pulling, creating, starting or running: the next attempt begins." }
  event "startup_ok" { doc = "The startup probe reached its success threshold, or the container has none." }
  event "startup_failed" { doc = "The startup probe reached its failure threshold." }
  event "ready" { doc = "The readiness probe reached its success threshold, or the container has none." }
  event "unready" { doc = "The readiness probe reached its failure threshold." }
  event "liveness_failed" { doc = "The liveness probe reached its failure threshold." }
  event "probe_due" { doc = "The period (or initial delay) of a running worker came round." }

  action "start_startup" {
    doc = "Start the startup probe's worker; reports startup_ok when the container has no startup probe."
  }
  action "start_probes" {
    doc = "Start the liveness and readiness workers; reports ready when the container has no readiness probe."
  }
  action "run_probe" {
    doc = "Run every worker whose probe is due, each on its own goroutine (exec: ExecSync with the probe's timeout); each raw result comes back as an input that the engine counts against the thresholds."
    cri = ["ExecSync"]
  }
  action "kill_container" {
    doc = "Stop the workers and deliver liveness_failed to the container machine, with the probe's grace period (Killing: failed liveness/startup probe, will be restarted)."
  }
  action "stop_probes" {
    doc = "Stop the workers of the instance that left running; their results are forgotten."
  }

  shared "stop" {
    doc = "The instance left running: every state but off, killing (which remembers the kill) and killed."
    transition "container_stopped" {
      to      = state.off
      actions = [action.stop_probes]
    }
  }

  shared "liveness" {
    doc = "Started (unready or ready): a failed liveness probe kills the container."
    transition "liveness_failed" {
      to      = state.killing
      actions = [action.kill_container]
    }
  }

  state "off" {
    doc = "The container does not run: no probe runs, not started, not ready."
    transition "container_running" {
      to      = state.starting_up
      actions = [action.start_startup]
    }
  }

  state "starting_up" {
    doc = "The startup probe runs (started=false); liveness and readiness wait."
    transition "probe_due" { actions = [action.run_probe] }
    transition "startup_ok" {
      to      = state.unready
      actions = [action.start_probes]
    }
    transition "startup_failed" {
      to      = state.killing
      actions = [action.kill_container]
    }
    use "stop" {}
  }

  state "unready" {
    doc = "Started; the readiness probe has not succeeded (yet), or failed its threshold."
    transition "probe_due" { actions = [action.run_probe] }
    transition "ready" { to = state.ready }
    use "liveness" {}
    use "stop" {}
  }

  state "ready" {
    doc = "Started and ready: the container counts for ContainersReady."
    transition "probe_due" { actions = [action.run_probe] }
    transition "unready" { to = state.unready }
    use "liveness" {}
    use "stop" {}
  }

  state "killing" {
    doc = "A liveness or startup failure killed the container; it leaves running."
    transition "container_stopped" {
      to      = state.killed
      actions = [action.stop_probes]
    }
  }

  state "killed" {
    doc = "The killed instance no longer runs (not started, not ready); the kill is remembered until the next attempt begins: the container machine's first_probe_kill and its crashloop duration read it."
    transition "container_starting" { to = state.off }
  }
}
