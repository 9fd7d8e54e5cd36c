package engine

import (
	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/fsm"
)

// The observers of the node machine, in the order they see a step: the
// common ones (engine/observe) and its timers, armed once the step's
// actions ran (node_schedule.go). A pod's machines have theirs in
// engine/worker.
var nodeObservers = append(observe.Common[*nodeReclaim](&fsm.NodeKind),
	fire.Taken(nodeEntered), fire.Observer[fsm.NodeState, fsm.NodeEvent, fsm.NodeAction, fsm.NodeGuard, *nodeReclaim]{Ran: nodeArm})

// Step is a transition a machine took, as Config.Steps is told of it
// (engine/observe).
type Step = observe.Step
