# The system: how the machines of one pod act on each other, and the
# invariants `speclet spec verify` checks over every reachable combination of
# their states (one pod machine, one instance of every other machine, 1..K
# container machines, each with a role, and every value of the parameters).
# The generated code does not use this file; the engine implements the ties
# (guards), effects (actions) and flags by hand.
#
# Blocks (references are written MACHINE.NAME; roles are role.init,
# role.sidecar and role.regular; parameter values PARAMETER.VALUE):
#
#   replicated "MACHINE" {}            the machine that runs once per container,
#                                      each instance with a role; the others run
#                                      once per pod.
#
#   restored "NAME" {                  states the engine rebuilds the machines in
#     states = [M.S, ...]              after a restart (NewXMachineAt): each
#   }                                  machine named starts in one of its states
#                                      listed (each container independently),
#                                      the others in their initial state; they
#                                      are explored like the initial states.
#
#   parameter "NAME" {                 a property of the pod fixed for its life
#     values = ["a", "b", ...]         (the restart policy); every value is
#     per_instance = true              explored. per_instance: a property of
#   }                                  each instance of the replicated machine
#                                      (a container's imagePullPolicy), each
#                                      with its own value; only the ties and
#                                      invariants of that machine name it.
#
#   flag "MACHINE" "NAME" {            a fact about one instance that an action
#     set_by = MACHINE.ACTION          records, any value each time it runs (the
#   }                                  exit was a failure); ties read it.
#
#   tie "MACHINE" "GUARD" {            the guard is a function of the system;
#     in    = [M.S, ...]               M (a once-per-pod machine) is in one of S
#     all   = [C.S, ...]               every container instance is in one of S
#     any   = [C.S, ...]               some container instance is in one of S
#     among = [role.R, ...]            all/any only count instances of these roles
#     roles = [role.R, ...]            the guard's own instance has one of these roles
#     given = [P.V, ...]               the parameter P has one of these values
#     flags = [M.F, ...]               these flags of the guard's own instance are set
#     mode  = "iff"                    "iff" (default): holds exactly when every
#   }                                  condition given holds; "if": holds when they
#                                      do, free otherwise; "may": free when they
#                                      do, false otherwise. A guard with several
#                                      ties holds when an iff or if tie holds,
#                                      else is free when it has an if tie or a may
#                                      tie holds, else is false. Untied guards are
#                                      free.
#
#   effect "MACHINE" "ACTION" {        what an action does when it runs:
#     sends   = [M.E, ...]             delivered in order to M (every instance of
#                                      the replicated machine), each handled to
#                                      the end before the next
#     reports = [MACHINE.E, ...]       then it reports exactly one of these to its
#                                      own machine (queued behind the step)
#     may_report_nothing = true        or it fails before any effect
#     requires = [M.S, ...]            and it does whenever M (once per pod) is in
#   }                                  none of S (a precondition the engine checks).
#                                      Actions without an effect do nothing visible.
#
#   external "MACHINE" "EVENT" {}      an event the engine fires from outside the
#                                      pod, which no input carries: it may happen
#                                      whenever an input could.
#
#   phase {                            how the phase users see (package
#     running     = [C.S, ...]         spec/podphase, the function the engine's
#     started     = [C.S, ...]         status calls) reads a state of the
#     exit_failed = C.F                system: a container runs in one of
#     terminating = [P.S, ...]         running; else it exited when its flag F
#     terminated  = [P.S, ...]         was ever recorded (failed when set) or
#     policy      = [R.A, R.O, R.N]    it entered one of started since (it ran:
#     keeps_terminal = true            an exit not recorded is unknown, a
#   }                                  failure), else it has not started; the
#                                      pod worker terminates in one of
#                                      terminating and has terminated in one of
#                                      terminated; policy names the restart
#                                      policy's values for Always, OnFailure and
#                                      Never; keeps_terminal: the status keeps a
#                                      Succeeded or Failed phase once published.
#                                      The phase reads the policy and each last
#                                      exit at every status: the verifier
#                                      follows them beside the explored states
#                                      (they are kept for the phase, not
#                                      forgotten between inputs).
#
#   conditions {                       how the pod conditions users see
#     serving       = [C.S, ...]       (podphase.ConditionsOf) read a state of
#     probe_ready   = [PR.S, ...]      the system, besides the phase block's
#     shows_exit    = [C.S, ...]       facts: a container serves while in one
#     sandbox_ready = [SB.S, ...]      of serving with the probe machine in one
#   }                                  of probe_ready; a container that exited
#                                      shows its exit in one of shows_exit; the
#                                      sandbox is ready in one of sandbox_ready.
#
#   invariant "NAME" {                 exactly one of:
#     never_enter = [M.S, ...]         no step enters one of S ...
#     while       = [P.S, ...]           ... while P is in one of these (optional)
#     from        = [M.S, ...]           ... directly from one of these (optional)
#     given       = [P.V, ...]           ... while the parameter has one of these
#                                            values (optional)
#     among       = [role.R, ...]        ... for instances of these roles (optional)
#     unless      = [M.F, ...]           ... unless one of these flags of the
#                                            instance is set (optional)
#     rank = [[P.A, P.B], [P.C], ...]  P's tiers, lowest first: no step goes down
#     always_reaches = [P.S, ...]      every reachable state can reach one of S
#     after   = P.E                    once an input delivered P.E, every run of
#     reaches = [P.S, ...]             completions and timers alone that is fair
#                                      (see below) reaches one of S
#     always_in = [M.S, ...]           every instance of M is in one of S in every
#     while     = [P.S, ...]           reachable state where P is in one of these
#     leaves = [M.S, ...]              an instance in one of S leaves that state
#                                      through completions and timers alone,
#                                      fairly: a bounded exit
#     phase_rank = [[phase.pending],   the phase users see (phase block), at
#       [phase.running], ...]          every state between inputs (where the
#                                      engine publishes a status): tiers lowest
#                                      first; no status goes down a tier, and a
#                                      phase of the last tier never changes
#     condition_never_true =           the condition users see (conditions
#       condition.NAME                 block) is not True at any state between
#     while  = [P.S, ...]              inputs where P is in one of these and
#     phases = [phase.NAME, ...]       the status shows one of these phases
#                                      (both optional)
#   }
#
# The environment: every input of routes.hcl and every external event may
# arrive whenever no step is being handled (an input naming a container goes
# to any one of them, and to it before the pod, as the engine does), and a
# timer of a state may fire whenever its machine rests in that state.
# Actions run synchronously, as in the engine: an event is handled to the end
# (actions, sends, reports and the steps they cause) before the next input.
#
# Fairness (after, leaves): without new inputs, the engine's own moves (an
# action's outcome, a free guard's value, a timer) are scheduled fairly: a
# choice made infinitely often takes each of its outcomes infinitely often.
# So a stop that may fail (may_report_nothing) succeeds eventually only if
# a timer retries it; a failure nothing retries is a state that stays. On
# the finite graph this is checked as: every state reached without new
# inputs can still reach the goal without them.
#
# Parameters and flags are chosen when first read (a run that has not read
# the restart policy yet is one of every policy), and a flag is forgotten
# between inputs: the restart decision reads the exit in the step that
# recorded it, and a later read chooses anew (more behaviour, never less).
# The phase check alone keeps them, as the engine does: the policy for the
# pod's life, an exit from its record to the next. Parameters are forgotten
# between inputs too, and sooner: a per-instance one once its instance has
# handled its event, any other but the restart policy after the step of
# the once-per-pod machine that read it. Forgetting is sound: a parameter
# not read stands for every value.
#
# Limits of the model: pods have at least one regular container, init and
# sidecar containers first; sync_pod asks every container at once (the engine
# asks init containers one at a time), so the model allows more orders than
# the engine. After editing this file run `make generate`: the stale test in
# fsm/ keeps its hash so that every spec file is accounted for.

