package verify

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The name model: N pod machines of one static pod full name sharing the
// engine's FIFO of that name (engine/names.go), explored together, with the
// rest of each pod abstracted.
//
// What is modelled as the engine does: the sync loop queues a UID under the
// name when it first declares it (its first update), in arrival order; guard
// name_taken holds when the queue's head is another UID and this UID is
// queued; action release_name leaves the queue and, when the UID was the
// head, posts name_free to the new head (delivered to that worker as an
// input, any time later). What is abstracted, soundly: every other guard of
// the pod machine is free; an action with an effect in system.hcl reports
// any of its reports, or nothing when it may (its precondition, on machines
// not modelled here, counts as unknown); its sends reach machines not
// modelled; release_name may fail (a sandbox of the pod may still run)
// except in a final state (remove_pod ran only with the sandbox stopped).
// The environment delivers the pod machine's inputs (kill, update, sync, of
// routes.hcl) to any declared pod, and declares pods in index order (the
// pods are alike, so that order stands for every arrival order).
//
// Checked: name_held_once, at most one pod of the name is started (it
// entered the state name_free leads to) and still queued, in every state
// between inputs; name_fifo, a pod enters that state the first time only at
// the queue's head, every UID ahead of it having released the name;
// name_successor_starts, from every state where a pod waits (in the state
// that handles name_free) and every pod ahead of it was killed, every fair
// run of completions, timers and name_free deliveries (the same fairness as
// kill_finishes) takes it out of waiting.

// Names of spec/pod.hcl the name model reads; a spec without them has no
// name model.
const (
	namePod      = "pod"
	nameGuard    = "name_taken"
	nameRelease  = "release_name"
	nameFreeEv   = "name_free"
	nameKillEv   = "kill"
	nameUpdateEv = "update"
)

// Per-pod bits of a name state.
const (
	nbDeclared = 1 << iota // queued once (its first update arrived)
	nbKilled               // a kill input reached it
	nbStarted              // it entered the start state
	nbFree                 // name_free posted, not yet delivered
)

// nstate is one state of the name model between inputs: each pod's machine
// state and bits, and the queue of the name (pod numbers, in order).
type nstate struct {
	st    []uint8
	bits  []uint8
	queue []uint8
}

func (s *nstate) clone() *nstate {
	return &nstate{st: slices.Clone(s.st), bits: slices.Clone(s.bits), queue: slices.Clone(s.queue)}
}

func (s *nstate) encode(buf []byte) []byte {
	buf = append(buf, s.st...)
	buf = append(buf, s.bits...)
	return append(buf, s.queue...)
}

func (nm *nameModel) decode(b []byte) *nstate {
	n := nm.n
	return &nstate{st: slices.Clone(b[:n]), bits: slices.Clone(b[n : 2*n]), queue: slices.Clone(b[2*n:])}
}

func (s *nstate) ahead(i int) []uint8 {
	if p := slices.Index(s.queue, uint8(i)); p >= 0 {
		return s.queue[:p]
	}
	return nil
}

// nameModel explores n pods of one name; r holds the explored graph in
// verify's own structures (store, parents, edges) so that its reachability
// and trace code applies.
type nameModel struct {
	md      *model
	m       *mach
	n       int
	r       *run
	taken   int   // guard name_taken
	release int   // action release_name
	free    int   // event name_free
	kill    int   // event kill
	update  int   // event update
	start   int   // the state a pod enters when the name is free (syncing)
	waiting int   // the state a pod waits in while name_taken holds
	inputs  []int // events of the pod machine the environment delivers
	final   []bool
	cur     *nstate // the state whose step is being taken (the guard hook)
	// releaseFn is release_name's success in s for pod i (release); it
	// returns the pod it posts name_free to, -1 for none.
	releaseFn func(s *nstate, i int) int
	// Violations found during the search: held-once and FIFO.
	held, fifo       *hit
	heldAt           int32
	checks           [3]int64
	heldDet, fifoDet string
}

type nmove struct {
	next  *nstate
	kind  uint8
	label []string
	fifo  string // a FIFO violation in this move
}

