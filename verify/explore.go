package verify

import (
	"fmt"
	"strings"

	"github.com/speclet/speclet/spec"
)

// Ops of a frame, run in order before the frame's next queued event.
const (
	opAction = iota // run action a of the frame's machine
	opSend          // deliver event b to instance a (a nested frame)
	opRaise         // queue event a on the frame's machine
	opReport        // action a reports one of its reports
)

type op struct{ kind, a, b uint8 }

// frame is one machine instance handling its queued events, as the engine's
// fire loop does: the step's actions (ops) run before the next queued event.
type frame struct {
	inst  uint8
	queue []uint8
	ops   []op
}

// sys is one product state: the role of each replicated instance, the state
// of every instance, and the stack of frames being handled (empty between
// inputs).
//
// params holds the value of each parameter plus one, 0 while no guard read
// it in the input being handled (the run is then one of every value); a
// per-instance parameter has a slot per instance of the replicated machine
// (run.slot).
// flags holds, per instance, the flags known (low 4 bits) and their values
// (high 4 bits); a flag is unknown until a guard reads it after the action
// that records it ran. Both are forgotten between inputs: the restart
// decision reads them in the step that recorded the exit, and a later read
// chooses anew (more behaviour, never less; the invariants that name them
// are checked in the step that read them), so they cost no state between
// inputs.
type sys struct {
	roles  []uint8
	params []uint8
	st     []uint8
	flags  []uint8
	frames []frame
}

func (s *sys) clone() *sys {
	c := &sys{roles: s.roles, params: append([]uint8(nil), s.params...), st: append([]uint8(nil), s.st...),
		flags: append([]uint8(nil), s.flags...), frames: make([]frame, len(s.frames))}
	for i, f := range s.frames {
		c.frames[i] = frame{inst: f.inst, queue: append([]uint8(nil), f.queue...), ops: append([]op(nil), f.ops...)}
	}
	return c
}

func (s *sys) encode(buf []byte) []byte {
	buf = append(buf, s.roles...)
	buf = append(buf, s.params...)
	buf = append(buf, s.st...)
	buf = append(buf, s.flags...)
	for _, f := range s.frames {
		buf = append(buf, f.inst, uint8(len(f.queue)))
		buf = append(buf, f.queue...)
		buf = append(buf, uint8(len(f.ops)))
		for _, o := range f.ops {
			buf = append(buf, o.kind, o.a, o.b)
		}
	}
	return buf
}

// key returns the key of state j.
func (r *run) key(j int) []byte { return r.keys.key(int32(j)) }

func (r *run) decode(b []byte) *sys {
	np, o := r.nSlots, r.stOff
	s := &sys{roles: b[:r.k:r.k], params: b[r.k : r.k+np : r.k+np], st: b[o : o+r.nInst : o+r.nInst], flags: b[o+r.nInst : o+2*r.nInst : o+2*r.nInst]}
	for i := r.restLen(); i < len(b); {
		f := frame{inst: b[i]}
		n := int(b[i+1])
		i += 2
		f.queue = append([]uint8(nil), b[i:i+n]...)
		i += n
		n = int(b[i])
		i++
		for range n {
			f.ops = append(f.ops, op{b[i], b[i+1], b[i+2]})
			i += 3
		}
		s.frames = append(s.frames, f)
	}
	return s
}

// Edge kinds.
const (
	edgeInternal = iota // a step, action outcome: no environment input
	edgeTimer           // a timer of a resting machine fired
	edgeInput           // an input of routes.hcl arrived
)

// run explores the product for one number of replicated instances.
type run struct {
	md          *model
	k           int
	nInst       int
	instMachine []int
	instNum     []int // number of the instance among its machine's (0 for singles)
	singleInst  []int // per machine: its instance, -1 for the replicated one
	repInsts    []int
	stOff       int   // offset of the states in a key
	paramBase   []int // per parameter: its first slot in sys.params
	nSlots      int   // slots of sys.params

	keys       *store
	buf        []byte
	parent     []int32
	parentEdge []int32
	edgeStart  []int32
	edgeTo     []int32
	edgeKind   []uint8
	// restoredRoot marks the initial states of restored families that are
	// not fresh ones.
	restoredRoot map[int32]bool
	rev          [2]struct{ cnt, from []int32 } // reverse graphs: all edges, restricted

	memo  []int8 // guard values of the running fire, -1 unknown
	fixed []bool // when set, the value of every guard (Step)
	// guardHook, when set, decides a guard first (tied) or leaves it free
	// (the name model's name_taken; its other guards are free).
	guardHook func(s *sys, inst, g int) (v, tied bool)

	// meta is, per edge, what the phase check needs of its move (see
	// phaseMeta); cur accumulates it for the move being taken.
	meta []uint32
	cur  uint32
}

