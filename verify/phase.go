package verify

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/speclet/speclet/spec"
	"github.com/speclet/speclet/spec/podphase"
)

// The phase users see (spec/system.hcl's phase block, podphase.Of) reads
// the restart policy and every container's last exit at every status the
// engine publishes, where the exploration has forgotten both: they are
// chosen at their first read in an input (more behaviour, fewer states).
// Keeping them in the explored states would multiply those by about 20, so
// the phase check follows them beside the explored graph instead: a
// context is one value of the policy and, per container, its exit (none
// recorded yet, a success, a failure); every edge records what its move
// read (the policy, an exit) and which exits it recorded anew, and a
// fixpoint over (state, context, last published phase) follows the
// contexts each edge admits: a read keeps the contexts that agree with it,
// a record lets the exit take either value. That is the product the
// engine runs, where the policy is fixed and an exit is kept until the next
// one, without storing it in the search.

// phaseMap is the phase block compiled.
type phaseMap struct {
	running     []bool // by state of the replicated machine
	started     []bool // by state of the replicated machine: entering it, it ran
	flag        int    // the exit flag of the replicated machine
	pod         int    // the machine of terminating and terminated
	terminating []bool // by state of pod
	terminated  []bool
	param       int               // the restart policy parameter
	policy      []podphase.Policy // by value of param
	keep        bool              // the status keeps a terminal phase
}

func (md *model) compilePhase(pm *spec.PhaseMap, states func([]spec.MRef) (int, []bool)) error {
	if md.rep < 0 {
		return fmt.Errorf("the phase block needs a replicated machine")
	}
	rep := md.machines[md.rep]
	ph := &phaseMap{flag: rep.flag[pm.ExitFailed.Name], keep: pm.KeepsTerminal}
	set := func(refs []spec.MRef, n int) []bool { // by state; empty lists name none
		if _, b := states(refs); b != nil {
			return b
		}
		return make([]bool, n)
	}
	ph.running = set(pm.Running, len(rep.states))
	ph.started = set(pm.Started, len(rep.states))
	ph.pod, ph.terminating = states(pm.Terminating)
	if ph.pod < 0 {
		return fmt.Errorf("the phase block names no state of the pod worker in terminating")
	}
	ph.terminating = set(pm.Terminating, len(md.machines[ph.pod].states))
	ph.terminated = set(pm.Terminated, len(md.machines[ph.pod].states))
	ph.param = slices.IndexFunc(md.params, func(p *param) bool { return p.name == pm.Policy[0].Machine })
	ph.policy = make([]podphase.Policy, len(md.params[ph.param].values))
	for i, r := range pm.Policy {
		ph.policy[md.params[ph.param].index[r.Name]] = []podphase.Policy{podphase.Always, podphase.OnFailure, podphase.Never}[i]
	}
	md.phase = ph
	return nil
}

// Edge metadata for the phase check (run.meta), filled while a move is
// taken: the value of the policy it chose (bits 0-1, value+1), the
// container whose exit it chose (bits 2-4, number+1) and that value (bit
// 5), the containers that entered a started state (bits 16-23: they ran,
// so an exit not recorded yet is unknown, a failure) and those whose exit
// it recorded anew (bits 8-15). They apply in that order: a guard reads in
// the step that enters its target, the actions record after it, and a read
// of an exit recorded anew, or a start's outcome, is a choice, which ends
// a followed chain.
const (
	metaPolicy    = 3
	metaExitShift = 2
	metaFailed    = 1 << 5
	metaRecShift  = 8
	metaRanShift  = 16
)

// noteEntered notes the states inst entered in a step.
func (r *run) noteEntered(inst int, path []int) {
	ph := r.md.phase
	if ph == nil || r.instMachine[inst] != r.md.rep {
		return
	}
	for _, st := range path {
		if ph.started[st] {
			r.cur |= 1 << (metaRanShift + r.instNum[inst])
		}
	}
}

func (r *run) notePolicyRead(p, v int) {
	if ph := r.md.phase; ph != nil && p == ph.param {
		r.cur |= uint32(v + 1)
	}
}

func (r *run) noteExitRead(inst, f int, v bool) {
	if ph := r.md.phase; ph != nil && f == ph.flag && r.instMachine[inst] == r.md.rep {
		r.cur |= uint32(r.instNum[inst]+1) << metaExitShift
		if v {
			r.cur |= metaFailed
		}
	}
}

func (r *run) noteExitRecord(inst, f int) {
	if ph := r.md.phase; ph != nil && f == ph.flag && r.instMachine[inst] == r.md.rep {
		r.cur |= 1 << (metaRecShift + r.instNum[inst])
	}
}

