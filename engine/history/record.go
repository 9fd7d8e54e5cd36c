package history

import (
	"sync"
	"time"

	"github.com/speclet/speclet/fsm"
)

// record is one transition as a Log keeps it, 24 bytes by value in the
// log's ring: the row taken and the choice branches passed, named from the
// machine kind's tables only when the history is read, and whether the
// step's actions ran, each without error, as the tables give them for that
// row and those branches (derived). Whatever does not fit is in more: a
// time that is not an offset from the log's base in the base's location,
// more than two branches or a branch past 254, an instance past the log's
// 255th, results that are not the derived ones.
type record struct {
	at      int64 // nanoseconds after the log's base, wall clock
	more    *extra
	row     uint16
	kind    uint8    // index in kinds
	inst    uint8    // index in the log's instances; noInst: more.instance
	nch     uint8    // branches in ch; noCh: more.choices
	derived bool     // the actions ran without error and are the tables' for row and the branches
	ch      [2]uint8 // the choice branches passed, nch of them
}

// extra is what a record keeps outside of its 24 bytes.
type extra struct {
	at       time.Time // when the time is not an offset from the base
	hasAt    bool
	instance string
	choices  []int32
	results  []ActionResult
}

const (
	noInst = 0xff
	noCh   = 0xff
)

// Names names one machine kind and its rows and choice branches.
type Names interface {
	index() uint8 // in kinds
	name() string
	transition(row int32, choices []int32) Transition
	// actions appends to out the actions a step of row passing choices
	// runs, as the kind's tables give them.
	actions(out []ActionResult, row int32, choices []int32) []ActionResult
	// derives reports whether rs are the actions a step of row passing
	// choices runs, as the kind's tables give them, each without error.
	derives(rs []ActionResult, row int32, choices []int32) bool
}

// kinds are the machine kinds records name by index (Names.index), in the
// order KindNames first saw them. It only grows: a process has a few kinds.
var kinds struct {
	mu    sync.RWMutex
	names []Names
}

// kindAt is the kind of index i.
func kindAt(i uint8) Names {
	kinds.mu.RLock()
	defer kinds.mu.RUnlock()
	return kinds.names[i]
}

// KindNames is the Names of the machine kind k, one per kind: records name
// their kind by the index it gets here. It panics past 256 kinds.
func KindNames[S, E, A, G fsm.Enum](k *fsm.Kind[S, E, A, G]) Names {
	kinds.mu.Lock()
	defer kinds.mu.Unlock()
	for _, n := range kinds.names {
		if kn, ok := n.(kindNames[S, E, A, G]); ok && kn.k == k {
			return kn
		}
	}
	if len(kinds.names) == 256 {
		panic("history: more than 256 machine kinds")
	}
	n := kindNames[S, E, A, G]{k: k, i: uint8(len(kinds.names))}
	kinds.names = append(kinds.names, n)
	return n
}

// kindNames is the Names of the machine kind k, at index i of kinds.
type kindNames[S, E, A, G fsm.Enum] struct {
	k *fsm.Kind[S, E, A, G]
	i uint8
}

func (n kindNames[S, E, A, G]) index() uint8 { return n.i }

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

// entry is the entry actions of s, nil when the kind lists none.
func (n kindNames[S, E, A, G]) entry(s S) []A {
	if int(s) < len(n.k.Entry) {
		return n.k.Entry[s]
	}
	return nil
}

// The actions of a step, as fsm's core collects them: the row's, the entry
// actions of its To unless it is internal, then for each branch passed its
// actions and its To's entry actions.
func (n kindNames[S, E, A, G]) actions(out []ActionResult, row int32, choices []int32) []ActionResult {
	add := func(as []A) {
		for _, a := range as {
			out = append(out, ActionResult{Action: a.String()})
		}
	}
	r := &n.k.Transitions[row]
	add(r.Actions)
	if !r.Internal {
		add(n.entry(r.To))
	}
	for _, i := range choices {
		c := &n.k.Choices[i]
		add(c.Actions)
		add(n.entry(c.To))
	}
	return out
}

