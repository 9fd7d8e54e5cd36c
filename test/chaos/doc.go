// Package chaos churns pods on a real containerd (cri/harness) while it
// breaks things: speclet is killed with SIGKILL at random moments and
// restarted, containerd is restarted, and CRI calls fail or time out at
// random through a fault-injecting gRPC proxy on the CRI socket (proxy.go).
// Manifests are added, edited and removed at random. Everything random
// comes from one seed, printed at the start (rerun with -chaos.seed N).
//
// After each restart and at the end the suite stops churning, switches the
// faults off, waits for the node to settle and checks what a user would:
//
//   - every declared pod runs exactly once: one READY sandbox per pod, at
//     most one running container per container name, and (sampled every
//     2 s during the whole run) never two READY sandboxes for one pod name
//     or two running instances of one container;
//   - a removed pod leaves nothing: no sandbox or container in the runtime,
//     no mount or shim naming its sandboxes, no directory under --root-dir;
//   - no container started after its pod was killed: in the daemons'
//     --cri-audit-log (engine/criaudit records, which name the pod of
//     RunPodSandbox and CreateContainer and the IDs of the others), no
//     RunPodSandbox, CreateContainer or StartContainer of a pod follows the
//     StopPodSandbox of its termination;
//   - RSS and goroutines of the daemon stay flat from the second minute on.
//
// It prints a summary: faults injected, restarts survived, pods churned,
// invariant violations (the test fails unless 0).
//
// A pod that completes because of a fault (a Never pod whose StartContainer
// failed while containerd restarted goes Failed, as with kubelet) settles
// with nothing running instead.
//
// What it found:
//
//   - A kill cancelled an in-flight StartContainer; containerd started the
//     task anyway, the container machine went starting -> exited and never
//     stopped that instance, and RemovePodSandbox of the removed pod then
//     failed forever with "cannot delete running task" (its sandbox, shim
//     and log directory stayed). Fixed in engine/detach: a kill no longer
//     cancels RunPodSandbox, CreateContainer or StartContainer.
//
//   - A RunPodSandbox cut by a containerd restart ("error reading from
//     server: EOF") had created the sandbox; every retry then failed with
//     "failed to reserve sandbox name ... is reserved for ID" and the pod
//     stayed Pending (short run, seed 1795436269582496180). Fixed: such a
//     create adopts the reserved object (engine/detach for containers,
//     engine/sandbox for sandboxes, see below).
//
//   - A StartContainer that failed at the client but ran in the runtime
//     (a lost reply, a timeout under load with a short
//     --runtime-request-timeout; seen with 3 s, seed 1795433833562236424)
//     left an instance running that no machine knew of. Fixed in
//     spec/container.hcl: start_failed goes to stopping, so the instance is
//     stopped before the restart policy decides (engine script
//     sandbox_reply_lost.txt loses that reply on purpose).
//
//   - A restartPolicy Never pod that completed (here: failed, because an
//     injected fault failed its CreateContainer or StartContainer) had its
//     sandbox removed although its manifest still declared it; after a
//     kill -9 of speclet nothing in the runtime said it completed, and the
//     restarted daemon ran it again (full run, seed 1795435494397300048,
//     pods p034 and p078). Fixed in spec/pod.hcl: a completed pod stops its
//     sandbox and keeps it and its dead containers until it is removed
//     (states completing and completed), as kubelet does, and recovery
//     resumes its sandbox machine in dead, where recreate_forbidden keeps
//     the outcome (engine script completed.txt). The short run now runs
//     its long runners under Never again.
//
//   - A RunPodSandbox whose reply was lost under load (the 30 s request
//     timeout of the e2e daemon, 100 pods at once) left the retry adopting
//     the reserved name of a sandbox containerd was still creating; every
//     CreateContainer then failed with "failed to find sandbox id" and the
//     pod never ran (BenchmarkBurst N=100: 97 of 100 Running). Fixed in
//     engine/sandbox: a reserved sandbox is adopted only once
//     PodSandboxStatus shows it ready; until then the create fails and is
//     retried after the sync backoff.
//
//   - A containerd-shim of a removed sandbox stayed alive after the pod was
//     removed (full run, seed 1795455041594445836, sandbox 8cb0389f4a5f).
//     The audit log and speclet's log show containerd reporting that
//     sandbox NOTREADY right after its own restart, the pod recreating its
//     sandbox, and, on removal, speclet's StopPodSandbox and
//     RemovePodSandbox of the old one succeeding: the runtime no longer
//     listed it, but its shim lived on with nothing under it. That is
//     containerd's leak (a shim it forgot across a restart), which kubelet
//     meets as well; speclet cannot reach a sandbox the CRI no longer
//     lists. The check now tells the two apart: a shim with processes under
//     it, or of a sandbox still listed, is a violation; an idle shim of a
//     removed sandbox is counted in the summary as a runtime leak.
//
//   - The same run then kept a completed Never pod's sandbox shim alive
//     (sandbox 94e896cd9d53, pod p070): its StartContainer timed out at the
//     client under load, start_failed stopped the still-created container
//     (a no-op) and the pod completed; containerd carried the start out
//     later and then reported the container UNKNOWN. The terminated
//     container machine ignored that, RemovePodSandbox failed with
//     "container is still running" until a restart's stop got through.
//     Fixed in spec/container.hcl: terminated goes to stopping on a late
//     started or on state_unknown (PLEG ContainerChanged), as kubelet kills
//     containers in an unknown state (engine script late_start.txt, with
//     cri/sim's StartLate).
//
//   - containerd's, reported as a runtime leak: a kill -9 of speclet while
//     a StartContainer was in flight (same seed, pod p091, container
//     971f7aeefcbe) left containerd reporting the container EXITED with
//     reason StartError and exit code 128 while it kept the task. The
//     restarted speclet took it for a failed start and started a new
//     instance, as kubelet would; on removal, RemoveContainer and
//     RemovePodSandbox of the old one failed with "cannot delete running
//     task", and StopContainer cannot reach it, because containerd stops
//     only containers its store shows running (containerd issue 11037,
//     open: the same status after a cancelled start, and crictl rm -f
//     failing the same way). The CRI offers no way out; speclet keeps
//     retrying the removal, and it cleared after the run's second
//     containerd restart, which reloads the task states: the pod was then
//     removed within 18 s. The check (lostStarts) now asserts what speclet
//     controls for such a pod (its sandbox stopped, none of its containers
//     running) and counts the rest as "runtime leaks (lost task
//     creations)" in the summary. speclet's "container died" line now
//     carries the runtime's message of a StartError, so the next
//     occurrence names containerd's step.
//
//   - Three more full runs of the same seed (2026-11-23, 21:47-23:00) met
//     containerd losing task creations cut by a kill -9 of speclet 3 to 28
//     times per run, in three forms: "failed to get task pid: context
//     canceled" (issue 11037), "failed to create shim task: context
//     canceled" and "failed to start containerd task ...: context
//     canceled". Besides the EXITED container it keeps, containerd may
//     lose the process itself: it let speclet remove the container and the
//     sandbox, and the shim of the removed sandbox went on running the
//     container's sh. The sampler now records every container it sees
//     EXITED with such a status (noteCutStarts); a process under a removed
//     sandbox's shim is the runtime's leak only when its cgroup names one
//     of them (cutProcesses), and is counted in the summary.
//
//   - The first of those runs found a speclet bug: an edited static pod
//     (p055) stayed Pending for 5 minutes because its predecessor could not
//     be removed from the runtime (a lost task creation), and speclet freed
//     the static pod's full name only once the runtime had removed the pod.
//     kubelet frees it when the pod's termination ends, before its
//     container GC removes what is left. Fixed in spec/pod.hcl: terminated
//     runs release_name after stop_sandbox (engine script static_names.txt).
//
//   - A completed pod keeps its stopped sandbox until it is removed; when
//     its StopPodSandbox was cut by a containerd restart, containerd kept
//     the sandbox's shim (with the exited pause task) too. The check of
//     such a sandbox is that it is NOTREADY and runs nothing; its shim and
//     bundle go with RemovePodSandbox. speclet now also retries a failed
//     sandbox stop of a completed pod at its resync timer.
//
//   - The fourth run (22:48, after the fixes) passed: 395 faults, 6 kill -9
//     of speclet and 2 containerd restarts, 311 manifest changes, every
//     checkpoint settled within 26 s, 0 violations, 0 runtime leaks.
//
//   - The same investigation found the harness leaving the cgroups of the
//     containers whose shims it killed (377 empty memory cgroups on this
//     machine by the end of a day of test runs); cri/harness reap now
//     removes them.
//
// `go test ./test/chaos` runs the short version (8 pods, about 2 minutes,
// one containerd restart); `make chaos` the full one (-chaos.full: 50 pods,
// 10 minutes, containerd restarted twice). Both need root; without it the
// test skips (fails with CI=true).
package chaos
