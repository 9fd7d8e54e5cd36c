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
//   - worker.go, glue.go: one worker goroutine per pod UID. Inputs are queued;
//     config inputs coalesce (only the newest pending spec counts; a pending
//     kill is never replaced). fsm.Route maps each input to machine events.
//     A kill cancels the running actions (a slow pull, a stop with a longer
//     grace period) so it is handled next.
//   - pod.go: the pod machine's guards, actions and durations (SyncPod,
//     RunSandbox, KillContainers, StopSandbox, RemovePod, ReleaseName,
//     ReportStatus), the grace period that only shortens, and static pod
//     name ownership (one started pod per full name, successors FIFO).
//   - container.go: the container machine's guards, actions and durations
//     (PullImage, CreateContainer, StartContainer, StopContainer, RecordExit,
//     RemoveContainer; CrashLoopBackOff and image pull backoff per container).
//   - effects.go, labels.go: CRI requests (sandbox and container configs, log
//     paths under RootDir, speclet's labels and annotations).
//   - pleg.go: relist diff and the runtime's event stream.
//   - status.go: the pod status derived from the machine states.
//   - recover.go: rebuilding from the runtime after a restart; orphans.
//
// Every CRI call the engine makes is inside an implementation of a generated
// Actions method, run by fsm.RunPodAction or fsm.RunContainerAction, except
// the reads that answer guards or feed the PLEG and status (ImageStatus before
// a start, ListContainers, ListPodSandbox, ContainerStatus, Status). Actions
// report their outcome as the events the spec names (sync_ok, pull_failed,
// ...); the engine fires them after the step's actions ran, never from inside
// a looplab callback.
//
// Housekeeping does not resync every pod (the spec routes it to pod.sync;
// at 10,000 pods that would be 5,000 syncs a second): the resync timer of
// the synced state does, as kubelet's work queue does.
//
// Lifecycle hooks follow kubelet (hooks.go): postStart runs after
// StartContainer and a failure kills the container (PostStartHookError,
// then the restart policy); preStop runs once per running instance before
// StopContainer, and the seconds it took are taken from the grace period
// given to StopContainer (at least 2 s remain).
//
// Not done yet: probes (the ProbeResults channel carries them once they
// exist), image pull credentials.
//
// # Tests
//
// testdata/*.txt are lifecycle scripts (cockroachdb/datadriven), one per
// rule: the engine runs on the simulated runtime (cri/sim over real gRPC)
// with a fake clock shared by both; commands add and remove pods, advance the
// clock, and print what a user sees (GET /pods) and what the runtime holds.
// `go test ./engine -run TestEngineScripts -rewrite` rewrites the expected
// output after a deliberate change. TestContainerd runs pods on a real
// containerd (root only, cri/harness); the benchmarks cover status, relist,
// 1,000 and 10,000 pods on the simulated runtime, event-to-status latency and
// a burst on containerd (docs/performance.md).
//
// Two checks run over every engine test (audit_test.go). The CRI audit: each
// engine test (the scripts, TestContainerd; not the benchmarks) gives the
// engine its runtime behind an engine/criaudit Recorder, and fails when a
// mutating CRI call happened outside a spec action or an action called a
// method missing from its `cri` list (and from those of the actions in its
// `calls` list). Row coverage: the tests log through a slog handler that
// counts the `row` and `choices` attributes of the "pod transition" and
// "container transition" debug records. When the whole package ran (no -run
// filter), TestMain prints the table of every transition row (machine, from,
// event, [guard], to, times taken) and choice branch (`state: [guard] -> to`)
// and fails the package when a row or branch was never taken, or when a
// declared (machine, action, method) was never called by that action in any
// test. `make test` runs the package in local directory mode so the table
// shows when it passes too.
//
// # Usage
//
//	e, err := engine.New(engine.Config{Runtime: rt, NodeName: node, RootDir: "/var/lib/speclet"})
//	if err != nil { ... }
//	go e.Run(ctx, merger.Updates()) // returns when ctx ends; pods keep running
//	pods := e.Pods()                // copies with status
//	err = e.Healthz()               // runtime down or PLEG stale
package engine