type move struct {
	next  *sys
	kind  uint8
	input int // index of the input, -1
	label string
	viols []int  // invariants the step violates
	meta  uint32 // for the phase check: the policy and exits it read and records
}

func newRun(md *model, k int) *run {
	r := &run{md: md, k: k, keys: newStore()}
	r.singleInst = make([]int, len(md.machines))
	for i := range r.singleInst {
		r.singleInst[i] = -1
	}
	for _, m := range md.singles {
		r.singleInst[m] = len(r.instMachine)
		r.instMachine = append(r.instMachine, m)
		r.instNum = append(r.instNum, 0)
	}
	if md.rep >= 0 {
		for c := range k {
			r.repInsts = append(r.repInsts, len(r.instMachine))
			r.instMachine = append(r.instMachine, md.rep)
			r.instNum = append(r.instNum, c)
		}
	}
	r.nInst = len(r.instMachine)
	for _, p := range md.params {
		r.paramBase = append(r.paramBase, r.nSlots)
		if p.perInst {
			r.nSlots += k
		} else {
			r.nSlots++
		}
	}
	r.stOff = k + r.nSlots
	return r
}

// forgetAfterStep forgets, after a step of a once-per-pod machine, the
// parameters of the pod other than the restart policy the phase follows:
// they are read by that step's guards and checked by its invariants (the
// admission, read in pending), and a later read in the same input chooses
// anew. Forgetting is always sound (a parameter not read stands for every
// value: more behaviour, and an invariant naming it counts it as any), so
// this only keeps the states of the rest of the input from being
// multiplied by a value nothing reads again.
func (r *run) forgetAfterStep(s *sys, inst int) {
	if r.instMachine[inst] == r.md.rep {
		return
	}
	for p, pm := range r.md.params {
		if ph := r.md.phase; !pm.perInst && (ph == nil || p != ph.param) {
			s.params[r.paramBase[p]] = 0
		}
	}
}

// forgetInstance forgets the per-instance parameters of inst once no frame
// of inst is left: the instance handled its event to the end (its start
// path reads the pull policy and image reference in one frame), and a later
// frame of it in the same input chooses them anew (more behaviour, never
// less), so they do not multiply the states of the other instances' steps.
func (r *run) forgetInstance(s *sys, inst int) {
	if r.instMachine[inst] != r.md.rep {
		return
	}
	for _, f := range s.frames {
		if int(f.inst) == inst {
			return
		}
	}
	for p, pm := range r.md.params {
		if pm.perInst {
			s.params[r.slot(p, inst)] = 0
		}
	}
}

// slot returns where sys.params holds parameter p as inst reads it: its
// one slot, or inst's own for a per-instance parameter (inst is then an
// instance of the replicated machine: spec validation allows no other
// reader).
func (r *run) slot(p, inst int) int {
	if r.md.params[p].perInst {
		return r.paramBase[p] + r.instNum[inst]
	}
	return r.paramBase[p]
}

// restLen is the length of the key of a state between inputs.
func (r *run) restLen() int { return r.stOff + 2*r.nInst }

// stateOf returns the state of instance inst in key.
func (r *run) stateOf(key []byte, inst int) uint8 { return key[r.stOff+inst] }

func (r *run) instName(s *sys, inst int) string {
	m := r.md.machines[r.instMachine[inst]]
	if r.instMachine[inst] != r.md.rep {
		return m.Name
	}
	c := r.instNum[inst]
	return fmt.Sprintf("%s[%d](%s)", m.Name, c, spec.Roles[s.roles[c]])
}

// decider enumerates the values of free guards and action outcomes by
// replaying a prefix of choices.
type decider struct {
	prefix []int
	trace  []int
	arity  []int
}

func (d *decider) choose(n int) int {
	i := len(d.trace)
	v := 0
	if i < len(d.prefix) {
		v = d.prefix[i]
	}
	d.trace = append(d.trace, v)
	d.arity = append(d.arity, n)
	return v
}

