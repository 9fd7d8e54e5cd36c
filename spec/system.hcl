# The system: how the machines of one pod act on each other, and the
# invariants `speclet spec verify` checks over every reachable combination of
# their states (one pod machine, one instance of every other machine, and 1..K
# container machines, each with a role). The generated code does not use this
# file; the engine implements the ties (guards) and effects (actions) by hand.
#
# Blocks (references are written MACHINE.NAME; roles are role.init,
# role.sidecar and role.regular):
#
#   replicated "MACHINE" {}            the machine that runs once per container,
#                                      each instance with a role; the others run
#                                      once per pod.
#
#   tie "MACHINE" "GUARD" {            the guard is a function of the system;
#     in    = [M.S, ...]               M (a once-per-pod machine) is in one of S
#     all   = [C.S, ...]               every container instance is in one of S
#     any   = [C.S, ...]               some container instance is in one of S
#     among = [role.R, ...]            all/any only count instances of these roles
#     roles = [role.R, ...]            the guard's own instance has one of these roles
#     mode  = "iff"                    "iff" (default): holds exactly when every
#   }                                  condition given holds; "if": holds when they
#                                      do, free otherwise. Untied guards are free.
#
#   effect "MACHINE" "ACTION" {        what an action does when it runs:
#     sends   = [M.E, ...]             delivered in order to M (every instance of
#                                      the replicated machine), each handled to
#                                      the end before the next
#     reports = [MACHINE.E, ...]       then it reports exactly one of these to its
#                                      own machine (queued behind the step)
#     may_report_nothing = true        or it fails before any effect
#   }                                  Actions without an effect do nothing visible.
#
#   external "MACHINE" "EVENT" {}      an event the engine fires from outside the
#                                      pod, which no input carries: it may happen
#                                      whenever an input could.
#
#   invariant "NAME" {                 exactly one of:
#     never_enter = [M.S, ...]         no step enters one of S ...
#     while       = [P.S, ...]           ... while P is in one of these (optional)
#     rank = [[P.A, P.B], [P.C], ...]  P's tiers, lowest first: no step goes down
#     always_reaches = [P.S, ...]      every reachable state can reach one of S
#     after   = P.E                    once an input delivered P.E, completions
#     reaches = [P.S, ...]             and timers alone can reach one of S
#   }
#
# The environment: every input of routes.hcl and every external event may
# arrive whenever no step is being handled (an input naming a container goes
# to any one of them, and to it before the pod, as the engine does), and a
# timer of a state may fire whenever its machine rests in that state.
# Actions run synchronously, as in the engine: an event is handled to the end
# (actions, sends, reports and the steps they cause) before the next input.
#
# Limits of the model: pods have at least one regular container, init and
# sidecar containers first; sync_pod asks every container at once (the engine
# asks init containers one at a time), so the model allows more orders than
# the engine. After editing this file run `make generate`: the stale test in
# fsm/ keeps its hash so that every spec file is accounted for.

replicated "container" {
  doc = "One container machine per container of the pod spec: init containers, sidecars (restartable init containers), then regular containers. An ephemeral container is an instance of role init here: its guards (start_blocked false, restart_allowed false) are among the free ones of that role, and it does not count for pod_done."
}

# --- guard ties ---

tie "container" "pod_terminating" {
  doc = "The pod worker has seen termination."
  in  = [pod.completing, pod.completed, pod.terminating, pod.terminated, pod.finished]
}

tie "container" "restart_allowed" {
  doc   = "Sidecars always restart; the restart policy and exit code decide for the others."
  roles = [role.sidecar]
  mode  = "if"
}

tie "pod" "all_containers_stopped" {
  doc = "Nothing of any container runs (engine: ctrState.stopped)."
  all = [container.waiting, container.pull_backoff, container.crashloop_backoff, container.exited, container.terminated, container.removed]
}

tie "pod" "pod_done" {
  doc   = "Succeeded or Failed: every regular container finished and may not restart (sidecars do not count); free otherwise, for an init container that failed for good."
  all   = [container.terminated, container.removed]
  among = [role.regular]
  mode  = "if"
}

# --- action effects and completions ---

