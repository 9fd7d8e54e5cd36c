// Package verify explores every reachable state of a pod's machines, coupled
// as spec/system.hcl declares, and checks the spec's invariants.
//
// It works on the decoded spec (package spec), not on the generated code, so
// that it can check any spec files. The product explored is one instance of
// every machine, except the replicated one (the container machine), which
// has K instances, each with a role: init and sidecar containers first, then
// regular ones, at least one regular (a pod spec needs one). Every role
// assignment for K is explored in one search.
//
// One step of a machine is that of fsm/core.go: the first transition in spec
// order whose guard holds, internal transitions, choice states passed at
// once. Guards are free (both values explored) unless tied. An event
// delivered to a machine is handled like the engine's fire loop: the step's
// actions run in order; an action delivers its sends (each handled to the end
// before the next) and then reports one of its reports, queued behind the
// step; the queue is handled before any other input. An action that may
// report nothing may also fail before any effect. Between inputs, any input
// of routes.hcl or external event may arrive (one naming the replicated
// machine goes to any one instance, and to it before the other machines) and
// any timer of a resting machine may fire.
//
// Invariants of kind never_enter and rank are checked on every step; the
// reachability kinds (always_reaches, after) on the explored graph once the
// search ends.
//
// The search is breadth first over a compact byte encoding of the product
// state, so a violation's trace is a shortest one.
package verify

import (
	"fmt"
	"slices"
	"time"

	"github.com/speclet/speclet/spec"
)

// Options bound the exploration.
type Options struct {
	// MaxContainers: the product is explored for K = 1..MaxContainers
	// instances of the replicated machine (default 3).
	MaxContainers int
}

// Report is the outcome of Check.
type Report struct {
	Runs       []Run
	Invariants []*InvariantResult
	// Unproduced lists the events (MACHINE.EVENT) that nothing in the
	// system produces: no input, external, timer, send or report.
	Unproduced []string
	States     int // over every run
	Elapsed    time.Duration
}

// Run is the exploration for one K.
type Run struct {
	K           int
	Assignments int // role assignments explored
	States      int
	Resting     int // states between inputs: no step in progress
	Transitions int
	Elapsed     time.Duration
}

// InvariantResult says whether an invariant held.
type InvariantResult struct {
	Name, Kind, Doc string
	// Checks counts the evaluations: steps for never_enter and rank,
	// states for always_reaches, inputs for after.
	Checks    int64
	Violation *Violation
}

// Violation is the first (shortest) counterexample found for an invariant.
type Violation struct {
	K      int
	Roles  []string
	Detail string
	// Trace lists the moves from the initial state, one line each.
	Trace []string
}

// OK reports whether every invariant held.
func (r *Report) OK() bool {
	for _, iv := range r.Invariants {
		if iv.Violation != nil {
			return false
		}
	}
	return true
}