// next returns the next prefix to try, or false when every combination was
// tried.
func (d *decider) next() bool {
	for i := len(d.trace) - 1; i >= 0; i-- {
		if d.trace[i]+1 < d.arity[i] {
			d.prefix = append(d.trace[:i:i], d.trace[i]+1)
			d.trace, d.arity = d.trace[:0:0], d.arity[:0:0]
			return true
		}
	}
	return false
}

func (r *run) tieHolds(s *sys, inst int, t *tie, d *decider, shown *[]string) bool {
	if t.inMachine >= 0 && !t.in[s.st[r.singleInst[t.inMachine]]] {
		return false
	}
	if t.all != nil {
		for c, i := range r.repInsts {
			if (t.among == nil || t.among[s.roles[c]]) && !t.all[s.st[i]] {
				return false
			}
		}
	}
	if t.any != nil {
		found := false
		for c, i := range r.repInsts {
			found = found || (t.among == nil || t.among[s.roles[c]]) && t.any[s.st[i]]
		}
		if !found {
			return false
		}
	}
	if t.roles != nil {
		if r.instMachine[inst] != r.md.rep || !t.roles[s.roles[r.instNum[inst]]] {
			return false
		}
	}
	if t.param >= 0 && !t.given[r.paramValue(s, inst, t.param, d, shown)] {
		return false
	}
	for _, f := range t.flags {
		if !r.flagValue(s, inst, f, d, shown) {
			return false
		}
	}
	return true
}

// tiesSay combines the ties ts of one guard of inst: the guard holds when an
// iff or if tie holds, is free (tied false) when an if tie exists or a may
// tie holds, and is false otherwise.
func (r *run) tiesSay(s *sys, inst int, ts []*tie, d *decider, shown *[]string) (v, tied bool) {
	free := false
	for _, t := range ts {
		h := r.tieHolds(s, inst, t, d, shown)
		if h && t.mode != "may" {
			return true, true
		}
		free = free || t.mode == "if" || h && t.mode == "may"
	}
	return false, !free
}

// paramValue reads parameter p as inst sees it, choosing it at its first
// read.
func (r *run) paramValue(s *sys, inst, p int, d *decider, shown *[]string) int {
	sl := r.slot(p, inst)
	if v := s.params[sl]; v > 0 {
		return int(v) - 1
	}
	pm := r.md.params[p]
	v := d.choose(len(pm.values))
	s.params[sl] = uint8(v + 1)
	r.notePolicyRead(p, v)
	if shown != nil {
		name := pm.name
		if pm.perInst {
			name = r.instName(s, inst) + "." + name
		}
		*shown = append(*shown, fmt.Sprintf("%s=%s(chosen)", name, pm.values[v]))
	}
	return v
}

// flagValue reads flag f of inst, choosing it when unknown.
func (r *run) flagValue(s *sys, inst, f int, d *decider, shown *[]string) bool {
	if s.flags[inst]&(1<<f) != 0 {
		return s.flags[inst]&(16<<f) != 0
	}
	v := d.choose(2) == 1
	s.flags[inst] |= 1 << f
	if v {
		s.flags[inst] |= 16 << f
	}
	r.noteExitRead(inst, f, v)
	if shown != nil {
		*shown = append(*shown, fmt.Sprintf("%s=%v(recorded)", r.md.machines[r.instMachine[inst]].flags[f], v))
	}
	return v
}

func (r *run) guard(s *sys, inst, g int, d *decider, shown *[]string) bool {
	if v := r.memo[g]; v >= 0 {
		return v == 1
	}
	m := r.md.machines[r.instMachine[inst]]
	var v bool
	tied := false
	if r.guardHook != nil {
		v, tied = r.guardHook(s, inst, g)
	} else if r.fixed != nil {
		v, tied = r.fixed[g], true
	} else if ts := m.ties[g]; len(ts) > 0 {
		v, tied = r.tiesSay(s, inst, ts, d, shown)
	}
	if !tied {
		v = d.choose(2) == 1
	}
	r.memo[g] = 0
	if v {
		r.memo[g] = 1
	}
	if shown != nil {
		suffix := ""
		if tied {
			suffix = "(tied)"
		}
		*shown = append(*shown, fmt.Sprintf("%s=%v%s", m.guards[g], v, suffix))
	}
	return v
}

