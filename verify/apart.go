package verify

import "slices"

// Machines explored apart. The product of every machine grows with each
// machine's states: a machine that nothing of the pod's machines reaches
// and that reaches none of them (the node machine, a device plugin's
// endpoint) multiplies the pod's states by its own without telling
// anything more. So the machines are split into components, two machines
// being in one component when something couples them: an input that
// routes to both, an effect's send or precondition, a tie (its in machine;
// the replicated machine for all, any, among and roles; every machine
// whose ties or invariants read the same parameter), an invariant naming
// both, a restored family naming both, the phase and conditions blocks
// (the pod, sandbox, probe and replicated machines). The component of the
// replicated machine (without one, of the first machine) is explored with
// K instances as before; every other component is explored once on its
// own (K = 0), from its initial states and restored families, with the
// invariants that name its machines. Since nothing crosses components, a
// state of the product is a pair of states of the parts, each moving
// alone: every invariant of one component holds in the product exactly
// when it holds in that component's exploration.

// components returns the machines of each component, the main one first,
// each in spec order.
func (md *model) components() [][]int {
	parent := make([]int, len(md.machines))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	join := func(a, b int) {
		if a < 0 || b < 0 {
			return
		}
		parent[find(a)] = find(b)
	}
	paramAt := make([]int, len(md.params)) // a machine that reads each parameter, -1: none yet
	for i := range paramAt {
		paramAt[i] = -1
	}
	reads := func(p, m int) {
		if p < 0 {
			return
		}
		if paramAt[p] < 0 {
			paramAt[p] = m
		}
		join(paramAt[p], m)
	}
	for _, in := range md.inputs {
		for _, r := range in.routes {
			join(in.routes[0].machine, r.machine)
		}
	}
	for _, m := range md.machines {
		for _, ef := range m.effects {
			if ef == nil {
				continue
			}
			for _, sd := range ef.sends {
				join(m.idx, sd.machine)
			}
			join(m.idx, ef.reqMachine)
		}
		for _, ti := range slices.Concat(m.ties...) {
			join(m.idx, ti.inMachine)
			if ti.all != nil || ti.any != nil || ti.among != nil || ti.roles != nil {
				join(m.idx, md.rep)
			}
			reads(ti.param, m.idx)
		}
	}
	for _, iv := range md.invs {
		join(iv.machine, iv.whileMachine)
		join(iv.machine, iv.afterMachine)
		if iv.among != nil {
			join(iv.machine, md.rep)
		}
		reads(iv.param, iv.machine)
	}
	for _, fam := range md.restored {
		first := -1
		for m, sts := range fam {
			if sts == nil {
				continue
			}
			if first < 0 {
				first = m
			}
			join(first, m)
		}
	}
	if md.phase != nil {
		join(md.rep, md.phase.pod)
	}
	if md.conds != nil {
		join(md.rep, md.conds.probe)
		join(md.rep, md.conds.sandbox)
	}
	main := 0
	if md.rep >= 0 {
		main = md.rep
	}
	var out [][]int
	at := map[int]int{} // root -> index in out
	if len(md.machines) > 0 {
		at[find(main)] = 0
		out = append(out, nil)
	}
	for i := range md.machines {
		root := find(i)
		j, ok := at[root]
		if !ok {
			j = len(out)
			at[root] = j
			out = append(out, nil)
		}
		out[j] = append(out[j], i)
	}
	return out
}

// part returns the model restricted to the machines of one component: the
// others are neither instances of its runs nor reached by its inputs, and
// only the invariants and restored families naming its machines are kept
// (the same invariants: their checks and violations are the model's). The
// main part keeps the replicated machine, the parameters, the phase and the
// conditions; another part has none of them.
func (md *model) part(machines []int, main bool) *model {
	in := make([]bool, len(md.machines))
	for _, m := range machines {
		in[m] = true
	}
	p := &model{machines: md.machines, rep: -1, params: md.params}
	if main {
		p.rep, p.phase, p.conds = md.rep, md.phase, md.conds
	}
	for _, m := range md.singles {
		if in[m] {
			p.singles = append(p.singles, m)
		}
	}
	for _, ip := range md.inputs {
		if len(ip.routes) > 0 && in[ip.routes[0].machine] {
			p.inputs = append(p.inputs, ip)
		}
	}
	for _, iv := range md.invs {
		if in[iv.machine] {
			p.invs = append(p.invs, iv)
		}
	}
	for _, fam := range md.restored {
		keep := false
		for m, sts := range fam {
			keep = keep || sts != nil && in[m]
		}
		if keep {
			p.restored = append(p.restored, fam)
		}
	}
	return p
}
