// Package history keeps what /debug/pods shows of a pod: where each of its
// machines is now, and the bounded log of their transitions, recorded as
// the fire loop takes them and named from the machine kinds' tables only
// when read.
package history

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/fsm"
)

// PerPod is how many transitions a Log keeps unless told otherwise, newest
// last (a steady pod adds about 6 per resync).
const PerPod = 64

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

// Log is the bounded transition log of one pod and where each of its
// machines is now. Container machines of a pod fire from parallel
// goroutines, so it has its own lock.
//
// Contract: a step records its transition and its machine's new state under
// one hold of mu, before its actions run, so that a reader (snapshot) always
// sees states and history that agree, also while an action blocks (a kill's
// StopContainer waits out the grace period inside the worker's batch).
type Log struct {
	mu sync.Mutex
	// Max is how many transitions are kept; 0: PerPod.
	Max  int
	recs []*Record // a ring of Max, oldest at next once full
	next int
	// machines is where each machine is, in the order SetMachines listed
	// them (pod, sandbox, then container and probe of each container); a
	// machine a step finds missing is appended.
	machines []MachineState
}

// Record is one transition as the log keeps it: the row taken and the
// choice branches passed, named from the machine kind's tables (kind) only
// when the history is read. It takes 112 bytes where a Transition takes 176:
// 10,000 pods keep about 12 each.
type Record struct {
	at       time.Time
	kind     Names
	instance string
	row      int32
	choices  []int32        // nil unless the step passed a choice
	actions  []ActionResult // set once the step's actions ran
}

// NewRecord is the step of a machine of kind (its instance: the container's
// name, or "") that took the transition row, passing the choice branches
// choices, at at.
func NewRecord(at time.Time, kind Names, instance string, row int, choices []int) *Record {
	r := &Record{at: at, kind: kind, instance: instance, row: int32(row)}
	if len(choices) > 0 {
		r.choices = make([]int32, len(choices))
		for i, c := range choices {
			r.choices[i] = int32(c)
		}
	}
	return r
}

// Names names one machine kind and its rows and choice branches.
type Names interface {
	name() string
	transition(row int32, choices []int32) Transition
}

// KindNames is the Names of the machine kind k.
func KindNames[S, E, A, G fsm.Enum](k *fsm.Kind[S, E, A, G]) Names { return kindNames[S, E, A, G]{k} }

// kindNames is the Names of the machine kind k.
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
func (r *Record) transition() Transition {
	t := r.kind.transition(r.row, r.choices)
	t.Time, t.Instance, t.Actions = r.at, r.instance, slices.Clone(r.actions)
	return t
}

// Add appends r, moves its machine to state (entered at since), and returns
// the record, so that the fire loop can attach the results of the step's
// actions once they ran (SetActions).
func (h *Log) Add(r *Record, state string, since time.Time) *Record {
	h.mu.Lock()
	max := h.Max
	if max == 0 {
		max = PerPod
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

// SetMachines replaces the machine states with a copy of ms, read from the
// machines by the worker goroutine while no step runs (publishStatus); the
// caller may reuse ms.
func (h *Log) SetMachines(ms []MachineState) {
	h.mu.Lock()
	h.machines = append(h.machines[:0], ms...)
	h.mu.Unlock()
}

// States returns a copy of the machine states.
func (h *Log) States() []MachineState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.machines)
}

// Snapshot returns the machine states and, when asked, the transitions,
// read under one hold of the lock: they agree.
func (h *Log) Snapshot(withHistory bool) ([]MachineState, []Transition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := slices.Clone(h.machines)
	if !withHistory {
		return ms, nil
	}
	return ms, h.listLocked()
}

// SetActions attaches the results of the actions r's step ran.
func (h *Log) SetActions(r *Record, rs []ActionResult) {
	h.mu.Lock()
	r.actions = rs
	h.mu.Unlock()
}

// listLocked returns copies of the records, oldest first. The caller holds
// h.mu.
func (h *Log) listLocked() []Transition {
	out := make([]Transition, 0, len(h.recs))
	for i := range h.recs {
		out = append(out, h.recs[(h.next+i)%len(h.recs)].transition())
	}
	return out
}