type fireResult struct {
	none, loop bool
	internal   bool
	path       []int
	actions    []int
}

// fireOnce takes the step of inst on ev like fsm/core.go: the first
// transition in spec order whose guard holds; choice states are passed at
// once, first branch whose guard holds, else otherwise. s.st[inst] is
// updated.
func (r *run) fireOnce(s *sys, inst, ev int, d *decider, shown *[]string) fireResult {
	m := r.md.machines[r.instMachine[inst]]
	if cap(r.memo) < len(m.guards) {
		r.memo = make([]int8, len(m.guards))
	}
	r.memo = r.memo[:len(m.guards)]
	for i := range r.memo {
		r.memo[i] = -1
	}
	from := int(s.st[inst])
	var picked *trans
	for _, t := range m.trans[from][ev] {
		if t.guard < 0 || r.guard(s, inst, t.guard, d, shown) {
			picked = t
			break
		}
	}
	if picked == nil {
		return fireResult{none: true}
	}
	res := fireResult{actions: append([]int(nil), picked.actions...)}
	if picked.to < 0 {
		res.internal = true
		return res
	}
	cur := picked.to
	s.st[inst] = uint8(cur)
	res.path = append(res.path, cur)
	res.actions = append(res.actions, m.entry[cur]...)
	for hops := 0; len(m.choice[cur]) > 0; hops++ {
		if hops > len(m.states) {
			res.loop = true
			return res
		}
		cs := m.choice[cur]
		b := cs[len(cs)-1]
		for _, c := range cs {
			if c.guard < 0 || r.guard(s, inst, c.guard, d, shown) {
				b = c
				break
			}
		}
		res.actions = append(res.actions, b.actions...)
		cur = b.to
		s.st[inst] = uint8(cur)
		res.path = append(res.path, cur)
		res.actions = append(res.actions, m.entry[cur]...)
	}
	return res
}

// sendOps expands the sends of an effect to one op per target instance.
func (r *run) sendOps(ef *effect) []op {
	var ops []op
	for _, sd := range ef.sends {
		if sd.machine == r.md.rep {
			for _, i := range r.repInsts {
				ops = append(ops, op{opSend, uint8(i), uint8(sd.event)})
			}
		} else if i := r.singleInst[sd.machine]; i >= 0 {
			ops = append(ops, op{opSend, uint8(i), uint8(sd.event)})
		}
	}
	return ops
}

// choices returns the number of outcomes of the top frame's first op (an
// action or a report): 1 when it is deterministic.
func (r *run) choices(s *sys, ef *effect, o op) int {
	switch {
	case ef == nil:
		return 1
	case o.kind == opAction && ef.nothing:
		if ef.reqMachine >= 0 && !ef.req[s.st[r.singleInst[ef.reqMachine]]] {
			return 1 // its precondition fails: it fails before any effect
		}
		return 2 // fails before any effect, or runs
	case o.kind == opReport && len(ef.reports) > 1:
		return len(ef.reports)
	}
	return 1
}

// apply replaces the top frame's first op (an action or a report) by its
// outcome number i: an action becomes its sends then its report (outcome 0
// of an action that may report nothing drops it); a report becomes the
// raise of reports[i].
func (r *run) apply(s *sys, ef *effect, i int) {
	f := &s.frames[len(s.frames)-1]
	o, rest := f.ops[0], f.ops[1:]
	if o.kind == opAction && (ef == nil || !ef.nothing || i > 0) {
		for _, fl := range r.md.machines[r.instMachine[f.inst]].sets[o.a] {
			s.flags[f.inst] &^= 17 << fl // recorded anew: unknown until read
			r.noteExitRecord(int(f.inst), fl)
		}
	}
	var ops []op
	switch {
	case ef == nil:
	case o.kind == opAction:
		if ef.nothing && i == 0 {
			break
		}
		ops = r.sendOps(ef)
		if len(ef.reports) > 0 {
			ops = append(ops, op{opReport, o.a, 0})
		}
	case o.kind == opReport:
		ops = []op{{opRaise, uint8(ef.reports[i]), 0}}
	}
	f.ops = append(ops, rest...)
}

