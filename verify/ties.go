package verify

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/speclet/speclet/spec"
)

// This file opens the model's guard ties to a test of the engine: the
// states the model reaches, and what the ties of a guard say in each, so
// that the engine's guard functions can be run on the same valuations.

// Valuation is what a tie reads of one reachable state: the state of each
// once-per-pod machine, and the role and state of each instance of the
// replicated machine, in order (init and sidecar instances first).
type Valuation struct {
	Single    map[string]string // machine name: state name
	Roles     []string          // per instance: init, sidecar or regular (spec.Roles)
	Instances []string          // per instance: its state
}

func (v Valuation) String() string {
	var b strings.Builder
	for _, m := range slices.Sorted(maps.Keys(v.Single)) {
		fmt.Fprintf(&b, "%s=%s ", m, v.Single[m])
	}
	for i := range v.Instances {
		fmt.Fprintf(&b, "[%d](%s)=%s ", i, v.Roles[i], v.Instances[i])
	}
	return strings.TrimSpace(b.String())
}

// Answer is what the ties of a guard say of it.
type Answer int8

// The answers: the guard is false, true, or free (the ties leave it open).
const (
	AnswerFalse Answer = iota
	AnswerTrue
	AnswerFree
)

func (a Answer) String() string { return [...]string{"false", "true", "free"}[a] }

// Ties answers the guard ties of a spec. It is not safe for concurrent use.
type Ties struct {
	md       *model
	partOf   []*model     // per machine: the model of its component (apart.go)
	runs     map[int]*run // per number of instances, for Guard
	roles    map[string]int
	machines map[string]*mach
}

// NewTies compiles s (a spec without error diagnostics).
func NewTies(s *spec.Spec) (*Ties, error) {
	md, err := compile(s)
	if err != nil {
		return nil, err
	}
	t := &Ties{md: md, runs: map[int]*run{}, roles: indexOf(spec.Roles), machines: map[string]*mach{}, partOf: make([]*model, len(md.machines))}
	for i, ms := range md.components() {
		p := md.part(ms, i == 0)
		for _, m := range ms {
			t.partOf[m] = p
		}
	}
	for _, m := range md.machines {
		t.machines[m.Name] = m
	}
	return t, nil
}

// Reachable calls visit once for each distinct valuation of a state the
// model reaches with k instances of the replicated machine, in the states
// between inputs and inside steps alike (where guards are read): the
// states of the pod's machines, not of those explored apart (apart.go).
func (t *Ties) Reachable(k int, visit func(Valuation)) {
	md := t.main()
	r := newRun(md, k)
	r.explore()
	seen := map[string]bool{}
	for j := range r.keys.len() {
		key := r.key(j)
		proj := string(key[:r.k]) + string(key[r.stOff:r.stOff+r.nInst])
		if seen[proj] {
			continue
		}
		seen[proj] = true
		s := r.decode(key)
		v := Valuation{Single: map[string]string{}}
		for _, m := range md.singles {
			v.Single[md.machines[m].Name] = md.machines[m].states[s.st[r.singleInst[m]]]
		}
		for c, inst := range r.repInsts {
			v.Roles = append(v.Roles, spec.Roles[s.roles[c]])
			v.Instances = append(v.Instances, t.md.machines[t.md.rep].states[s.st[inst]])
		}
		visit(v)
	}
}

// Guards lists the guards of machine that have ties.
func (t *Ties) Guards(machine string) []string {
	m := t.machines[machine]
	if m == nil {
		return nil
	}
	var out []string
	for g, ts := range m.ties {
		if len(ts) > 0 {
			out = append(out, m.guards[g])
		}
	}
	return out
}

// Guard says what the ties of guard of machine give in v for instance inst
// (an index of v.Instances; ignored for a once-per-pod machine), with the
// parameters' values (a per-instance one: inst's) and the instance's flags
// given by name. v gives the states of the machines the guard's machine is
// explored with (apart.go: the pod's, or its own group's). A parameter or
// flag the ties read must be given.
func (t *Ties) Guard(machine, guard string, v Valuation, inst int, params map[string]string, flags map[string]bool) (Answer, error) {
	m := t.machines[machine]
	if m == nil {
		return 0, fmt.Errorf("no machine %q", machine)
	}
	md := t.partOf[m.idx]
	mi := m.idx
	g, ok := m.guard[guard]
	if !ok {
		return 0, fmt.Errorf("machine %s has no guard %q", machine, guard)
	}
	if len(m.ties[g]) == 0 {
		return AnswerFree, nil
	}
	k := len(v.Instances)
	if md.rep < 0 {
		k = 0
	}
	r := t.runs[k]
	if md != t.main() {
		r = newRun(md, 0)
	} else if r == nil {
		r = newRun(md, k)
		t.runs[k] = r
	}
	s := &sys{roles: make([]uint8, r.k), params: make([]uint8, r.nSlots), st: make([]uint8, r.nInst), flags: make([]uint8, r.nInst)}
	for _, sm := range md.singles {
		st, ok := md.machines[sm].state[v.Single[md.machines[sm].Name]]
		if !ok {
			return 0, fmt.Errorf("%s: no state %q", md.machines[sm].Name, v.Single[md.machines[sm].Name])
		}
		s.st[r.singleInst[sm]] = uint8(st)
	}
	for c, inst := range r.repInsts {
		role, ok := t.roles[v.Roles[c]]
		if !ok {
			return 0, fmt.Errorf("no role %q", v.Roles[c])
		}
		st, ok := md.machines[md.rep].state[v.Instances[c]]
		if !ok {
			return 0, fmt.Errorf("%s: no state %q", md.machines[md.rep].Name, v.Instances[c])
		}
		s.roles[c], s.st[inst] = uint8(role), uint8(st)
	}
	self := r.singleInst[mi]
	if mi == md.rep {
		self = r.repInsts[inst]
	}
	for p, pm := range md.params {
		if val, ok := params[pm.name]; ok {
			i, known := pm.index[val]
			if !known {
				return 0, fmt.Errorf("parameter %s has no value %q", pm.name, val)
			}
			if pm.perInst && mi != md.rep {
				continue // not the guard's to read (spec validation)
			}
			s.params[r.slot(p, self)] = uint8(i + 1)
		}
	}
	for f, name := range m.flags {
		if val, ok := flags[name]; ok {
			s.flags[self] |= 1 << f
			if val {
				s.flags[self] |= 16 << f
			}
		}
	}
	d := &decider{}
	val, tied := r.tiesSay(s, self, m.ties[g], d, nil)
	if len(d.trace) > 0 {
		return 0, fmt.Errorf("the ties of %s.%s read a parameter or flag not given", machine, guard)
	}
	switch {
	case !tied:
		return AnswerFree, nil
	case val:
		return AnswerTrue, nil
	}
	return AnswerFalse, nil
}

// main is the model of the pod's machines: the component of the
// replicated machine.
func (t *Ties) main() *model {
	if t.md.rep >= 0 {
		return t.partOf[t.md.rep]
	}
	return t.partOf[0]
}
