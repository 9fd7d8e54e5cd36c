package verify

import (
	"fmt"
	"slices"

	"github.com/speclet/speclet/spec"
)

// model is the decoded spec compiled to indices for exploration.
type model struct {
	machines []*mach
	rep      int   // index of the replicated machine in machines, -1 when none
	singles  []int // machines that run once per pod, in spec order
	inputs   []*input
	invs     []*inv
	params   []*param
	// restored lists, per restored family, the states each machine may
	// start in (nil: its initial state).
	restored [][][]int
	phase    *phaseMap // nil: no phase block
	conds    *condMap  // nil: no conditions block
}

// param is a parameter of the pod (spec.Parameter): fixed for the pod's
// life, chosen at its first read.
type param struct {
	name    string
	values  []string
	index   map[string]int
	perInst bool // one value per instance of the replicated machine
}

type mach struct {
	*spec.Machine
	idx     int
	states  []string
	events  []string
	guards  []string
	actions []string
	state   map[string]int
	event   map[string]int
	guard   map[string]int
	action  map[string]int
	initial int
	trans   [][][]*trans // [state][event], spec order
	choice  [][]*branch  // [state], when branches then otherwise
	entry   [][]int      // entry actions per state
	timers  [][]int      // timer events per state
	ties    [][]*tie     // per guard; empty: free
	effects []*effect    // per action; nil: no visible effect
	flags   []string     // flags of an instance (at most 4)
	flag    map[string]int
	sets    [][]int // per action: the flags it records anew
}

type trans struct {
	guard   int // -1: unguarded
	to      int // -1: internal
	actions []int
}

type branch struct {
	guard   int // -1: otherwise
	to      int
	actions []int
}

type tie struct {
	inMachine int    // -1 when no in
	in        []bool // by state of inMachine
	all, any  []bool // by state of the replicated machine; nil when unset
	among     []bool // by role; nil: every role
	roles     []bool // by role; nil when unset
	param     int    // -1 when no given
	given     []bool // by value of param
	flags     []int  // flags of the guard's own instance that must be set
	mode      string // "iff", "if" or "may"
}

type effect struct {
	sends   []send
	reports []int
	nothing bool
	// reqMachine is in one of req, or the action fails before any effect;
	// -1 when no precondition.
	reqMachine int
	req        []bool
}

type send struct{ machine, event int }

// input is a move of the environment: an input of routes.hcl or an
// external event. Its routes are in delivery order: the replicated
// machine's first (the engine fires the container event, then the pod's).
type input struct {
	name     string
	external bool
	routes   []send
}

type inv struct {
	*spec.Invariant
	machine      int    // machine whose states set names
	set          []bool // never_enter, always_reaches, reaches
	whileMachine int    // -1: no while
	while        []bool
	rank         []int // by state of machine
	phaseTier    []int // phase_rank: by index of podphase.Phases
	afterMachine int
	afterEvent   int
	from         []bool // never_enter: by state of machine; nil: any
	param        int    // never_enter given: -1 when none
	given        []bool
	among        []bool // by role; nil: every role
	unless       []int  // flags of machine
	checks       int64
	violation    *Violation
	kept         []*Violation // phase_rank: where the status keeps a terminal phase
	cond         int          // condition_never_true: index of podphase.CondNames
	phases       []bool       // condition_never_true: by index of podphase.Phases
}

// Roles of an instance of the replicated machine, as indices of spec.Roles.
const (
	roleInit = iota
	roleSidecar
	roleRegular
)

func indexOf(names []string) map[string]int {
	m := make(map[string]int, len(names))
	for i, n := range names {
		m[n] = i
	}
	return m
}

