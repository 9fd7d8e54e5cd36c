package observe

import (
	"context"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/fsm"
)

// Check follows every step of the machines of the kinds it is added to,
// after their own observers, as engine/fire's Observer with the machine's
// kind left out: the engine's tests check each action's effects against
// spec/system.hcl with it (the engine's effects_test.go; engine/worker's
// and engine/reclaim's AddCheck). Each hook may be nil.
type Check struct {
	// Scope returns the context the observers of a step taken (i < 0) or
	// its action i run under.
	Scope func(ctx context.Context, st CheckStep, i int) context.Context
	// Ran: the step's actions returned.
	Ran func(ctx context.Context, st CheckStep)
	// Refused: the machine took no transition for the event.
	Refused func(ctx context.Context, st CheckStep)
}

// CheckStep is a step as a Check sees it.
type CheckStep struct {
	Owner   Owner
	Step    any // the step (an *engine/fire.Step): one per step taken
	Machine string
	Event   string
	Actions []string
	// LastErr is the error of the last action that ran, "" for none.
	LastErr string
	// Queued is the events the machine's actions raised that it has not
	// taken yet, in order.
	Queued []string
}

// CheckObserver is c as an observer of one machine kind, whose owners'
// queues of raised events queued reads.
func CheckObserver[S, E, A, G fsm.Enum, B Owner](c Check, queued func(B) []E) fire.Observer[S, E, A, G, B] {
	view := func(st *fire.Step[S, E, A, G, B]) CheckStep {
		v := CheckStep{Owner: st.Owner, Step: st, Machine: st.Machine, Event: st.Event.String()}
		for _, a := range st.Actions {
			v.Actions = append(v.Actions, a.String())
		}
		if n := len(st.Results); n > 0 {
			v.LastErr = st.Results[n-1].Error
		}
		for _, e := range queued(st.Owner) {
			v.Queued = append(v.Queued, e.String())
		}
		return v
	}
	var o fire.Observer[S, E, A, G, B]
	if c.Scope != nil {
		o.Scope = func(ctx context.Context, st *fire.Step[S, E, A, G, B], i int) context.Context {
			return c.Scope(ctx, view(st), i)
		}
	}
	if c.Ran != nil {
		o.Ran = func(ctx context.Context, st *fire.Step[S, E, A, G, B]) { c.Ran(ctx, view(st)) }
	}
	if c.Refused != nil {
		o.Refused = func(ctx context.Context, st *fire.Step[S, E, A, G, B]) { c.Refused(ctx, view(st)) }
	}
	return o
}