// phaseCheck is the fixpoint of one run: per state, the set of (context,
// last published phase) pairs that reach it, as bits ctx*4+phase.
type phaseCheck struct {
	r      *run
	ivs    []*inv // the phase_rank and condition_never_true invariants
	nPol   int
	nCtx   int
	words  int
	bits   []uint64 // per state, words words
	delta  []uint64 // per state: the bits not propagated yet
	raw    []uint8  // per (resting state, context): phase+1, 0 not computed
	restIx []int32  // per state: its index among the resting states, -1
	pow3   []int
	conds  []uint8 // per (resting state, context, phase): condTrue+1, 0 not computed
	// kept holds, per terminal phase kept and the phase the states gave
	// instead (keep), the first pair found where the status kept it.
	kept map[[2]int]*phaseHit
}

type phaseHit struct {
	from, edge int32
	fromBit    int
	ctx, a, b  int
}

func (pc *phaseCheck) has(j int32, bit int) bool {
	return pc.bits[int(j)*pc.words+bit/64]&(1<<(bit%64)) != 0
}

func (pc *phaseCheck) set(j int32, bit int) bool {
	w := &pc.bits[int(j)*pc.words+bit/64]
	if *w&(1<<(bit%64)) != 0 {
		return false
	}
	*w |= 1 << (bit % 64)
	pc.delta[int(j)*pc.words+bit/64] |= 1 << (bit % 64)
	return true
}

// takeDelta returns the bits of j not propagated yet and clears them.
func (pc *phaseCheck) takeDelta(j int32, out []int) []int {
	out = out[:0]
	for w := range pc.words {
		d := &pc.delta[int(j)*pc.words+w]
		for x := *d; x != 0; x &= x - 1 {
			out = append(out, w*64+bits.TrailingZeros64(x))
		}
		*d = 0
	}
	return out
}

func (pc *phaseCheck) pol(ctx int) int { return ctx % pc.nPol }

// exit of container c in ctx: 0 none recorded, 1 success, 2 failure.
func (pc *phaseCheck) exit(ctx, c int) int { return ctx / pc.nPol / pc.pow3[c] % 3 }

func (pc *phaseCheck) withExit(ctx, c, v int) int {
	return ctx + (v-pc.exit(ctx, c))*pc.nPol*pc.pow3[c]
}

// rawPhase is podphase.Of on resting state j under ctx.
func (pc *phaseCheck) rawPhase(j int32, ctx int) int {
	i := int(pc.restIx[j])*pc.nCtx + ctx
	if v := pc.raw[i]; v > 0 {
		return int(v) - 1
	}
	r := pc.r
	ph := r.md.phase
	s := r.decode(r.key(int(j)))
	pst := s.st[r.singleInst[ph.pod]]
	p := podphase.Pod{Policy: ph.policy[pc.pol(ctx)], Terminating: ph.terminating[pst], Terminated: ph.terminated[pst]}
	for c, i := range r.repInsts {
		f := podphase.Container{Kind: []podphase.Kind{podphase.Init, podphase.Sidecar, podphase.Regular}[s.roles[c]]}
		switch {
		case ph.running[s.st[i]]:
			f.State = podphase.Runs
		case pc.exit(ctx, c) > 0:
			f.State = podphase.Exited
			f.Failed = pc.exit(ctx, c) == 2
		}
		p.Containers = append(p.Containers, f)
	}
	v := slices.Index(podphase.Phases, podphase.Of(p))
	pc.raw[i] = uint8(v + 1)
	return v
}

// admit appends to buf the contexts ctx becomes along edge e (none when
// the edge reads a policy or exit ctx disagrees with) and returns it.
func (pc *phaseCheck) admit(e int32, ctx int, buf []int) []int {
	r := pc.r
	m := r.meta[e]
	if v := int(m & metaPolicy); v > 0 && pc.pol(ctx) != v-1 {
		return buf
	}
	if c := int(m>>metaExitShift&7) - 1; c >= 0 {
		want := 1
		if m&metaFailed != 0 {
			want = 2
		}
		switch pc.exit(ctx, c) {
		case 0:
			ctx = pc.withExit(ctx, c, want) // a first read records it
		case want:
		default:
			return buf
		}
	}
	for c := range r.k {
		if m&(1<<(metaRanShift+c)) != 0 && pc.exit(ctx, c) == 0 {
			ctx = pc.withExit(ctx, c, 2) // it ran: its exit is unknown
		}
	}
	// Each exit recorded anew takes either value.
	first := len(buf)
	buf = append(buf, ctx)
	for c := range r.k {
		if m&(1<<(metaRecShift+c)) == 0 {
			continue
		}
		n := len(buf)
		for i := first; i < n; i++ {
			x := buf[i]
			buf[i] = pc.withExit(x, c, 1)
			buf = append(buf, pc.withExit(x, c, 2))
		}
	}
	return buf
}