func compile(s *spec.Spec) (*model, error) {
	md := &model{rep: -1}
	byName := map[string]int{}
	for i, m := range s.Machines {
		mc := &mach{Machine: m, idx: i}
		for _, st := range m.States {
			mc.states = append(mc.states, st.Name)
		}
		for _, e := range m.Events {
			mc.events = append(mc.events, e.Name)
		}
		for _, g := range m.Guards {
			mc.guards = append(mc.guards, g.Name)
		}
		for _, a := range m.Actions {
			mc.actions = append(mc.actions, a.Name)
		}
		if len(mc.states) > 255 || len(mc.events) > 255 || len(mc.actions) > 255 {
			return nil, fmt.Errorf("machine %q is too large to explore", m.Name)
		}
		mc.state, mc.event, mc.guard, mc.action = indexOf(mc.states), indexOf(mc.events), indexOf(mc.guards), indexOf(mc.actions)
		mc.initial = mc.state[m.Initial.Name]
		refs := func(rs []spec.Ref) []int {
			out := make([]int, len(rs))
			for i, r := range rs {
				out[i] = mc.action[r.Name]
			}
			return out
		}
		guardOf := func(r spec.Ref) int {
			if !r.Set() {
				return -1
			}
			return mc.guard[r.Name]
		}
		mc.trans = make([][][]*trans, len(m.States))
		mc.choice = make([][]*branch, len(m.States))
		mc.entry = make([][]int, len(m.States))
		mc.timers = make([][]int, len(m.States))
		for si, st := range m.States {
			mc.trans[si] = make([][]*trans, len(mc.events))
			for _, t := range st.Transitions {
				to := -1
				if t.To.Set() {
					to = mc.state[t.To.Name]
				}
				ei := mc.event[t.Event.Name]
				mc.trans[si][ei] = append(mc.trans[si][ei], &trans{guard: guardOf(t.Guard), to: to, actions: refs(t.Actions)})
			}
			if ch := st.Choice; ch != nil {
				for _, br := range ch.When {
					mc.choice[si] = append(mc.choice[si], &branch{guard: guardOf(br.Guard), to: mc.state[br.To.Name], actions: refs(br.Actions)})
				}
				if ch.Otherwise != nil {
					mc.choice[si] = append(mc.choice[si], &branch{guard: -1, to: mc.state[ch.Otherwise.To.Name], actions: refs(ch.Otherwise.Actions)})
				}
			}
			mc.entry[si] = refs(st.Entry)
			for _, tm := range st.Timers {
				mc.timers[si] = append(mc.timers[si], mc.event[tm.Event.Name])
			}
		}
		mc.ties = make([][]*tie, len(mc.guards))
		mc.effects = make([]*effect, len(mc.actions))
		mc.sets = make([][]int, len(mc.actions))
		mc.flag = map[string]int{}
		md.machines = append(md.machines, mc)
		byName[m.Name] = i
	}
	sys := &s.System
	if sys.Replicated.Set() {
		md.rep = byName[sys.Replicated.Name]
	}
	for i := range md.machines {
		if i != md.rep {
			md.singles = append(md.singles, i)
		}
	}
	states := func(refs []spec.MRef) (int, []bool) {
		if len(refs) == 0 {
			return -1, nil
		}
		m := md.machines[byName[refs[0].Machine]]
		set := make([]bool, len(m.states))
		for _, r := range refs {
			set[m.state[r.Name]] = true
		}
		return m.idx, set
	}
	roles := func(refs []spec.Ref) []bool {
		if len(refs) == 0 {
			return nil
		}
		set := make([]bool, len(spec.Roles))
		for _, r := range refs {
			set[slices.Index(spec.Roles, r.Name)] = true
		}
		return set
	}
	for _, p := range sys.Parameters {
		pm := &param{name: p.Name, perInst: p.PerInstance}
		for _, v := range p.Values {
			pm.values = append(pm.values, v.Name)
		}
		pm.index = indexOf(pm.values)
		md.params = append(md.params, pm)
	}
	given := func(refs []spec.MRef) (int, []bool) {
		if len(refs) == 0 {
			return -1, nil
		}
		pi := slices.IndexFunc(md.params, func(p *param) bool { return p.name == refs[0].Machine })
		set := make([]bool, len(md.params[pi].values))
		for _, r := range refs {
			set[md.params[pi].index[r.Name]] = true
		}
		return pi, set
	}
	for _, f := range sys.Flags {
		m := md.machines[byName[f.Machine.Name]]
		if len(m.flags) == 4 {
			return nil, fmt.Errorf("machine %q has more than 4 flags", m.Name)
		}
		fi := len(m.flags)
		m.flag[f.Name.Name] = fi
		m.flags = append(m.flags, f.Name.Name)
		a := m.action[f.SetBy.Name]
		m.sets[a] = append(m.sets[a], fi)
	}
	flagsOf := func(m *mach, refs []spec.MRef) []int {
		var out []int
		for _, r := range refs {
			out = append(out, m.flag[r.Name])
		}
		return out
	}
	for _, t := range sys.Ties {
		m := md.machines[byName[t.Machine.Name]]
		ti := &tie{mode: t.Mode}
		ti.inMachine, ti.in = states(t.In)
		_, ti.all = states(t.All)
		_, ti.any = states(t.Any)
		ti.among, ti.roles = roles(t.Among), roles(t.Roles)
		ti.param, ti.given = given(t.Given)
		ti.flags = flagsOf(m, t.Flags)
		g := m.guard[t.Guard.Name]
		m.ties[g] = append(m.ties[g], ti)
	}
	for _, e := range sys.Effects {
		m := md.machines[byName[e.Machine.Name]]
		ef := &effect{nothing: e.MayReportNothing}
		ef.reqMachine, ef.req = states(e.Requires)
		for _, r := range e.Sends {
			to := md.machines[byName[r.Machine]]
			ef.sends = append(ef.sends, send{machine: to.idx, event: to.event[r.Name]})
		}
		for _, r := range e.Reports {
			ef.reports = append(ef.reports, m.event[r.Name])
		}
		m.effects[m.action[e.Action.Name]] = ef
	}
	if sys.Phase != nil {
		if err := md.compilePhase(sys.Phase, states); err != nil {
			return nil, err
		}
	}
	if sys.Conditions != nil {
		if err := md.compileConditions(sys.Conditions, states); err != nil {
			return nil, err
		}
	}
	for _, in := range s.Inputs {
		ip := &input{name: in.Name}
		for _, r := range in.Routes {
			m := md.machines[byName[r.Machine.Name]]
			ip.routes = append(ip.routes, send{machine: m.idx, event: m.event[r.Event.Name]})
		}
		slices.SortStableFunc(ip.routes, func(a, b send) int {
			return cmpBool(b.machine == md.rep, a.machine == md.rep)
		})
		md.inputs = append(md.inputs, ip)
	}
	for _, x := range sys.Externals {
		m := md.machines[byName[x.Machine.Name]]
		md.inputs = append(md.inputs, &input{name: x.Machine.Name + "." + x.Event.Name, external: true,
			routes: []send{{machine: m.idx, event: m.event[x.Event.Name]}}})
	}
	for _, rs := range sys.Restored {
		fam := make([][]int, len(md.machines))
		for _, r := range rs.States {
			m := md.machines[byName[r.Machine]]
			fam[m.idx] = append(fam[m.idx], m.state[r.Name])
		}
		md.restored = append(md.restored, fam)
	}
	for _, si := range sys.Invariants {
		iv := &inv{Invariant: si, machine: -1, whileMachine: -1, afterMachine: -1, param: -1}
		switch si.Kind {
		case spec.InvNeverEnter:
			iv.machine, iv.set = states(si.NeverEnter)
			iv.whileMachine, iv.while = states(si.While)
			_, iv.from = states(si.From)
			iv.param, iv.given = given(si.Given)
			iv.among = roles(si.Among)
			if iv.machine >= 0 {
				iv.unless = flagsOf(md.machines[iv.machine], si.Unless)
			}
		case spec.InvAlwaysIn:
			iv.machine, iv.set = states(si.AlwaysIn)
			iv.whileMachine, iv.while = states(si.While)
		case spec.InvLeaves:
			iv.machine, iv.set = states(si.Leaves)
		case spec.InvRank:
			var all []spec.MRef
			for _, t := range si.Rank {
				all = append(all, t...)
			}
			if len(all) == 0 {
				return nil, fmt.Errorf("invariant %q ranks no state", si.Name)
			}
			m := md.machines[byName[all[0].Machine]]
			iv.machine = m.idx
			iv.rank = make([]int, len(m.states))
			for tier, t := range si.Rank {
				for _, r := range t {
					iv.rank[m.state[r.Name]] = tier
				}
			}
		case spec.InvPhaseRank:
			if md.phase == nil {
				return nil, fmt.Errorf("invariant %q ranks the phase, but the spec has no phase block", si.Name)
			}
			iv.machine = md.rep
			iv.phaseTier = make([]int, len(spec.PhaseNames))
			for tier, t := range si.PhaseRank {
				for _, r := range t {
					iv.phaseTier[slices.Index(spec.PhaseNames, r.Name)] = tier
				}
			}
		case spec.InvConditionNeverTrue:
			if err := md.compileConditionInv(iv, states); err != nil {
				return nil, err
			}
		case spec.InvAlwaysReaches:
			iv.machine, iv.set = states(si.AlwaysReaches)
		case spec.InvAfterReaches:
			iv.machine, iv.set = states(si.Reaches)
			m := md.machines[byName[si.After.Machine]]
			iv.afterMachine, iv.afterEvent = m.idx, m.event[si.After.Name]
		}
		if iv.machine < 0 {
			return nil, fmt.Errorf("invariant %q names no state", si.Name)
		}
		md.invs = append(md.invs, iv)
	}
	return md, nil
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// detached returns the machines nothing of the pod system reaches: no
// input, external or other machine's effect sends them an event, they send
// none elsewhere, and no tie reads them or is read by them (the node
// machine, driven by the engine's node loop). Exploration leaves them in
// their initial state; their events are not counted as unproduced.
func (md *model) detached() map[int]bool {
	out := map[int]bool{}
	for _, m := range md.machines {
		if m.idx != md.rep {
			out[m.idx] = true
		}
	}
	for _, in := range md.inputs {
		for _, r := range in.routes {
			delete(out, r.machine)
		}
	}
	for _, m := range md.machines {
		for _, ef := range m.effects {
			if ef == nil {
				continue
			}
			for _, sd := range ef.sends {
				if sd.machine != m.idx {
					delete(out, sd.machine)
					delete(out, m.idx)
				}
			}
		}
		for _, ti := range slices.Concat(m.ties...) {
			if ti.all != nil || ti.any != nil || ti.roles != nil || ti.inMachine >= 0 && ti.inMachine != m.idx {
				delete(out, m.idx)
				if ti.inMachine >= 0 {
					delete(out, ti.inMachine)
				}
			}
		}
	}
	for _, iv := range md.invs {
		delete(out, iv.machine)
		delete(out, iv.whileMachine)
		delete(out, iv.afterMachine)
	}
	return out
}

// unproduced lists the events no input, external, timer, send or report
// produces: they never happen in the explored system. Detached machines
// are left out.
func (md *model) unproduced() []string {
	made := map[send]bool{}
	for _, in := range md.inputs {
		for _, r := range in.routes {
			made[r] = true
		}
	}
	for _, m := range md.machines {
		for _, ts := range m.timers {
			for _, ev := range ts {
				made[send{m.idx, ev}] = true
			}
		}
		for _, ef := range m.effects {
			if ef == nil {
				continue
			}
			for _, sd := range ef.sends {
				made[sd] = true
			}
			for _, ev := range ef.reports {
				made[send{m.idx, ev}] = true
			}
		}
	}
	var out []string
	skip := md.detached()
	for _, m := range md.machines {
		if skip[m.idx] {
			continue
		}
		for ev, name := range m.events {
			if !made[send{m.idx, ev}] {
				out = append(out, m.Name+"."+name)
			}
		}
	}
	return out
}
