package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/speclet/speclet/spec"
)

func check(t *testing.T, files []spec.File, k int) *Report {
	t.Helper()
	s, diags := spec.Parse(files)
	if diags.HasErrors() {
		for _, d := range diags {
			t.Errorf("%s", spec.Line(d))
		}
		t.FailNow()
	}
	rep, err := Check(s, Options{MaxContainers: k})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestVerifyEmbeddedSpec: the repository's spec keeps its invariants with
// 1, 2 and 3 containers.
func TestVerifyEmbeddedSpec(t *testing.T) {
	rep := check(t, spec.Embedded(), 3)
	if len(rep.Runs) != 3 {
		t.Fatalf("%d runs, want K=1..3", len(rep.Runs))
	}
	prev := 0
	for _, r := range rep.Runs {
		t.Logf("K=%d: %d role assignments, %d states, %d transitions, %s", r.K, r.Assignments, r.States, r.Transitions, r.Elapsed)
		if r.States <= prev || r.Transitions <= 0 || r.Assignments != 1<<r.K-1 {
			t.Errorf("K=%d: %d states (previous K: %d), %d transitions, %d assignments", r.K, r.States, prev, r.Transitions, r.Assignments)
		}
		prev = r.States
	}
	if len(rep.Unproduced) > 0 {
		t.Errorf("events nothing produces: %v", rep.Unproduced)
	}
	kinds := map[string]bool{}
	for _, iv := range rep.Invariants {
		kinds[iv.Kind] = true
		if iv.Checks <= 0 {
			t.Errorf("invariant %s was never evaluated", iv.Name)
		}
		if v := iv.Violation; v != nil {
			t.Errorf("invariant %s violated with K=%d (roles %v): %s\n%s", iv.Name, v.K, v.Roles, v.Detail, strings.Join(v.Trace, "\n"))
		}
	}
	for _, iv := range rep.Invariants {
		if iv.Kind != spec.InvPhaseRank {
			continue
		}
		// The status keeps a terminal phase: the traces say when the
		// engine needs that rule (a terminated container reported running
		// after all).
		if len(iv.Kept) == 0 {
			t.Errorf("invariant %s: no trace where the status keeps a terminal phase", iv.Name)
		}
		for _, k := range iv.Kept {
			trace := strings.Join(k.Trace, "\n")
			t.Logf("%s: %s\n%s", iv.Name, k.Detail, trace)
			if !strings.Contains(trace, "terminated --started--> stopping") {
				t.Errorf("the status keeps a terminal phase without a late start:\n%s\n=> %s", trace, k.Detail)
			}
		}
	}
	for _, k := range []string{spec.InvNeverEnter, spec.InvRank, spec.InvPhaseRank, spec.InvConditionNeverTrue, spec.InvAlwaysReaches, spec.InvAfterReaches, spec.InvAlwaysIn, spec.InvLeaves} {
		if !kinds[k] {
			t.Errorf("no invariant of kind %s in the spec", k)
		}
	}
	if len(rep.Invariants) < 13 {
		t.Errorf("%d invariants, want at least 13", len(rep.Invariants))
	}
}

// mutate writes the built-in spec files to a temporary directory with old
// replaced by new in file base, and reads them back.
func mutate(t *testing.T, base, old, new string) []spec.File {
	t.Helper()
	dir := t.TempDir()
	found := false
	for _, f := range spec.Embedded() {
		src := string(f.Src)
		if filepath.Base(f.Name) == base {
			if strings.Count(src, old) != 1 {
				t.Fatalf("spec/%s does not contain exactly one %q; update the mutation", base, old)
			}
			src = strings.Replace(src, old, new, 1)
			found = true
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f.Name)), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Fatalf("no spec file %s", base)
	}
	files, err := spec.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// refusedDoc is the doc line of pending's row for a pod refused admission.
const refusedDoc = `      doc     = "Refused admission (kubelet's canAdmitPod): Failed with the refusal's reason (OutOfcpu, NodePorts, ...); nothing runs, only clean up."`

// TestVerifyMutations: specs broken on purpose violate the invariant that
// guards against the mistake, with a trace.
func TestVerifyMutations(t *testing.T) {
	for _, tc := range []struct {
		name, file, old, new, invariant, inTrace string
	}{
		{
			// kill_containers delivers kill to a container that already
			// terminated while the pod terminates.
			name: "terminated container restarts", file: "container.hcl",
			old:       `    transition "kill" {}` + "\n" + `    transition "died" { doc = "A late ContainerDied runtime event." }`,
			new:       `    transition "kill" { to = state.pulling }` + "\n" + `    transition "died" { doc = "A late ContainerDied runtime event." }`,
			invariant: "no_start_after_termination", inTrace: "terminated --kill--> pulling",
		},
		{
			// A stopped container goes back to running: a killed pod's
			// containers never all stop.
			name: "stopping never ends", file: "container.hcl",
			old:       `    transition "stopped" { to = state.exited }` + "\n" + `    transition "died" { to = state.exited }` + "\n",
			new:       `    transition "stopped" { to = state.running }` + "\n" + `    transition "died" { to = state.running }` + "\n",
			invariant: "kill_finishes", inTrace: "--kill--> stopping",
		},
		{
			// Without the status's keep rule, the runtime reporting a
			// terminated container running after all (a StartContainer
			// that timed out ran later) takes the phase users see from
			// Succeeded or Failed back to Running.
			name: "status without the terminal keep rule", file: "system.hcl",
			old:       "  keeps_terminal = true\n",
			new:       "",
			invariant: "phase_never_backwards", inTrace: "terminated --started--> stopping",
		},
		{
			// A container removed while its stop fails, before its exit
			// was recorded, reads as never started: the phase falls back
			// from Running to Pending (the engine shows such an exit as
			// ContainerStatusUnknown).
			name: "phase forgets that a container ran", file: "system.hcl",
			old:       "  started        = [container.running, container.stopping]\n",
			new:       "  started        = [container.running]\n",
			invariant: "phase_never_backwards", inTrace: "stopping --removed [pod_terminating=true(tied)]--> removed",
		},
		{
			// The conditions block counts a container that waits as
			// serving: the pod is Ready while Pending.
			name: "ready before it runs", file: "system.hcl",
			old:       "  serving       = [container.running]\n",
			new:       "  serving       = [container.running, container.waiting]\n",
			invariant: "ready_only_while_running", inTrace: "probe unready --ready--> ready",
		},
		{
			// The conditions block counts a stopping sandbox as ready: a
			// terminated pod whose StopPodSandbox fails reports
			// PodReadyToStartContainers True.
			name: "a stopping sandbox counts as ready", file: "system.hcl",
			old:       "  sandbox_ready = [sandbox.ready]\n",
			new:       "  sandbox_ready = [sandbox.ready, sandbox.stopping]\n",
			invariant: "sandbox_not_ready_once_stopped", inTrace: "sandbox=stopping",
		},
		{
			name: "termination resyncs", file: "pod.hcl",
			old:       `transition "update" { doc = "Updates during termination only matter for the grace period." }`,
			new:       `transition "update" { to = state.syncing }`,
			invariant: "worker_never_backwards", inTrace: "terminating --update--> syncing",
		},
		{
			// The pod waits in terminating for a condition stopped
			// containers never meet.
			name: "termination waits for running containers", file: "system.hcl",
			old:       `all = [container.waiting, container.pull_backoff, container.crashloop_backoff, container.exited, container.terminated, container.removed]`,
			new:       `all = [container.running]`,
			invariant: "can_always_finish", inTrace: "pod=synced",
		},
		{
			// Stopping the sandbox asks for a new one: a terminated pod
			// creates a sandbox.
			name: "termination creates a sandbox", file: "system.hcl",
			old:       `effect "pod" "stop_sandbox" {` + "\n" + `  sends = [sandbox.stop]`,
			new:       `effect "pod" "stop_sandbox" {` + "\n" + `  sends = [sandbox.create]`,
			invariant: "no_sandbox_after_termination", inTrace: "sandbox none --create--> creating",
		},
		{
			// The node machine ignores a failed observation: its eviction
			// pass never ends.
			name: "node pass stuck", file: "node.hcl",
			old:       `    transition "observe_failed" { to = state.idle }` + "\n",
			new:       "",
			invariant: "node_pass_ends", inTrace: "node observing --observe_failed--> no transition",
		},
		{
			// The tie forgets Always for regular containers.
			name: "Always does not restart", file: "system.hcl",
			old:       `  roles = [role.regular]` + "\n" + `  given = [restart_policy.always]`,
			new:       `  roles = [role.regular]` + "\n" + `  given = [restart_policy.on_failure]`,
			invariant: "always_restarts", inTrace: "restart_policy=always(chosen)",
		},
		{
			// The tie forgets that sidecars always restart.
			name: "sidecar not restarted", file: "system.hcl",
			old:       `  doc   = "A sidecar always restarts."` + "\n" + `  roles = [role.sidecar]`,
			new:       `  doc   = "A sidecar always restarts."` + "\n" + `  roles = [role.init]`,
			invariant: "sidecars_always_restart", inTrace: "(sidecar) exited --exit_recorded",
		},
		{
			// A container that exited under Never restarts anyway.
			name: "restart row under Never", file: "container.hcl",
			old:       `      otherwise { to = state.terminated }`,
			new:       `      otherwise { to = state.crashloop_backoff }`,
			invariant: "no_restart_under_never", inTrace: "restart_policy=never(chosen)",
		},
		{
			// The tie lets a regular container restart under Never.
			name: "restart allowed under Never", file: "system.hcl",
			old:       `  roles = [role.regular]` + "\n" + `  given = [restart_policy.always]`,
			new:       `  roles = [role.regular]` + "\n" + `  given = [restart_policy.always, restart_policy.never]`,
			invariant: "no_restart_under_never", inTrace: "deciding -> restarting",
		},
		{
			// OnFailure restarts a regular container whatever its exit.
			name: "OnFailure restarts after success", file: "system.hcl",
			old:       `  given = [restart_policy.on_failure]` + "\n" + `  flags = [container.exit_failed]` + "\n",
			new:       `  given = [restart_policy.on_failure]` + "\n",
			invariant: "on_failure_restarts_only_failures", inTrace: "restart_policy=on_failure(chosen)",
		},
		{
			// An init container restarts after it completed.
			name: "init container restarts after success", file: "system.hcl",
			old:       `  given = [restart_policy.always, restart_policy.on_failure]` + "\n" + `  flags = [container.exit_failed]` + "\n" + `  mode  = "may"`,
			new:       `  given = [restart_policy.always, restart_policy.on_failure]` + "\n" + `  mode  = "may"`,
			invariant: "init_restarts_only_failures", inTrace: "container[0](init) exited --exit_recorded",
		},
		{
			// remove_pod runs while the sandbox still stops (the engine's
			// precondition dropped): the pod finishes with it stopping.
			name: "remove_pod without its precondition", file: "system.hcl",
			old:       `  requires           = [sandbox.stopped]` + "\n",
			new:       "",
			invariant: "sandbox_removed_when_finished", inTrace: "sandbox=stopping",
		},
		{
			// A terminated container ignores its removal.
			name: "terminated container not removed", file: "container.hcl",
			old:       `    transition "removed" { to = state.removed }` + "\n" + `    transition "kill" {}`,
			new:       `    transition "removed" {}` + "\n" + `    transition "kill" {}`,
			invariant: "containers_removed_when_finished", inTrace: "container[0](regular)=terminated",
		},
		{
			// Without its grace timer a failed stop of a container the pod
			// does not kill (a liveness kill, a spec change) is never retried.
			name: "stopping without its grace timer", file: "container.hcl",
			old:       `    timeout "grace_expired" { after = duration.grace_period }` + "\n",
			new:       "",
			invariant: "container_stop_ends", inTrace: "container[0](regular)=stopping",
		},
		{
			// Without the terminated timer a failed StopPodSandbox is
			// never retried.
			name: "sandbox stop never retried", file: "pod.hcl",
			old:       `    entry = [action.stop_sandbox, action.release_name, action.remove_pod, action.report_status]` + "\n" + `    timeout "sync" { after = duration.sync_backoff }` + "\n",
			new:       `    entry = [action.stop_sandbox, action.release_name, action.remove_pod, action.report_status]` + "\n",
			invariant: "sandbox_stop_ends", inTrace: "stop_sandbox fails before any effect",
		},
		{
			// Without the stop_containers timer a terminating pod waits for
			// a runtime event once a failed stop finally succeeded.
			name: "terminating without its timer", file: "pod.hcl",
			old:       `    entry = [action.kill_containers]` + "\n" + `    timeout "sync" { after = duration.sync_backoff }` + "\n",
			new:       `    entry = [action.kill_containers]` + "\n",
			invariant: "pod_stop_ends", inTrace: "stop_container fails before any effect",
		},
		{
			// The name FIFO is asked before admission: a refused static
			// pod whose name is taken waits for it, and starts when it is
			// free, its admission never read.
			name: "name asked before admission", file: "pod.hcl",
			old: `      guard   = guard.admission_refused` + "\n" + `      to      = state.terminated` + "\n" + refusedDoc + "\n" + `    }` + "\n" +
				`    transition "update" {` + "\n" + `      guard = guard.name_taken` + "\n" + `      to    = state.waiting_to_start` + "\n",
			new: `      guard   = guard.name_taken` + "\n" + `      to      = state.waiting_to_start` + "\n" + `    }` + "\n" +
				`    transition "update" {` + "\n" + `      guard = guard.admission_refused` + "\n" + `      to    = state.terminated` + "\n" + refusedDoc + "\n",
			invariant: "refused_pod_never_starts", inTrace: "pod pending --update [name_taken=true]--> waiting_to_start",
		},
		{
			// The admission tie names the wrong value: a refused pod syncs.
			name: "admission tie inverted", file: "system.hcl",
			old:       `  given = [admission.refused]` + "\n" + `}`,
			new:       `  given = [admission.admitted]` + "\n" + `}`,
			invariant: "refused_pod_never_starts", inTrace: "admission=refused(chosen)",
		},
		{
			// The pull_never tie names IfNotPresent: a container under
			// Never pulls its missing image.
			name: "pull_never tie on the wrong policy", file: "system.hcl",
			old:       `  given = [pull_policy.never]`,
			new:       `  given = [pull_policy.if_not_present]`,
			invariant: "never_policy_never_pulls", inTrace: "checking_image --image_missing",
		},
		{
			// The pull_always tie forgets Always: it looks for the image
			// first.
			name: "Always looks first", file: "system.hcl",
			old:       `  given = [pull_policy.always]`,
			new:       `  given = [pull_policy.never]`,
			invariant: "always_policy_pulls_without_looking", inTrace: "pull_policy=always(chosen)",
		},
		{
			// The image_invalid tie names a valid reference: an invalid
			// one is looked up and pulled.
			name: "invalid image used", file: "system.hcl",
			old:       `  given = [image_reference.invalid]`,
			new:       `  given = [image_reference.valid]`,
			invariant: "invalid_image_never_used", inTrace: "image_reference=invalid(chosen) image_invalid=false(tied)",
		},
		{
			// A failed stop is retried neither by the grace timer nor by a
			// repeated kill: some run still finishes (the first stop
			// succeeds), but a fair run where it fails never does.
			name: "failed stop never retried", file: "container.hcl",
			old: `    timeout "grace_expired" { after = duration.grace_period }` + "\n" + `    transition "grace_expired" {` + "\n" +
				`      actions = [action.force_stop_container]` + "\n" + `      doc     = "The grace period ran out and the instance is still not stopped: force it."` + "\n" + `    }` + "\n" +
				`    transition "stopped" { to = state.exited }` + "\n" + `    transition "died" { to = state.exited }` + "\n" + `    transition "kill" {` + "\n" + `      actions = [action.stop_container]` + "\n",
			new: `    transition "grace_expired" {` + "\n" +
				`      actions = [action.force_stop_container]` + "\n" + `      doc     = "The grace period ran out and the instance is still not stopped: force it."` + "\n" + `    }` + "\n" +
				`    transition "stopped" { to = state.exited }` + "\n" + `    transition "died" { to = state.exited }` + "\n" + `    transition "kill" {` + "\n",
			invariant: "kill_finishes", inTrace: "stop_container fails before any effect",
		},
		{
			// A static pod waiting for its name ignores name_free: the
			// successor waits forever once the holder released it.
			name: "waiting ignores name_free", file: "pod.hcl",
			old:       `    transition "name_free" { to = state.syncing }`,
			new:       `    transition "name_free" {}`,
			invariant: "name_successor_starts", inTrace: "name_taken=true(tied)]--> waiting_to_start",
		},
		{
			// finished does not release the name: a pod whose release
			// failed in terminated (its sandbox stop failed) and whose
			// removal then succeeded keeps the name for good.
			name: "finished keeps the name", file: "pod.hcl",
			old:       `    entry = [action.release_name]` + "\n" + `    final = true`,
			new:       `    final = true`,
			invariant: "name_successor_starts", inTrace: "release_name fails before any effect",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := check(t, mutate(t, tc.file, tc.old, tc.new), 2)
			if rep.OK() {
				t.Fatal("the mutated spec passed")
			}
			for _, iv := range rep.Invariants {
				if iv.Name != tc.invariant {
					continue
				}
				v := iv.Violation
				if v == nil {
					t.Fatalf("invariant %s holds", iv.Name)
				}
				trace := strings.Join(v.Trace, "\n")
				t.Logf("%s violated with K=%d, roles %v:\n%s\n=> %s", iv.Name, v.K, v.Roles, trace, v.Detail)
				// A trace starts from an initial or restored state with an
				// input, an external event or a timer of that state (the
				// node machine's idle).
				if len(v.Trace) < 2 || !strings.HasPrefix(v.Trace[0], "input ") && !strings.HasPrefix(v.Trace[0], "external: ") && !strings.HasPrefix(v.Trace[0], "timer: ") && !strings.HasPrefix(v.Trace[0], "restored after a restart: ") || !strings.HasPrefix(v.Trace[len(v.Trace)-1], "state: ") {
					t.Errorf("trace does not start with an input, an external event, a timer or a restore and end with the state:\n%s", trace)
				}
				if !strings.Contains(trace, tc.inTrace) {
					t.Errorf("trace has no step %q", tc.inTrace)
				}
				return
			}
			t.Fatalf("no invariant %s", tc.invariant)
		})
	}
}

