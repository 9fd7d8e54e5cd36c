package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/speclet/speclet/fsm"
)

// This file is the one fire loop every machine of a pod goes through: the
// pod machine, the sandbox machine and each container machine.

// step is what the generic loop needs of one generated Step.
type step[A any] struct {
	from, to, event string
	entered         bool // a state was (re-)entered: its timers are re-armed
	actions         []A
	row             int   // index of the transition taken in the machine's TransitionTable
	choices         []int // indices of the choice branches passed in its ChoiceTable
}

// stepOf is the loop's view of a generated Step.
func stepOf[S, E, A fmt.Stringer](from, to S, ev E, path []S, actions []A, row int, choices []int) step[A] {
	return step[A]{from: from.String(), to: to.String(), event: ev.String(), entered: len(path) > 0,
		actions: actions, row: row, choices: choices}
}

// runner adapts one generated machine to the loop: fire takes one event, run
// carries out one action, timers returns the timers of the current state,
// state names the current state, guard and choice name the guard of a
// transition row and of a choice branch (for the history).
type runner[E, A any] struct {
	kind     string // machine name, for logs and metrics
	instance string // the container's name; "" for the pod and sandbox machines
	who      func() []any
	fire     func(E) (step[A], error)
	run      func(context.Context, A) error
	timers   func(now time.Time) []timer
	entered  func(context.Context) // after a state was entered and its timers armed
	state    func() string
	guard    func(row int) string
	choice   func(branch int) string
	since    time.Time // when the machine entered its current state
}

// rowGuard is the guard of a transition row, "" when it has none.
func rowGuard[G fmt.Stringer](g G, has bool) string {
	if !has {
		return ""
	}
	return g.String()
}

// branchString renders a choice branch as "[guard] -> to".
func branchString[G, S fmt.Stringer](g G, has bool, to S) string {
	if !has {
		return "[otherwise] -> " + to.String()
	}
	return "[" + g.String() + "] -> " + to.String()
}

// timer is one timer of the current state: the event it fires, typed by
// its machine, and its deadline.
type timer struct {
	at   time.Time
	fire func(context.Context)
}

// fireLoop delivers ev and then every event the actions raise (appended to
// *queue while they run), in order, until none is left. For each step it
// re-arms the machine's timers when a state was entered, runs the step's
// actions in order outside the machine, and logs and counts the transition.
// A refused event is logged at debug level: routes deliver some inputs to
// states that ignore them (a late runtime event).
func fireLoop[E fmt.Stringer, A fmt.Stringer](ctx context.Context, w *podWorker, owner string, r *runner[E, A], queue *[]E, ev E) {
	e := w.e
	*queue = append(*queue, ev)
	for len(*queue) > 0 {
		ev := (*queue)[0]
		*queue = (*queue)[1:]
		from := r.state()
		st, err := r.fire(ev)
		if err != nil {
			if errors.Is(err, fsm.ErrNoTransition) {
				e.metrics.rejected(r.kind, from, ev.String())
				if e.log.Enabled(ctx, slog.LevelDebug-4) {
					e.log.Log(ctx, slog.LevelDebug-4, "event refused", append(r.who(), "machine", r.kind, "event", ev.String())...)
				}
			} else {
				e.log.Error("state machine", append(r.who(), "machine", r.kind, "event", ev.String(), "err", err)...)
			}
			continue
		}
		now := e.clock.Now()
		e.metrics.transition(r.kind, st.from, st.to, st.event)
		if st.entered {
			e.metrics.stateDuration(r.kind, st.from, now.Sub(r.since))
			r.since = now
		}
		rec := Transition{Time: now, Machine: r.kind, Instance: r.instance, From: st.from, Event: st.event,
			Guard: r.guard(st.row), To: st.to}
		for _, c := range st.choices {
			rec.Choices = append(rec.Choices, r.choice(c))
		}
		h := w.hist.add(rec, r.since)
		if e.log.Enabled(ctx, slog.LevelDebug) {
			e.log.Debug("transition", append(r.who(), "machine", r.kind, "from", st.from, "event", st.event,
				"to", st.to, "actions", fmt.Sprint(st.actions), "row", st.row, "choices", st.choices)...)
		}
		e.progress.Add(1)
		// The operator's info line of this step, if any (oplog.go).
		w.logLifecycle(ctx, r.kind, st.from, st.event, st.to, r.who())
		w.recordLifecycle(r.kind, st.from, st.event, st.to, r.who())
		if st.entered {
			w.setTimers(owner, r.timers(e.clock.Now()))
			if r.entered != nil {
				r.entered(ctx)
			}
		}
		// The step's actions slice is the machine's buffer, valid until
		// the next Fire; an action may fire this machine again.
		actions := append([]A(nil), st.actions...)
		var results []ActionResult
		for _, a := range actions {
			res := ActionResult{Action: a.String()}
			if err := r.run(ctx, a); err != nil {
				res.Error = err.Error()
				e.log.Warn("action failed", append(r.who(), "machine", r.kind, "action", a.String(), "err", err)...)
			}
			results = append(results, res)
		}
		if len(results) > 0 {
			w.hist.setActions(h, results)
		}
	}
}
