package engine

import (
	"context"
	"time"

	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// The node machine's timers (spec/node.hcl, durations next_image_gc,
// next_eviction and next_container_gc, which engine/reclaim's schedules
// give). Each pass keeps when it is next due; idle arms its timer for that
// instant. Firing a timer moves its pass's schedule on by whole periods
// past now (reclaim.Node.Advance), then delivers the timer's event. The node loop (run) waits on the engine's
// clock for the earliest armed timer; only the node goroutine touches the
// schedules and the armed timers.

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
	n.timers = schedule.Of(n.machine.Timers(), n.e.clock.Now(),
		func(d fsm.NodeDuration) time.Duration { return fsm.NodeDurationOf(n, d) },
		func(ctx context.Context, ev fsm.NodeEvent, after fsm.NodeDuration) {
			n.Advance(after, n.e.clock.Now())
			n.fire(ctx, ev)
		})
}

// run arms the timers of the initial state, with each pass first due one
// period after now, then, until ctx ends, waits on the engine's clock for
// the earliest armed timer (the first armed of those due at the same
// instant) and fires it.
func (n *nodeReclaim) run(ctx context.Context) {
	n.Start(n.e.clock.Now())
	n.arm()
	for ctx.Err() == nil {
		i := schedule.Earliest(n.timers)
		if i < 0 {
			<-ctx.Done()
			return
		}
		if d := n.timers[i].At.Sub(n.e.clock.Now()); d > 0 {
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
		t.Fire(ctx)
	}
}