// TestVerifyStartOnTerminatedIsUnreachable: a container transition from
// terminated on start into the start path breaks no invariant of
// termination, because only sync_pod sends start and it runs only while the
// pod syncs; once the pod terminates nothing asks a container to start. The
// pod machine alone keeps no_start_after_termination. The row does skip the
// image checks (it pulls without reading the image reference or the pull
// policy), which the image invariants catch, and only those.
func TestVerifyStartOnTerminatedIsUnreachable(t *testing.T) {
	rep := check(t, mutate(t, "container.hcl",
		`transition "start" { doc = "A terminated container never starts again; sync_pod still asks every container." }`,
		`transition "start" { to = state.pulling }`), 2)
	skipsChecks := map[string]bool{"never_policy_never_pulls": true, "invalid_image_never_used": true}
	for _, iv := range rep.Invariants {
		switch {
		case iv.Violation != nil && !skipsChecks[iv.Name]:
			t.Errorf("invariant %s violated:\n%s", iv.Name, strings.Join(iv.Violation.Trace, "\n"))
		case iv.Violation == nil && skipsChecks[iv.Name]:
			t.Errorf("invariant %s holds, although terminated --start--> pulling reads neither the image reference nor the pull policy", iv.Name)
		case iv.Violation != nil && !strings.Contains(strings.Join(iv.Violation.Trace, "\n"), "terminated --start--> pulling"):
			t.Errorf("invariant %s violated elsewhere:\n%s", iv.Name, strings.Join(iv.Violation.Trace, "\n"))
		}
	}
}