replicated "container" {
  doc = "One container machine per container of the pod spec: init containers, sidecars (restartable init containers), then regular containers. An ephemeral container is an instance of role init here: its guards (start_blocked false, restart_allowed false) are among the free ones of that role, and it does not count for pod_done."
}

# --- states rebuilt after a restart (engine recovery: adopt) ---

restored "sandbox_ready" {
  doc    = "A pod whose newest sandbox is ready resumes in synced with that sandbox ready (podState.adopt, sandboxState.adopt). A container with no instance, or whose newest instance was only created, resumes in waiting; a running one in running; an exited one in running with died fired before the first input (ctrState.adopt), so in crashloop_backoff or terminated once it decided (or waiting on a spec change)."
  states = [pod.synced, sandbox.ready, container.waiting, container.running, container.crashloop_backoff, container.terminated]
}

restored "sandbox_not_ready" {
  doc    = "A pod whose newest sandbox is no longer ready (it completed, or the sandbox died) resumes in pending with that sandbox dead; a running container gets sandbox_died before the first input, so it is stopping (its stop may have failed); the others as above."
  states = [sandbox.dead, container.waiting, container.stopping, container.crashloop_backoff, container.terminated]
}

restored "device_checkpoint" {
  doc    = "engine/devicemanager's start: a resource the checkpoint lists resumes in gone (kubelet's stopped endpoint), its grace counted from the start; the others are absent until their plugin registers."
  states = [device_plugin.gone]
}

