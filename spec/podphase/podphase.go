// Package podphase is the pod phase and conditions users see, as one pure function of what
// the machines know of a pod: per container its kind and whether it has not
// run yet, runs, or exited (with a failure or not), plus the restart policy
// and whether the pod worker terminates. The engine's status (engine/worker/phase.go)
// calls it with facts read from its container views; `speclet spec verify`
// (package verify) calls it with facts read from the explored model states
// (spec/system.hcl's phase block says how), so the invariant
// phase_never_backwards is about the phase the engine publishes.
//
// It lives under spec/ because it is part of what the spec promises and both
// sides may import it (verify imports only spec; the engine imports this
// package and nothing else of spec/); it imports nothing but the standard library.
package podphase

// Phase is a pod phase (the strings of the Kubernetes API's PodPhase).
type Phase string

// The phases, in the order a pod goes through them.
const (
	Pending   Phase = "Pending"
	Running   Phase = "Running"
	Succeeded Phase = "Succeeded"
	Failed    Phase = "Failed"
)

// Phases lists every phase, in the order a pod goes through them.
var Phases = []Phase{Pending, Running, Succeeded, Failed}

// Kind is the kind of a container of the pod spec. Ephemeral containers
// are no part of the phase.
type Kind uint8

const (
	Regular Kind = iota // spec.containers
	Init                // spec.initContainers without restartPolicy Always
	Sidecar             // spec.initContainers with restartPolicy Always
)

// State is what the phase needs of a container's state.
type State uint8

const (
	// NotStarted: no exit of the container is known and nothing of it
	// runs (it waits, pulls, is created or started, or was stopped before
	// it ran).
	NotStarted State = iota
	// Runs: an instance runs (also while it is being stopped).
	Runs
	// Exited: its newest instance exited and none runs; it may be waiting
	// for its next instance (its status is then waiting, with the exit as
	// lastState).
	Exited
)

// Container is one container's facts.
type Container struct {
	Kind  Kind
	State State
	// Failed: Exited with a non-zero exit code, or none known.
	Failed bool

	// The conditions' facts (ConditionsOf); the phase reads none of them.

	// Name: the container's name, for the conditions' messages.
	Name string
	// Ready: the container's status says ready (ContainerReady while it
	// runs; an init container that completed with exit code 0).
	Ready bool
	// Ran: a sidecar has started at least once.
	Ran bool
	// Shown: the status shows the container started, running or terminated
	// (not waiting).
	Shown bool
}

// Policy is the pod's spec.restartPolicy.
type Policy uint8

const (
	Always Policy = iota // the default
	OnFailure
	Never
)

// Pod is what the phase needs of a pod.
type Pod struct {
	Policy Policy
	// Terminating: the pod worker has seen termination (pod machine
	// completing, completed, terminating, terminated or finished).
	Terminating bool
	// Terminated: every container stopped for good (pod machine completed,
	// terminated or finished); it implies Terminating.
	Terminated bool
	// Containers: init containers and sidecars in spec order, then the
	// regular containers in spec order.
	Containers []Container

	// The conditions' facts (ConditionsOf); the phase reads none of them.

	// SandboxReady: the pod's sandbox is ready.
	SandboxReady bool
	// Gates: the messages of the readiness gates whose condition is missing
	// or not True, in spec order.
	Gates []string
}

// Of returns the phase of p, kubelet's getPhase over the facts:
//   - Failed once an init container failed under restartPolicy Never;
//   - Pending while the pod is not initialized and the first regular
//     container has not run, and while any regular container or sidecar
//     has not run yet;
//   - Running while a regular container or a sidecar runs;
//   - once every regular container exited (sidecars that exited count for
//     nothing): Running while the pod worker runs and the policy restarts
//     them (Always; OnFailure after a failure), else Succeeded when every
//     regular container exited with 0, Failed otherwise.
//
// A pod without a regular container is Pending.
func Of(p Pod) Phase {
	var firstRegular *Container
	for i := range p.Containers {
		if p.Containers[i].Kind == Regular {
			firstRegular = &p.Containers[i]
			break
		}
	}
	for _, c := range p.Containers {
		if c.Kind != Init {
			continue
		}
		done := c.State == Exited
		if done && c.Failed && p.Policy == Never {
			return Failed
		}
		if (!done || c.Failed) && firstRegular != nil && firstRegular.State == NotStarted {
			return Pending // not initialized: the regular containers wait
		}
	}
	var running, waiting, stopped, succeeded int
	for _, c := range p.Containers {
		switch c.Kind {
		case Sidecar:
			// A running sidecar keeps the pod Running (so a pod whose
			// regular containers all completed stays Running until its
			// sidecars stopped), one that never ran keeps it Pending, one
			// that exited counts for nothing.
			switch c.State {
			case Runs:
				running++
			case NotStarted:
				waiting++
			}
		case Regular:
			switch c.State {
			case Runs:
				running++
			case Exited:
				stopped++
				if !c.Failed {
					succeeded++
				}
			default:
				waiting++
			}
		}
	}
	switch {
	case waiting > 0:
		return Pending
	case running > 0:
		return Running
	case stopped > 0:
		if p.Terminated || !p.Terminating {
			switch p.Policy {
			case Always:
				if !p.Terminated {
					return Running // every container is restarting
				}
			case OnFailure:
				if stopped != succeeded && !p.Terminated {
					return Running // the failed ones are restarting
				}
			}
		}
		if stopped == succeeded {
			return Succeeded
		}
		return Failed
	}
	return Pending
}