// settle carries out the deterministic parts of the top frames: queued
// raises, sends, actions and reports with one outcome, finished frames. It
// stops where a choice or a step is due, or when no frame is left.
func (r *run) settle(s *sys) {
	for len(s.frames) > 0 {
		f := &s.frames[len(s.frames)-1]
		if len(f.ops) > 0 {
			o := f.ops[0]
			switch o.kind {
			case opRaise:
				f.queue = append(f.queue, o.a)
				f.ops = f.ops[1:]
				continue
			case opSend:
				f.ops = f.ops[1:]
				s.frames = append(s.frames, frame{inst: o.a, queue: []uint8{o.b}})
				continue
			case opAction, opReport:
				ef := r.md.machines[r.instMachine[f.inst]].effects[o.a]
				if r.choices(s, ef, o) == 1 {
					r.apply(s, ef, 0)
					continue
				}
				return
			}
		}
		if len(f.queue) > 0 {
			return
		}
		s.frames = s.frames[:len(s.frames)-1]
		r.forgetInstance(s, int(f.inst))
	}
	clear(s.params) // forgotten between inputs
	clear(s.flags)
}

// successors calls emit for every move from s (settled), in a fixed order.
// Labels are built only when describe is set. A move is followed through
// the steps after it that have a single successor (no free guard, no
// action with several outcomes), so that the states of such a chain are not
// stored; its label then has one line per step, and it violates the
// invariants any step of the chain violates.
func (r *run) successors(s *sys, describe bool, emit func(*move)) {
	r.moves(s, describe, func(mv *move) bool {
		for len(mv.next.frames) > 0 {
			var only *move
			n := 0
			r.moves(mv.next, describe, func(m2 *move) bool {
				if n++; n == 1 {
					only = m2
				}
				return n < 2
			})
			if n != 1 {
				break
			}
			mv.next = only.next
			mv.viols = append(mv.viols, only.viols...)
			mv.meta |= only.meta
			if describe {
				mv.label += "\n" + only.label
			}
		}
		emit(mv)
		return true
	})
}

