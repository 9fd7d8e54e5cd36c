package engine

import (
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/fsm"
)

// This file keeps what /debug/pods shows: the current state of each machine
// of a pod, and the bounded history of its transitions, kept for a while
// after the pod is gone.

// Bounds of the debug history.
const (
	historyPerPod = 64               // transitions kept per pod, newest last (a steady pod adds about 6 per resync)
	historyPods   = 200              // pods gone from the engine whose history is kept
	historyKeep   = 15 * time.Minute // how long the history of a pod that is gone is kept
)

// Transition is one step of one machine of a pod, as the fire loop took it.
type Transition struct {
	Time     time.Time      `json:"time"`
	Machine  string         `json:"machine"`            // pod, sandbox, container, probe
	Instance string         `json:"instance,omitempty"` // the container's name (container and probe machines)
	From     string         `json:"from"`
	Event    string         `json:"event"`
	Guard    string         `json:"guard,omitempty"` // the guard of the row taken, "" when unguarded
	To       string         `json:"to"`              // after choices; equal to From for an internal transition
	Choices  []string       `json:"choices,omitempty"`
	Actions  []ActionResult `json:"actions,omitempty"`
}

// ActionResult is an action a step ran and its error, if any.
type ActionResult struct {
	Action string `json:"action"`
	Error  string `json:"error,omitempty"`
}

// MachineState is where one machine of a pod is now.
type MachineState struct {
	Machine  string    `json:"machine"`
	Instance string    `json:"instance,omitempty"`
	State    string    `json:"state"`
	Since    time.Time `json:"since"`
}

// PodDebug is a pod's machines now and, from DebugPod, their history.
type PodDebug struct {
	UID       types.UID      `json:"uid"`
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	Phase     string         `json:"phase"`
	Gone      bool           `json:"gone,omitempty"` // the engine forgot the pod; its history is kept for a while
	Machines  []MachineState `json:"machines"`
	History   []Transition   `json:"history,omitempty"`
}

// history is the bounded transition log of one pod and where each of its
// machines is now. Container machines of a pod fire from parallel
// goroutines, so it has its own lock.
//
// Contract: a step records its transition and its machine's new state under
// one hold of mu, before its actions run, so that a reader (snapshot) always
// sees states and history that agree, also while an action blocks (a kill's
// StopContainer waits out the grace period inside the worker's batch).
type history struct {
	mu   sync.Mutex
	max  int       // transitions kept; 0: historyPerPod
	recs []*record // a ring of max, oldest at next once full
	next int
	// machines is where each machine is, in the order setMachines listed
	// them (pod, sandbox, then container and probe of each container); a
	// machine a step finds missing is appended.
	machines []MachineState
}

// record is one transition as the history keeps it: the row taken and the
// choice branches passed, named from the machine kind's tables (kind) only
// when the history is read. It takes 112 bytes where a Transition takes 176:
// 10,000 pods keep about 12 each.
type record struct {
	at       time.Time
	kind     stepNames
	instance string
	row      int32
	choices  []int32        // nil unless the step passed a choice
	actions  []ActionResult // set once the step's actions ran
}

// stepNames names one machine kind and its rows and choice branches.
type stepNames interface {
	name() string
	transition(row int32, choices []int32) Transition
}

// kindNames is the stepNames of the machine kind k.
type kindNames[S, E, A, G fsm.Enum] struct{ k *fsm.Kind[S, E, A, G] }

func (n kindNames[S, E, A, G]) name() string { return n.k.Name }

func (n kindNames[S, E, A, G]) transition(row int32, choices []int32) Transition {
	r := &n.k.Transitions[row]
	t := Transition{Machine: n.k.Name, From: r.From.String(), Event: r.Event.String(), To: r.To.String()}
	if r.Internal {
		t.To = t.From
	}
	if r.HasGuard {
		t.Guard = r.Guard.String()
	}
	for _, i := range choices {
		c := &n.k.Choices[i]
		t.Choices = append(t.Choices, fsm.Branch[S, G]{Guard: c.Guard, HasGuard: c.HasGuard, To: c.To}.String())
		t.To = c.To.String()
	}
	return t
}

// transition is r as /debug/pods shows it.
func (r *record) transition() Transition {
	t := r.kind.transition(r.row, r.choices)
	t.Time, t.Instance, t.Actions = r.at, r.instance, slices.Clone(r.actions)
	return t
}

// add appends r, moves its machine to state (entered at since), and returns
// the record, so that the fire loop can attach the results of the step's
// actions once they ran (setActions).
func (h *history) add(r *record, state string, since time.Time) *record {
	h.mu.Lock()
	max := h.max
	if max == 0 {
		max = historyPerPod
	}
	if len(h.recs) < max {
		h.recs = append(h.recs, r)
	} else {
		h.recs[h.next] = r
		h.next = (h.next + 1) % max
	}
	machine := r.kind.name()
	now := MachineState{Machine: machine, Instance: r.instance, State: state, Since: since}
	if i := slices.IndexFunc(h.machines, func(m MachineState) bool {
		return m.Machine == machine && m.Instance == r.instance
	}); i >= 0 {
		h.machines[i] = now
	} else if len(h.machines) > 0 {
		// Before the worker first listed its machines, debug answers
		// nothing: the pod is not listed with a partial set.
		h.machines = append(h.machines, now)
	}
	h.mu.Unlock()
	return r
}

