package engine

import "github.com/speclet/speclet/engine/observe"

// Every machine goes through engine/fire's one fire loop; observe.go
// registers the observers of each kind.

// owner is the engine object that owns one machine instance and implements
// its guards and actions (fsm.<Machine>Impl): a podState, sandboxState,
// ctrState or probeState of a pod worker, or the nodeReclaim.
type owner interface {
	observe.Owner
	engine() *Engine
}
