package engine

import (
	"context"
	"time"

	"github.com/speclet/speclet/fsm"
)

// The node machine's timers and the schedules of its passes (spec/node.hcl,
// durations next_image_gc, next_eviction and next_container_gc). Each pass
// keeps when it is next due; idle arms its timer for that instant. Firing a
// timer moves its pass's schedule on by whole periods past now, then
// delivers the timer's event. The node loop (run) waits on the engine's
// clock for the earliest armed timer; only the node goroutine touches the
// schedules and the armed timers.

// schedule is when a pass of the node machine is next due; every is its
// period, 0 when the pass is off.
type schedule struct {
	every time.Duration
	next  time.Time
}

// until is the time from now until the schedule's next instant, never
// below 0; negative when the pass is off (no timer).
func (s schedule) until(now time.Time) time.Duration {
	if s.every <= 0 {
		return -1
	}
	return max(s.next.Sub(now), 0)
}

// startSchedules sets each pass's schedule, at start: image GC every
// ImageGCPeriod, eviction every EvictionPeriod with an eviction manager,
// container GC every ContainerGCPeriod with a node-wide limit; each first
// due one period after start.
func (n *nodeReclaim) startSchedules(start time.Time) {
	cfg := n.e.cfg
	every := func(d time.Duration, on bool) schedule {
		if !on {
			return schedule{}
		}
		return schedule{every: d, next: start.Add(d)}
	}
	n.sched[fsm.NodeDurationNextImageGc] = every(cfg.ImageGCPeriod, true)
	n.sched[fsm.NodeDurationNextEviction] = every(cfg.EvictionPeriod, cfg.Eviction != nil)
	n.sched[fsm.NodeDurationNextContainerGc] = every(cfg.ContainerGCPeriod, cfg.ContainerGC.MaxContainers != nil)
}

// NextImageGc is the duration next_image_gc.
func (n *nodeReclaim) NextImageGc() time.Duration {
	return n.sched[fsm.NodeDurationNextImageGc].until(n.e.clock.Now())
}

// NextEviction is the duration next_eviction: negative without an eviction
// manager.
func (n *nodeReclaim) NextEviction() time.Duration {
	return n.sched[fsm.NodeDurationNextEviction].until(n.e.clock.Now())
}

// NextContainerGc is the duration next_container_gc: negative without a
// node-wide dead container limit.
func (n *nodeReclaim) NextContainerGc() time.Duration {
	return n.sched[fsm.NodeDurationNextContainerGc].until(n.e.clock.Now())
}

// nodeArm arms the timers of the state the node machine entered, after the
// step's actions: a state without timers cancels them.
func nodeArm(_ context.Context, st *nodeStep) {
	if st.Entered() {
		st.Owner.arm()
	}
}

// arm replaces the armed timers by those of the machine's current state,
// each at now plus its duration; a negative duration arms none. Firing one
// moves the schedule its duration reads on by whole periods past now, then
// delivers its event.
func (n *nodeReclaim) arm() {
	n.timers = stateTimers(n.machine.Timers(), n.e.clock.Now(),
		func(d fsm.NodeDuration) time.Duration { return fsm.NodeDurationOf(n, d) },
		func(ctx context.Context, ev fsm.NodeEvent, after fsm.NodeDuration) {
			s := &n.sched[after]
			s.next = nextPeriod(s.next, s.every, n.e.clock.Now())
			n.fire(ctx, ev)
		})
}

// run arms the timers of the initial state, with each pass first due one
// period after now, then, until ctx ends, waits on the engine's clock for
// the earliest armed timer (the first armed of those due at the same
// instant) and fires it.
func (n *nodeReclaim) run(ctx context.Context) {
	n.startSchedules(n.e.clock.Now())
	n.arm()
	for ctx.Err() == nil {
		i := -1
		for k, t := range n.timers {
			if i < 0 || t.at.Before(n.timers[i].at) {
				i = k
			}
		}
		if i < 0 {
			<-ctx.Done()
			return
		}
		if d := n.timers[i].at.Sub(n.e.clock.Now()); d > 0 {
			w := n.e.clock.NewTimer(d)
			select {
			case <-ctx.Done():
				w.Stop()
				return
			case <-w.C():
			}
		}
		t := n.timers[i]
		n.timers = append(n.timers[:i], n.timers[i+1:]...)
		t.fire(ctx)
	}
}
