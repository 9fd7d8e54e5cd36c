// Package criaudit checks the contract between the spec and the CRI calls
// the engine makes: every mutating CRI call happens inside a spec action, and
// each action calls only the CRI methods its `cri` list declares, plus those
// of the actions its `calls` list names (transitively).
//
// A Recorder wraps a cri.Runtime and records, for every call, the method and
// the action the call's context was tagged with by the generated dispatch
// (fsm.Run<Machine>Action, fsm.ActionFrom); a call outside any action has an
// empty machine and action. The innermost action counts: a container action
// run while a pod action runs is checked against the container action's list.
// Check finds the calls that break the contract; Unseen finds the declared
// (machine, action, method) triples that no record shows, which is only
// meaningful over the union of all records of a test suite.
//
// The Recorder is a test and debugging aid (the engine tests, `speclet run
// --cri-audit-log FILE` and test/e2e use it): it forwards every call
// unchanged and costs one record per call (an append under a mutex, or one
// JSON line written to a file).
//
// Which methods are mutating (Mutating) is decided from the CRI: a call that
// creates, changes or removes runtime state, or runs a process in a
// container (ExecSync), is mutating; Version, Status, the *Status and List*
// reads, ImageStatus and the GetContainerEvents stream are reads. Reads may
// happen outside actions (guards, PLEG relist, status, health checks); inside
// an action they must be declared like any other call.
//
// The kubelet API (engine/kubeletapi) calls the runtime outside the engine,
// on the user's behalf, never through the engine's Runtime: reads
// (ListContainers, ContainerStatus, ListPodSandbox, ListContainerStats,
// ListPodSandboxStats), the streaming calls of cri.Streaming (Exec, Attach,
// PortForward only prepare a session whose commands are the user's), and
// ExecSync for /run, the user's command. None is a lifecycle effect, so none
// is a spec action. Likewise engine/containerlogs' ReopenContainerLog, the
// one mutating call outside the spec: log rotation (--container-log-max-size)
// renames a running container's log file and has the runtime reopen it; it
// changes the runtime's file handle, never a container's state.
//
// # Usage
//
//	rec := criaudit.NewRecorder(rt)          // keeps records in memory
//	e, _ := engine.New(engine.Config{Runtime: rec, ...})
//	...
//	if v := criaudit.Check(rec.Records()); len(v) > 0 { t.Error(criaudit.FormatViolations(v)) }
//	// after every test of the suite:
//	if u := criaudit.Unseen(all); len(u) > 0 { ... criaudit.FormatUnseen(u) ... }
//
//	f, _ := os.Create(path)
//	rt = criaudit.NewLogRecorder(rt, f)      // JSON lines, read back by ReadLog
package criaudit