func TestAssignments(t *testing.T) {
	for k, want := range map[int][]string{
		1: {"r"},
		2: {"r r", "i r", "s r"},
		3: {"r r r", "i r r", "s r r", "i i r", "s i r", "i s r", "s s r"},
	} {
		var got []string
		for _, a := range assignments(k) {
			var w []string
			for _, r := range a {
				w = append(w, spec.Roles[r][:1])
			}
			got = append(got, strings.Join(w, " "))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("assignments(%d) = %v, want %v", k, got, want)
		}
	}
}

// detachedSpec is a pod machine driven by an input, with an event "stuck"
// nothing produces, and a machine "node" that, unless extra connects it,
// nothing of the pod reaches: no input, external, tie or effect.
const detachedSpec = `
machine "pod" {
  initial = state.idle
  event "go" {}
  event "done" {}
  event "stuck" {}
  guard "node_busy" {}
  action "work" {}
  state "idle" {
    transition "go" {
      guard = guard.node_busy
    }
    transition "go" { to = state.busy }
  }
  state "busy" {
    entry = [action.work]
    transition "done" { to = state.end }
    transition "stuck" { to = state.end }
  }
  state "end" { final = true }
}

machine "node" {
  initial = state.idle
  event "due" {}
  event "measured" {}
  action "measure" {}
  state "idle" {
    transition "due" { to = state.measuring }
  }
  state "measuring" {
    entry = [action.measure]
    transition "measured" { to = state.idle }
  }
}

input "start" { pod = pod.go }
effect "pod" "work" { reports = [pod.done] }
`

