// Package verify explores every reachable state of a pod's machines, coupled
// as spec/system.hcl declares, and checks the spec's invariants.
//
// It works on the decoded spec (package spec), not on the generated code, so
// that it can check any spec files. The product explored is one instance of
// every machine, except the replicated one (the container machine), which
// has K instances, each with a role: init and sidecar containers first, then
// regular ones, at least one regular (a pod spec needs one). Every role
// assignment for K is explored in one search, from the initial states and
// from every state of the restored families (the states the engine rebuilds
// the machines in after a restart). Machines that nothing couples to the
// pod's (the node machine, a device plugin's endpoint) are explored apart,
// each group on its own with its invariants (apart.go).
//
// One step of a machine is that of fsm/core.go: the first transition in spec
// order whose guard holds, internal transitions, choice states passed at
// once. Guards are free (both values explored) unless tied; a tie may read
// the other machines' states, the instance's role, a parameter of the pod
// (the restart policy) and a flag of the instance (whether its last exit
// failed). A parameter or flag is chosen at its first read in an input and
// forgotten between inputs: the invariants that name them are checked in
// the step that read them, and a later read chooses anew (more behaviour,
// never less), so they cost no state between inputs. An event delivered to
// a machine is handled like the engine's fire loop: the step's actions run
// in order; an action delivers its sends (each handled to the end before
// the next) and then reports one of its reports, queued behind the step;
// the queue is handled before any other input. An action that may report
// nothing may also fail before any effect, and always does while its
// precondition (requires) does not hold; an action that records a flag
// makes it unknown again. Between inputs, any input of routes.hcl or
// external event may arrive (one naming the replicated machine goes to any
// one instance, and to it before the other machines) and any timer of a
// resting machine may fire.
//
// Invariants of kind never_enter and rank are checked on every step,
// always_in on every state; the reachability kinds on the explored graph
// once the search ends: always_reaches over every move, after and leaves
// over action outcomes, free guards and timers alone, under fairness (a
// choice made infinitely often takes each outcome infinitely often): every
// state reached without new inputs can still reach the goal without them,
// so a failure that nothing retries, or a state left only by a new input,
// is a violation.
//
// The phase_rank invariant is about the phase users see, podphase.Of over
// the facts spec/system.hcl's phase block reads (the function the engine's
// status calls). It reads the restart policy and every container's last
// exit at every state between inputs, which the search forgets: it is
// checked after the search by a fixpoint that follows them beside the
// explored graph (phase.go). The condition_never_true invariants are about
// the conditions users see, podphase.ConditionsOf over the phase's facts and
// those the conditions block reads; they are checked in the same fixpoint
// (conditions.go).
//
// The search is breadth first over a compact byte encoding of the product
// state (kept in one pointer-free store), so a violation's trace is a
// shortest one. A step with a single successor (no free guard, no action
// with several outcomes) is followed at once: the states of such chains are
// not stored.
package verify

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/speclet/speclet/spec"
)

// Options bound the exploration.
type Options struct {
	// MaxContainers: the product is explored for K = 1..MaxContainers
	// instances of the replicated machine (default 3).
	MaxContainers int
	// MaxPods: the name model is explored for N = 2..MaxPods pods of one
	// static pod full name (default 3).
	MaxPods int
}

// Report is the outcome of Check.
type Report struct {
	Runs       []Run
	Invariants []*InvariantResult
	// Unproduced lists the events (MACHINE.EVENT) that nothing in the
	// system produces: no input, external, timer, send or report.
	Unproduced []string
	// Apart are the runs of the machines explored apart (apart.go), one
	// per component of machines that nothing couples to the pod's
	// machines: K is 0 and Machines names them.
	Apart []Run
	// Names are the runs of the name model (names.go), K the number of
	// pods; their states are not in States.
	Names   []Run
	States  int // over every run
	Elapsed time.Duration
}