func newNameModel(md *model, n int) *nameModel {
	mi := slices.IndexFunc(md.machines, func(m *mach) bool { return m.Name == namePod })
	if mi < 0 {
		return nil
	}
	m := md.machines[mi]
	g, ok1 := m.guard[nameGuard]
	a, ok2 := m.action[nameRelease]
	f, ok3 := m.event[nameFreeEv]
	k, ok4 := m.event[nameKillEv]
	u, ok5 := m.event[nameUpdateEv]
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return nil
	}
	nm := &nameModel{md: md, m: m, n: n, taken: g, release: a, free: f, kill: k, update: u, start: -1, waiting: -1}
	// waiting: where a transition guarded by name_taken leads; start: where
	// the same state's next row on that event leads (the name is free).
	for si := range m.states {
		for _, ts := range m.trans[si] {
			for ti, t := range ts {
				if t.guard == g && t.to >= 0 && nm.waiting < 0 && ti+1 < len(ts) && ts[ti+1].to >= 0 {
					nm.waiting, nm.start = t.to, ts[ti+1].to
				}
			}
		}
		nm.final = append(nm.final, m.States[si].Final)
	}
	if nm.start < 0 {
		return nil
	}
	for _, in := range md.inputs {
		for _, rt := range in.routes {
			if rt.machine == mi && rt.event != f && !slices.Contains(nm.inputs, rt.event) {
				nm.inputs = append(nm.inputs, rt.event)
			}
		}
	}
	r := &run{md: md, nInst: n, keys: newStore()}
	for i := range n {
		r.instMachine = append(r.instMachine, mi)
		r.instNum = append(r.instNum, i)
	}
	r.guardHook = func(_ *sys, inst, g int) (bool, bool) {
		if g != nm.taken {
			return false, false
		}
		return NameTaken(nm.cur.queue, uint8(inst)), true
	}
	nm.releaseFn = release
	nm.r = r
	return nm
}

// NameTaken is the tie of guard name_taken over the queue of a static pod
// full name (UIDs in arrival order): another UID heads the queue and uid is
// queued. engine/names' Taken must agree with it.
func NameTaken[U comparable](queue []U, uid U) bool {
	return len(queue) > 0 && queue[0] != uid && slices.Contains(queue, uid)
}

// release is release_name as the engine runs it: pod i leaves the queue and,
// when it headed it, the new head gets name_free (returned; -1 for none).
func release(s *nstate, i int) int {
	p := slices.Index(s.queue, uint8(i))
	if p < 0 {
		return -1
	}
	s.queue = slices.Delete(s.queue, p, p+1)
	if p != 0 || len(s.queue) == 0 {
		return -1
	}
	s.bits[s.queue[0]] |= nbFree
	return int(s.queue[0])
}

func (nm *nameModel) name(i int) string { return fmt.Sprintf("pod[%d]", i) }

// deliver hands event ev to pod i in s and calls emit for every outcome once
// the pod handled it to the end (its actions' reports included).
func (nm *nameModel) deliver(s *nstate, i int, evq []int, lines []string, fifo string, emit func(*nstate, []string, string)) {
	if len(evq) == 0 {
		emit(s, lines, fifo)
		return
	}
	ev, rest := evq[0], evq[1:]
	m := nm.m
	d := &decider{}
	for {
		next := s.clone()
		nm.cur = next
		var shown []string
		sy := &sys{st: next.st}
		from := int(next.st[i])
		res := nm.r.fireOnce(sy, i, ev, d, &shown)
		g := ""
		if len(shown) > 0 {
			g = " [" + strings.Join(shown, " ") + "]"
		}
		label := fmt.Sprintf("%s %s --%s%s--> ", nm.name(i), m.states[from], m.events[ev], g)
		f := fifo
		switch {
		case res.none:
			label += "no transition (ignored)"
		case res.loop:
			label += "choice loop (ignored)"
			next.st[i] = uint8(from)
		default:
			var p []string
			for _, st := range res.path {
				p = append(p, m.states[st])
				if st == nm.start && next.bits[i]&nbStarted == 0 {
					next.bits[i] |= nbStarted
					nm.checks[1]++
					if f == "" && (len(next.queue) == 0 || int(next.queue[0]) != i) {
						f = fmt.Sprintf("%s started while the queue of the name is %s", nm.name(i), nm.queueText(next))
					}
				}
			}
			if res.internal {
				p = []string{"(internal)"}
			}
			label += strings.Join(p, " -> ")
			var acts []string
			for _, a := range res.actions {
				acts = append(acts, m.actions[a])
			}
			if len(acts) > 0 {
				label += " / " + strings.Join(acts, ", ")
			}
		}
		var acts []int
		if !res.none && !res.loop {
			acts = res.actions
		}
		nm.act(next, i, acts, rest, append(slices.Clip(lines), label), f, emit)
		if !d.next() {
			return
		}
	}
}