// TestDetachedMachineEvents: the events of a machine nothing of the pod
// reaches (the node machine, run by the engine's node loop) are not
// "events nothing produces", while an unproduced event of the pod machine
// is; once an input, or a tie of another machine's guard, reaches the
// machine, its unproduced events are reported too.
func TestDetachedMachineEvents(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		want        []string
	}{
		{
			name: "detached: its events are left out, the pod's unproduced one is reported",
			want: []string{"pod.stuck"},
		},
		{
			name: "an input reaches it: the event nothing sends is reported",
			extra: `input "poke" { node = node.due }
`,
			want: []string{"node.measured", "pod.stuck"},
		},
		{
			name: "another machine's guard is tied to it: both its events are reported",
			extra: `tie "pod" "node_busy" { in = [node.measuring] }
`,
			want: []string{"node.due", "node.measured", "pod.stuck"},
		},
		{
			name: "reached, and every event produced: nothing reported",
			extra: `effect "node" "measure" { reports = [node.measured] }
input "poke" { node = node.due }
input "jam" { pod = pod.stuck }
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := check(t, []spec.File{{Name: "detached.hcl", Src: []byte(detachedSpec + tc.extra)}}, 1)
			got := append([]string(nil), rep.Unproduced...)
			slices.Sort(got)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("events nothing produces: %v, want %v", got, tc.want)
			}
		})
	}
}

// tieSpec: the pod's work pokes every container, which records a flag
// (note) and decides by guard g whether it goes to yes or no.
const tieSpec = `
machine "p" {
  initial = state.idle
  event "go" {}
  event "done" {}
  event "quit" {}
  action "work" {}
  state "idle" {
    transition "go" { to = state.busy }
    transition "quit" { to = state.end }
  }
  state "busy" {
    entry = [action.work]
    transition "done" { to = state.idle }
  }
  state "end" { final = true }
}
machine "c" {
  initial = state.x
  event "poke" {}
  event "quit" {}
  guard "g" {}
  action "note" {}
  state "x" {
    transition "poke" {
      to      = state.deciding
      actions = [action.note]
    }
    transition "quit" { to = state.end }
  }
  state "deciding" {
    choice {
      when "g" { to = state.yes }
      otherwise { to = state.no }
    }
  }
  state "yes" {
    transition "poke" { to = state.x }
  }
  state "no" {
    transition "poke" { to = state.x }
  }
  state "end" { final = true }
}
replicated "c" {}
input "start" { p = p.go }
input "stop" {
  p = p.quit
  c = c.quit
}
effect "p" "work" {
  sends   = [c.poke]
  reports = [p.done]
}
parameter "policy" { values = ["a", "b"] }
flag "c" "failed" { set_by = c.note }
invariant "never_yes" { never_enter = [c.yes] }
invariant "never_no" { never_enter = [c.no] }
invariant "yes_only_under_a" {
  never_enter = [c.yes]
  given       = [policy.b]
}
invariant "yes_only_failed" {
  never_enter = [c.yes]
  from        = [c.deciding]
  unless      = [c.failed]
}
`

// TestTies: the value a guard takes under its ties (iff, if, may, several
// ties, parameters and flags), seen through which states a container
// enters.
func TestTies(t *testing.T) {
	for _, tc := range []struct {
		name, ties string
		violated   []string
	}{
		{"untied: free", ``, []string{"never_yes", "never_no", "yes_only_under_a", "yes_only_failed"}},
		{"iff on a parameter", `tie "c" "g" { given = [policy.a] }`, []string{"never_yes", "never_no", "yes_only_failed"}},
		{"iff on a flag", `tie "c" "g" { flags = [c.failed] }`, []string{"never_yes", "never_no", "yes_only_under_a"}},
		{"iff on both", `tie "c" "g" {
  given = [policy.a]
  flags = [c.failed]
}`, []string{"never_yes", "never_no"}},
		{"iff on a role the instance lacks", `tie "c" "g" { roles = [role.sidecar] }`, []string{"never_no"}},
		{"if on a role the instance lacks: free", `tie "c" "g" {
  roles = [role.sidecar]
  mode  = "if"
}`, []string{"never_yes", "never_no", "yes_only_under_a", "yes_only_failed"}},
		{"may: free when it holds, else false", `tie "c" "g" {
  given = [policy.a]
  mode  = "may"
}`, []string{"never_yes", "never_no", "yes_only_failed"}},
		{"may that never holds: false", `tie "c" "g" {
  roles = [role.init]
  mode  = "may"
}`, []string{"never_no"}},
		{"several ties: an iff one holds", `tie "c" "g" { roles = [role.regular] }
tie "c" "g" {
  given = [policy.b]
  mode  = "may"
}`, []string{"never_yes", "yes_only_under_a", "yes_only_failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := check(t, []spec.File{{Name: "ties.hcl", Src: []byte(tieSpec + tc.ties)}}, 1)
			var got []string
			for _, iv := range rep.Invariants {
				if iv.Violation != nil {
					got = append(got, iv.Name)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.violated, " ") {
				t.Errorf("violated %v, want %v", got, tc.violated)
			}
		})
	}
}

// stopSpec: a kill starts a stop that may fail; extra adds the stopping
// state's rows.
const stopSpec = `
machine "p" {
  initial = state.idle
  event "kill" {}
  event "stopped" {}
  event "retry" {}
  action "stop" {}
  duration "wait" { default = "1s" }
  state "idle" {
    transition "kill" { to = state.stopping }
  }
  state "stopping" {
    entry = [action.stop]
    %s
    transition "stopped" { to = state.done }
  }
  state "done" { final = true }
}
input "kill" { p = p.kill }
effect "p" "stop" {
  reports            = [p.stopped]
  may_report_nothing = true
}
invariant "kill_ends" {
  after   = p.kill
  reaches = [p.done]
}
invariant "stop_ends" { leaves = [p.stopping] }
invariant "can_end" { always_reaches = [p.done] }
`

// TestFairness: a stop that may fail finishes under fair scheduling only
// when a timer retries it; some path to the end is not enough.
func TestFairness(t *testing.T) {
	for _, tc := range []struct {
		name, rows string
		violated   []string
	}{
		{"retried by a timer", `timeout "retry" { after = duration.wait }
    transition "retry" { actions = [action.stop] }`, nil},
		{"retried only by a new kill", `transition "kill" { actions = [action.stop] }`, []string{"kill_ends", "stop_ends"}},
		{"never retried", `transition "retry" { actions = [action.stop] }`, []string{"kill_ends", "stop_ends", "can_end"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := check(t, []spec.File{{Name: "stop.hcl", Src: []byte(fmt.Sprintf(stopSpec, tc.rows))}}, 1)
			var got []string
			for _, iv := range rep.Invariants {
				if v := iv.Violation; v != nil {
					got = append(got, iv.Name)
					t.Logf("%s: %s\n%s", iv.Name, v.Detail, strings.Join(v.Trace, "\n"))
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.violated, " ") {
				t.Errorf("violated %v, want %v", got, tc.violated)
			}
		})
	}
}

// TestRestored: the states of a restored family are explored like initial
// states, and a trace from one says so.
func TestRestored(t *testing.T) {
	ties := `tie "c" "g" { roles = [role.sidecar] }
invariant "no_yes" { always_in = [c.x, c.deciding, c.no, c.end] }
`
	rep := check(t, []spec.File{{Name: "ties.hcl", Src: []byte(tieSpec + ties)}}, 1)
	for _, iv := range rep.Invariants {
		if iv.Name == "no_yes" && iv.Violation != nil {
			t.Fatalf("no_yes violated without a restored family")
		}
	}
	rep = check(t, []spec.File{{Name: "ties.hcl", Src: []byte(tieSpec + ties + `restored "back" { states = [p.busy, c.yes] }
`)}}, 1)
	for _, iv := range rep.Invariants {
		if iv.Name != "no_yes" {
			continue
		}
		v := iv.Violation
		if v == nil {
			t.Fatal("no_yes holds from the restored state c=yes")
		}
		if !strings.HasPrefix(v.Trace[0], "restored after a restart: ") || !strings.Contains(v.Trace[0], "p=busy") {
			t.Errorf("trace = %q", v.Trace)
		}
	}
}

const phaseSpec = `
machine "p" {
  initial = state.active
  event "kill" {}
  state "active" {
    transition "kill" { to = state.gone }
  }
  state "gone" { final = true }
}
machine "c" {
  initial = state.waiting
  event "run" {}
  event "die" {}
  event "recorded" {}
  event "gone" {}
  guard "restart" {}
  action "record" {}
  state "waiting" {
    transition "run" { to = state.running }
  }
  state "running" {
    transition "die" { to = state.exited }
    transition "gone" { to = state.removed }
  }
  state "exited" {
    entry = [action.record]
    transition "recorded" { to = state.deciding }
  }
  state "deciding" {
    choice {
      when "restart" { to = state.waiting }
      otherwise { to = state.done }
    }
  }
  state "done" {
    transition "gone" { to = state.removed }
  }
  state "removed" { final = true }
}
replicated "c" {}
input "run" { c = c.run }
input "die" { c = c.die }
input "gone" { c = c.gone }
effect "c" "record" { reports = [c.recorded] }
parameter "policy" { values = ["always", "on_failure", "never"] }
flag "c" "failed" { set_by = c.record }
tie "c" "restart" {
  roles = [role.regular]
  given = [policy.always]
}
tie "c" "restart" {
  roles = [role.regular]
  given = [policy.on_failure]
  flags = [c.failed]
}
invariant "phase" { phase_rank = [[phase.pending], [phase.running], [phase.succeeded, phase.failed]] }
`

const phaseBlock = `
phase {
  running     = [c.running]
  started     = [c.running]
  exit_failed = c.failed
  terminating = [p.gone]
  terminated  = [p.gone]
  policy      = [policy.always, policy.on_failure, policy.never]
}
`

// TestPhaseContexts: the phase check keeps the restart policy and each
// container's last exit from one input to the next, which the exploration
// forgets: a container that completed stays Succeeded or Failed (read as
// never started, it would fall back to Pending), and the policy a restart
// decision read holds for the pod's life.
func TestPhaseContexts(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		inDetail       string // "": the invariant holds
	}{
		{name: "as declared"},
		{"restart under Never", `given = [policy.always]`, `given = [policy.always, policy.never]`, "policy=never"},
		{"a removed container never ran", `  started     = [c.running]` + "\n", `  started     = []` + "\n", "from Running to Pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(phaseSpec+phaseBlock, tc.old, tc.new, 1)
			rep := check(t, []spec.File{{Name: "phase.hcl", Src: []byte(src)}}, 1)
			v := rep.Invariants[0].Violation
			switch {
			case tc.inDetail == "" && v != nil:
				t.Fatalf("violated: %s\n%s", v.Detail, strings.Join(v.Trace, "\n"))
			case tc.inDetail != "" && v == nil:
				t.Fatal("the invariant holds")
			case v != nil:
				t.Logf("%s\n=> %s", strings.Join(v.Trace, "\n"), v.Detail)
				if !strings.Contains(v.Detail, tc.inDetail) {
					t.Errorf("detail %q has no %q", v.Detail, tc.inDetail)
				}
			}
			if rep.Invariants[0].Checks == 0 {
				t.Error("no phase was compared")
			}
		})
	}
}

// TestConditionAtRestoredStart: a condition invariant holds at the states
// exploration starts from, restored ones included: a pod restored in
// p.limbo (which no transition of the fresh pod reaches) with its sandbox
// ready breaks "never ready to start containers in limbo" before any input
// moves a machine: the check evaluates the conditions at every start
// state, so the trace is that state alone (the status the engine publishes
// right after a restart), not an input that leaves it as it is.
func TestConditionAtRestoredStart(t *testing.T) {
	// limbo is entered only through a row whose guard is tied false (it
	// holds only in gone, where p has no such row): exploration from the
	// fresh pod never reaches it.
	src := strings.Replace(strings.Replace(phaseSpec, `  state "gone" { final = true }`, `  state "gone" { final = true }
  state "limbo" {
    transition "kill" { to = state.gone }
  }`, 1), `    transition "kill" { to = state.gone }
  }
  state "gone"`, `    transition "kill" { to = state.gone }
    transition "pause" {
      guard = guard.never
      to    = state.limbo
    }
  }
  state "gone"`, 1)
	src = strings.Replace(src, `  event "kill" {}`, `  event "kill" {}
  event "pause" {}
  guard "never" {}`, 1) + phaseBlock + `
