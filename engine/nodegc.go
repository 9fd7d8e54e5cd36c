package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/containergc"
	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/pods"
	"github.com/speclet/speclet/engine/reclaim"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// kubelet's periods of the node machine's passes.
const (
	DefaultImageGCPeriod     = reclaim.DefaultImageGCPeriod
	DefaultContainerGCPeriod = reclaim.DefaultContainerGCPeriod
	DefaultEvictionPeriod    = reclaim.DefaultEvictionPeriod
)

// Statfs is FsStat on a real node: the filesystem's size and what an
// unprivileged user may still write (f_bavail, as cadvisor reports it).
func Statfs(path string) (capacity, available uint64, err error) { return reclaim.Statfs(path) }

// nodeHistoryMax bounds the node machine's kept transitions.
const nodeHistoryMax = 200

// nodeStep is a step of the node machine as its observers see it
// (observe.go).
type nodeStep = fire.Step[fsm.NodeState, fsm.NodeEvent, fsm.NodeAction, fsm.NodeGuard, *nodeReclaim]

// nodeReclaim owns the node machine (spec/node.hcl) and binds it to
// engine/reclaim's Node, whose guards, actions and durations it promotes:
// its goroutine (run, node_schedule.go) fires the timers of the machine's
// state when they are due and carries out the steps, one at a time, as a
// pod worker does for a pod's machines. Everything but the history and the
// published state is touched by that goroutine only.
type nodeReclaim struct {
	*reclaim.Node
	e       *Engine
	machine *fsm.NodeMachine
	steps   fire.Run[fsm.NodeState, fsm.NodeEvent, fsm.NodeAction, fsm.NodeGuard, *nodeReclaim] // the node machine in the fire loop

	timers []schedule.Timer // of the machine's current state (node_schedule.go)

	hist  history.Log   // the node machine's last transitions
	mu    sync.Mutex    // guards state
	state fsm.NodeState // the machine's state, for readers on other goroutines
}

var _ fsm.NodeImpl = (*nodeReclaim)(nil)
var _ fsm.NodeDurations = (*nodeReclaim)(nil)

// stateName is the node machine's current state.
func (n *nodeReclaim) stateName() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state.String()
}

func newNodeReclaim(e *Engine) *nodeReclaim {
	n := &nodeReclaim{e: e, hist: history.Log{Max: nodeHistoryMax}}
	cfg := e.cfg
	gc := cfg.ContainerGC
	policy := containergc.Policy{MinAge: gc.MinAge, MaxPerContainer: gc.MaxPerContainer}
	gcPeriod := time.Duration(0) // no node-wide limit: no such pass
	if gc.MaxContainers != nil {
		policy.MaxContainers, gcPeriod = *gc.MaxContainers, cfg.ContainerGCPeriod
	}
	n.Node = reclaim.New(reclaim.Config{
		Runtime: e.rt, Clock: e.clock, Log: e.log, Identify: runtimepods.Identify, Report: n.report,
		PodEvent: func(pod *v1.Pod, eventType, reason, message string) {
			if r := cfg.Events; r != nil {
				r.Event(pod, "", eventType, reason, message)
			}
		},
		NodeEvent: func(eventType, reason, message string) { e.nodeEvent(eventType, reason, "%s", message) },
		ImageGC:   cfg.ImageGC, ImageGCPeriod: cfg.ImageGCPeriod, FsStat: cfg.FsStat,
		Eviction: cfg.Eviction, EvictionPeriod: cfg.EvictionPeriod, Signals: cfg.Signals,
		EvictionMaxPodGrace: cfg.EvictionMaxPodGrace, Pods: enginePods{e}, PodGrace: pods.Grace,
		ContainerGC: policy, ContainerGCPeriod: gcPeriod,
	})
	n.machine = fsm.BindNodeMachine(fsm.NodeInitialState, n)
	n.steps = fire.NewRun(n, nodeObservers)
	return n
}

// report queues an event an action reports; fire delivers it after the
// action returned.
func (n *nodeReclaim) report(ev fsm.NodeEvent) { n.steps.Raise(ev) }

// fire delivers ev and the events the actions report, in order (engine/fire).
func (n *nodeReclaim) fire(ctx context.Context, ev fsm.NodeEvent) {
	fire.Fire(ctx, n.machine, &n.steps, ev)
}

// The node machine has no pod: its steps go to its own history and are
// logged without a pod.
func (n *nodeReclaim) Sinks() *observe.Sinks { return &n.e.sinks }
func (n *nodeReclaim) Now() time.Time        { return n.e.clock.Now() }
func (n *nodeReclaim) Logger() *slog.Logger  { return n.e.log }
func (n *nodeReclaim) LogAttrs() []any       { return nil }
func (n *nodeReclaim) Record() *history.Log  { return &n.hist }
func (n *nodeReclaim) Instance() string      { return "" }
func (n *nodeReclaim) PodUID() types.UID     { return "" }

// nodeEntered publishes the state the node machine entered to readers on
// other goroutines (speclet_machines).
func nodeEntered(_ context.Context, st *nodeStep) {
	if !st.Entered() {
		return
	}
	n := st.Owner
	n.mu.Lock()
	n.state = st.To
	n.mu.Unlock()
}

// NodeHistory returns the node machine's last transitions, oldest first.
func (e *Engine) NodeHistory() []Transition {
	_, h := e.node.hist.Snapshot(true)
	return h
}
