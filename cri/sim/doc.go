// Package sim is an in-memory container runtime that speaks the CRI over
// real gRPC on a unix socket. Unit tests, engine tests and scale benchmarks
// use it where real containerd is too slow or absent, and the daemon runs it
// as --runtime=sim.
//
// It is faithful where speclet depends on the runtime: 64-hex ids, sandbox
// and container states, created/started/finished timestamps, exit codes and
// reasons ("Completed", "Error", "StartError"), labels and annotations,
// list filters, gRPC NotFound on unknown ids, idempotent removal, stop with
// a timeout, name reservation, GetContainerEvents, a sandbox whose pause
// process dies behind the agent's back (KillSandbox). Processes are scripted,
// not run: a container runs until stopped unless a Behavior says otherwise.
// Every time the runtime reports or waits for follows its injected clock.
//
// # Usage
//
//	clk := clocktesting.NewFakeClock(time.Now())
//	srv, err := sim.Start(dir, sim.Options{Clock: clk, Images: []string{"busybox:latest"}})
//	if err != nil { ... }
//	defer srv.Stop()
//	srv.Runtime.OnContainer(sim.Match{Name: "job"}, sim.Behavior{Exit: &sim.Exit{After: 5 * time.Second, Code: 1}})
//	srv.Runtime.OnContainer(sim.Match{Name: "web"}, sim.Behavior{Exec: []sim.ExecReply{{Command: "drain", Delay: 3 * time.Second}}})
//	srv.Runtime.MissingImage("nosuch:latest")
//	srv.Runtime.SlowCall("StartContainer", 3*time.Second)
//	srv.Runtime.FailCall("CreateContainer", 2, codes.Unavailable, "runtime restarting")
//	err = srv.Runtime.KillSandbox(sandboxID) // kill -9 of its pause process: NOTREADY
//	rt, err := cri.Dial(ctx, srv.Endpoint)
//	... // "job" exits with code 1 once clk has stepped 5 s past its start
package sim