func (n kindNames[S, E, A, G]) derives(rs []ActionResult, row int32, choices []int32) bool {
	i := 0
	match := func(as []A) bool {
		for _, a := range as {
			if i == len(rs) || rs[i].Error != "" || rs[i].Action != a.String() {
				return false
			}
			i++
		}
		return true
	}
	r := &n.k.Transitions[row]
	if !match(r.Actions) || !r.Internal && !match(n.entry(r.To)) {
		return false
	}
	for _, k := range choices {
		c := &n.k.Choices[k]
		if !match(c.Actions) || !match(n.entry(c.To)) {
			return false
		}
	}
	return i == len(rs)
}

// choices returns the branches r passed, in buf when they fit.
func (r *record) choices(buf *[2]int32) []int32 {
	if r.nch == noCh {
		return r.more.choices
	}
	for i := range r.nch {
		buf[i] = int32(r.ch[i])
	}
	return buf[:r.nch]
}

// newRecord encodes the step of a machine of kind (its instance: the
// container's name, or "") that took the transition row, passing the choice
// branches choices, at at; h is the log it goes to, whose lock the caller
// holds.
func (h *Log) newRecord(at time.Time, kind Names, instance string, row int, choices []int) record {
	r := record{kind: kind.index(), row: uint16(row)}
	if h.base.IsZero() && !at.IsZero() {
		h.base = at.Round(0)
	}
	if off, ok := offset(h.base, at); ok {
		r.at = off
	} else {
		r.more = &extra{at: at, hasAt: true}
	}
	r.inst = h.instanceIndex(instance)
	if r.inst == noInst {
		r.extra().instance = instance
	}
	small := len(choices) <= len(r.ch)
	for _, c := range choices {
		small = small && c >= 0 && c < noCh
	}
	if small {
		r.nch = uint8(len(choices))
		for i, c := range choices {
			r.ch[i] = uint8(c)
		}
	} else {
		r.nch = noCh
		e := r.extra()
		e.choices = make([]int32, len(choices))
		for i, c := range choices {
			e.choices[i] = int32(c)
		}
	}
	return r
}

// extra returns r.more, made when nil.
func (r *record) extra() *extra {
	if r.more == nil {
		r.more = &extra{}
	}
	return r.more
}

// instanceIndex is the index of instance in h.instances, added when new;
// noInst when the log has 255 already. The caller holds h.mu.
func (h *Log) instanceIndex(instance string) uint8 {
	for i, s := range h.instances {
		if s == instance {
			return uint8(i)
		}
	}
	if len(h.instances) == noInst {
		return noInst
	}
	h.instances = append(h.instances, instance)
	return uint8(len(h.instances) - 1)
}

// offset is at as nanoseconds of wall clock after base, when at is in
// base's location and the offset fits in an int64.
func offset(base, at time.Time) (int64, bool) {
	if base.IsZero() || at.Location() != base.Location() {
		return 0, false
	}
	ds := at.Unix() - base.Unix()
	if ds > 9e9 || ds < -9e9 {
		return 0, false
	}
	return ds*1e9 + int64(at.Nanosecond()-base.Nanosecond()), true
}

// transition is r as /debug/pods shows it; h's lock is held.
func (h *Log) transition(r *record) Transition {
	kind := kindAt(r.kind)
	var buf [2]int32
	choices := r.choices(&buf)
	t := kind.transition(int32(r.row), choices)
	t.Time = h.base.Add(time.Duration(r.at))
	if r.more != nil && r.more.hasAt {
		t.Time = r.more.at
	}
	if r.inst == noInst {
		t.Instance = r.more.instance
	} else {
		t.Instance = h.instances[r.inst]
	}
	switch {
	case r.derived:
		t.Actions = kind.actions(nil, int32(r.row), choices)
	case r.more != nil && r.more.results != nil:
		t.Actions = append([]ActionResult(nil), r.more.results...)
	}
	return t
}

// setActions attaches the results of r's actions: derived when they are
// the tables', else a copy.
func (r *record) setActions(rs []ActionResult) {
	var buf [2]int32
	if len(rs) > 0 && kindAt(r.kind).derives(rs, int32(r.row), r.choices(&buf)) {
		r.derived = true
		if r.more != nil {
			r.more.results = nil
		}
		return
	}
	r.derived = false
	r.extra().results = append([]ActionResult(nil), rs...)
}
