// Package engine runs pods: it turns channel inputs (pod config updates,
// runtime container events, ticks, probe results) into events of the
// generated state machines (package fsm, from spec/*.hcl) and carries out the
// actions their transitions return as CRI calls.
//
// # Structure
//
//   - engine.go, loop.go: the sync loop. One goroutine selects over config
//     updates, PLEG events, a 1 s sync tick (machine timers that ran out), a
//     2 s housekeeping tick (runtime health, orphans, purge of finished
//     workers, backoff GC) and probe results. While the runtime does not
//     answer, pod workers hold their inputs (nothing is lost) and a prober
//     retries with exponential backoff.
//   - engine/worker: one worker per pod UID (dispatch.go creates it
//     after admission and posts its inputs): its goroutine and inbox, the
//     inputs routed to machine events, the pod, sandbox, container and
//     probe machines' owners in the fire loop, their timers, the CRI
//     requests, adoption after a restart, the status it computes and
//     publishes, the operator log and Kubernetes events of a step. It
//     reads the node through a worker.Host (host.go builds it) and asks
//     the engine for static names, the runtime's gate and the run context
//     through worker.Engine.
//   - engine/fire: the one fire loop of every machine (pod, sandbox,
//     container, probe, node); engine/worker registers the observers of a
//     pod's machines, engine/reclaim the node machine's.
//   - engine/op: what an action does outside the machines, as values:
//     the continuations do no I/O, and the ops tests of engine/worker,
//     engine/sandbox, engine/containers, engine/images and engine/reclaim
//     drive them with replies fed by hand (engine/op/optest), each CRI
//     call held to the action's spec cri list.
//   - nodegc.go: the node machine (spec/node.hcl), engine/reclaim's
//     Machine bound to its Node (its guards, actions and durations), on its
//     own goroutine, through the same fire loop: the timers of idle
//     (image_gc_due, eviction_due, container_gc_due after next_image_gc,
//     next_eviction, next_container_gc), armed for the next instant of each
//     pass's schedule and waited for on the engine's clock (no sync tick:
//     a pass runs at its instant); every ImageGCPeriod (5 min)
//     MeasureImageFs (ImageFsInfo, statfs of its mountpoint through
//     Config.FsStat, the images and the containers using them) and
//     RemoveUnusedImages (RemoveImage of engine/imagegc's plan).
//   - names.go: static pod full names (engine/names), one started pod per name, FIFO.
//   - loop.go runs engine/pleg (the relist diff of containers and sandboxes,
//     and the runtime's event stream) and hands its events to the workers.
//   - probe.go, status.go, labels.go: the engine's API for probe kinds and
//     results, the status reasons and the labels on CRI objects.
//   - recover.go: rebuilding from the runtime after a restart (the pods
//     engine/runtimepods groups from the labels); orphans.
//   - strays.go: runtime pods that appear while speclet runs and that no
//     worker owns (a lost RunPodSandbox reply), handed to the orphan path.
//   - engine/history: each pod's machine states and bounded transition
//     log; debug.go answers GET /debug/pods from it and keeps the log of a
//     pod that is gone a while.
//   - engine/metrics: the Prometheus series (transitions, every spec row
//     exported from 0; refused events, time in state, machines per state,
//     pod workers, kubelet's equivalents); engine/observe feeds it.
//   - engine/detach: the calls an action's spec declares `uncancellable`
//     (today RunPodSandbox, CreateContainer and StartContainer, which would
//     complete in the runtime unseen) are not cancelled by a kill; the
//     kill is handled when they return. A create whose name containerd
//     still reserves for an earlier unanswered attempt of the same create
//     adopts that object instead of failing on every retry.
//   - cleanup.go, engine/poddirs: removing the directories (volumes, logs)
//     and the pod cgroups of pods gone from every source and from the
//     runtime, after unmounting what is still mounted under them (tmpfs
//     volumes of a pod removed while the agent was down).
//   - engine/pods MountVolumes / UnmountVolumes, allocatable.go: the pod machine's
//     mount_volumes (run by sync_pod before the sandbox) and
//     unmount_volumes (run by remove_pod) over engine/volume; a volume that
//     never mounted fails the sync with FailedMount (logged with the
//     volume, its type and the cause), so the pod stays ContainerCreating
//     and sync_backoff retries it; Config.VolumeAPI supplies configMaps,
//     secrets and tokens (volume.Clientset over a client-go clientset).
//   - resources/ (pure): QoS class, oom_score_adj, pod cgroup settings,
//     hugepages, node allocatable, the --kube-reserved and --eviction-hard
//     flag syntax. cgroups/: the kubepods hierarchy and pod cgroups on the
//     cgroupfs driver (v1 and v2), behind Config.PodCgroups; the sandbox
//     machine's run_sandbox (before RunPodSandbox) and remove_pod_cgroup
//     call it.
//   - Container GC is the container machine's remove_container, run when
//     CrashLoopBackOff begins, with Config.ContainerGC (kubelet's
//     --maximum-dead-containers-per-container, --minimum-container-ttl-duration);
//     with ContainerGC.MaxContainers (--maximum-dead-containers) the node
//     machine's remove_dead_containers (engine/reclaim) enforces both
//     limits across pods every ContainerGCPeriod (1 min) with the plan of
//     containergc/ (pure); the pod workers forget the removed instances
//     when the PLEG reports them gone.
//   - eviction/ and imagegc/ (pure): the decisions of kubelet's eviction
//     manager (thresholds, grace periods, minimum reclaim, pressure
//     conditions, admission under pressure, ranking) and image GC (high and
//     low thresholds, LRU, in-use, pinned, minimum age), wired through the
//     node machine by engine/reclaim (signals from nodestats/ or
//     Config.Signals, including allocatableMemory.available of the pods
//     cgroup; the pods it may evict through evict.go). It records kubelet's
//     EvictionThresholdMet and ImageGCFailed on the node (Config.NodeEvents,
//     events.go) and Evicted on the evicted pod.
//   - oomwatch/ (pure parser, /dev/kmsg source): the kernel's OOM kills and
//     kubelet's SystemOOM rule; cmd/speclet runs the watcher and records
//     the event on the node.
//   - The SyncLoop ADD/UPDATE/REMOVE lines come from dispatch.go; the
//     operator's lifecycle lines from engine/worker's oplog.go.
//
// Every CRI call that changes the runtime is an operation (engine/op) of
// an implementation of a generated Actions method, run by the machine's
// Run (fsm.Run<Machine>Action with its owner's Exec); only
// reads
// that feed the PLEG, recovery and health (ListContainers, ListPodSandbox,
// Status, Version) happen outside actions. Actions run synchronously on the
// pod's worker goroutine and report their outcome as the events the spec
// names (sync_ok, pull_failed, exit_recorded, ...), fired after the step's
// actions ran, never from inside a looplab callback. So the in-flight
// states (syncing, checking_image, pulling, creating, starting, creating
// and checking of the sandbox) are left before the worker takes its next
// input; the spec draws only the rows that can happen that way.
//
// Housekeeping does not resync every pod (at 10,000 pods that would be
// 5,000 syncs a second) and is no input of any machine (spec/routes.hcl):
// the resync timer of the synced state does, as kubelet's work queue does.
//
// Lifecycle hooks follow kubelet (engine/containers): postStart runs after
// StartContainer and a failure stops the container through the stopping
// state with the grace period (PostStartHookError, then the restart
// policy); preStop runs once per running instance before
// StopContainer, and the seconds it took are taken from the grace period
// given to StopContainer (at least 2 s remain).
//
// Probes follow kubelet's prober (engine/probes, spec/probe.hcl): readiness
// starts false, a startup probe gates liveness and readiness, a liveness or
// startup failure kills the container through its machine with the probe's
// terminationGracePeriodSeconds or the pod's, and the results start over
// with each instance. Each probe kind of a container ticks every period
// from the pod's first sync that mounted its volumes (kubelet's AddPod,
// before the container starts), plus a random part of the period when that
// sync came within one period of the engine's start (Config.ProbeJitter);
// the ticks keep their phase across the container's restarts (engine/worker's
// probe_schedule.go). A tick probes only when it comes after the running
// instance's start and at or after start + initialDelaySeconds, so a first
// probe may come up to one period after that, as in kubelet; a worker skips
// a tick while its previous probe still runs. Readiness is triggered at once
// when the container becomes started and when it falls unready (action
// trigger_readiness, kubelet's UpdatePodStatus trigger), and its ticks
// restart from there. The probe machine's timer (probe_due after
// next_probe, spec/probe.hcl) is found by the 1 s sync tick, so a probe may
// run up to 1 s after its tick.
//
// Admission (engine/admission, one pure decision; admit.go gathers its
// input under the engine's lock): a pod that does not fit the
// node beside the admitted pods not yet terminated is refused when first
// declared and fails with kubelet's reason (the pod machine's
// admission_refused guard): requests over Config.Allocatable (OutOfcpu,
// OutOfmemory), node affinity or nodeSelector against Config.Node's labels
// (NodeAffinity), another spec.nodeName (NodeName), a host port taken
// (NodePorts), an unknown runtimeClassName (RuntimeClassNotFound, through
// Config.RuntimeClasses, which also gives the sandbox its handler), a
// failed lookup or decision (UnexpectedAdmissionError). The others keep
// running.
//
// # Tests
//
// testdata/*.txt are lifecycle scripts (cockroachdb/datadriven), one per
// rule: the engine runs on the simulated runtime (cri/sim over real gRPC)
// with a fake clock shared by both; commands add and remove pods, advance the
// clock, and print what a user sees (GET /pods) and what the runtime holds.
// `go test ./engine -run TestEngineScripts -rewrite` rewrites the expected
// output after a deliberate change. The tests that run pods on a real
// containerd (root only, cri/harness; minutes of real time) are a package of
// their own, engine/containerdtest, which drives the engine through its
// exported API; the benchmarks cover status, relist, 1,000 and 10,000 pods
// on the simulated runtime, event-to-status latency and (in
// engine/containerdtest) a burst on containerd (docs/performance.md).
//
// Two checks run over every engine test, of this package, of
// engine/devicemanager (whose tests drive the device plugin machine,
// spec/device_plugin.hcl, through a real plugin over gRPC; the manager
// tells its Config.Sinks of each step) and of engine/containerdtest
// (engine/internal/suite). The CRI audit: each engine
// test (the scripts, the containerd tests; not the benchmarks) gives the
// engine its runtime behind an engine/criaudit Recorder, and fails when a
// mutating CRI call happened outside a spec action or an action called a
// method missing from its `cri` list (and from those of the actions in its
// `calls` list). Row coverage: each engine test's Config.Steps, the
// engine's observer of every step a machine takes (Step: its machine, row
// and choice branches), counts them (suite.Took). When a whole package ran
// (no -run filter), its TestMain records what its tests took and called in
// the directory $SPECLET_ENGINE_SUITE names, and the package that finds every record there prints the table of
// every transition row (machine, from, event, [guard], to, times taken in
// all and per package) and choice branch (`state: [guard] -> to`) and fails
// when a row or branch was never taken, a call broke the cri lists, or a
// declared (machine, action, method) was never called by that action in any
// test. Without the other packages' records a package prints its own table
// and fails only on a violation of its own calls. `make test` runs this
// package, engine/devicemanager, then engine/containerdtest, in local
// directory mode with one new directory, so the table of the union shows
// when it passes too; by hand:
//
//	d=$(mktemp -d); (cd engine && SPECLET_ENGINE_SUITE=$d go test) && (cd engine/devicemanager && SPECLET_ENGINE_SUITE=$d go test) && (cd engine/containerdtest && SPECLET_ENGINE_SUITE=$d go test)
//
// A third check holds the actions to the `effect` blocks of spec/system.hcl,
// which `speclet spec verify` trusts (effects_test.go): an observer the tests
// register on every machine kind (a pod's through worker.AddCheck) follows
// each action run through the fire loop (engine/fire, Observer.Scope) and
// checks that it raised to its own
// machine exactly one of its reports (or nothing where the effect allows it,
// and always nothing when its action failed and the effect may report
// nothing), that what it delivered to other machines is among its sends in
// their order, that an action without an effect raised and delivered
// nothing, and that the events machines' observers deliver are declared
// `external`. A script fails on what its engine did; TestMain fails on what
// other tests' engines did and prints the runs checked per action (with
// the whole package, or -v). The observer is this package's tests', so the
// tests of engine/containerdtest and engine/worker's unit tests are outside
// this check.
//
// # Usage
//
//	e, err := engine.New(engine.Config{Runtime: rt, NodeName: node, RootDir: "/var/lib/speclet"})
//	if err != nil { ... }
//	go e.Run(ctx, merger.Updates()) // returns when ctx ends; pods keep running
//	pods := e.Pods()                // copies with status
//	err = e.Healthz()               // not recovered yet, runtime down, or PLEG stale
package engine