input "pause" { p = p.pause }
tie "p" "never" { in = [p.gone] }
conditions {
  serving       = [c.running]
  probe_ready   = [p.active, p.limbo]
  shows_exit    = [c.done, c.removed]
  sandbox_ready = [p.limbo]
}
invariant "limbo_frees_network" {
  condition_never_true = condition.ready_to_start_containers
  while                = [p.limbo]
}
restored "back" { states = [p.limbo, c.removed] }
`
	rep := check(t, []spec.File{{Name: "phase.hcl", Src: []byte(src)}}, 1)
	for _, iv := range rep.Invariants {
		if iv.Name != "limbo_frees_network" {
			continue
		}
		v := iv.Violation
		if v == nil {
			t.Fatal("limbo_frees_network holds although the restored start state breaks it")
		}
		t.Logf("%s\n=> %s", strings.Join(v.Trace, "\n"), v.Detail)
		if len(v.Trace) != 2 || !strings.HasPrefix(v.Trace[0], "restored after a restart: ") || !strings.Contains(v.Trace[0], "p=limbo") || !strings.HasPrefix(v.Trace[1], "state: ") {
			t.Errorf("trace %q is not the restored state alone", v.Trace)
		}
		if !strings.Contains(v.Detail, "ready_to_start_containers") && !strings.Contains(v.Detail, "PodReadyToStartContainers") {
			t.Errorf("detail %q does not name the condition", v.Detail)
		}
		return
	}
	t.Fatal("no invariant limbo_frees_network in the report")
}
