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
//
// The records are kept by value (record, 24 bytes) in a ring that grows by
// growStep up to Max, so that a pod keeps 24 bytes per transition and no
// more than growStep spare ones; their times are offsets from base.
type Log struct {
	mu sync.Mutex
	// Max is how many transitions are kept; 0: PerPod.
	Max  int
	recs []record // the ring, oldest at added % len once len is the maximum
	// added is how many records Add added; the newest is Ref(added).
	added uint64
	// base is the time records' offsets count from: the first record's,
	// without monotonic reading.
	base time.Time
	// instances are the instances the records name, indexed by record.inst.
	instances []string
	// machines is where each machine is, in the order SetMachines listed
	// them (pod, sandbox, then container and probe of each container); a
	// machine a step finds missing is appended.
	machines []MachineState
}

// growStep is how many records the ring grows by.
const growStep = 8

// Ref names a record Add added, for SetActions; the zero Ref names none.
type Ref uint64

// max is how many records h keeps.
func (h *Log) max() int {
	if h.Max == 0 {
		return PerPod
	}
	return h.Max
}

// Add records the step of a machine of kind (its instance: the container's
// name, or "") that took the transition row, passing the choice branches
// choices, at at (row is below 65,536: a kind's table is far smaller); it
// moves the machine to state (entered at since). It
// returns the record's Ref, so that the fire loop can attach the results of
// the step's actions once they ran (SetActions).
func (h *Log) Add(at time.Time, kind Names, instance string, row int, choices []int, state string, since time.Time) Ref {
	h.mu.Lock()
	r := h.newRecord(at, kind, instance, row, choices)
	if max := h.max(); len(h.recs) < max {
		if len(h.recs) == cap(h.recs) {
			h.recs = append(make([]record, 0, min(max, len(h.recs)+growStep)), h.recs...)
		}
		h.recs = append(h.recs, r)
	} else {
		h.recs[h.added%uint64(max)] = r
	}
	h.added++
	ref := Ref(h.added)
	machine := kind.name()
	now := MachineState{Machine: machine, Instance: instance, State: state, Since: since}
	if i := slices.IndexFunc(h.machines, func(m MachineState) bool {
		return m.Machine == machine && m.Instance == instance
	}); i >= 0 {
		h.machines[i] = now
	} else if len(h.machines) > 0 {
		// Before the worker first listed its machines, debug answers
		// nothing: the pod is not listed with a partial set.
		h.machines = append(h.machines, now)
	}
	h.mu.Unlock()
	return ref
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

// SetActions attaches the results of the actions the step of ref ran; a
// record the ring dropped since is left alone. The caller may reuse rs.
func (h *Log) SetActions(ref Ref, rs []ActionResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ref == 0 || uint64(ref) > h.added || h.added-uint64(ref) >= uint64(len(h.recs)) {
		return
	}
	h.recs[(uint64(ref)-1)%uint64(h.max())].setActions(rs)
}

// listLocked returns the records as Transitions, oldest first. The caller
// holds h.mu.
func (h *Log) listLocked() []Transition {
	out := make([]Transition, 0, len(h.recs))
	first := h.added - uint64(len(h.recs))
	for i := range uint64(len(h.recs)) {
		out = append(out, h.transition(&h.recs[(first+i)%uint64(h.max())]))
	}
	return out
}
