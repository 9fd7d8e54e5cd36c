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

// runner adapts one generated machine to the loop: fire takes one event, run
// carries out one action, timers returns the timers of the current state.
type runner[E, A any] struct {
	kind    string // machine name, for logs and metrics
	who     func() []any
	fire    func(E) (step[A], error)
	run     func(context.Context, A) error
	timers  func(now time.Time) []timer
	entered func(context.Context) // after a state was entered and its timers armed
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
		st, err := r.fire(ev)
		if err != nil {
			if errors.Is(err, fsm.ErrNoTransition) {
				if e.log.Enabled(ctx, slog.LevelDebug-4) {
					e.log.Log(ctx, slog.LevelDebug-4, "event refused", append(r.who(), "machine", r.kind, "event", ev.String())...)
				}
			} else {
				e.log.Error("state machine", append(r.who(), "machine", r.kind, "event", ev.String(), "err", err)...)
			}
			continue
		}
		e.metrics.transition(r.kind, st.from, st.to, st.event)
		if e.log.Enabled(ctx, slog.LevelDebug) {
			e.log.Debug("transition", append(r.who(), "machine", r.kind, "from", st.from, "event", st.event,
				"to", st.to, "actions", fmt.Sprint(st.actions), "row", st.row, "choices", st.choices)...)
		}
		e.progress.Add(1)
		if st.entered {
			w.setTimers(owner, r.timers(e.clock.Now()))
			if r.entered != nil {
				r.entered(ctx)
			}
		}
		// The step's actions slice is the machine's buffer, valid until
		// the next Fire; an action may fire this machine again.
		actions := append([]A(nil), st.actions...)
		for _, a := range actions {
			if err := r.run(ctx, a); err != nil {
				e.log.Warn("action failed", append(r.who(), "machine", r.kind, "action", a.String(), "err", err)...)
			}
		}
	}
}
