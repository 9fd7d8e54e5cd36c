package engine

import "github.com/speclet/speclet/engine/observe"

// Every machine goes through engine/fire's one fire loop; observe.go
// registers the observers of each kind.

// owner is the engine object that owns one machine instance and implements
// its guards and actions (fsm.<Machine>Impl), itself or through the
// packages it embeds: a podState, sandboxState (engine/sandbox), ctrState
// (engine/containers, and engine/images for the image actions) or
// probeState (engine/probes) of a pod worker, or the nodeReclaim
// (engine/reclaim). host is the engine's host (host.go) it runs under.
type owner interface {
	observe.Owner
	host() *host
}
