// Package observe is what every machine kind's steps tell the engine's
// common sinks, registered once per kind (engine/fire's observers): the
// transition metrics, the owner's history, the debug log and the
// Config.Steps hook. Observers that mean something to one kind only (the
// operator log, Kubernetes events, timers, published states) are those of
// the machine's owner (engine/worker, engine/reclaim). A Check (check.go)
// is the engine tests' observer of every kind, its kind left out.
package observe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/metrics"
	"github.com/speclet/speclet/fsm"
)

// Owner is what the common observers read of a machine's owner.
type Owner interface {
	fire.Owner
	// Sinks is where the machine's steps go besides its history.
	Sinks() *Sinks
	// Record is the history the machine's steps go to: its pod's, or the
	// node machine's.
	Record() *history.Log
	// Instance names the machine among the machines of its kind in its
	// pod's history: the container's name (a device plugin machine's
	// resource), "" for the others.
	Instance() string
	// PodUID is the machine's pod; "" for the node machine.
	PodUID() types.UID
}

// Sinks are the engine's: its metrics and the Config.Steps hook (nil: none).
// Logs go to the owner's Logger.
type Sinks struct {
	Metrics *metrics.Metrics
	Steps   func(Step)
}

// Step is a transition a machine took, as Config.Steps is told of it. Row
// and Choices index the tables of the machine's kind (fsm.<Machine>Kind's
// Transitions and Choices), which name its guard and every branch.
type Step struct {
	Machine         string    // the machine's kind: pod, sandbox, container, probe, node or device_plugin
	Pod             types.UID // the machine's pod; "" for the node and device plugin machines
	Container       string    // the container of a container or probe machine, the resource of a device plugin machine; "" for the others
	From, Event, To string    // To is From on an internal row
	Row             int       // the transition row taken
	Choices         []int     // the choice branches it went through, in order; the Step's own copy
	Actions         []string  // the actions the step runs, in order
	At              time.Time // when it was taken, on the engine's clock
}

// Common returns the observers every machine kind has, in the order they
// see a step: the metrics, the history (which names its records from the
// kind's tables, k), the debug log and the Steps hook.
func Common[B Owner, S, E, A, G fsm.Enum](k *fsm.Kind[S, E, A, G]) []fire.Observer[S, E, A, G, B] {
	names := history.KindNames(k)
	return []fire.Observer[S, E, A, G, B]{
		{Taken: countStep[S, E, A, G, B], Refused: countRefusal[S, E, A, G, B]},
		{Taken: func(ctx context.Context, st *fire.Step[S, E, A, G, B]) { recordStep(ctx, st, names) }, Ran: recordResults[S, E, A, G, B]},
		{Taken: logStep[S, E, A, G, B], Refused: logRefusal[S, E, A, G, B]},
		{Taken: tellStep[S, E, A, G, B]},
	}
}

// tellStep tells Sinks.Steps of the step, when it is set.
func tellStep[S, E, A, G fsm.Enum, B Owner](_ context.Context, st *fire.Step[S, E, A, G, B]) {
	tell := st.Owner.Sinks().Steps
	if tell == nil {
		return
	}
	s := Step{Machine: st.Machine, Pod: st.Owner.PodUID(), Container: st.Owner.Instance(), From: st.From.String(),
		Event: st.Event.String(), To: st.To.String(), Row: st.Row, Choices: slices.Clone(st.Choices), At: st.At}
	if len(st.Actions) > 0 {
		s.Actions = make([]string, len(st.Actions))
		for i, a := range st.Actions {
			s.Actions[i] = a.String()
		}
	}
	tell(s)
}

// countStep counts the transition (speclet_transitions_total) and, when it
// entered a state, the time spent in the state it left
// (speclet_state_duration_seconds).
func countStep[S, E, A, G fsm.Enum, B Owner](_ context.Context, st *fire.Step[S, E, A, G, B]) {
	m := st.Owner.Sinks().Metrics
	m.Transition(st.Machine, st.From.String(), st.To.String(), st.Event.String())
	if st.Entered() {
		m.StateDuration(st.Machine, st.From.String(), st.At.Sub(st.Since))
	}
}

// countRefusal counts an event the machine's state has no row for
// (speclet_rejected_events_total).
func countRefusal[S, E, A, G fsm.Enum, B Owner](_ context.Context, st *fire.Step[S, E, A, G, B]) {
	if errors.Is(st.Err, fsm.ErrNoTransition) {
		st.Owner.Sinks().Metrics.Rejected(st.Machine, st.From.String(), st.Event.String())
	}
}

// recordStep records the transition in its owner's history (/debug/pods,
// the node's history), named by its kind's names, and moves its machine
// there.
func recordStep[S, E, A, G fsm.Enum, B Owner](_ context.Context, st *fire.Step[S, E, A, G, B], names history.Names) {
	since := st.Since
	if st.Entered() {
		since = st.At
	}
	st.Rec = st.Owner.Record().Add(st.At, names, st.Owner.Instance(), st.Row, st.Choices, st.To.String(), since)
}

// recordResults attaches the results of the step's actions to its record.
func recordResults[S, E, A, G fsm.Enum, B Owner](_ context.Context, st *fire.Step[S, E, A, G, B]) {
	if len(st.Results) > 0 && st.Rec != 0 {
		st.Owner.Record().SetActions(st.Rec, st.Results)
	}
}

// logStep logs the transition at debug level.
func logStep[S, E, A, G fsm.Enum, B Owner](ctx context.Context, st *fire.Step[S, E, A, G, B]) {
	log := st.Owner.Logger()
	if log.Enabled(ctx, slog.LevelDebug) {
		log.Debug("transition", append(st.Owner.LogAttrs(), "machine", st.Machine, "from", st.From.String(), "event", st.Event.String(),
			"to", st.To.String(), "actions", fmt.Sprint(st.Actions), "row", st.Row, "choices", st.Choices)...)
	}
}

// logRefusal logs a refused event below debug level, and a machine's
// failure as an error.
func logRefusal[S, E, A, G fsm.Enum, B Owner](ctx context.Context, st *fire.Step[S, E, A, G, B]) {
	log := st.Owner.Logger()
	if !errors.Is(st.Err, fsm.ErrNoTransition) {
		log.Error("state machine", append(st.Owner.LogAttrs(), "machine", st.Machine, "event", st.Event.String(), "err", st.Err)...)
		return
	}
	if log.Enabled(ctx, slog.LevelDebug-4) {
		log.Log(ctx, slog.LevelDebug-4, "event refused", append(st.Owner.LogAttrs(), "machine", st.Machine, "event", st.Event.String())...)
	}
}
