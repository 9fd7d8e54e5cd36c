package worker

import (
	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/fsm"
)

// This file registers the observers of each machine kind of a pod, once:
// every kind has the metrics, the history, the debug log and Config.Steps
// (engine/observe's Common); the pod, sandbox and container kinds add the
// operator log (oplog.go), their Kubernetes events (events.go) and what
// entering a state means to their owner (timers, the published pod state,
// the waiting reason); the probe kind arms its timers once the step's
// actions ran (probe_schedule.go).

// The observers of each machine kind, in the order they see a step.
var (
	podObservers = append(observe.Common[*podState](&fsm.PodKind),
		fire.Taken(logPodStep), fire.Taken(recordPodEvent), fire.Taken(podEntered))
	sandboxObservers = append(observe.Common[*sandboxState](&fsm.SandboxKind),
		fire.Taken(recordSandboxEvent))
	ctrObservers = append(observe.Common[*ctrState](&fsm.ContainerKind),
		fire.Taken(logContainerStep), fire.Taken(recordContainerEvent), fire.Taken(containerEntered))
	probeObservers = append(observe.Common[*probeState](&fsm.ProbeKind),
		fire.Observer[fsm.ProbeState, fsm.ProbeEvent, fsm.ProbeAction, fsm.ProbeGuard, *probeState]{Ran: probeEntered})
)