// Run is the exploration for one K.
type Run struct {
	K           int
	Assignments int // role assignments explored
	States      int
	Resting     int // states between inputs: no step in progress
	Transitions int
	Elapsed     time.Duration
	// Machines are the machines of a run apart (Report.Apart); nil for
	// the runs of the pod's machines.
	Machines []string
}

// InvariantResult says whether an invariant held.
type InvariantResult struct {
	Name, Kind, Doc string
	// Checks counts the evaluations: steps for never_enter and rank,
	// states for always_reaches, inputs for after.
	Checks    int64
	Violation *Violation
	// Kept (phase_rank, with the phase block's keeps_terminal): per
	// terminal phase kept and phase the machines' states give instead, the
	// first trace found (with the fewest containers) where the status keeps
	// it, so where the engine needs that rule.
	Kept []*Violation
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
	if opt.MaxPods <= 0 {
		opt.MaxPods = 3
	}
	md, err := compile(s)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{Unproduced: md.unproduced()}
	parts := md.components()
	whole := md
	md = md.part(parts[0], true)
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
		for j := range r.keys.len() {
			if len(r.key(j)) == r.restLen() {
				resting++
			}
		}
		rep.Runs = append(rep.Runs, Run{K: k, Assignments: n, States: r.keys.len(), Resting: resting, Transitions: len(r.edgeTo), Elapsed: time.Since(t0)})
		rep.States += r.keys.len()
	}
	for _, ms := range parts[1:] {
		pm := whole.part(ms, false)
		t0 := time.Now()
		r := newRun(pm, 0)
		r.explore()
		run := Run{States: r.keys.len(), Transitions: len(r.edgeTo)}
		for j := range r.keys.len() {
			if len(r.key(j)) == r.restLen() {
				run.Resting++
			}
		}
		for _, m := range ms {
			run.Machines = append(run.Machines, whole.machines[m].Name)
		}
		run.Elapsed = time.Since(t0)
		rep.Apart = append(rep.Apart, run)
		rep.States += run.States
	}
	for _, iv := range whole.invs {
		rep.Invariants = append(rep.Invariants, &InvariantResult{Name: iv.Name, Kind: iv.Kind, Doc: iv.Doc, Checks: iv.checks, Violation: iv.violation, Kept: iv.kept})
	}
	var names []*InvariantResult
	rep.Names, names = checkNames(md, opt.MaxPods)
	rep.Invariants = append(rep.Invariants, names...)
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

// restoredRoots adds as initial states every combination of the states
// family lists for the instances from inst on.
func (r *run) restoredRoots(s *sys, fam [][]int, inst int) {
	if inst == r.nInst {
		if r.restoredRoot == nil {
			r.restoredRoot = map[int32]bool{}
		}
		n := r.keys.len()
		if j := r.add(s, -1, -1); int(j) == n {
			r.restoredRoot[j] = true
		}
		return
	}
	sts := fam[r.instMachine[inst]]
	if sts == nil {
		r.restoredRoots(s, fam, inst+1)
		return
	}
	for _, st := range sts {
		c := s.clone()
		c.st[inst] = uint8(st)
		r.restoredRoots(c, fam, inst+1)
	}
}