# --- the phase users see ---

phase {
  doc            = "The engine's status (engine/podstatus) calls podphase.Of with these facts, read from its container views: a container in running or stopping runs (phaseRunning); one whose exit is known shows it (state terminated, or lastState while it waits for its next instance), failed when the exit code is not 0; one removed while it was being stopped, before any exit was recorded, shows an unknown exit (137, ContainerStatusUnknown; the engine tells it by its container ID, the model by its having entered running or stopping: they differ only for an instance created but never started, adopted after a restart, killed and removed, which the engine shows as an unknown exit and the model as not started, both forward moves); the others have not started (waiting, also in terminated or removed when no instance of it ran). podState.terminating() is pod_terminating's list; podstatus.View.Terminated is completed, terminated and finished. podstatus.Compute keeps a terminal phase, as kubelet's status manager does: the runtime may report a terminated container running after all (terminated --started--> stopping: a StartContainer that timed out ran later), which the phase alone would show as Running after Succeeded; `speclet spec verify` prints a trace where the rule is needed."
  running        = [container.running, container.stopping]
  started        = [container.running, container.stopping]
  exit_failed    = container.exit_failed
  terminating    = [pod.completing, pod.completed, pod.terminating, pod.terminated, pod.finished]
  terminated     = [pod.completed, pod.terminated, pod.finished]
  policy         = [restart_policy.always, restart_policy.on_failure, restart_policy.never]
  keeps_terminal = true
}

# --- the conditions users see ---

conditions {
  doc           = "The engine's status (engine/podstatus) calls podphase.ConditionsOf with the phase's facts and these, read from its container views: a container serves while its machine is in running (not stopping: the view's ready) and its probe machine in ready (probeState.ready); podphase.ContainerReady makes a serving sidecar ready, a serving regular container ready unless the pod worker terminates (the phase block's terminating), and an init container ready once its status shows an exit 0. A container that exited shows its exit (state terminated, not waiting) in exited, terminated and removed (the engine also between a death and the next instance when no waiting reason is known; the model shows it waiting there: only Initialized reads it, through a regular container that started or an init container that completed with 0). A sidecar ran once the phase sees it run or exited (the engine: a start time is known). The sandbox is ready in ready (sandboxState.ready). The readiness gates pass."
  serving       = [container.running]
  probe_ready   = [probe.ready]
  shows_exit    = [container.exited, container.terminated, container.removed]
  sandbox_ready = [sandbox.ready]
}

