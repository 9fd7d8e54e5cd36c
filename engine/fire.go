package engine

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/history"
)

// Every machine goes through engine/fire's one fire loop; observe.go
// registers the observers of each kind.

// owner is the engine object that owns one machine instance and implements
// its guards and actions (fsm.<Machine>Impl): a podState, sandboxState,
// ctrState or probeState of a pod worker, or the nodeReclaim.
type owner interface {
	fire.Owner
	engine() *Engine
	// record is the history the machine's steps go to: its pod's, or the
	// node machine's.
	record() *history.Log
	// instance names the machine among the machines of its kind in its
	// pod's history: the container's name, "" for the others.
	instance() string
	// podUID is the machine's pod; "" for the node machine.
	podUID() types.UID
}
