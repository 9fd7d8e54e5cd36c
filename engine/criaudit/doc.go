// Package criaudit checks the contract between the spec and the CRI calls
// speclet makes: every mutating CRI call happens inside a spec action or a
// caller's handler, each action calls only the CRI methods its `cri` list
// declares, plus those of the actions its `calls` list names
// (transitively), and each handler only those of its own `cri` list.
//
// A Recorder records, for every call of a cri.Client dialed with its
// DialOption (a pair of gRPC client interceptors), the method and the
// action the call's context was tagged with by the generated dispatch
// (fsm.Run<Machine>Action, fsm.ActionFrom); a call outside any action has an
// empty machine and action. The ids of a record come from the gRPC request
// and, for RunPodSandbox and CreateContainer, the reply. What it records is
// what reaches gRPC: a list the client splits by sandbox (cri's splitter)
// shows as its gRPC calls, and a cri.Full that wraps the client (a test's
// runtime that fails or holds a call) is audited for the calls it lets
// through. The innermost action counts: a container action
// run while a pod action runs is checked against the container action's list.
// Check finds the calls that break the contract; Unseen finds the declared
// (machine, action, method) triples that no record shows, which is only
// meaningful over the union of all records of a test suite.
//
// The callers of the runtime outside the machines are declared in
// spec/callers.hcl: the kubelet API (engine/kubeletapi: logs, exec, attach,
// port-forward, /run, stats) and log rotation (engine/containerlogs:
// ReopenContainerLog). They are no lifecycle effect (the command an exec
// or /run starts is the user's; a reopened log changes the runtime's file
// handle, never a container's state), so they are not spec actions; but
// each entry point is a handler with a cri list, and its code tags its
// context with fsm.Handler.Tag, so a Record names the caller in the place
// of the machine and the handler in the place of the action, and Check
// holds it to the handler's list as it holds an action to its own
// (Declared lists the machines' triples, DeclaredHandlers the callers').
// `speclet run` gives every caller the one audited, metered runtime.
//
// The Recorder is a test and debugging aid (the engine tests, the kubelet
// API's tests, `speclet run --cri-audit-log FILE` and test/e2e use it): it
// lets every call through unchanged and costs one record per call (an
// append under a mutex, or one JSON line written to a file).
//
// Which methods are mutating (Mutating) is decided from the CRI: a call that
// creates, changes or removes runtime state, runs a process in a container
// (ExecSync) or prepares a session that does (Exec, Attach, PortForward), or
// reopens a log file (ReopenContainerLog) is mutating; Version, Status, the
// *Status and List* reads (ListPodSandboxStats included), ImageStatus and
// the GetContainerEvents stream are reads. Reads may happen outside actions
// (guards, PLEG relist, status, health checks); inside an action or a
// handler they must be declared like any other call.
//
// # Usage
//
//	rec := criaudit.NewRecorder()            // keeps records in memory
//	rt, _ := cri.Dial(ctx, endpoint, rec.DialOption())
//	e, _ := engine.New(engine.Config{Runtime: rt, ...})
//	...
//	if v := criaudit.Check(rec.Records()); len(v) > 0 { t.Error(criaudit.FormatViolations(v)) }
//	// after every test of the suite:
//	if u := criaudit.Unseen(all, criaudit.Declared()); len(u) > 0 { ... criaudit.FormatUnseen(u) ... }
//
//	f, _ := os.Create(path)
//	rec = criaudit.NewLogRecorder(f)         // JSON lines, read back by ReadLog
package criaudit