// published is the phase the status shows in resting state to under ctx
// after a, and the one the machines' states give.
func (pc *phaseCheck) published(to int32, ctx, a int) (b, raw int) {
	raw = pc.rawPhase(to, ctx)
	if pc.r.md.phase.keep && pc.terminal(a) {
		return a, raw
	}
	return raw, raw
}

func (pc *phaseCheck) terminal(a int) bool {
	return podphase.Phases[a] == podphase.Succeeded || podphase.Phases[a] == podphase.Failed
}

// allowed: no status goes down a tier of iv, and a phase of its last tier
// stays.
func allowed(iv *inv, a, b int) bool {
	t := iv.phaseTier
	return t[b] >= t[a] && (t[a] != slices.Max(t) || a == b)
}

// pending: some invariant of the check has no violation yet.
func (pc *phaseCheck) pending() bool {
	return slices.ContainsFunc(pc.ivs, func(iv *inv) bool { return iv.violation == nil })
}

// checkPhase checks the phase_rank and condition_never_true invariants ivs
// on the explored graph, in one fixpoint.
func (r *run) checkPhase(ivs []*inv) {
	n := r.keys.len()
	pc := &phaseCheck{r: r, ivs: ivs, nPol: len(r.md.phase.policy)}
	pc.nCtx = pc.nPol
	for range r.k {
		pc.pow3 = append(pc.pow3, pc.nCtx/pc.nPol)
		pc.nCtx *= 3
	}
	pc.words = (pc.nCtx*4 + 63) / 64
	pc.bits = make([]uint64, n*pc.words)
	pc.delta = make([]uint64, n*pc.words)
	pc.restIx = make([]int32, n)
	rest := r.restLen()
	nRest := 0
	for j := range n {
		pc.restIx[j] = -1
		if len(r.key(j)) == rest {
			pc.restIx[j] = int32(nRest)
			nRest++
		}
	}
	pc.raw = make([]uint8, nRest*pc.nCtx)
	if r.md.conds != nil {
		pc.conds = make([]uint8, nRest*pc.nCtx*4)
	}
	pc.kept = map[[2]int]*phaseHit{}
	// The initial states: a fresh pod's containers have no exit; a restored
	// container not in its initial state ran (its exit is a success or a
	// failure, or unknown: a failure). The engine publishes a status from a
	// restored state before any input moves a machine, so the conditions
	// are checked there too, with a trace of that state alone.
	var work []int32
	queued := make([]bool, n)
	m := r.md.machines[r.md.rep]
	for j := range n {
		if r.parent[j] >= 0 || pc.restIx[j] < 0 {
			continue
		}
		s := r.decode(r.key(j))
		for ctx := range pc.nCtx {
			ok := true
			for c, i := range r.repInsts {
				ok = ok && (pc.exit(ctx, c) == 0) == !(r.restoredRoot[int32(j)] && int(s.st[i]) != m.initial)
			}
			if !ok {
				continue
			}
			raw := pc.rawPhase(int32(j), ctx)
			pc.set(int32(j), ctx*4+raw)
			for _, iv := range ivs {
				if iv.Kind != spec.InvConditionNeverTrue || iv.violation != nil {
					continue
				}
				if detail := pc.checkCondition(iv, int32(j), ctx, raw); detail != "" {
					iv.violation = r.violationChain([]hit{{int32(j), -1}}, detail+" ("+pc.ctxText(ctx)+")")
				}
			}
		}
		work = append(work, int32(j))
		queued[j] = true
	}
	// Breadth first, so that the first violation found has a short trace.
	var todo, ctxs []int
	for head := 0; head < len(work) && pc.pending(); head++ {
		if head > 1<<20 && head > len(work)/2 {
			work, head = append(work[:0], work[head:]...), 0
		}
		j := work[head]
		queued[j] = false
		todo = pc.takeDelta(j, todo)
		for e := r.edgeStart[j]; e < r.edgeStart[j+1]; e++ {
			to := r.edgeTo[e]
			resting := pc.restIx[to] >= 0
			for _, bit := range todo {
				a := bit % 4
				ctxs = pc.admit(e, bit/4, ctxs[:0])
				for _, ctx := range ctxs {
					b := a
					if resting {
						var raw int
						b, raw = pc.published(to, ctx, a)
						for _, iv := range ivs {
							if iv.violation != nil {
								continue
							}
							detail := ""
							if iv.Kind == spec.InvPhaseRank {
								iv.checks++
								if !allowed(iv, a, b) {
									detail = fmt.Sprintf("the phase users see goes from %s to %s", podphase.Phases[a], podphase.Phases[b])
								}
							} else {
								detail = pc.checkCondition(iv, to, ctx, b)
							}
							if detail != "" {
								iv.violation = pc.violation(phaseHit{from: j, edge: e, fromBit: bit, ctx: ctx, a: a, b: b}, detail)
							}
						}
						if k := [2]int{a, raw}; raw != b && pc.kept[k] == nil {
							pc.kept[k] = &phaseHit{from: j, edge: e, fromBit: bit, ctx: ctx, a: a, b: raw}
						}
					}
					if pc.set(to, ctx*4+b) && !queued[to] {
						queued[to] = true
						work = append(work, to)
					}
				}
			}
		}
	}
	for _, iv := range ivs {
		if iv.Kind == spec.InvPhaseRank && iv.violation == nil {
			pc.keep(iv)
		}
	}
}

