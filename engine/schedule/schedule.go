// Package schedule is when the machines' timers and the probes' ticks fall
// due: the timers a state arms from the spec's durations, the armed timers
// of the machines of one pod (or of the node) keyed by their owner, and the
// tick arithmetic of kubelet's probe workers. It is pure: time comes in as
// arguments, and firing a timer is the caller's call of its Fire.
//
// A Set is not safe for concurrent use; its owner holds a lock around it
// when other goroutines ask (the pod worker's mutex).
package schedule

import (
	"context"
	"slices"
	"time"

	"github.com/speclet/speclet/fsm"
)

// Timer is one timer of a machine's current state: its deadline and what
// firing it does (its typed event delivered to the machine).
type Timer struct {
	At   time.Time
	Fire func(context.Context)
}

// Of returns the timers ts of the state a machine entered at now, each
// running out after its duration (dur) and then calling fire with its event
// and duration. A negative duration arms none: a timer the state has but the
// machine's data turns off (active_deadline without a deadline).
func Of[E, D fsm.Enum](ts []fsm.Timer[E, D], now time.Time, dur func(D) time.Duration, fire func(context.Context, E, D)) []Timer {
	var out []Timer
	for _, t := range ts {
		if d := dur(t.After); d >= 0 {
			out = append(out, Timer{At: now.Add(d), Fire: func(ctx context.Context) { fire(ctx, t.Event, t.After) }})
		}
	}
	return out
}

// Earliest returns the index of the timer of ts that runs out first (the
// first of those that run out at the same instant), -1 when ts is empty.
func Earliest(ts []Timer) int {
	i := -1
	for k, t := range ts {
		if i < 0 || t.At.Before(ts[i].At) {
			i = k
		}
	}
	return i
}

// Set is the armed timers of several machines, each under the name of the
// machine that owns it ("pod", "sandbox", "container/NAME", ...). The zero
// value is empty and ready.
type Set struct {
	armed []armed
}

type armed struct {
	owner string
	Timer
}

// Replace makes ts the armed timers of owner: a machine that enters a state
// cancels the timers of the state it left.
func (s *Set) Replace(owner string, ts []Timer) {
	s.armed = slices.DeleteFunc(s.armed, func(a armed) bool { return a.owner == owner })
	for _, t := range ts {
		s.armed = append(s.armed, armed{owner: owner, Timer: t})
	}
}

// Due reports whether a timer has run out at now.
func (s *Set) Due(now time.Time) bool {
	for _, a := range s.armed {
		if !now.Before(a.At) {
			return true
		}
	}
	return false
}

// Take removes and returns the timers that have run out at now and whose
// owner keep passes (nil: every owner), earliest first (armed order among
// those of one instant).
func (s *Set) Take(now time.Time, keep func(owner string) bool) []Timer {
	var out []Timer
	s.armed = slices.DeleteFunc(s.armed, func(a armed) bool {
		if now.Before(a.At) || (keep != nil && !keep(a.owner)) {
			return false
		}
		out = append(out, a.Timer)
		return true
	})
	slices.SortStableFunc(out, func(a, b Timer) int { return a.At.Compare(b.At) })
	return out
}

// TickAfter is the first tick anchor + n*period (n >= 0) after t: anchor
// itself when it is after t, else the tick due at t moved on by whole
// periods. period must be positive.
func TickAfter(anchor time.Time, period time.Duration, t time.Time) time.Time {
	if t.Before(anchor) {
		return anchor
	}
	return anchor.Add((t.Sub(anchor)/period + 1) * period)
}

// TickAtOrAfter is the first tick anchor + n*period (n >= 0) at or after t.
// period must be positive.
func TickAtOrAfter(anchor time.Time, period time.Duration, t time.Time) time.Time {
	if !t.After(anchor) {
		return anchor
	}
	return anchor.Add((t.Sub(anchor) + period - 1) / period * period)
}
