package reclaim

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/op"
	timer "github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// historyMax bounds the node machine's kept transitions.
const historyMax = 200

// Machine owns the node machine (spec/node.hcl) and binds it to a Node,
// whose guards, actions and durations it promotes. Its goroutine (Run)
// fires the timers of the machine's state when they are due and carries
// out the steps, one at a time, through engine/fire's loop, as a pod
// worker does for a pod's machines. Everything but the history and the
// published state is touched by that goroutine only.
//
// The machine's timers (durations next_image_gc, next_eviction and
// next_container_gc, which the Node's schedules give): each pass keeps
// when it is next due, and idle arms its timer for that instant. Firing a
// timer moves its pass's schedule on by whole periods past now (Advance),
// then delivers the timer's event. Run waits on the clock for the earliest
// armed timer.
type Machine struct {
	*Node
	clock   clock.WithTicker
	log     *slog.Logger
	sinks   *observe.Sinks
	machine *fsm.NodeMachine
	steps   fire.Run[fsm.NodeState, fsm.NodeEvent, fsm.NodeAction, fsm.NodeGuard, *Machine]

	timers []timer.Timer // of the machine's current state

	hist  history.Log   // the node machine's last transitions
	mu    sync.Mutex    // guards state
	state fsm.NodeState // the machine's state, for readers on other goroutines
}

// nodeStep is a step of the node machine as its observers see it.
type nodeStep = fire.Step[fsm.NodeState, fsm.NodeEvent, fsm.NodeAction, fsm.NodeGuard, *Machine]

// observers are the node machine's, in the order they see a step: the
// common ones (engine/observe), the published state, and its timers,
// armed once the step's actions ran.
var observers = append(observe.Common[*Machine](&fsm.NodeKind),
	fire.Taken(entered), fire.Observer[fsm.NodeState, fsm.NodeEvent, fsm.NodeAction, fsm.NodeGuard, *Machine]{Ran: arm})

// AddCheck adds c after the node machine's observers. It must be called
// before any machine runs; nothing calls it in production.
func AddCheck(c observe.Check) {
	observers = append(observers, observe.CheckObserver[fsm.NodeState, fsm.NodeEvent, fsm.NodeAction, fsm.NodeGuard](c,
		func(m *Machine) []fsm.NodeEvent { return m.steps.Pending() }))
}

// NewMachine returns the node machine over cfg in its initial state, on
// clk, its common observers' sinks. The events its actions report go to
// the machine (cfg.Report is replaced).
func NewMachine(cfg Config, clk clock.WithTicker, sinks *observe.Sinks) *Machine {
	m := &Machine{clock: clk, log: cfg.Log, sinks: sinks, hist: history.Log{Max: historyMax}}
	cfg.Report = m.raise
	m.Node = New(cfg)
	m.machine = fsm.BindNodeMachine(fsm.NodeInitialState, m)
	m.steps = fire.NewRun(m, observers)
	return m
}

var _ fsm.NodeImpl[op.Op] = (*Machine)(nil)
var _ fsm.NodeDurations = (*Machine)(nil)

// Exec runs the operations of a node machine's action on the runtime, on
// the action's context (fsm.NodeImpl).
func (m *Machine) Exec(ctx context.Context, first op.Op) error {
	return op.Exec(ctx, m.cfg.Runtime, first)
}

// StateName is the node machine's current state.
func (m *Machine) StateName() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state.String()
}

// History is the node machine's last transitions, oldest first.
func (m *Machine) History() []history.Transition {
	_, h := m.hist.Snapshot(true)
	return h
}

// raise queues an event an action reports; fire delivers it after the
// action returned.
func (m *Machine) raise(ev fsm.NodeEvent) { m.steps.Raise(ev) }

// fire delivers ev and the events the actions report, in order (engine/fire).
func (m *Machine) fire(ctx context.Context, ev fsm.NodeEvent) {
	fire.Fire(ctx, m.machine, &m.steps, ev)
}

// The node machine has no pod: its steps go to its own history and are
// logged without a pod.
func (m *Machine) Sinks() *observe.Sinks { return m.sinks }
func (m *Machine) Now() time.Time        { return m.clock.Now() }
func (m *Machine) Logger() *slog.Logger  { return m.log }
func (m *Machine) LogAttrs() []any       { return nil }
func (m *Machine) Record() *history.Log  { return &m.hist }
func (m *Machine) Instance() string      { return "" }
func (m *Machine) PodUID() types.UID     { return "" }

// entered publishes the state the node machine entered to readers on
// other goroutines (speclet_machines).
func entered(_ context.Context, st *nodeStep) {
	if !st.Entered() {
		return
	}
	m := st.Owner
	m.mu.Lock()
	m.state = st.To
	m.mu.Unlock()
}

// arm arms the timers of the state the node machine entered, after the
// step's actions: a state without timers cancels them.
func arm(_ context.Context, st *nodeStep) {
	if st.Entered() {
		st.Owner.arm()
	}
}

// arm replaces the armed timers by those of the machine's current state,
// each at now plus its duration; a negative duration arms none. Firing one
// moves the schedule its duration reads on by whole periods past now, then
// delivers its event.
func (m *Machine) arm() {
	m.timers = timer.Of(m.machine.Timers(), m.clock.Now(),
		func(d fsm.NodeDuration) time.Duration { return fsm.NodeDurationOf(m, d) },
		func(ctx context.Context, ev fsm.NodeEvent, after fsm.NodeDuration) {
			m.Advance(after, m.clock.Now())
			m.fire(ctx, ev)
		})
}

// Run arms the timers of the initial state, with each pass first due one
// period after now, then, until ctx ends, waits on the clock for the
// earliest armed timer (the first armed of those due at the same instant)
// and fires it.
func (m *Machine) Run(ctx context.Context) {
	m.Start(m.clock.Now())
	m.arm()
	for ctx.Err() == nil {
		i := timer.Earliest(m.timers)
		if i < 0 {
			<-ctx.Done()
			return
		}
		if d := m.timers[i].At.Sub(m.clock.Now()); d > 0 {
			w := m.clock.NewTimer(d)
			select {
			case <-ctx.Done():
				w.Stop()
				return
			case <-w.C():
			}
		}
		t := m.timers[i]
		m.timers = append(m.timers[:i], m.timers[i+1:]...)
		t.Fire(ctx)
	}
}