invariant "ready_only_while_running" {
  doc                  = "The pod is Ready only while its phase is Running: never before every sidecar and regular container runs (Pending), never once it Succeeded or Failed."
  condition_never_true = condition.ready
  phases               = [phase.pending, phase.succeeded, phase.failed]
}

invariant "sandbox_not_ready_once_stopped" {
  doc                  = "Once the pod completed or terminated its sandbox is stopped: PodReadyToStartContainers is never True again (a pod that ends frees its network)."
  condition_never_true = condition.ready_to_start_containers
  while                = [pod.completed, pod.terminated, pod.finished]
}

# --- guard ties ---

# Guards left untied, so free (any value at each read), and why that is
# sound: a free guard allows every path a tie would allow and more, so each
# invariant proven with it free holds for every tie. What each would take:
#  - name_taken (pod): free in this model of one pod, where its effect,
#    waiting_to_start until name_free, is explored for every pod. It is tied
#    in `speclet spec verify`'s name model (verify/names.go): 2 and 3 pod
#    machines of one static full name sharing the engine's FIFO, name_taken
#    true when another UID heads the queue and this UID is queued (the
#    engine/names' Taken, checked against it in engine/names/names_test.go),
#    release_name leaving the queue and posting name_free to the new head;
#    the pods' other guards and action outcomes free. It checks
#    name_held_once, name_fifo and name_successor_starts (docs/spec.md).
#  - spec_changed (container): the hash of the spec an instance was
#    created from against the newest one; no state holds a spec, and a user
#    may change a container's spec at any update, so any update and any
#    later exit may find it changed. Tying it needs a per-instance fact
#    recorded at create_container and at update, kept between inputs (a
#    bit per container in every explored state: up to twice the states per
#    container), for no invariant that reads it.
# The other guards of the pod's machines are tied below: the restart
# policy, start order, recreate_forbidden and pod_done to the machines'
# states and the restart policy; admission_refused, image_invalid and the
# pull policy to parameters, each with an invariant that reads it.

parameter "admission" {
  doc    = "Whether the sync loop admitted the pod when its UID was first declared (engine: podState.AdmissionRefused, the worker's refusal), decided once for the pod's life. Only pending reads it, and the first update leaves pending, so choosing it at that read is the whole decision."
  values = ["admitted", "refused"]
}

tie "pod" "admission_refused" {
  doc   = "The admission decision refused the pod."
  given = [admission.refused]
}

parameter "pull_policy" {
  doc          = "The container's imagePullPolicy as the engine reads it (podspec.PullPolicy: the spec's value, else Always for an untagged or :latest image, IfNotPresent otherwise), one per container. It is read at each start; as other parameters it is chosen anew in each input that reads it (the policy of a container is fixed, so this allows more, never less)."
  per_instance = true
  values       = ["always", "if_not_present", "never"]
}

tie "container" "pull_always" {
  doc   = "imagePullPolicy Always."
  given = [pull_policy.always]
}

tie "container" "pull_never" {
  doc   = "imagePullPolicy Never."
  given = [pull_policy.never]
}

parameter "image_reference" {
  doc          = "Whether the container's image reference parses (engine: podspec.ImageNameError), one per container; an update may change it, and it is chosen anew in each input that reads it."
  per_instance = true
  values       = ["valid", "invalid"]
}

tie "container" "image_invalid" {
  doc   = "The image reference does not parse (InvalidImageName)."
  given = [image_reference.invalid]
}

tie "container" "pod_terminating" {
  doc = "The pod worker has seen termination."
  in  = [pod.completing, pod.completed, pod.terminating, pod.terminated, pod.finished]
}

parameter "restart_policy" {
  doc    = "The pod's spec.restartPolicy: Always, OnFailure or Never."
  values = ["always", "on_failure", "never"]
}