func (r *run) add(s *sys, parent, edge int32) int32 {
	r.buf = s.encode(r.buf[:0])
	j, added := r.keys.add(r.buf)
	if !added {
		return j
	}
	r.parent = push(r.parent, parent)
	r.parentEdge = push(r.parentEdge, edge)
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
		s := &sys{roles: roles, params: make([]uint8, r.nSlots), st: make([]uint8, r.nInst), flags: make([]uint8, r.nInst)}
		for i := range r.nInst {
			s.st[i] = uint8(md.machines[r.instMachine[i]].initial)
		}
		r.settle(s)
		r.add(s, -1, -1)
		for _, fam := range md.restored {
			r.restoredRoots(s, fam, 0)
		}
	}
	safety := make([]*hit, len(md.invs))
	afterEdges := make([][]hit, len(md.invs))
	var buf []byte
	for i := 0; i < r.keys.len(); i++ {
		s := r.decode(r.key(i))
		for vi, iv := range md.invs {
			if iv.Kind == spec.InvAlwaysIn && safety[vi] == nil && !r.alwaysIn(s, iv) {
				safety[vi] = &hit{int32(i), -1}
			}
		}
		r.edgeStart = push(r.edgeStart, int32(len(r.edgeTo)))
		e := int32(0)
		r.successors(s, false, func(mv *move) {
			buf = mv.next.encode(buf[:0])
			j := r.keys.lookup(buf)
			if j < 0 {
				j = r.add(mv.next, int32(i), e)
			}
			r.edgeTo = push(r.edgeTo, j)
			r.edgeKind = push(r.edgeKind, mv.kind)
			if md.phase != nil {
				r.meta = push(r.meta, mv.meta)
			}
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
	r.edgeStart = push(r.edgeStart, int32(len(r.edgeTo)))

	// The phase and the conditions users see: one fixpoint for all.
	var phased []*inv
	for _, iv := range md.invs {
		if (iv.Kind == spec.InvPhaseRank || iv.Kind == spec.InvConditionNeverTrue) && iv.violation == nil {
			phased = append(phased, iv)
		}
	}
	if len(phased) > 0 {
		r.checkPhase(phased)
	}
	for vi, iv := range md.invs {
		if iv.violation != nil {
			continue // the first run with a violation keeps it
		}
		switch iv.Kind {
		case spec.InvNeverEnter, spec.InvRank:
			if h := safety[vi]; h != nil {
				iv.violation = r.violation(h.from, h.edge, "")
			}
		case spec.InvAlwaysIn:
			if h := safety[vi]; h != nil {
				iv.violation = r.violation(h.from, -1, fmt.Sprintf("here %s, but not every %s is in one of %s", r.whileText(iv), r.md.machines[iv.machine].Name, goal(iv)))
			}
		case spec.InvLeaves:
			r.checkLeaves(iv)
		case spec.InvAlwaysReaches:
			ok := r.canReach(func(j int) bool { return iv.set[r.stateOf(r.key(j), r.singleInst[iv.machine])] }, false)
			for j := range r.keys.len() {
				iv.checks++
				if !ok[j] {
					iv.violation = r.violation(int32(j), -1, fmt.Sprintf("from this state no sequence of inputs, completions and timers reaches %s", goal(iv)))
					break
				}
			}
		case spec.InvAfterReaches:
			r.checkAfter(iv, afterEdges[vi])
		}
	}
	return len(as)
}

func goal(iv *inv) string {
	var l []string
	for _, r := range slices.Concat(iv.AlwaysReaches, iv.Reaches, iv.AlwaysIn, iv.Leaves) {
		l = append(l, r.String())
	}
	return fmt.Sprint(l)
}

func (r *run) whileText(iv *inv) string {
	if iv.whileMachine < 0 {
		return "(always)"
	}
	w := r.md.machines[iv.whileMachine]
	return fmt.Sprintf("%s is in one of %v", w.Name, iv.While)
}

// alwaysIn evaluates an always_in invariant on s.
func (r *run) alwaysIn(s *sys, iv *inv) bool {
	iv.checks++
	if iv.whileMachine >= 0 {
		w := r.singleInst[iv.whileMachine]
		if w < 0 || !iv.while[s.st[w]] {
			return true
		}
	}
	for inst := range r.nInst {
		if r.instMachine[inst] == iv.machine && !iv.set[s.st[inst]] {
			return false
		}
	}
	return true
}

// checkAfter checks an after invariant under fairness: from the state each
// delivery of the event leads to, every state that completions and timers
// alone reach (before the goal) can still reach the goal through them. On
// a finite graph that is what "every run that takes each of its choices
// (an action's outcome, a free guard, a timer) fairly reaches the goal"
// means: a run that stays away from the goal forever passes infinitely
// often through some state, so a fair run would take that state's path to
// the goal. An action that may fail (report nothing) is retried only by a
// timer that re-runs it, so the retry must be in the spec.
func (r *run) checkAfter(iv *inv, edges []hit) {
	n := r.keys.len()
	ok := r.canReach(func(j int) bool { return iv.set[r.stateOf(r.key(j), r.singleInst[iv.machine])] }, true)
	// Forward search over completions and timers from every target, with
	// the edge that first reached each state.
	via := make([]hit, n)
	seen := make([]bool, n)
	var queue []int32
	for _, h := range edges {
		iv.checks++
		to := r.edgeTo[r.edgeStart[h.from]+h.edge]
		if !seen[to] {
			seen[to] = true
			queue = append(queue, to)
			via[to] = h
		}
	}
	roots := map[int32]bool{}
	for _, j := range queue {
		roots[j] = true
	}
	for q := 0; q < len(queue); q++ {
		j := queue[q]
		if !ok[j] {
			// The chain: to the delivery, then forward to j.
			var fwd []hit
			for c := j; !roots[c]; c = via[c].from {
				fwd = append(fwd, via[c])
			}
			slices.Reverse(fwd)
			start := via[j]
			if len(fwd) > 0 {
				start = via[fwd[0].from]
			}
			chain := append(r.chainTo(start.from), start)
			chain = append(chain, fwd...)
			iv.violation = r.violationChain(chain, fmt.Sprintf("after %s.%s, completions and timers reach this state, from which they never reach %s (nothing but a new input would help)", iv.After.Machine, iv.After.Name, goal(iv)))
			return
		}
		if iv.set[r.stateOf(r.key(int(j)), r.singleInst[iv.machine])] {
			continue // reached
		}
		for e := r.edgeStart[j]; e < r.edgeStart[j+1]; e++ {
			if r.edgeKind[e] == edgeInput {
				continue
			}
			if to := r.edgeTo[e]; !seen[to] {
				seen[to] = true
				via[to] = hit{j, e - r.edgeStart[j]}
				queue = append(queue, to)
			}
		}
	}
}

// checkLeaves checks a leaves invariant: for every instance of its machine
// and every state of the invariant, from every reachable state where the
// instance is in that state, completions and timers alone can take it out
// (so every fair run does).
func (r *run) checkLeaves(iv *inv) {
	for st, in := range iv.set {
		if in {
			r.checkLeave(iv, uint8(st))
		}
		if iv.violation != nil {
			return
		}
	}
}

func (r *run) checkLeave(iv *inv, st uint8) {
	for inst := range r.nInst {
		if r.instMachine[inst] != iv.machine {
			continue
		}
		ok := r.canReach(func(j int) bool { return r.stateOf(r.key(j), inst) != st }, true)
		for j := range r.keys.len() {
			iv.checks++
			if !ok[j] {
				m := r.md.machines[iv.machine]
				iv.violation = r.violation(int32(j), -1, fmt.Sprintf("%s rests in %s and completions and timers alone never take it out (nothing but a new input would help)",
					r.instName(r.decode(r.key(j)), inst), m.states[r.stateOf(r.key(j), inst)]))
				return
			}
		}
	}
}

// canReach returns the states from which a state where goal holds is
// reachable (over internal and timer edges only when restricted).
func (r *run) canReach(goal func(int) bool, restricted bool) []bool {
	n := r.keys.len()
	rv := &r.rev[0]
	if restricted {
		rv = &r.rev[1]
	}
	if rv.cnt == nil {
		rv.cnt, rv.from = r.reverse(restricted)
	}
	cnt, from := rv.cnt, rv.from
	ok := make([]bool, n)
	queue := make([]int32, 0, n)
	for i := range n {
		if goal(i) {
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

// reverse returns the explored graph's edges by target (over internal and
// timer edges only when restricted): the sources of the edges into j are
// from[cnt[j]:cnt[j+1]].
func (r *run) reverse(restricted bool) (cnt, from []int32) {
	n := r.keys.len()
	// Reverse edges, counting sort by target.
	cnt = make([]int32, n+1)
	for e, to := range r.edgeTo {
		if restricted && r.edgeKind[e] == edgeInput {
			continue
		}
		cnt[to+1]++
	}
	for i := 1; i <= n; i++ {
		cnt[i] += cnt[i-1]
	}
	from = make([]int32, cnt[n])
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
	return cnt, from
}

// violation builds the trace to state j, then along its edge number edge
// (-1: none).
func (r *run) violation(j, edge int32, detail string) *Violation {
	chain := r.chainTo(j)
	if edge >= 0 {
		chain = append(chain, hit{j, edge})
	}
	if len(chain) == 0 {
		chain = []hit{{j, -1}}
	}
	return r.violationChain(chain, detail)
}

// chainTo returns the shortest moves from an initial state to state j.
func (r *run) chainTo(j int32) []hit {
	var chain []hit
	for i := j; r.parent[i] >= 0; i = r.parent[i] {
		chain = append(chain, hit{r.parent[i], r.parentEdge[i]})
	}
	slices.Reverse(chain)
	return chain
}

// violationChain builds the trace of chain, moves from an initial state
// (an edge -1 only names the state).
func (r *run) violationChain(chain []hit, detail string) *Violation {
	root := chain[0].from
	for r.parent[root] >= 0 {
		root = r.parent[root]
	}
	s0 := r.decode(r.key(int(root)))
	v := &Violation{K: r.k, Detail: detail}
	for _, ro := range s0.roles {
		v.Roles = append(v.Roles, spec.Roles[ro])
	}
	if r.restoredRoot[root] {
		v.Trace = append(v.Trace, "restored after a restart: "+r.describe(s0))
	}
	var last *sys
	for _, h := range chain {
		s := r.decode(r.key(int(h.from)))
		if h.edge < 0 {
			last = s
			continue
		}
		n := int32(0)
		r.successors(s, true, func(mv *move) {
			if n == h.edge {
				v.Trace = append(v.Trace, strings.Split(mv.label, "\n")...)
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
			v.Trace = append(v.Trace, strings.Split(first.label, "\n")...)
			last = first.next
		}
	}
	v.Trace = append(v.Trace, "state: "+r.describe(last))
	return v
}

// describe renders the machine states of s, the flags known and the
// parameters read (a parameter not read yet may have any value).
func (r *run) describe(s *sys) string {
	out := ""
	for i := range r.nInst {
		if i > 0 {
			out += ", "
		}
		out += r.instName(s, i) + "=" + r.md.machines[r.instMachine[i]].states[s.st[i]]
	}
	for i := range r.nInst {
		m := r.md.machines[r.instMachine[i]]
		for f, name := range m.flags {
			if s.flags[i]&(1<<f) != 0 {
				out += fmt.Sprintf(", %s.%s=%v", r.instName(s, i), name, s.flags[i]&(16<<f) != 0)
			}
		}
	}
	for p, pm := range r.md.params {
		n := 1
		if pm.perInst {
			n = r.k
		}
		for c := range n {
			v := s.params[r.paramBase[p]+c]
			if v == 0 {
				continue // not read yet: any value
			}
			val := pm.values[v-1]
			name := pm.name
			if pm.perInst {
				name = r.instName(s, r.repInsts[c]) + "." + name
			}
			out += fmt.Sprintf(", %s=%s", name, val)
		}
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
	sy := &sys{roles: []uint8{roleRegular}, st: []uint8{uint8(st)}, flags: make([]uint8, 1)}
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