// setMachines replaces the machine states with ms, read from the machines by
// the worker goroutine while no step runs (publishStatus).
func (h *history) setMachines(ms []MachineState) {
	h.mu.Lock()
	h.machines = ms
	h.mu.Unlock()
}

// states returns a copy of the machine states.
func (h *history) states() []MachineState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.machines)
}

// snapshot returns the machine states and, when asked, the transitions,
// read under one hold of the lock: they agree.
func (h *history) snapshot(withHistory bool) ([]MachineState, []Transition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := slices.Clone(h.machines)
	if !withHistory {
		return ms, nil
	}
	return ms, h.listLocked()
}

func (h *history) setActions(r *record, rs []ActionResult) {
	h.mu.Lock()
	r.actions = rs
	h.mu.Unlock()
}

// listLocked returns copies of the records, oldest first. The caller holds
// h.mu.
func (h *history) listLocked() []Transition {
	out := make([]Transition, 0, len(h.recs))
	for i := range h.recs {
		out = append(out, h.recs[(h.next+i)%len(h.recs)].transition())
	}
	return out
}

// goneHistory is the history of a pod the engine forgot.
type goneHistory struct {
	at  time.Time
	pod PodDebug
	// final is the status the worker published after its pod machine
	// stopped (nil if none): PodStopped answers it for a purged worker,
	// so that the API status manager writes it even when housekeeping
	// purged the worker first. It holds the pod's identity (name,
	// namespace, UID) and status only: a gone pod's spec (up to a
	// 10 MiB manifest) is not kept for historyKeep.
	final *v1.Pod
}

// Debug returns every pod the engine runs, and those it forgot within the
// last minutes, with the current state of each of their machines.
func (e *Engine) Debug() []PodDebug {
	e.mu.RLock()
	ws := make([]*podWorker, 0, len(e.workers))
	for _, w := range e.workers {
		ws = append(ws, w)
	}
	var gone []PodDebug
	for _, g := range e.gone {
		gone = append(gone, g.pod)
	}
	e.mu.RUnlock()
	out := make([]PodDebug, 0, len(ws)+len(gone))
	for _, w := range ws {
		if d, ok := w.debug(false); ok {
			out = append(out, d)
		}
	}
	for _, g := range gone {
		g.History = nil
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b PodDebug) int {
		if a.Namespace+"/"+a.Name != b.Namespace+"/"+b.Name {
			if a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name {
				return -1
			}
			return 1
		}
		return a.Machines[0].Since.Compare(b.Machines[0].Since)
	})
	return out
}

// PodHistory returns one pod's machines and their transition history, by
// UID, or by name (namespace/name, or a name in any namespace) for a pod of
// that name the engine still runs, else one it forgot.
func (e *Engine) PodHistory(key string) (PodDebug, bool) {
	e.mu.RLock()
	w := e.workers[types.UID(key)]
	g, isGone := e.gone[types.UID(key)]
	e.mu.RUnlock()
	if w != nil {
		return w.debug(true)
	}
	if isGone {
		return g.pod, true
	}
	var best *PodDebug
	for _, d := range e.Debug() {
		if d.Name == key || d.Namespace+"/"+d.Name == key {
			if best == nil || best.Gone && !d.Gone {
				d := d
				best = &d
			}
		}
	}
	if best == nil {
		return PodDebug{}, false
	}
	return e.PodHistory(string(best.UID))
}

// debug is where the worker's machines are now, with the history when
// asked: one snapshot, so the states agree with the newest transitions
// (a machine's state is the To of its last transition), also in the middle
// of a batch. The phase is the last published status's. ok is false before
// the worker handled its first input.
func (w *podWorker) debug(withHistory bool) (PodDebug, bool) {
	w.mu.Lock()
	d := PodDebug{UID: w.uid}
	if w.pub != nil {
		d.Namespace, d.Name, d.Phase = w.pub.Namespace, w.pub.Name, string(w.pub.Status.Phase)
	}
	w.mu.Unlock()
	d.Machines, d.History = w.hist.snapshot(withHistory)
	if len(d.Machines) == 0 {
		return d, false
	}
	return d, true
}

// forget keeps the history of a purged worker for historyKeep, at most
// historyPods of them. The caller holds e.mu.
func (e *Engine) forgetLocked(w *podWorker) {
	d, ok := w.debug(true)
	if !ok {
		return
	}
	d.Gone = true
	now := e.clock.Now()
	g := goneHistory{at: now, pod: d}
	w.mu.Lock()
	if w.pub != nil && podStopped(w.pubState) {
		g.final = &v1.Pod{TypeMeta: w.pub.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: w.pub.Name, Namespace: w.pub.Namespace, UID: w.pub.UID},
			Status: *w.pub.Status.DeepCopy()}
	}
	w.mu.Unlock()
	e.gone[w.uid] = g
	for uid, g := range e.gone {
		if now.Sub(g.at) > historyKeep {
			delete(e.gone, uid)
		}
	}
	for len(e.gone) > historyPods {
		var oldest types.UID
		var at time.Time
		for uid, g := range e.gone {
			if oldest == "" || g.at.Before(at) {
				oldest, at = uid, g.at
			}
		}
		delete(e.gone, oldest)
	}
}

// DebugPods is Debug for the read-only server (engine/server.Debugger).
func (e *Engine) DebugPods() any { return e.Debug() }

// DebugPod is PodHistory for the read-only server.
func (e *Engine) DebugPod(key string) (any, bool) { return e.PodHistory(key) }
