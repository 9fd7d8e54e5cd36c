package engine

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
	"github.com/speclet/speclet/fsm"
)

// This file registers the observers of each machine kind, once: every kind
// has the metrics, the history and the debug log (common); the pod,
// sandbox and container kinds add the operator log (oplog.go), their
// Kubernetes events (events.go) and what entering a state means to their
// owner (timers, the published pod state, the waiting reason); the probe
// and node kinds arm their timers once the step's actions ran
// (probe_schedule.go, node_schedule.go).

// The observers of each machine kind, in the order they see a step.
var (
	podObservers = append(common[*podState](&fsm.PodKind),
		fire.Taken(logPodStep), fire.Taken(recordPodEvent), fire.Taken(podEntered))
	sandboxObservers = append(common[*sandboxState](&fsm.SandboxKind),
		fire.Taken(recordSandboxEvent))
	ctrObservers = append(common[*ctrState](&fsm.ContainerKind),
		fire.Taken(logContainerStep), fire.Taken(recordContainerEvent), fire.Taken(containerEntered))
	probeObservers = append(common[*probeState](&fsm.ProbeKind),
		fire.Observer[fsm.ProbeState, fsm.ProbeEvent, fsm.ProbeAction, fsm.ProbeGuard, *probeState]{Ran: probeEntered})
	nodeObservers = append(common[*nodeReclaim](&fsm.NodeKind),
		fire.Taken(nodeEntered), fire.Observer[fsm.NodeState, fsm.NodeEvent, fsm.NodeAction, fsm.NodeGuard, *nodeReclaim]{Ran: nodeArm})
)

// common returns the observers every machine kind has: the metrics, the
// history (which names its records from the kind's tables, k) and the debug
// log.
func common[B owner, S, E, A, G fsm.Enum](k *fsm.Kind[S, E, A, G]) []fire.Observer[S, E, A, G, B] {
	names := history.KindNames(k)
	return []fire.Observer[S, E, A, G, B]{
		{Taken: countStep[S, E, A, G, B], Refused: countRefusal[S, E, A, G, B]},
		{Taken: func(ctx context.Context, st *fire.Step[S, E, A, G, B]) { recordStep(ctx, st, names) }, Ran: recordResults[S, E, A, G, B]},
		{Taken: logStep[S, E, A, G, B], Refused: logRefusal[S, E, A, G, B]},
		{Taken: tellStep[S, E, A, G, B]},
	}
}

// Step is a transition a machine took, as Config.Steps is told of it. Row
// and Choices index the tables of the machine's kind (fsm.<Machine>Kind's
// Transitions and Choices), which name its guard and every branch.
type Step struct {
	Machine         string    // the machine's kind: pod, sandbox, container, probe or node
	Pod             types.UID // the machine's pod; "" for the node machine
	Container       string    // the container of a container or probe machine; "" for the others
	From, Event, To string    // To is From on an internal row
	Row             int       // the transition row taken
	Choices         []int     // the choice branches it went through, in order; the Step's own copy
	Actions         []string  // the actions the step runs, in order
	At              time.Time // when it was taken, on the engine's clock
}

// tellStep tells Config.Steps of the step, when it is set.
func tellStep[S, E, A, G fsm.Enum, B owner](_ context.Context, st *fire.Step[S, E, A, G, B]) {
	tell := st.Owner.engine().cfg.Steps
	if tell == nil {
		return
	}
	s := Step{Machine: st.Machine, Pod: st.Owner.podUID(), Container: st.Owner.instance(), From: st.From.String(),
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
func countStep[S, E, A, G fsm.Enum, B owner](_ context.Context, st *fire.Step[S, E, A, G, B]) {
	m := st.Owner.engine().metrics
	m.Transition(st.Machine, st.From.String(), st.To.String(), st.Event.String())
	if st.Entered() {
		m.StateDuration(st.Machine, st.From.String(), st.At.Sub(st.Since))
	}
}

// countRefusal counts an event the machine's state has no row for
// (speclet_rejected_events_total).
func countRefusal[S, E, A, G fsm.Enum, B owner](_ context.Context, st *fire.Step[S, E, A, G, B]) {
	if errors.Is(st.Err, fsm.ErrNoTransition) {
		st.Owner.engine().metrics.Rejected(st.Machine, st.From.String(), st.Event.String())
	}
}

// recordStep records the transition in its owner's history (/debug/pods,
// NodeHistory), named by its kind's names, and moves its machine there.
func recordStep[S, E, A, G fsm.Enum, B owner](_ context.Context, st *fire.Step[S, E, A, G, B], names history.Names) {
	rec := history.NewRecord(st.At, names, st.Owner.instance(), st.Row, st.Choices)
	since := st.Since
	if st.Entered() {
		since = st.At
	}
	st.Rec = st.Owner.record().Add(rec, st.To.String(), since)
}

// recordResults attaches the results of the step's actions to its record.
func recordResults[S, E, A, G fsm.Enum, B owner](_ context.Context, st *fire.Step[S, E, A, G, B]) {
	if len(st.Results) > 0 && st.Rec != nil {
		st.Owner.record().SetActions(st.Rec, st.Results)
	}
}

// logStep logs the transition at debug level.
func logStep[S, E, A, G fsm.Enum, B owner](ctx context.Context, st *fire.Step[S, E, A, G, B]) {
	log := st.Owner.engine().log
	if log.Enabled(ctx, slog.LevelDebug) {
		log.Debug("transition", append(st.Owner.LogAttrs(), "machine", st.Machine, "from", st.From.String(), "event", st.Event.String(),
			"to", st.To.String(), "actions", fmt.Sprint(st.Actions), "row", st.Row, "choices", st.Choices)...)
	}
}

// logRefusal logs a refused event below debug level, and a machine's
// failure as an error.
func logRefusal[S, E, A, G fsm.Enum, B owner](ctx context.Context, st *fire.Step[S, E, A, G, B]) {
	log := st.Owner.engine().log
	if !errors.Is(st.Err, fsm.ErrNoTransition) {
		log.Error("state machine", append(st.Owner.LogAttrs(), "machine", st.Machine, "event", st.Event.String(), "err", st.Err)...)
		return
	}
	if log.Enabled(ctx, slog.LevelDebug-4) {
		log.Log(ctx, slog.LevelDebug-4, "event refused", append(st.Owner.LogAttrs(), "machine", st.Machine, "event", st.Event.String())...)
	}
}
