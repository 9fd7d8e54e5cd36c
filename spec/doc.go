// Package spec owns the lifecycle spec of speclet: the HCL files in this
// directory (pod.hcl, container.hcl, routes.hcl, system.hcl, callers.hcl)
// and the Go package that decodes and validates them.
//
// A machine file declares one state machine: its events, guards (questions the
// engine answers), actions (effects the engine runs, each naming the CRI calls
// it makes), durations (timer lengths the engine supplies) and states with
// their transitions, timers and choices. routes.hcl maps the engine's channel
// inputs to machine events. See State for the transition semantics.
//
// Format (one machine per file; inputs in routes.hcl):
//
//	machine "NAME" {
//	  doc     = "..."
//	  initial = state.NAME
//	  event "NAME" { doc = "..." }               // something that happens
//	  guard "NAME" { doc = "..." }               // a yes/no question the engine answers
//	  action "NAME" {                            // an effect the engine runs
//	    cri   = ["StartContainer"]               // CRI methods it calls
//	    calls = [action.OTHER]                   // actions it runs itself as steps
//	    uncancellable = {                        // calls of cri a kill lets finish
//	      StartContainer = "why"                 // (a kill cancels every other call)
//	    }
//	  }
//	  duration "NAME" { default = "10s" }        // a timer length the engine supplies (also max)
//	  state "NAME" {
//	    final = true                             // no way out
//	    entry = [action.A, ...]                  // run on every entry
//	    timeout "EVENT" { after = duration.D }   // fire EVENT after D while here
//	    transition "EVENT" {                     // tried in order; first guard that holds wins
//	      guard   = guard.G                      // optional; the unguarded one comes last
//	      to      = state.S                      // omit for an internal transition
//	      actions = [action.A, ...]
//	    }
//	    use "SHARED" { P = state.S }             // the shared rows, written here
//	    choice {                                 // eventless branch taken on entry
//	      when "GUARD" { to = state.S }
//	      otherwise { to = state.S }
//	    }
//	  }
//	  shared "NAME" {                            // rows several states use
//	    entry = [action.A, ...]                  // at most one entry list per state
//	    timeout "EVENT" { after = duration.D }
//	    transition "EVENT" { to = param.P }      // param.P: the value the use gives
//	  }
//	}
//	input "NAME" { MACHINE = MACHINE.EVENT ... }  // a channel input and the events it becomes
//	caller "NAME" {                              // a user of the runtime outside the machines (callers.hcl)
//	  handler "NAME" { cri = ["Exec"] }          // an entry point and the CRI methods it calls
//	}
//
// The system (system.hcl, read only by `speclet spec verify`, package
// verify) couples the machines of one pod and declares its invariants; see
// System and the comment at the top of system.hcl. References are written
// MACHINE.NAME and roles role.init, role.sidecar, role.regular:
//
//	replicated "container" {}                    // runs once per container, with a role
//	parameter "restart_policy" {                 // fixed for the pod; every value explored
//	  values = ["always", "on_failure", "never"]
//	}
//	flag "container" "exit_failed" {             // recorded anew (any value) each time
//	  set_by = container.record_exit             // this action runs
//	}
//	tie "MACHINE" "GUARD" {                      // the guard is a function of the system
//	  in    = [pod.terminating, ...]             // a once-per-pod machine is in one of these
//	  all   = [container.exited, ...]            // every container is in one of these
//	  any   = [container.running, ...]           // some container is in one of these
//	  among = [role.regular]                     // all/any count only these roles
//	  roles = [role.sidecar]                     // the guard's own container has one of these
//	  given = [restart_policy.always]            // the parameter has one of these values
//	  flags = [container.exit_failed]            // the guard's own instance has these flags set
//	  mode  = "iff"                              // or "if": holds when the conditions do, else free;
//	}                                            // or "may": free when they do, else false
//	                                             // (several ties of a guard: see Tie)
//	effect "MACHINE" "ACTION" {                  // what an action does when it runs
//	  sends   = [container.kill]                 // delivered to every instance, in order
//	  reports = [MACHINE.EVENT, ...]             // then exactly one of these is reported
//	  may_report_nothing = true                  // or it fails before any effect
//	  requires = [sandbox.stopped]               // and does whenever this does not hold
//	}
//	external "pod" "name_free" {}                // fired from outside the pod; no input carries it
//	restored "NAME" {                            // states rebuilt after a restart: each machine
//	  states = [pod.synced, container.running]   // named in one of its states, explored too
//	}
//	invariant "NAME" {                           // exactly one kind of:
//	  never_enter = [container.pulling, ...]     // no step enters one of these ...
//	  while       = [pod.terminating, ...]       // ... while this holds (optional)
//	  from        = [container.deciding]         // ... directly from these (optional)
//	  given       = [restart_policy.never]       // ... under these values (optional)
//	  among       = [role.regular]               // ... for these roles (optional)
//	  unless      = [container.exit_failed]      // ... unless this flag is set (optional)
//	}
//	invariant "NAME" {
//	  rank = [[pod.pending], [pod.syncing], ...] // tiers, lowest first: never go down
//	}
//	invariant "NAME" {
//	  always_reaches = [pod.finished]            // every reachable state can get there
//	}
//	invariant "NAME" {
//	  after   = pod.kill                         // once an input delivered this, every
//	  reaches = [pod.finished]                   // fair run of completions and timers gets there
//	}
//	invariant "NAME" {
//	  always_in = [container.removed]            // every instance is in one of these ...
//	  while     = [pod.finished]                 // ... whenever this holds (optional)
//	}
//	invariant "NAME" {
//	  leaves = [container.stopping]              // each is left by fair completions and timers
//	}
//
// Action completions are declared in system.hcl only (effect reports), not
// in the machine files, so that the machine files stay what the generator
// reads. Guards without a tie are free: the verifier explores both values.
//
// Validation reports every problem as an HCL diagnostic with file:line:col:
// syntax errors, unknown references with a suggestion, duplicate or invalid
// names, unreachable states, dead ends, states that cannot reach a final
// state, final states with exits, ambiguous or shadowed transitions, choices
// without otherwise, timers without a transition, CRI calls that
// k8s.io/cri-api does not define, uncancellable calls that are not in the
// action's cri list, named twice or without a reason, callers named like a
// machine or spread over two files, duplicate handlers; in the system
// blocks, references to unknown machines, states, events, guards, actions
// roles, parameters, values and flags (with a hint), ties without a
// condition, requires without may_report_nothing, invariants with no or
// several kinds or misplaced qualifiers, and ranks that miss a state. Unused
// guards, actions and durations, and handlers without CRI calls, are
// warnings.
//
// Usage:
//
//	s, diags := spec.Parse(spec.Embedded())
//	if diags.HasErrors() {
//		s.WriteDiagnostics(os.Stderr, diags)
//	}
//
// The package imports HCL only; the list of CRI method names is generated
// from k8s.io/cri-api (crimethods_gen.go) and checked by a test.
package spec

//go:generate go run ../cmd/specgen -cri-methods crimethods_gen.go
