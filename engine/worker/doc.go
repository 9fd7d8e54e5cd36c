// Package worker is a pod's worker: one goroutine per pod UID that takes
// the pod's inputs (config ops, runtime events, due timers, probe results,
// the eviction manager's order) in order, turns each into events of the
// pod's generated machines (pod, sandbox, one container and one probe
// machine per container) and runs them through engine/fire's loop, whose
// actions (engine/pods, engine/sandbox, engine/containers, engine/images,
// engine/probes) call the runtime. After each batch it computes the pod's
// status and publishes it.
//
// The engine (package engine) creates a worker per UID after admission
// (New), posts its inputs (Post) and reads what it published (Snapshot,
// Published, MachineState, StoppedPod, Debug). A worker reads the node
// through the Host the engine builds once, and asks the engine for what
// the engine owns (static names, the runtime's gate, the run context, a
// first probe's jitter) through Engine.
//
// # Structure
//
//   - worker.go: one worker goroutine per pod UID and its input queue
//     (engine/inbox). A
//     container timer already due when the worker has handled its inputs
//     (a zero delay: the immediate restart, the restart after a probe
//     kill) fires before the worker publishes (timers.go fireDueNow), not
//     at the next tick.
//     Config inputs coalesce (only the newest pending spec counts; a pending
//     kill is never replaced). A kill cancels the running action (a slow
//     pull, a stop with a longer grace period) so it is handled next,
//     except the calls its spec declares uncancellable (engine/detach).
//   - inputs.go: each input becomes machine events through fsm.Route.
//   - observe.go: the observers of each machine kind of a pod, registered
//     once: metrics, history, the debug log and Config.Steps for all
//     (engine/observe's Common); the operator log (oplog.go), Kubernetes
//     events (events.go) and what entering a state means (timers, the
//     published pod state) where they apply. check.go lets the engine's
//     tests add their effect check (AddCheck).
//   - timers.go: the armed timers of a pod's machines (engine/schedule's
//     Set under the worker's lock).
//   - pod.go: the pod machine and its guards (admission_refused,
//     name_taken, pod_done, all_containers_stopped), bound to
//     engine/pods' Pod (the actions and durations: SyncPod,
//     KillContainers, StopSandbox, RemovePod, ReleaseName, ReportStatus,
//     MountVolumes, UnmountVolumes, ExceedDeadline; the start time and the
//     grace period that only shortens); pod_owner.go is what the Pod reads
//     of the pod and how it delivers to the sandbox and container machines
//     (pods.Owner: the containers' order and parallelism are the worker's).
//   - sandbox.go: the sandbox machine, bound to engine/sandbox's Sandbox
//     (its guards and actions: RunSandbox, CheckSandbox, StopSandbox,
//     RemovePodCgroup; recreate_forbidden), which reads the pod through
//     the sandboxState (sandbox.Pod).
//   - container.go: the container machine, bound to engine/containers'
//     Container (the runtime's instances of the container, and the
//     guards, durations and actions CreateContainer, StartContainer with
//     its postStart hook, StopContainer with its preStop hook,
//     RecordExit, RemoveContainer, ShowBackoff, CountRestart;
//     start_blocked, restart_allowed, spec_changed) and to engine/images'
//     Puller (CheckImage, RefuseNeverPull, PullImage, RefuseImage,
//     CountPullFailure; pull_always, pull_never); container_owner.go and
//     image_actions.go are what they read of the container, its pod and
//     the node (containers.Owner, images.Container); ephemeral.go builds
//     a container's config (BuildConfig), an ephemeral one's with its
//     target.
//   - probe.go, probe_schedule.go: the probe machine of each container,
//     bound to engine/probes' Workers (its actions start_startup,
//     start_probes, trigger_readiness, run_probe, kill_container,
//     stop_probes: one worker per probe kind of the running instance,
//     probing on that kind's ticks, anchored at the pod's first sync and
//     kept across instances; probes on their own goroutine, thresholds
//     counted on the pod worker; the arithmetic is engine/prober's),
//     which kills the container through the probeState (probes.Container),
//     and the state timer probe_due
//     armed for the earliest due worker (duration next_probe, on the pod
//     worker's clock); engine/handlers runs the exec, httpGet, tcpSocket
//     and grpc probes.
//   - names.go: static pod full names (engine/names), one started pod per name, FIFO.
//   - backoff.go: CrashLoopBackOff and image pull backoff per container.
//   - requests.go: CRI requests (sandbox and container configs, mounts,
//     resources, log paths under RootDir, speclet's labels and annotations
//     from engine/runtimepods).
//   - loop.go runs engine/pleg (the relist diff of containers and sandboxes,
//     and the runtime's event stream) and hands its events to the workers.
//   - view.go: what the status needs, read from the machine states;
//     engine/podstatus computes the pod status from it.
//   - adopt.go: a pod and its containers taken over from the runtime
//     after a restart (the pods engine/runtimepods groups from the labels).
//   - backoff.go: CrashLoopBackOff and image pull backoff per container.
//   - host.go: what the worker reads of the node (Host) and asks the
//     engine (Engine).
//   - oplog.go: the operator's info lines (container started, killing
//     container, container died, killing pod, pod finished): observers of
//     the container and pod machines' steps, keyed on the typed event and
//     to-state.
package worker
