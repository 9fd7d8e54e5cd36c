# The probes of one container (kubelet pkg/kubelet/prober: worker.go and
# prober_manager.go), one machine per container.
#
# The engine fires container_running when the container machine enters
# `running`, container_stopping when it enters `stopping` (preStop and
# StopContainer run; the instance still runs) and container_stopped when it
# enters any other state. Results belong to the
# running instance and start over after a restart. Readiness starts false;
# the startup probe gates liveness and readiness: their workers start only
# once startup succeeded, so a liveness or readiness result while
# `starting_up` has no row. A container without a startup probe is started at
# once (start_startup reports startup_ok); one without a readiness probe is
# ready once started (start_probes reports ready).
#
# The period timer: while workers run (starting_up, unready, ready) the
# state's timer probe_due fires after next_probe, the time until the earliest
# due probe of the running workers. A worker probes on the ticks of its
# kind's ticker (kubelet's worker, one per container and probe kind, made
# when the pod is added to the prober and kept until the pod is removed):
# every periodSeconds from the pod's first sync that mounted its volumes
# (kubelet's AddPod), plus, when that sync came less than one period after
# the engine's start, a random part of the period (kubelet's jitter after a
# restart of the agent). The ticks go on while the container does not run,
# so their phase is the same for every instance of the container. A tick
# probes only when it comes after the instance started (at or after the
# container's start plus initialDelaySeconds; a tick at the very instant a
# worker starts has passed), as kubelet's doProbe skips the ticks before.
# run_probe runs the due workers and moves each one's next probe to its next
# tick, past now. trigger_readiness is kubelet's manual trigger
# (UpdatePodStatus, in the sync that sees a started, running container whose
# readiness is not success): the readiness ticks restart from now and the
# worker probes at once, or at its first tick after the initial delay; it
# runs when the container becomes started (start_probes) and when readiness
# fails its threshold. probe_due goes back to the same state, which re-arms
# the timer after run_probe (the engine arms the probe machine's timers once
# the step's actions ran, as they start and schedule the workers); entering
# another running state arms it anew, and off, stopping, killing and killed
# arm none.
# With no worker running (no readiness and no liveness probe) next_probe is
# negative and no timer is armed. A worker whose previous probe still runs
# (timeoutSeconds longer than the period) skips that turn: one probe at a
# time per worker.
#
# Rules that are not transitions, and where the engine enforces them
# (engine/probes, engine/worker/probe.go, engine/worker/probe_schedule.go):
#  - Parameters with kubelet's defaults: initialDelaySeconds 0 (counted from
#    the container's start), periodSeconds 10, timeoutSeconds 1,
#    successThreshold 1, failureThreshold 3.
#  - Thresholds are counted by the engine, not by this machine: each worker
#    keeps its last raw result and how many times in a row it came (kubelet's
#    resultRun); when that run reaches successThreshold or failureThreshold
#    and the result differs from what this machine holds (readiness: ready or
#    unready; liveness and startup hold none, as a failure kills and stops
#    the workers and a startup success stops its worker), the engine
#    delivers the thresholded result as an input of spec/routes.hcl
#    (startup_succeeded, startup_failed, readiness_succeeded,
#    readiness_failed, liveness_failed). So every row below is one such
#    change. Why not rows: the counters are data (three per container, each
#    bounded only by the pod spec's thresholds), not states. Raw results as
#    events with guards over the counters (readiness_successes_reached, ...)
#    would still need the engine to count before firing (a guard only
#    reads), so those guards would be the engine's comparison under a name;
#    the rows would decide only the "differs from what this machine holds"
#    part, at the price of a transition per probe per period that only
#    counts. The thresholded events stay in any case: start_startup and
#    start_probes report them for a container without that probe, and the
#    engine's script tests deliver thresholded results (handleProbe,
#    engine/dispatch.go). And `speclet spec verify` could check nothing
#    more: it would take such guards as free, as it already takes the
#    thresholded inputs as arriving at any time. A raw result of a stopped
#    worker (an earlier instance) is dropped.
#  - Handlers: exec (ExecSync with the probe's timeout; a non-zero exit code
#    fails), httpGet (200-399 succeeds; the host defaults to the pod IP, the
#    node IP for hostNetwork pods), tcpSocket (a connection succeeds), grpc
#    (grpc.health.v1 Check answers SERVING).
#  - kill_container uses the probe's terminationGracePeriodSeconds when set,
#    else the pod's.
#  - While the container stops (stopping, killing) only the readiness
#    worker runs, as kubelet's: its StopLivenessAndStartup when the pod
#    terminates, and a liveness kill that leaves the readiness worker on
#    during the preStop hook. It probes by itself on its ticks, on its own
#    goroutine, as kubelet's worker does: the pod's worker runs the stop
#    (preStop, StopContainer) and serves no timer until it returns, so no
#    probe_due could come. Its results are counted (events, metrics) when
#    the pod's worker reads them but not routed: a stopping container does
#    not serve whatever they say (spec/system.hcl's conditions: serving is
#    the container machine's running), so neither state has a row for ready
#    or unready.
#  - Status: started = this machine is in `unready`, `ready`, `stopping`
#    or `killing`; ready = it is in `ready` (and the pod is not terminating).
#  - The engine fires container_starting when the container machine enters
#    checking_image, pulling, creating, starting or running while this machine is in
#    `killed`, before container_running.
machine "probe" {
  doc     = "The liveness, readiness and startup probes of one container, while it runs."
  initial = state.off

  event "container_running" { doc = "The container machine entered running." }
  event "container_stopping" { doc = "The container machine entered stopping: preStop and StopContainer run, the instance still runs." }
  event "container_stopped" { doc = "The container machine entered a state other than running and stopping (died, stopped): the instance no longer runs." }
  event "container_starting" { doc = "The container machine entered checking_image, pulling, creating, starting or running: the next attempt begins." }
  event "startup_ok" { doc = "The startup probe reached its success threshold, or the container has none." }
  event "startup_failed" { doc = "The startup probe reached its failure threshold." }
  event "ready" { doc = "The readiness probe reached its success threshold, or the container has none." }
  event "unready" { doc = "The readiness probe reached its failure threshold." }
  event "liveness_failed" { doc = "The liveness probe reached its failure threshold." }
  event "probe_due" { doc = "The timer of a running state: the earliest due tick of a running worker came round." }

  action "start_startup" {
    doc = "Start the startup probe's worker; reports startup_ok when the container has no startup probe."
  }
  action "start_probes" {
    doc = "Start the liveness and readiness workers; reports ready when the container has no readiness probe."
  }
  action "run_probe" {
    doc = "Run every worker whose probe is due and whose previous probe returned, each on its own goroutine (exec: ExecSync with the probe's timeout), and move each due worker's next probe one period on, past now; each raw result comes back as an input that the engine counts against the thresholds."
    cri = ["ExecSync"]
  }
  action "trigger_readiness" {
    doc = "kubelet's manual trigger of the readiness worker: its ticks restart from now, and it probes at once (on its own goroutine, as run_probe) when the container started initialDelaySeconds ago and its previous probe returned; a worker still waiting for its first tick's jitter takes the trigger there."
    cri = ["ExecSync"]
  }
  action "kill_container" {
    doc = "Stop the liveness and startup workers (the readiness worker goes on by itself on its ticks while the container stops) and deliver liveness_failed to the container machine, with the probe's grace period (Killing: failed liveness/startup probe, will be restarted)."
    cri = ["ExecSync"]
  }
  action "stop_liveness_and_startup" {
    doc = "Stop the liveness and startup workers: the readiness worker, when it runs, goes on by itself on its ticks (its own goroutine) while the container stops, until stop_probes (kubelet's StopLivenessAndStartup when the pod terminates)."
    cri = ["ExecSync"]
  }
  action "stop_probes" {
    doc = "Stop the workers of the instance that left running; their results are forgotten."
  }

  duration "next_probe" {
    doc     = "Until the earliest next probe of the running workers (never below 0): each worker's next tick (every periodSeconds, default 10 s, from the pod's first sync plus the jitter, or from readiness's last trigger) at or after the container's start plus initialDelaySeconds; negative (no timer) when no worker runs."
    default = "10s"
  }

  shared "probing" {
    doc = "Workers run (starting_up, unready, ready): probe when the earliest one is due, and arm the timer again for the next (param.here is the state itself)."
    timeout "probe_due" { after = duration.next_probe }
    transition "probe_due" {
      to      = param.here
      actions = [action.run_probe]
    }
  }

  shared "stop" {
    doc = "The instance stops or stopped: starting_up, unready and ready."
    transition "container_stopping" {
      to      = state.stopping
      actions = [action.stop_liveness_and_startup]
    }
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
    use "probing" { here = state.starting_up }
    transition "startup_ok" {
      to      = state.unready
      actions = [action.start_probes, action.trigger_readiness]
    }
    transition "startup_failed" {
      to      = state.killing
      actions = [action.kill_container]
    }
    use "stop" {}
  }

  state "unready" {
    doc = "Started; the readiness probe has not succeeded (yet), or failed its threshold."
    use "probing" { here = state.unready }
    transition "ready" { to = state.ready }
    use "liveness" {}
    use "stop" {}
  }

  state "ready" {
    doc = "Started and ready: the container counts for ContainersReady."
    use "probing" { here = state.ready }
    transition "unready" {
      to      = state.unready
      actions = [action.trigger_readiness]
    }
    use "liveness" {}
    use "stop" {}
  }

  state "stopping" {
    doc = "The container stops (its preStop hook and StopContainer run): only the readiness worker runs, by itself; started, not ready."
    transition "container_stopped" {
      to      = state.off
      actions = [action.stop_probes]
    }
  }

  state "killing" {
    doc = "A liveness or startup failure killed the container; it stops (only the readiness worker runs, by itself) until it no longer runs."
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
