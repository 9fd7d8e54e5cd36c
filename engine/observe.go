package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

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
		taken(logPodStep), taken(recordPodEvent), taken(podEntered))
	sandboxObservers = append(common[*sandboxState](&fsm.SandboxKind),
		taken(recordSandboxEvent))
	ctrObservers = append(common[*ctrState](&fsm.ContainerKind),
		taken(logContainerStep), taken(recordContainerEvent), taken(containerEntered))
	probeObservers = append(common[*probeState](&fsm.ProbeKind),
		observer[fsm.ProbeState, fsm.ProbeEvent, fsm.ProbeAction, fsm.ProbeGuard, *probeState]{ran: probeEntered})
	nodeObservers = append(common[*nodeReclaim](&fsm.NodeKind),
		taken(nodeEntered), observer[fsm.NodeState, fsm.NodeEvent, fsm.NodeAction, fsm.NodeGuard, *nodeReclaim]{ran: nodeArm})
)

// common returns the observers every machine kind has: the metrics, the
// history (which names its records from the kind's tables, k) and the debug
// log.
func common[B owner, S, E, A, G fsm.Enum](k *fsm.Kind[S, E, A, G]) []observer[S, E, A, G, B] {
	names := history.KindNames(k)
	return []observer[S, E, A, G, B]{
		{taken: countStep[S, E, A, G, B], refused: countRefusal[S, E, A, G, B]},
		{taken: func(ctx context.Context, st *step[S, E, A, G, B]) { recordStep(ctx, st, names) }, ran: recordResults[S, E, A, G, B]},
		{taken: logStep[S, E, A, G, B], refused: logRefusal[S, E, A, G, B]},
	}
}

// taken returns an observer of the steps taken only.
func taken[S, E, A, G fsm.Enum, B owner](h hook[S, E, A, G, B]) observer[S, E, A, G, B] {
	return observer[S, E, A, G, B]{taken: h}
}

// countStep counts the transition (speclet_transitions_total) and, when it
// entered a state, the time spent in the state it left
// (speclet_state_duration_seconds).
func countStep[S, E, A, G fsm.Enum, B owner](_ context.Context, st *step[S, E, A, G, B]) {
	m := st.owner.engine().metrics
	m.Transition(st.Machine, st.From.String(), st.To.String(), st.Event.String())
	if st.Entered() {
		m.StateDuration(st.Machine, st.From.String(), st.at.Sub(st.since))
	}
}

// countRefusal counts an event the machine's state has no row for
// (speclet_rejected_events_total).
func countRefusal[S, E, A, G fsm.Enum, B owner](_ context.Context, st *step[S, E, A, G, B]) {
	if errors.Is(st.err, fsm.ErrNoTransition) {
		st.owner.engine().metrics.Rejected(st.Machine, st.From.String(), st.Event.String())
	}
}

// recordStep records the transition in its owner's history (/debug/pods,
// NodeHistory), named by its kind's names, and moves its machine there.
func recordStep[S, E, A, G fsm.Enum, B owner](_ context.Context, st *step[S, E, A, G, B], names history.Names) {
	rec := history.NewRecord(st.at, names, st.owner.instance(), st.Row, st.Choices)
	since := st.since
	if st.Entered() {
		since = st.at
	}
	st.rec = st.owner.record().Add(rec, st.To.String(), since)
}

// recordResults attaches the results of the step's actions to its record.
func recordResults[S, E, A, G fsm.Enum, B owner](_ context.Context, st *step[S, E, A, G, B]) {
	if len(st.results) > 0 && st.rec != nil {
		st.owner.record().SetActions(st.rec, st.results)
	}
}

// logStep logs the transition at debug level; the row and choices
// attributes are what the engine tests count for row coverage.
func logStep[S, E, A, G fsm.Enum, B owner](ctx context.Context, st *step[S, E, A, G, B]) {
	log := st.owner.engine().log
	if log.Enabled(ctx, slog.LevelDebug) {
		log.Debug("transition", append(st.owner.logAttrs(), "machine", st.Machine, "from", st.From.String(), "event", st.Event.String(),
			"to", st.To.String(), "actions", fmt.Sprint(st.Actions), "row", st.Row, "choices", st.Choices)...)
	}
}

// logRefusal logs a refused event below debug level, and a machine's
// failure as an error.
func logRefusal[S, E, A, G fsm.Enum, B owner](ctx context.Context, st *step[S, E, A, G, B]) {
	log := st.owner.engine().log
	if !errors.Is(st.err, fsm.ErrNoTransition) {
		log.Error("state machine", append(st.owner.logAttrs(), "machine", st.Machine, "event", st.Event.String(), "err", st.err)...)
		return
	}
	if log.Enabled(ctx, slog.LevelDebug-4) {
		log.Log(ctx, slog.LevelDebug-4, "event refused", append(st.owner.logAttrs(), "machine", st.Machine, "event", st.Event.String())...)
	}
}