// act runs pod i's actions in order, branching on their outcomes, then
// handles the events queued behind the step (evq, with the reports).
func (nm *nameModel) act(s *nstate, i int, acts, evq []int, lines []string, fifo string, emit func(*nstate, []string, string)) {
	if len(acts) == 0 {
		nm.deliver(s, i, evq, lines, fifo, emit)
		return
	}
	a, rest := acts[0], acts[1:]
	name := nm.m.actions[a]
	if a == nm.release {
		if !nm.final[s.st[i]] {
			nm.act(s, i, rest, evq, append(slices.Clip(lines), fmt.Sprintf("%s: %s fails before any effect (a sandbox may still run)", nm.name(i), name)), fifo, emit)
		}
		next := s.clone()
		label := fmt.Sprintf("%s: %s runs", nm.name(i), name)
		if h := nm.releaseFn(next, i); h >= 0 {
			label += fmt.Sprintf(": posts name_free to %s", nm.name(h))
		}
		nm.act(next, i, rest, evq, append(slices.Clip(lines), label), fifo, emit)
		return
	}
	ef := nm.m.effects[a]
	if ef == nil {
		nm.act(s, i, rest, evq, lines, fifo, emit)
		return
	}
	if ef.nothing {
		nm.act(s, i, rest, evq, append(slices.Clip(lines), fmt.Sprintf("%s: %s fails before any effect (reports nothing)", nm.name(i), name)), fifo, emit)
	}
	if len(ef.reports) == 0 {
		nm.act(s, i, rest, evq, lines, fifo, emit)
		return
	}
	for _, rp := range ef.reports {
		nm.act(s, i, rest, append(slices.Clip(evq), rp), append(slices.Clip(lines), fmt.Sprintf("%s: %s reports %s", nm.name(i), name, nm.m.events[rp])), fifo, emit)
	}
}

func (nm *nameModel) queueText(s *nstate) string {
	var q []string
	for _, p := range s.queue {
		q = append(q, nm.name(int(p)))
	}
	return "[" + strings.Join(q, " ") + "]"
}

// successors calls emit for every move from s: an input to a declared pod
// (the first update of the next undeclared pod declares and queues it), a
// timer of a pod's state, or a posted name_free delivered.
func (nm *nameModel) successors(s *nstate, emit func(*nmove)) {
	for i := range nm.n {
		declared := s.bits[i]&nbDeclared != 0
		for _, ev := range nm.inputs {
			next := s.clone()
			if !declared {
				if ev != nm.update || i > 0 && s.bits[i-1]&nbDeclared == 0 {
					continue
				}
				next.bits[i] |= nbDeclared
				next.queue = append(next.queue, uint8(i))
			}
			if ev == nm.kill {
				next.bits[i] |= nbKilled
			}
			head := fmt.Sprintf("input %s: %s.%s", nm.m.events[ev], nm.name(i), nm.m.events[ev])
			nm.deliver(next, i, []int{ev}, []string{head}, "", func(ns *nstate, l []string, f string) {
				emit(&nmove{next: ns, kind: edgeInput, label: l, fifo: f})
			})
		}
		if !declared {
			continue
		}
		for _, ev := range nm.m.timers[s.st[i]] {
			head := fmt.Sprintf("timer: %s in %s fires %s", nm.name(i), nm.m.states[s.st[i]], nm.m.events[ev])
			nm.deliver(s.clone(), i, []int{ev}, []string{head}, "", func(ns *nstate, l []string, f string) {
				emit(&nmove{next: ns, kind: edgeTimer, label: l, fifo: f})
			})
		}
		if s.bits[i]&nbFree != 0 {
			next := s.clone()
			next.bits[i] &^= nbFree
			head := fmt.Sprintf("engine: %s takes its posted name_free", nm.name(i))
			nm.deliver(next, i, []int{nm.free}, []string{head}, "", func(ns *nstate, l []string, f string) {
				emit(&nmove{next: ns, kind: edgeInternal, label: l, fifo: f})
			})
		}
	}
}

// held returns a text when more than one pod of the name is started and
// still queued in s.
func (nm *nameModel) heldText(s *nstate) string {
	var on []string
	for _, p := range s.queue {
		if s.bits[p]&nbStarted != 0 {
			on = append(on, fmt.Sprintf("%s (%s)", nm.name(int(p)), nm.m.states[s.st[p]]))
		}
	}
	if len(on) > 1 {
		return "started and holding the name at once: " + strings.Join(on, ", ")
	}
	return ""
}

func (nm *nameModel) add(s *nstate, parent, edge int32) int32 {
	r := nm.r
	r.buf = s.encode(r.buf[:0])
	j, added := r.keys.add(r.buf)
	if added {
		r.parent = push(r.parent, parent)
		r.parentEdge = push(r.parentEdge, edge)
	}
	return j
}