flag "container" "exit_failed" {
  doc    = "The exit record_exit recorded last was a failure: a non-zero exit code, or none known (engine/containers: the Container's current exit is nil or its ExitCode is not 0)."
  set_by = container.record_exit
}

tie "container" "restart_allowed" {
  doc   = "A sidecar always restarts."
  roles = [role.sidecar]
}

tie "container" "restart_allowed" {
  doc   = "restartPolicy Always restarts a regular container after any exit."
  roles = [role.regular]
  given = [restart_policy.always]
}

tie "container" "restart_allowed" {
  doc   = "restartPolicy OnFailure restarts a regular container after a failed exit only."
  roles = [role.regular]
  given = [restart_policy.on_failure]
  flags = [container.exit_failed]
}

tie "container" "restart_allowed" {
  doc   = "An init container restarts after a failed exit unless the policy is Never. It may: an ephemeral container, an instance of role init here, never restarts. Otherwise (Never, or a successful exit of a non-sidecar under OnFailure, or of an init container) it does not."
  roles = [role.init]
  given = [restart_policy.always, restart_policy.on_failure]
  flags = [container.exit_failed]
  mode  = "may"
}

tie "container" "first_probe_kill" {
  doc  = "A probe kill is remembered by the probe machine (killed) until the next attempt begins; whether the killed instance was the container's first is no state: free there, false elsewhere. (The model has one probe machine per pod, so a kill remembered there may stand for any container's.)"
  in   = [probe.killed]
  mode = "may"
}

tie "container" "start_blocked" {
  doc   = "Start order (engine/containers StartBlocked): a regular container waits while a sidecar does not run (podState.initialized counts a sidecar once it runs). Free otherwise: an init container not completed with exit 0 also blocks it (the exit is no state), an earlier init container blocks an init container, and a container that left the spec is always blocked; an ephemeral container (role init here) is never blocked."
  roles = [role.regular]
  any   = [container.waiting, container.checking_image, container.pulling, container.pull_backoff, container.creating, container.starting, container.stopping, container.exited, container.deciding, container.restarting, container.crashloop_backoff, container.terminated, container.removed]
  among = [role.sidecar]
  mode  = "if"
}

tie "sandbox" "recreate_forbidden" {
  doc   = "The pod is done (engine/sandbox RecreateForbidden: PodDone): every regular container is terminated or removed. Free otherwise: restartPolicy Never after a container ran (engine/containers Ran, which no state shows) or an init container that failed for good also forbid it. (Tying those to restart_policy would read the policy at every sandbox create and double the states inside a step, for no invariant that needs it yet.)"
  all   = [container.terminated, container.removed]
  among = [role.regular]
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
  doc                = "On success every sandbox and container is gone from the runtime; on failure nothing is reported and the sync timer retries. It removes nothing while the sandbox is not stopped (engine: RemovePod returns \"sandbox not stopped yet\"), so a failed StopPodSandbox is retried (terminated's timer re-runs stop_sandbox) before the pod is removed."
  sends              = [container.removed, sandbox.removed]
  reports            = [pod.cleanup_done]
  may_report_nothing = true
  requires           = [sandbox.stopped]
}