// keep reports, on a phase_rank invariant that holds, where the status
// keeps a terminal phase.
func (pc *phaseCheck) keep(iv *inv) {
	for a := range podphase.Phases {
		for b := range podphase.Phases {
			h := pc.kept[[2]int{a, b}]
			if h == nil || slices.ContainsFunc(iv.kept, func(v *Violation) bool { return strings.HasPrefix(v.Detail, keptText(a, b)) }) {
				continue
			}
			iv.kept = append(iv.kept, pc.violation(*h, keptText(a, b)))
		}
	}
}

func keptText(a, b int) string {
	return fmt.Sprintf("the machines' states give %s after %s: the status keeps %s", podphase.Phases[b], podphase.Phases[a], podphase.Phases[a])
}

// violation builds the trace of a pair along an edge: a shortest chain of
// (state, pair) from an initial one, found backwards.
func (pc *phaseCheck) violation(h phaseHit, detail string) *Violation {
	r := pc.r
	cnt, from := r.reverseAll()
	type node = phaseNode
	type step struct {
		prev node
		edge int32 // index among prev's edges
	}
	start := node{h.from, h.fromBit}
	seen := map[node]step{start: {prev: node{-1, 0}}}
	queue := []node{start}
	var root node
	found := false
	for q := 0; q < len(queue) && !found; q++ {
		x := queue[q]
		if r.parent[x.j] < 0 && pc.isRootPair(x) {
			root, found = x, true
			break
		}
		for _, p := range from[cnt[x.j]:cnt[x.j+1]] {
			for e := r.edgeStart[p]; e < r.edgeStart[p+1]; e++ {
				if r.edgeTo[e] != x.j {
					continue
				}
				for bit := range pc.nCtx * 4 {
					y := node{p, bit}
					if _, ok := seen[y]; ok || !pc.has(p, bit) {
						continue
					}
					hit := false
					for _, ctx := range pc.admit(e, bit/4, nil) {
						b := bit % 4
						if pc.restIx[x.j] >= 0 {
							b, _ = pc.published(x.j, ctx, b)
						}
						hit = hit || ctx*4+b == x.bit
					}
					if hit {
						seen[y] = step{prev: x, edge: e - r.edgeStart[p]}
						queue = append(queue, y)
					}
				}
			}
		}
	}
	var chain []hit
	if found {
		for x := root; x != start; {
			st := seen[x]
			chain = append(chain, hit{x.j, st.edge})
			x = st.prev
		}
	} else {
		chain = r.chainTo(h.from) // not expected: the pair came from a root
	}
	chain = append(chain, hit{h.from, h.edge - r.edgeStart[h.from]})
	return r.violationChain(chain, detail+" ("+pc.ctxText(h.ctx)+")")
}

// phaseNode is a pair (bit) of state j.
type phaseNode struct {
	j   int32
	bit int
}

// isRootPair: x is a pair the fixpoint started from.
func (pc *phaseCheck) isRootPair(x phaseNode) bool {
	return pc.has(x.j, x.bit) && pc.rawPhase(x.j, x.bit/4) == x.bit%4 && pc.rootCtx(x.j, x.bit/4)
}

func (pc *phaseCheck) rootCtx(j int32, ctx int) bool {
	r := pc.r
	s := r.decode(r.key(int(j)))
	m := r.md.machines[r.md.rep]
	for c, i := range r.repInsts {
		if (pc.exit(ctx, c) == 0) != !(r.restoredRoot[j] && int(s.st[i]) != m.initial) {
			return false
		}
	}
	return true
}

func (pc *phaseCheck) ctxText(ctx int) string {
	r := pc.r
	ph := r.md.phase
	out := []string{fmt.Sprintf("%s=%s", r.md.params[ph.param].name, r.md.params[ph.param].values[pc.pol(ctx)])}
	for c := range r.k {
		out = append(out, fmt.Sprintf("container[%d] last exit %s", c, []string{"none", "0", "failed"}[pc.exit(ctx, c)]))
	}
	return strings.Join(out, ", ")
}

// reverseAll returns the reverse graph over every edge.
func (r *run) reverseAll() (cnt, from []int32) {
	rv := &r.rev[0]
	if rv.cnt == nil {
		rv.cnt, rv.from = r.reverse(false)
	}
	return rv.cnt, rv.from
}