// explore searches the name model breadth first and checks its invariants.
func (nm *nameModel) explore() []*InvariantResult {
	r := nm.r
	s0 := &nstate{st: make([]uint8, nm.n), bits: make([]uint8, nm.n)}
	for i := range s0.st {
		s0.st[i] = uint8(nm.m.initial)
	}
	nm.add(s0, -1, -1)
	var buf []byte
	for i := 0; i < r.keys.len(); i++ {
		s := nm.decode(r.key(i))
		nm.checks[0]++
		if nm.held == nil {
			if t := nm.heldText(s); t != "" {
				nm.held, nm.heldDet = &hit{int32(i), -1}, t
			}
		}
		r.edgeStart = push(r.edgeStart, int32(len(r.edgeTo)))
		e := int32(0)
		nm.successors(s, func(mv *nmove) {
			buf = mv.next.encode(buf[:0])
			j := r.keys.lookup(buf)
			if j < 0 {
				j = nm.add(mv.next, int32(i), e)
			}
			r.edgeTo = push(r.edgeTo, j)
			r.edgeKind = push(r.edgeKind, mv.kind)
			if mv.fifo != "" && nm.fifo == nil {
				nm.fifo, nm.fifoDet = &hit{int32(i), e}, mv.fifo
			}
			e++
		})
	}
	r.edgeStart = push(r.edgeStart, int32(len(r.edgeTo)))

	res := []*InvariantResult{
		{Name: "name_held_once", Kind: "names", Doc: "At most one pod of a static pod's full name is started (past waiting_to_start) and has not released the name.", Checks: nm.checks[0]},
		{Name: "name_fifo", Kind: "names", Doc: "A pod of a static pod's full name starts only at the head of the name's queue: every UID queued ahead of it released the name.", Checks: nm.checks[1]},
		{Name: "name_successor_starts", Kind: "names", Doc: "A pod waiting for its full name, every pod ahead of it killed, leaves waiting_to_start through completions, timers and name_free deliveries alone, fairly."},
	}
	if nm.held != nil {
		res[0].Violation = nm.trace(r.chainTo(nm.held.from), nm.heldDet)
	}
	if nm.fifo != nil {
		res[1].Violation = nm.trace(append(r.chainTo(nm.fifo.from), *nm.fifo), nm.fifoDet)
	}
	for i := range nm.n {
		ok := r.canReach(func(j int) bool { return r.key(j)[i] != uint8(nm.waiting) }, true)
		for j := range r.keys.len() {
			s := nm.decode(r.key(j))
			if int(s.st[i]) != nm.waiting || slices.ContainsFunc(s.ahead(i), func(p uint8) bool { return s.bits[p]&nbKilled == 0 }) {
				continue
			}
			res[2].Checks++
			if !ok[j] {
				res[2].Violation = nm.trace(r.chainTo(int32(j)), fmt.Sprintf("%s waits, every pod ahead of it killed, and completions, timers and name_free deliveries never take it out of %s", nm.name(i), nm.m.states[nm.waiting]))
				return res
			}
		}
	}
	return res
}

// trace renders chain (moves from the initial state) as a violation.
func (nm *nameModel) trace(chain []hit, detail string) *Violation {
	v := &Violation{K: nm.n, Detail: detail}
	last := nm.decode(nm.r.key(0))
	for _, h := range chain {
		s := nm.decode(nm.r.key(int(h.from)))
		n := int32(0)
		nm.successors(s, func(mv *nmove) {
			if n == h.edge {
				v.Trace = append(v.Trace, mv.label...)
				last = mv.next
			}
			n++
		})
	}
	var st []string
	for i := range nm.n {
		st = append(st, fmt.Sprintf("%s=%s", nm.name(i), nm.m.states[last.st[i]]))
	}
	v.Trace = append(v.Trace, fmt.Sprintf("state: %s, queue %s", strings.Join(st, ", "), nm.queueText(last)))
	return v
}

// checkNames explores the name model for 2..maxPods pods; it returns the
// runs and the invariants' results, the first violation (fewest pods) kept.
// A spec without the pod machine's name FIFO has none.
func checkNames(md *model, maxPods int) ([]Run, []*InvariantResult) {
	var runs []Run
	var out []*InvariantResult
	for n := 2; n <= maxPods; n++ {
		t0 := time.Now()
		nm := newNameModel(md, n)
		if nm == nil {
			return nil, nil
		}
		res := nm.explore()
		runs = append(runs, Run{K: n, Assignments: 1, States: nm.r.keys.len(), Resting: nm.r.keys.len(), Transitions: len(nm.r.edgeTo), Elapsed: time.Since(t0)})
		if out == nil {
			out = res
			continue
		}
		for i, ir := range res {
			out[i].Checks += ir.Checks
			if out[i].Violation == nil {
				out[i].Violation = ir.Violation
			}
		}
	}
	return runs, out
}
