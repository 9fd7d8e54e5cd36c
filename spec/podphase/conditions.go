package podphase

import (
	"fmt"
	"strings"
)

// The pod conditions users see, as one pure function of the same facts as
// the phase (plus, per container, its name, readiness and whether it ran or
// shows as started), the phase the status shows, the sandbox and the
// readiness gates' verdicts. The engine's status (engine/podstatus) calls
// ConditionsOf with facts read from its container views; `speclet spec
// verify` calls it with facts read from the explored model states
// (spec/system.hcl's conditions block says how), so the condition
// invariants (condition_never_true) are about the conditions the engine
// publishes.

// Condition is one pod condition: True or False, with kubelet's reason and
// message when False (and the reason PodCompleted of a Succeeded pod's
// Initialized).
type Condition struct {
	True    bool
	Reason  string
	Message string
}

// Conditions are the pod conditions the node agent computes (PodScheduled,
// set by the scheduler, is always True and not part of them).
type Conditions struct {
	ReadyToStartContainers Condition
	Initialized            Condition
	Ready                  Condition
	ContainersReady        Condition
}

// CondNames are the conditions a condition invariant names
// (condition.NAME), in the order of the fields of Conditions.
var CondNames = []string{"ready_to_start_containers", "initialized", "ready", "containers_ready"}

// Get returns the condition of c named CondNames[i].
func (c *Conditions) Get(i int) Condition {
	return [...]Condition{c.ReadyToStartContainers, c.Initialized, c.Ready, c.ContainersReady}[i]
}

// Kubelet's reasons (pkg/kubelet/status/generate.go).
const (
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// ContainerReady is a running container's readiness as its status shows it,
// where serving says that its machine runs (not stopping) and its probe
// machine says ready: a sidecar is ready while it serves, also while the
// pod terminates; a regular container while it serves and the pod does not
// terminate; an init container that is not a sidecar never while it runs
// (it is ready once it completed with exit code 0, which the caller tells).
func ContainerReady(k Kind, serving, terminating bool) bool {
	switch k {
	case Sidecar:
		return serving
	case Regular:
		return serving && !terminating
	}
	return false
}

// ConditionsOf returns the conditions of p when the status shows phase,
// kubelet's GeneratePodReadyToStartContainersCondition,
// GeneratePodInitializedCondition, GeneratePodReadyCondition and
// GenerateContainersReadyCondition over the facts:
//   - ReadyToStartContainers: True while the sandbox is ready;
//   - Initialized: True once the pod Succeeded (reason PodCompleted), or
//     once a regular container shows as started (running or terminated),
//     or when every init container shows as terminated with 0 and every
//     sidecar ran;
//     else False, ContainersNotInitialized, naming the others;
//   - ContainersReady: False with reason PodCompleted or PodFailed in a
//     terminal phase; else True when every sidecar and regular container is
//     ready, else False, ContainersNotReady, naming the unready ones;
//   - Ready: as ContainersReady, but False with ReadinessGatesNotReady and
//     the gates' messages (p.Gates) when ContainersReady is True and a
//     readiness gate is not.
//
// Lists of names are in the order of p.Containers (kubelet's: spec order,
// init containers and sidecars first).
func ConditionsOf(p Pod, phase Phase) Conditions {
	var c Conditions
	c.ReadyToStartContainers.True = p.SandboxReady

	initialized, pendingInit := true, []string(nil)
	var unready []string
	for _, x := range p.Containers {
		switch x.Kind {
		case Init:
			// The status must show it terminated with 0 now: one waiting
			// to run again after an exit 0 (its lastState) is incomplete
			// here, though the phase counts it initialized (kubelet's
			// GeneratePodInitializedCondition reads State.Terminated
			// only, getPhase also LastTerminationState).
			if !x.Shown || x.State != Exited || x.Failed {
				initialized = false
				pendingInit = append(pendingInit, x.Name)
			}
		case Sidecar:
			if !x.Ran {
				initialized = false
				pendingInit = append(pendingInit, x.Name)
			}
			if !x.Ready {
				unready = append(unready, x.Name)
			}
		case Regular:
			if !x.Ready {
				unready = append(unready, x.Name)
			}
		}
	}
	for _, x := range p.Containers {
		if x.Kind == Regular && x.Shown {
			initialized = true // a regular container started: it was initialized
		}
	}
	switch {
	case phase == Succeeded:
		c.Initialized = Condition{True: true, Reason: ReasonPodCompleted}
	case initialized:
		c.Initialized.True = true
	default:
		c.Initialized = Condition{Reason: ReasonContainersNotInitialized, Message: listMsg("containers with incomplete status", pendingInit)}
	}

	switch {
	case phase == Succeeded:
		c.ContainersReady.Reason = ReasonPodCompleted
	case phase == Failed:
		c.ContainersReady.Reason = ReasonPodFailed
	case len(unready) > 0:
		c.ContainersReady = Condition{Reason: ReasonContainersNotReady, Message: listMsg("containers with unready status", unready)}
	default:
		c.ContainersReady.True = true
	}
	c.Ready = c.ContainersReady
	if c.Ready.True && len(p.Gates) > 0 {
		c.Ready = Condition{Reason: ReasonReadinessGatesNotReady, Message: strings.Join(p.Gates, ", ")}
	}
	return c
}

func listMsg(what string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: [%s]", what, strings.Join(names, " "))
}
