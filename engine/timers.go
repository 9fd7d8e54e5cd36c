package engine

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/speclet/speclet/fsm"
)

// timer is one timer of a machine's current state: its deadline and what
// firing it does (its typed event delivered to the machine).
type timer struct {
	at   time.Time
	fire func(context.Context)
}

// stateTimers returns the timers ts of the state a machine entered at now,
// each running out after its duration (dur) and then calling fire with its
// event and duration; a negative duration arms none (a timer the state
// has but the machine's data turns off, as active_deadline without a
// deadline).
func stateTimers[E, D fsm.Enum](ts []fsm.Timer[E, D], now time.Time, dur func(D) time.Duration, fire func(context.Context, E, D)) []timer {
	var out []timer
	for _, t := range ts {
		if d := dur(t.After); d >= 0 {
			out = append(out, timer{at: now.Add(d), fire: func(ctx context.Context) { fire(ctx, t.Event, t.After) }})
		}
	}
	return out
}

// armed is a machine timer waiting for its deadline. owner names the
// machine of the pod it belongs to ("pod", "sandbox", "container/NAME"); the
// timer's fire delivers its typed event to that machine.
type armed struct {
	owner string
	timer
}

// setTimers replaces the armed timers of owner's machine by ts: a machine
// that enters a state cancels the timers of the state it left.
func (w *podWorker) setTimers(owner string, ts []timer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kept := w.timers[:0]
	for _, t := range w.timers {
		if t.owner != owner {
			kept = append(kept, t)
		}
	}
	w.timers = kept
	for _, t := range ts {
		w.timers = append(w.timers, armed{owner: owner, timer: t})
	}
}

// due reports whether one of the worker's timers has run out.
func (w *podWorker) due(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.timers {
		if !now.Before(t.at) {
			return true
		}
	}
	return false
}

// takeDue removes and returns the timers that ran out and whose owner
// passes keep (nil: every owner), earliest first.
func (w *podWorker) takeDue(now time.Time, keep func(owner string) bool) []armed {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []armed
	kept := w.timers[:0]
	for _, t := range w.timers {
		if !now.Before(t.at) && (keep == nil || keep(t.owner)) {
			out = append(out, t)
		} else {
			kept = append(kept, t)
		}
	}
	w.timers = kept
	slices.SortStableFunc(out, func(a, b armed) int { return a.at.Compare(b.at) })
	return out
}

// fireDue fires the timers that ran out, earliest first. A timer whose
// machine left its state meanwhile was cancelled by setTimers.
func (w *podWorker) fireDue(ctx context.Context) {
	for _, t := range w.takeDue(w.e.clock.Now(), nil) {
		t.fire(ctx)
	}
}

// maxDueRounds bounds fireDueNow: a state whose timer is already due when
// it is entered cannot keep the worker from its queue.
const maxDueRounds = 8

// fireDueNow fires the container timers that ran out while the worker
// handled its inputs (a zero delay: the immediate first restart of a
// crashing container, the restart after a probe kill), instead of leaving
// them for the next sync tick: kubelet starts such a container in the sync
// that saw it die. Probe, pod and sandbox timers keep waiting for the tick,
// as their schedules are counted in ticks.
func (w *podWorker) fireDueNow(ctx context.Context) {
	container := func(owner string) bool { return strings.HasPrefix(owner, containerOwner) }
	for i := 0; i < maxDueRounds && ctx.Err() == nil; i++ {
		due := w.takeDue(w.e.clock.Now(), container)
		if len(due) == 0 {
			return
		}
		for _, t := range due {
			t.fire(ctx)
		}
	}
}