effect "pod" "sync_pod" {
  doc     = "Delivers the newest spec to every container, stops the containers of a dead sandbox (the model sends sandbox_died at every sync: more behaviour than the engine, which sends it only when the sandbox is dead), asks the sandbox to be ready, then asks every container to start; each container machine decides whether and how."
  sends   = [container.update, container.sandbox_died, sandbox.create, container.start]
  reports = [pod.sync_ok, pod.sync_failed]
}

effect "pod" "kill_containers" {
  sends   = [container.kill]
  reports = [pod.termination_done]
}

effect "pod" "stop_sandbox" {
  sends = [sandbox.stop]
}

effect "pod" "remove_pod" {
  doc                = "On success every sandbox and container is gone from the runtime; on failure nothing is reported and the sync timer retries."
  sends              = [container.removed, sandbox.removed]
  reports            = [pod.cleanup_done]
  may_report_nothing = true
}

effect "container" "pull_image" {
  reports = [container.pull_ok, container.pull_failed]
}

effect "container" "create_container" {
  reports = [container.created, container.create_failed]
}

effect "container" "start_container" {
  reports = [container.started, container.start_failed, container.post_start_failed]
}

effect "container" "stop_container" {
  doc                = "A failed StopContainer reports nothing; grace_expired forces the stop (force_stop_container)."
  reports            = [container.stopped]
  may_report_nothing = true
}

effect "container" "force_stop_container" {
  doc                = "A failed StopContainer reports nothing; the grace timer retries."
  reports            = [container.stopped]
  may_report_nothing = true
}

effect "container" "record_exit" {
  reports = [container.exit_recorded]
}

effect "sandbox" "run_sandbox" {
  reports = [sandbox.ready, sandbox.create_failed, sandbox.status_failed]
}

effect "sandbox" "check_sandbox" {
  reports = [sandbox.ready, sandbox.died, sandbox.status_failed]
}

effect "sandbox" "stop_sandbox" {
  doc                = "A failed StopPodSandbox reports nothing; the pod's terminated timer retries."
  reports            = [sandbox.stopped]
  may_report_nothing = true
}

effect "probe" "kill_container" {
  doc   = "A liveness or startup probe failed its threshold: the container is killed through its machine and the restart policy decides. (The engine sends it to the probe's own container; the model, with one probe machine per pod, sends it to every container: more behaviour, not less.)"
  sends = [container.liveness_failed]
}

effect "probe" "start_startup" {
  doc                = "Without a startup probe the container counts as started at once."
  reports            = [probe.startup_ok]
  may_report_nothing = true
}

effect "probe" "start_probes" {
  doc                = "Without a readiness probe the container is ready once started."
  reports            = [probe.ready]
  may_report_nothing = true
}

# --- events from outside the pod ---

external "pod" "name_free" {
  doc = "The previous holder of this static pod's full name finished (its release_name) and this pod heads the FIFO."
}

external "probe" "container_running" {
  doc = "The engine fires it when a container machine enters running (the model has one probe machine per pod, so it may come at any time)."
}

external "probe" "container_stopped" {
  doc = "The engine fires it when a container machine leaves running."
}

external "probe" "probe_due" {
  doc = "A probe worker's period came round (a timer of the worker, not of a state)."
}

# --- invariants ---

invariant "no_start_after_termination" {
  doc         = "Once the pod worker has seen termination, no container enters its start path."
  never_enter = [container.pulling, container.creating, container.starting]
  while       = [pod.completing, pod.completed, pod.terminating, pod.terminated, pod.finished]
}

invariant "phase_never_backwards" {
  doc = "The pod phase only moves forward: pending, then running, then terminal."
  rank = [
    [pod.pending, pod.waiting_to_start],
    [pod.syncing, pod.synced, pod.sync_backoff],
    [pod.completing, pod.completed],
    [pod.terminating, pod.terminated, pod.finished],
  ]
}

invariant "can_always_finish" {
  doc            = "From every reachable state the pod worker can still reach finished."
  always_reaches = [pod.finished]
}

invariant "kill_finishes" {
  doc     = "After kill, the pod worker reaches finished through action completions and timers alone."
  after   = pod.kill
  reaches = [pod.finished]
}
