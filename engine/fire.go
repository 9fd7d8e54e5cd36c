package engine

import (
	"context"
	"time"

	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/fsm"
)

// This file is the one fire loop every machine goes through: the pod
// machine, the sandbox machine, each container and probe machine of a pod,
// and the node machine. The loop knows a machine only as an fsm.Machine and
// its owner; what a step means to the rest of the engine (metrics, history,
// logs, Kubernetes events, timers) is said by the observers of its machine
// kind (observe.go), registered once.

// owner is the engine object that owns one machine instance and implements
// its guards and actions (fsm.<Machine>Impl): a podState, sandboxState,
// ctrState or probeState of a pod worker, or the nodeReclaim.
type owner interface {
	engine() *Engine
	// logAttrs names the machine's pod and container for logs (nil for the
	// node machine). It returns a new slice.
	logAttrs() []any
	// record is the history the machine's steps go to: its pod's, or the
	// node machine's.
	record() *history.Log
	// instance names the machine among the machines of its kind in its
	// pod's history: the container's name, "" for the others.
	instance() string
}

// run is where one machine instance stands in the loop: its owner, the
// observers of its kind, the events its actions raised (fired after the
// running step) and when it entered its current state.
type run[S, E, A, G fsm.Enum, B owner] struct {
	owner     B
	observers []observer[S, E, A, G, B]
	queue     []E
	since     time.Time
}

// newRun returns the run of a machine owned by b, observed by obs, that
// entered its state now.
func newRun[S, E, A, G fsm.Enum, B owner](b B, obs []observer[S, E, A, G, B]) run[S, E, A, G, B] {
	return run[S, E, A, G, B]{owner: b, observers: obs, since: b.engine().clock.Now()}
}

// raise queues ev; fire delivers it after the running step's actions.
func (r *run[S, E, A, G, B]) raise(ev E) { r.queue = append(r.queue, ev) }

// step is one step of a machine as its observers see it: the fsm.Step, the
// machine and its owner, when it was taken and when the machine had entered
// From, and, once they ran, the results of its actions. For a refused event
// From and To are the current state, Event the event and Row -1.
type step[S, E, A, G fsm.Enum, B owner] struct {
	fsm.Step[S, E, A, G]
	m       fsm.Machine[S, E, A, G]
	owner   B
	at      time.Time // when the step was taken
	since   time.Time // when the machine entered From
	err     error     // why the event was refused (wraps fsm.ErrNoTransition unless the machine failed)
	results []ActionResult
	rec     *history.Record // the step's history record (set by the history observer)
}

// observer is told of the steps of every machine of one kind. Each hook may
// be nil. taken runs after the transition, before the step's actions, in
// registration order; ran after the actions (st.results); refused when the
// machine took no transition (st.err).
//
// scope, when set, returns the context that the hooks of a step taken
// (i < 0, called once before they run) or its action i (called right
// before it runs) run under. The engine's observers set none; the effects
// test (effects_test.go) marks by it which action or which machine's hooks
// deliver an event to another machine, and where each action begins.
type observer[S, E, A, G fsm.Enum, B owner] struct {
	taken, ran, refused hook[S, E, A, G, B]
	scope               func(ctx context.Context, st *step[S, E, A, G, B], i int) context.Context
}

// fire delivers ev to m and then every event the actions raise (r.queue),
// in order, until none is left. For each step it tells the observers of
// m's kind, runs the step's actions in order outside the machine, and tells
// the observers again with their results. A refused event goes to the
// observers' refused hooks: routes deliver some inputs to states that ignore
// them (a late runtime event).
func fire[S, E, A, G fsm.Enum, B owner](ctx context.Context, m fsm.Machine[S, E, A, G], r *run[S, E, A, G, B], ev E) {
	e := r.owner.engine()
	r.queue = append(r.queue, ev)
	for len(r.queue) > 0 {
		ev := r.queue[0]
		r.queue = r.queue[1:]
		// A step per fire, not one kept per machine for reuse: 10,000 pods
		// would hold 1 KB each of idle steps.
		st := &step[S, E, A, G, B]{m: m, owner: r.owner, since: r.since}
		from := m.State()
		fs, err := m.Fire(ev)
		if err != nil {
			st.Step = fsm.Step[S, E, A, G]{Machine: m.Name(), From: from, To: from, Event: ev, Row: -1}
			st.err = err
			notify(ctx, r.observers, st, func(o *observer[S, E, A, G, B]) hook[S, E, A, G, B] { return o.refused })
			continue
		}
		st.Step, st.at = fs, e.clock.Now()
		if fs.Entered() {
			r.since = st.at
		}
		hctx := scoped(ctx, r.observers, st, -1)
		notify(hctx, r.observers, st, func(o *observer[S, E, A, G, B]) hook[S, E, A, G, B] { return o.taken })
		// The step's actions slice is the machine's buffer, valid until
		// the next Fire; an action may fire this machine again.
		actions := append([]A(nil), fs.Actions...)
		st.Actions = actions
		if len(actions) > 0 {
			st.results = make([]ActionResult, 0, len(actions))
		}
		for i, a := range actions {
			res := ActionResult{Action: a.String()}
			if err := m.Run(scoped(ctx, r.observers, st, i), a); err != nil {
				res.Error = err.Error()
				e.log.Warn("action failed", append(r.owner.logAttrs(), "machine", fs.Machine, "action", a.String(), "err", err)...)
			}
			st.results = append(st.results, res)
		}
		notify(hctx, r.observers, st, func(o *observer[S, E, A, G, B]) hook[S, E, A, G, B] { return o.ran })
	}
}

// hook is one hook of an observer.
type hook[S, E, A, G fsm.Enum, B owner] func(ctx context.Context, st *step[S, E, A, G, B])

// notify calls the hook which picks of each observer, in order.
func notify[S, E, A, G fsm.Enum, B owner](ctx context.Context, obs []observer[S, E, A, G, B], st *step[S, E, A, G, B],
	which func(*observer[S, E, A, G, B]) hook[S, E, A, G, B]) {
	for i := range obs {
		if h := which(&obs[i]); h != nil {
			h(ctx, st)
		}
	}
}

// scoped returns ctx under the scope of each observer that sets one, in
// order (observer.scope): the context of the hooks of st (i < 0) or of its
// action i.
func scoped[S, E, A, G fsm.Enum, B owner](ctx context.Context, obs []observer[S, E, A, G, B], st *step[S, E, A, G, B], i int) context.Context {
	for k := range obs {
		if s := obs[k].scope; s != nil {
			ctx = s(ctx, st, i)
		}
	}
	return ctx
}
