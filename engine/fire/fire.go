// Package fire is the one fire loop every machine of the engine goes
// through: the pod machine, the sandbox machine, each container and probe
// machine of a pod, and the node machine. The loop knows a machine only as
// an fsm.Machine and its Owner; what a step means to the rest of the engine
// (metrics, history, logs, Kubernetes events, timers) is said by the
// Observers of its machine kind, registered once by the engine.
package fire

import (
	"context"
	"log/slog"
	"time"

	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/fsm"
)

// Owner is the object that owns one machine instance and implements its
// guards and actions (fsm.<Machine>Impl).
type Owner interface {
	// Now is the engine's clock: when a step is taken.
	Now() time.Time
	// Logger is where a failed action is logged.
	Logger() *slog.Logger
	// LogAttrs names the machine's pod and container for logs (nil for the
	// node machine). It returns a new slice.
	LogAttrs() []any
}

// Run is where one machine instance stands in the loop: its owner, the
// observers of its kind, the events its actions raised (fired after the
// running step) and when it entered its current state.
type Run[S, E, A, G fsm.Enum, B Owner] struct {
	owner     B
	observers []Observer[S, E, A, G, B]
	queue     []E
	since     time.Time
}

// NewRun returns the run of a machine owned by b, observed by obs, that
// entered its state now.
func NewRun[S, E, A, G fsm.Enum, B Owner](b B, obs []Observer[S, E, A, G, B]) Run[S, E, A, G, B] {
	return Run[S, E, A, G, B]{owner: b, observers: obs, since: b.Now()}
}

// Raise queues ev; Fire delivers it after the running step's actions.
func (r *Run[S, E, A, G, B]) Raise(ev E) { r.queue = append(r.queue, ev) }

// Since is when the machine entered its current state.
func (r *Run[S, E, A, G, B]) Since() time.Time { return r.since }

// Pending is the events raised and not delivered yet, oldest first; the
// slice is the run's own, valid until the next Raise or delivery.
func (r *Run[S, E, A, G, B]) Pending() []E { return r.queue }

// Step is one step of a machine as its observers see it: the fsm.Step, the
// machine and its owner, when it was taken and when the machine had entered
// From, and, once they ran, the results of its actions. For a refused event
// From and To are the current state, Event the event and Row -1.
type Step[S, E, A, G fsm.Enum, B Owner] struct {
	fsm.Step[S, E, A, G]
	M       fsm.Machine[S, E, A, G]
	Owner   B
	At      time.Time // when the step was taken
	Since   time.Time // when the machine entered From
	Err     error     // why the event was refused (wraps fsm.ErrNoTransition unless the machine failed)
	Results []history.ActionResult
	Rec     history.Ref // the step's history record (set by the engine's history observer)
}

// Observer is told of the steps of every machine of one kind. Each hook may
// be nil. Taken runs after the transition, before the step's actions, in
// registration order; Ran after the actions (st.Results); Refused when the
// machine took no transition (st.Err).
//
// Scope, when set, returns the context that the hooks of a step taken
// (i < 0, called once before they run) or its action i (called right
// before it runs) run under. The engine's observers set none; its effects
// test marks by it which action or which machine's hooks deliver an event
// to another machine, and where each action begins.
type Observer[S, E, A, G fsm.Enum, B Owner] struct {
	Taken, Ran, Refused Hook[S, E, A, G, B]
	Scope               func(ctx context.Context, st *Step[S, E, A, G, B], i int) context.Context
}

// Hook is one hook of an observer.
type Hook[S, E, A, G fsm.Enum, B Owner] func(ctx context.Context, st *Step[S, E, A, G, B])

// Taken returns an observer of the steps taken only.
func Taken[S, E, A, G fsm.Enum, B Owner](h Hook[S, E, A, G, B]) Observer[S, E, A, G, B] {
	return Observer[S, E, A, G, B]{Taken: h}
}

// Fire delivers ev to m and then every event the actions raise (r's
// queue), in order, until none is left. For each step it tells the
// observers of m's kind, runs the step's actions in order outside the
// machine, and tells the observers again with their results. A refused
// event goes to the observers' Refused hooks: routes deliver some inputs to
// states that ignore them (a late runtime event).
func Fire[S, E, A, G fsm.Enum, B Owner](ctx context.Context, m fsm.Machine[S, E, A, G], r *Run[S, E, A, G, B], ev E) {
	r.queue = append(r.queue, ev)
	for len(r.queue) > 0 {
		ev := r.queue[0]
		r.queue = r.queue[1:]
		// A step per fire, not one kept per machine for reuse: 10,000 pods
		// would hold 1 KB each of idle steps.
		st := &Step[S, E, A, G, B]{M: m, Owner: r.owner, Since: r.since}
		from := m.State()
		fs, err := m.Fire(ev)
		if err != nil {
			st.Step = fsm.Step[S, E, A, G]{Machine: m.Name(), From: from, To: from, Event: ev, Row: -1}
			st.Err = err
			notify(ctx, r.observers, st, func(o *Observer[S, E, A, G, B]) Hook[S, E, A, G, B] { return o.Refused })
			continue
		}
		st.Step, st.At = fs, r.owner.Now()
		if fs.Entered() {
			r.since = st.At
		}
		hctx := scoped(ctx, r.observers, st, -1)
		notify(hctx, r.observers, st, func(o *Observer[S, E, A, G, B]) Hook[S, E, A, G, B] { return o.Taken })
		// The step's actions slice is the machine's buffer, valid until
		// the next Fire; an action may fire this machine again.
		actions := append([]A(nil), fs.Actions...)
		st.Actions = actions
		if len(actions) > 0 {
			st.Results = make([]history.ActionResult, 0, len(actions))
		}
		for i, a := range actions {
			res := history.ActionResult{Action: a.String()}
			if err := m.Run(scoped(ctx, r.observers, st, i), a); err != nil {
				res.Error = err.Error()
				r.owner.Logger().Warn("action failed", append(r.owner.LogAttrs(), "machine", fs.Machine, "action", a.String(), "err", err)...)
			}
			st.Results = append(st.Results, res)
		}
		notify(hctx, r.observers, st, func(o *Observer[S, E, A, G, B]) Hook[S, E, A, G, B] { return o.Ran })
	}
}

// notify calls the hook which picks of each observer, in order.
func notify[S, E, A, G fsm.Enum, B Owner](ctx context.Context, obs []Observer[S, E, A, G, B], st *Step[S, E, A, G, B],
	which func(*Observer[S, E, A, G, B]) Hook[S, E, A, G, B]) {
	for i := range obs {
		if h := which(&obs[i]); h != nil {
			h(ctx, st)
		}
	}
}

// scoped returns ctx under the scope of each observer that sets one, in
// order (Observer.Scope): the context of the hooks of st (i < 0) or of its
// action i.
func scoped[S, E, A, G fsm.Enum, B Owner](ctx context.Context, obs []Observer[S, E, A, G, B], st *Step[S, E, A, G, B], i int) context.Context {
	for k := range obs {
		if s := obs[k].Scope; s != nil {
			ctx = s(ctx, st, i)
		}
	}
	return ctx
}