// Check explores s (a spec without error diagnostics) and checks its
// invariants.
func Check(s *spec.Spec, opt Options) (*Report, error) {
	if opt.MaxContainers <= 0 {
		opt.MaxContainers = 3
	}
	md, err := compile(s)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{Unproduced: md.unproduced()}
	ks := []int{0}
	if md.rep >= 0 {
		ks = ks[:0]
		for k := 1; k <= opt.MaxContainers; k++ {
			ks = append(ks, k)
		}
	}
	for _, k := range ks {
		t0 := time.Now()
		r := newRun(md, k)
		if r.nInst > 255 {
			return nil, fmt.Errorf("too many machine instances (%d)", r.nInst)
		}
		n := r.explore()
		resting := 0
		for _, key := range r.keys {
			if len(key) == r.k+r.nInst {
				resting++
			}
		}
		rep.Runs = append(rep.Runs, Run{K: k, Assignments: n, States: len(r.keys), Resting: resting, Transitions: len(r.edgeTo), Elapsed: time.Since(t0)})
		rep.States += len(r.keys)
	}
	for _, iv := range md.invs {
		rep.Invariants = append(rep.Invariants, &InvariantResult{Name: iv.Name, Kind: iv.Kind, Doc: iv.Doc, Checks: iv.checks, Violation: iv.violation})
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// assignments returns the role assignments for k instances: init and
// sidecar in any order, then at least one regular.
func assignments(k int) [][]uint8 {
	var out [][]uint8
	for j := 0; j < k; j++ {
		for mask := 0; mask < 1<<j; mask++ {
			roles := make([]uint8, k)
			for i := range k {
				switch {
				case i >= j:
					roles[i] = roleRegular
				case mask&(1<<i) != 0:
					roles[i] = roleSidecar
				default:
					roles[i] = roleInit
				}
			}
			out = append(out, roles)
		}
	}
	if k == 0 {
		out = [][]uint8{{}}
	}
	return out
}

func (r *run) add(s *sys, parent, edge int32) int32 {
	key := string(s.encode(nil))
	if j, ok := r.index[key]; ok {
		return j
	}
	j := int32(len(r.keys))
	r.index[key] = j
	r.keys = append(r.keys, key)
	r.parent = append(r.parent, parent)
	r.parentEdge = append(r.parentEdge, edge)
	return j
}

type hit struct {
	from, edge int32
}

// explore runs the search and the checks of one run; it returns the number
// of role assignments.
func (r *run) explore() int {
	md := r.md
	as := assignments(r.k)
	for _, roles := range as {
		s := &sys{roles: roles, st: make([]uint8, r.nInst)}
		for i := range r.nInst {
			s.st[i] = uint8(md.machines[r.instMachine[i]].initial)
		}
		r.settle(s)
		r.add(s, -1, -1)
	}
	safety := make([]*hit, len(md.invs))
	afterEdges := make([][]hit, len(md.invs))
	var buf []byte
	for i := 0; i < len(r.keys); i++ {
		s := r.decode(r.keys[i])
		r.edgeStart = append(r.edgeStart, int32(len(r.edgeTo)))
		e := int32(0)
		r.successors(s, false, func(mv *move) {
			buf = mv.next.encode(buf[:0])
			j, ok := r.index[string(buf)]
			if !ok {
				j = r.add(mv.next, int32(i), e)
			}
			r.edgeTo = append(r.edgeTo, j)
			r.edgeKind = append(r.edgeKind, mv.kind)
			for _, v := range mv.viols {
				if safety[v] == nil {
					safety[v] = &hit{int32(i), e}
				}
			}
			if mv.kind == edgeInput {
				for vi, iv := range md.invs {
					if iv.Kind != spec.InvAfterReaches {
						continue
					}
					for _, rt := range md.inputs[mv.input].routes {
						if rt.machine == iv.afterMachine && rt.event == iv.afterEvent {
							afterEdges[vi] = append(afterEdges[vi], hit{int32(i), e})
							break
						}
					}
				}
			}
			e++
		})
	}
	r.edgeStart = append(r.edgeStart, int32(len(r.edgeTo)))

	for vi, iv := range md.invs {
		if iv.violation != nil {
			continue // the first run with a violation keeps it
		}
		switch iv.Kind {
		case spec.InvNeverEnter, spec.InvRank:
			if h := safety[vi]; h != nil {
				iv.violation = r.violation(h.from, h.edge, "")
			}
		case spec.InvAlwaysReaches:
			ok := r.canReach(iv, false)
			for j := range r.keys {
				iv.checks++
				if !ok[j] {
					iv.violation = r.violation(int32(j), -1, fmt.Sprintf("from this state no sequence of inputs, completions and timers reaches %s", goal(iv)))
					break
				}
			}
		case spec.InvAfterReaches:
			ok := r.canReach(iv, true)
			for _, h := range afterEdges[vi] {
				iv.checks++
				to := r.edgeTo[r.edgeStart[h.from]+h.edge]
				if !ok[to] {
					iv.violation = r.violation(h.from, h.edge, fmt.Sprintf("after %s.%s, completions and timers alone never reach %s", iv.After.Machine, iv.After.Name, goal(iv)))
					break
				}
			}
		}
	}
	return len(as)
}

func goal(iv *inv) string {
	var l []string
	for _, r := range append(iv.AlwaysReaches, iv.Reaches...) {
		l = append(l, r.String())
	}
	return fmt.Sprint(l)
}

// canReach returns the states from which a state where iv's machine is in
// iv.set is reachable (over internal and timer edges only when restricted).
func (r *run) canReach(iv *inv, restricted bool) []bool {
	n := len(r.keys)
	// Reverse edges, counting sort by target.
	cnt := make([]int32, n+1)
	for e, to := range r.edgeTo {
		if restricted && r.edgeKind[e] == edgeInput {
			continue
		}
		cnt[to+1]++
	}
	for i := 1; i <= n; i++ {
		cnt[i] += cnt[i-1]
	}
	from := make([]int32, cnt[n])
	pos := slices.Clone(cnt[:n])
	for i := range n {
		for e := r.edgeStart[i]; e < r.edgeStart[i+1]; e++ {
			if restricted && r.edgeKind[e] == edgeInput {
				continue
			}
			to := r.edgeTo[e]
			from[pos[to]] = int32(i)
			pos[to]++
		}
	}
	ok := make([]bool, n)
	var queue []int32
	w := r.singleInst[iv.machine]
	for i := range n {
		st := r.keys[i][r.k+w]
		if iv.set[st] {
			ok[i] = true
			queue = append(queue, int32(i))
		}
	}
	for len(queue) > 0 {
		j := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, p := range from[cnt[j]:cnt[j+1]] {
			if !ok[p] {
				ok[p] = true
				queue = append(queue, p)
			}
		}
	}
	return ok
}

// violation builds the trace to state j, then along its edge number edge
// (-1: none).
func (r *run) violation(j, edge int32, detail string) *Violation {
	var chain []hit
	for i := j; r.parent[i] >= 0; i = r.parent[i] {
		chain = append(chain, hit{r.parent[i], r.parentEdge[i]})
	}
	slices.Reverse(chain)
	if edge >= 0 {
		chain = append(chain, hit{j, edge})
	}
	root := j
	for r.parent[root] >= 0 {
		root = r.parent[root]
	}
	s0 := r.decode(r.keys[root])
	v := &Violation{K: r.k, Detail: detail}
	for _, ro := range s0.roles {
		v.Roles = append(v.Roles, spec.Roles[ro])
	}
	var last *sys
	for _, h := range chain {
		s := r.decode(r.keys[h.from])
		n := int32(0)
		r.successors(s, true, func(mv *move) {
			if n == h.edge {
				v.Trace = append(v.Trace, mv.label)
				last = mv.next
			}
			n++
		})
	}
	if last == nil {
		last = s0
	}
	if detail != "" {
		// Show how the step in progress ends, taking the first move each time.
		for n := 0; len(last.frames) > 0 && n < 100; n++ {
			var first *move
			r.successors(last, true, func(mv *move) {
				if first == nil {
					first = mv
				}
			})
			v.Trace = append(v.Trace, first.label)
			last = first.next
		}
	}
	v.Trace = append(v.Trace, "state: "+r.describe(last))
	return v
}

// describe renders the machine states of s.
func (r *run) describe(s *sys) string {
	out := ""
	for i := range r.nInst {
		if i > 0 {
			out += ", "
		}
		out += r.instName(s, i) + "=" + r.md.machines[r.instMachine[i]].states[s.st[i]]
	}
	if len(s.frames) > 0 {
		out += fmt.Sprintf(" (%d frame(s) in progress)", len(s.frames))
	}
	return out
}

// Step takes one step of machine from state on event, with each guard's
// value taken from guards (a missing guard is false), the way Check
// explores it. It returns the states entered (empty for an internal
// transition) and the actions to run; ok is false when no transition
// applies. It exists to check the exploration against the generated code.
func Step(s *spec.Spec, machine, state, event string, guards map[string]bool) (path, actions []string, ok bool, err error) {
	md, err := compile(s)
	if err != nil {
		return nil, nil, false, err
	}
	mi := slices.IndexFunc(md.machines, func(m *mach) bool { return m.Name == machine })
	if mi < 0 {
		return nil, nil, false, fmt.Errorf("no machine %q", machine)
	}
	m := md.machines[mi]
	st, ok1 := m.state[state]
	ev, ok2 := m.event[event]
	if !ok1 || !ok2 {
		return nil, nil, false, fmt.Errorf("machine %q has no state %q or no event %q", machine, state, event)
	}
	r := &run{md: md, nInst: 1, instMachine: []int{mi}, instNum: []int{0}, fixed: make([]bool, len(m.guards))}
	for g, v := range guards {
		i, ok := m.guard[g]
		if !ok {
			return nil, nil, false, fmt.Errorf("machine %q has no guard %q", machine, g)
		}
		r.fixed[i] = v
	}
	sy := &sys{roles: []uint8{roleRegular}, st: []uint8{uint8(st)}}
	res := r.fireOnce(sy, 0, ev, &decider{}, nil)
	if res.loop {
		return nil, nil, false, fmt.Errorf("choice loop")
	}
	if res.none {
		return nil, nil, false, nil
	}
	for _, p := range res.path {
		path = append(path, m.states[p])
	}
	for _, a := range res.actions {
		actions = append(actions, m.actions[a])
	}
	return path, actions, true, nil
}