// moves calls emit for every single move from s (settled), in a fixed
// order, until emit returns false.
func (r *run) moves(s *sys, describe bool, emit func(*move) bool) {
	md := r.md
	if len(s.frames) == 0 {
		for ii, in := range md.inputs {
			targets := []int{-1}
			for _, rt := range in.routes {
				if rt.machine == md.rep {
					targets = r.repInsts
				}
			}
			for _, c := range targets {
				next := s.clone()
				var parts []string
				// Frames are a stack: push the last route first.
				for j := len(in.routes) - 1; j >= 0; j-- {
					rt := in.routes[j]
					inst := r.singleInst[rt.machine]
					if rt.machine == md.rep {
						inst = c
					}
					if inst < 0 {
						continue
					}
					next.frames = append(next.frames, frame{inst: uint8(inst), queue: []uint8{uint8(rt.event)}})
					if describe {
						parts = append([]string{r.instName(s, inst) + "." + md.machines[rt.machine].events[rt.event]}, parts...)
					}
				}
				if len(next.frames) == 0 {
					continue
				}
				r.cur = 0
				r.settle(next)
				mv := &move{next: next, kind: edgeInput, input: ii, meta: r.cur}
				if describe {
					mv.label = fmt.Sprintf("input %s: %s", in.name, strings.Join(parts, ", "))
					if in.external {
						mv.label = "external: " + strings.Join(parts, ", ")
					}
				}
				if !emit(mv) {
					return
				}
			}
		}
		for inst := range r.nInst {
			m := md.machines[r.instMachine[inst]]
			for _, ev := range m.timers[s.st[inst]] {
				next := s.clone()
				next.frames = append(next.frames, frame{inst: uint8(inst), queue: []uint8{uint8(ev)}})
				r.cur = 0
				r.settle(next)
				mv := &move{next: next, kind: edgeTimer, input: -1, meta: r.cur}
				if describe {
					mv.label = fmt.Sprintf("timer: %s in %s fires %s", r.instName(s, inst), m.states[s.st[inst]], m.events[ev])
				}
				if !emit(mv) {
					return
				}
			}
		}
		return
	}
	f := &s.frames[len(s.frames)-1]
	inst := int(f.inst)
	m := md.machines[r.instMachine[inst]]
	if len(f.ops) > 0 { // an action or a report with several outcomes
		o := f.ops[0]
		ef := m.effects[o.a]
		for i := range r.choices(s, ef, o) {
			next := s.clone()
			r.cur = 0
			r.apply(next, ef, i)
			r.settle(next)
			mv := &move{next: next, kind: edgeInternal, input: -1, meta: r.cur}
			if describe {
				what := [2]string{"fails before any effect (reports nothing)", "runs"}[min(i, 1)]
				if o.kind == opReport {
					what = "reports " + m.events[ef.reports[i]]
				}
				mv.label = fmt.Sprintf("%s: %s %s", r.instName(s, inst), m.actions[o.a], what)
			}
			if !emit(mv) {
				return
			}
		}
		return
	}
	ev := int(f.queue[0])
	d := &decider{}
	for {
		next := s.clone()
		var shown []string
		var sp *[]string
		if describe {
			sp = &shown
		}
		from := int(s.st[inst])
		r.cur = 0
		res := r.fireOnce(next, inst, ev, d, sp)
		nf := &next.frames[len(next.frames)-1]
		nf.queue = nf.queue[1:]
		var ops []op
		for _, a := range res.actions {
			ops = append(ops, op{opAction, uint8(a), 0})
		}
		nf.ops = ops
		mv := &move{next: next, kind: edgeInternal, input: -1}
		if !res.none && !res.loop {
			mv.viols = r.check(next, inst, from, res.path)
			r.noteEntered(inst, res.path)
		}
		r.forgetAfterStep(next, inst)
		r.settle(next)
		mv.meta = r.cur
		if describe {
			g := ""
			if len(shown) > 0 {
				g = " [" + strings.Join(shown, " ") + "]"
			}
			who := r.instName(s, inst)
			switch {
			case res.none:
				mv.label = fmt.Sprintf("%s %s --%s%s--> no transition (ignored)", who, m.states[from], m.events[ev], g)
			case res.loop:
				mv.label = fmt.Sprintf("%s %s --%s%s--> choice loop (ignored)", who, m.states[from], m.events[ev], g)
			default:
				to := "(internal)"
				if !res.internal {
					var p []string
					for _, st := range res.path {
						p = append(p, m.states[st])
					}
					to = strings.Join(p, " -> ")
				}
				var acts []string
				for _, a := range res.actions {
					acts = append(acts, m.actions[a])
				}
				a := ""
				if len(acts) > 0 {
					a = " / " + strings.Join(acts, ", ")
				}
				mv.label = fmt.Sprintf("%s %s --%s%s--> %s%s", who, m.states[from], m.events[ev], g, to, a)
			}
		}
		if res.loop {
			next.st[inst] = uint8(from)
		}
		if !emit(mv) {
			return
		}
		if !d.next() {
			return
		}
	}
}

// check evaluates the step invariants on a step of inst from state from
// through path (next holds the states after the step) and returns the
// indices of the invariants it violates.
func (r *run) check(next *sys, inst, from int, path []int) []int {
	var viols []int
	for i, iv := range r.md.invs {
		if iv.machine != r.instMachine[inst] {
			continue
		}
		switch iv.Kind {
		case spec.InvNeverEnter:
			iv.checks++
			if iv.whileMachine >= 0 {
				w := r.singleInst[iv.whileMachine]
				if w < 0 || !iv.while[next.st[w]] {
					continue
				}
			}
			if iv.param >= 0 {
				// Not read yet: the run is one of every value.
				if v := next.params[r.slot(iv.param, inst)]; v > 0 && !iv.given[v-1] {
					continue
				}
			}
			if iv.among != nil && (r.instMachine[inst] != r.md.rep || !iv.among[next.roles[r.instNum[inst]]]) {
				continue
			}
			excused := false
			for _, f := range iv.unless {
				// An unknown flag may be unset.
				excused = excused || next.flags[inst]&(17<<f) == 17<<f
			}
			if excused {
				continue
			}
			prev := from
			for _, p := range path {
				if iv.set[p] && (iv.from == nil || iv.from[prev]) {
					viols = append(viols, i)
					break
				}
				prev = p
			}
		case spec.InvRank:
			iv.checks++
			prev := from
			for _, p := range path {
				if iv.rank[p] < iv.rank[prev] {
					viols = append(viols, i)
					break
				}
				prev = p
			}
		}
	}
	return viols
}