effect "container" "check_image" {
  doc     = "ImageStatus answered with the image, without it, or failed."
  reports = [container.image_present, container.image_missing, container.image_check_failed]
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

effect "node" "remove_dead_containers" {
  reports = [node.containers_collected, node.container_gc_failed]
}

effect "node" "observe_signals" {
  reports = [node.no_pressure, node.reclaim, node.pressure, node.observe_failed]
}

effect "node" "measure_image_fs" {
  reports = [node.below_high, node.above_high, node.measure_failed]
}

effect "node" "remove_unused_images" {
  reports = [node.collected, node.collect_failed]
}

# evict_pod has no effect here: the kill it decides reaches a pod worker as
# input evicted, which may arrive whenever an input can.

# --- events from outside the pod ---

external "pod" "name_free" {
  doc = "The previous holder of this static pod's full name finished (its release_name) and this pod heads the FIFO."
}

external "probe" "container_running" {
  doc = "The engine fires it when a container machine enters running (the model has one probe machine per pod, so it may come at any time)."
}

external "probe" "container_stopping" {
  doc = "The engine fires it when a container machine enters stopping while the probe machine is in starting_up, unready or ready."
}

external "probe" "container_stopped" {
  doc = "The engine fires it when a container machine enters a state other than running and stopping."
}

external "probe" "container_starting" {
  doc = "The engine fires it when a container machine enters checking_image, pulling, creating, starting or running while the probe machine remembers a kill."
}

external "device_plugin" "registered" {
  doc = "engine/devicemanager fires it when a Register request of the resource passed validation and the plugin's endpoint answered."
}

external "device_plugin" "devices" {
  doc = "engine/devicemanager fires it for each device list the resource's endpoint's ListAndWatch stream sends."
}

external "device_plugin" "stream_ended" {
  doc = "engine/devicemanager fires it when the resource's endpoint's ListAndWatch stream ends."
}

# --- invariants ---

invariant "no_start_after_termination" {
  doc         = "Once the pod worker has seen termination, no container enters its start path."
  never_enter = [container.checking_image, container.pulling, container.creating, container.starting]
  while       = [pod.completing, pod.completed, pod.terminating, pod.terminated, pod.finished]
}

invariant "phase_never_backwards" {
  doc        = "The phase users see (podphase.Of over the phase block's facts) only moves forward from one status to the next: Pending, then Running, then Succeeded or Failed, which never changes."
  phase_rank = [[phase.pending], [phase.running], [phase.succeeded, phase.failed]]
}

invariant "worker_never_backwards" {
  doc = "The pod worker only moves forward: pending, then syncing, then completing or terminating."
  rank = [
    [pod.pending, pod.waiting_to_start],
    [pod.syncing, pod.synced, pod.sync_backoff],
    [pod.completing, pod.completed],
    [pod.terminating, pod.terminated, pod.finished],
  ]
}

invariant "no_sandbox_after_termination" {
  doc         = "Once the pod worker has seen termination, no sandbox is created or checked."
  never_enter = [sandbox.creating, sandbox.checking]
  while       = [pod.completing, pod.completed, pod.terminating, pod.terminated, pod.finished]
}

invariant "refused_pod_never_starts" {
  doc         = "A pod refused admission fails without starting: it goes from pending to terminated, never to syncing or waiting for its static name, so no sandbox or container of it is made (kubelet's canAdmitPod decides before the pod worker syncs)."
  never_enter = [pod.syncing, pod.waiting_to_start]
  from        = [pod.pending]
  given       = [admission.refused]
}

invariant "never_policy_never_pulls" {
  doc         = "Under imagePullPolicy Never no container pulls: a missing image is ErrImageNeverPull."
  never_enter = [container.pulling]
  given       = [pull_policy.never]
}

invariant "always_policy_pulls_without_looking" {
  doc         = "Under imagePullPolicy Always a start pulls at once: it never looks for the image on the node first."
  never_enter = [container.checking_image]
  given       = [pull_policy.always]
}

invariant "invalid_image_never_used" {
  doc         = "A container whose image reference does not parse is neither looked up, pulled nor created (InvalidImageName, as kubelet refuses it before EnsureImageExists)."
  never_enter = [container.checking_image, container.pulling, container.creating]
  given       = [image_reference.invalid]
}

invariant "no_restart_under_never" {
  doc         = "Under restartPolicy Never no init or regular container restarts after it exited (a spec change still recreates it, as kubelet does whatever the policy: deciding -> waiting, not this row)."
  never_enter = [container.restarting, container.crashloop_backoff]
  from        = [container.deciding]
  given       = [restart_policy.never]
  among       = [role.init, role.regular]
}

invariant "on_failure_restarts_only_failures" {
  doc         = "Under restartPolicy OnFailure an init or regular container restarts only after a failed exit."
  never_enter = [container.restarting, container.crashloop_backoff]
  from        = [container.deciding]
  given       = [restart_policy.on_failure]
  among       = [role.init, role.regular]
  unless      = [container.exit_failed]
}

invariant "init_restarts_only_failures" {
  doc         = "Under restartPolicy Always an init container restarts only after a failed exit (it must complete once)."
  never_enter = [container.restarting, container.crashloop_backoff]
  from        = [container.deciding]
  given       = [restart_policy.always]
  among       = [role.init]
  unless      = [container.exit_failed]
}

invariant "always_restarts" {
  doc         = "Under restartPolicy Always a regular container that exited while the pod runs is restarted (or recreated on a spec change), never terminated."
  never_enter = [container.terminated]
  from        = [container.deciding]
  given       = [restart_policy.always]
  among       = [role.regular]
  while       = [pod.pending, pod.waiting_to_start, pod.syncing, pod.synced, pod.sync_backoff]
}

invariant "sidecars_always_restart" {
  doc         = "A sidecar that exited while the pod runs is restarted, whatever the restart policy."
  never_enter = [container.terminated]
  from        = [container.deciding]
  among       = [role.sidecar]
  while       = [pod.pending, pod.waiting_to_start, pod.syncing, pod.synced, pod.sync_backoff]
}

invariant "containers_removed_when_finished" {
  doc       = "Once the pod worker finished, every container is in its final state removed (final states have no exits), or rests where nothing of it runs and nothing asks it to start again, because the pod went from pending to terminated, which kills no container: waiting (refused admission, killed before it synced, or restored with its sandbox not ready; remove_pod removed any created instance), or crashloop_backoff (restored with its sandbox not ready, an adopted exited instance decided to restart before the kill; remove_pod removed its instances, but crashloop_backoff has no row for removed: the machine outlives the pod there, an open gap)."
  always_in = [container.waiting, container.crashloop_backoff, container.removed]
  while     = [pod.finished]
}

invariant "sandbox_removed_when_finished" {
  doc       = "Once the pod worker finished, the sandbox is in its final state removed."
  always_in = [sandbox.removed]
  while     = [pod.finished]
}

invariant "container_stop_ends" {
  doc    = "A stopping container leaves stopping through its grace timer and its stop's retries alone."
  leaves = [container.stopping]
}

invariant "sandbox_stop_ends" {
  doc    = "A stopping sandbox leaves stopping without new inputs (the pod's timers retry a failed stop)."
  leaves = [sandbox.stopping]
}

invariant "pod_stop_ends" {
  doc    = "A pod worker that stops containers or removes the pod leaves that state without new inputs."
  leaves = [pod.completing, pod.terminating, pod.terminated]
}

invariant "node_pass_ends" {
  doc    = "A pass of the node machine (container GC, eviction, image GC) ends in idle through its own completions."
  leaves = [node.removing_containers, node.observing, node.measuring, node.collecting]
}

invariant "can_always_finish" {
  doc            = "From every reachable state the pod worker can still reach finished."
  always_reaches = [pod.finished]
}

invariant "kill_finishes" {
  doc     = "After kill, every fair run of action completions and timers alone reaches finished: no failure that nothing retries, no state left only by a new input."
  after   = pod.kill
  reaches = [pod.finished]
}

invariant "device_plugin_gone_leaves" {
  doc    = "A gone endpoint's resource leaves gone through its grace timer alone (to removed, its one exit without a registration): a dead plugin's devices leave the Node's capacity without anything else happening."
  leaves = [device_plugin.gone]
}

invariant "device_plugin_devices_need_an_endpoint" {
  doc         = "A resource gets devices (healthy or unhealthy) only from a connected endpoint: never from absent, gone or removed without a registration first, so a list of an endpoint gone or replaced never revives it."
  never_enter = [device_plugin.healthy, device_plugin.unhealthy]
  from        = [device_plugin.absent, device_plugin.gone, device_plugin.removed]
}
