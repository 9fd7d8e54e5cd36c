package worker

import (
	"context"
	"strings"
	"time"

	"github.com/speclet/speclet/engine/schedule"
)

// The armed timers of a pod's machines (engine/schedule's Set), each under
// its owner's name ("pod", "sandbox", "container/NAME", "probe/NAME"): the
// worker's mutex guards them, as the sync tick asks whether one is due from
// the sync loop's goroutine.

// setTimers replaces the armed timers of owner's machine by ts: a machine
// that enters a state cancels the timers of the state it left.
func (w *Worker) setTimers(owner string, ts []schedule.Timer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timers.Replace(owner, ts)
}

// Due reports whether one of the worker's timers has run out.
func (w *Worker) Due(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.timers.Due(now)
}

// takeDue removes and returns the timers that ran out and whose owner
// passes keep (nil: every owner), earliest first.
func (w *Worker) takeDue(now time.Time, keep func(owner string) bool) []schedule.Timer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.timers.Take(now, keep)
}

// fireDue fires the timers that ran out, earliest first. A timer whose
// machine left its state meanwhile was cancelled by setTimers.
func (w *Worker) fireDue(ctx context.Context) {
	for _, t := range w.takeDue(w.h.Clock.Now(), nil) {
		t.Fire(ctx)
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
func (w *Worker) fireDueNow(ctx context.Context) {
	container := func(owner string) bool { return strings.HasPrefix(owner, containerOwner) }
	for i := 0; i < maxDueRounds && ctx.Err() == nil; i++ {
		due := w.takeDue(w.h.Clock.Now(), container)
		if len(due) == 0 {
			return
		}
		for _, t := range due {
			t.Fire(ctx)
		}
	}
}
